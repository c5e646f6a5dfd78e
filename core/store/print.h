#pragma once
// Printing what the store's queries (queries.h) return: `brickdl-query`'s tables, CSV and
// JSON. Functions here take rows and a stream; they run no SQL and never see a TuningDb.
// Output is deterministic: numbers are printed with fixed formats, rows in the order given.
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/store/queries.h"

namespace brickdl::query {

// One section per source and target (measured on a GPU, on a CPU, predicted for a GPU spec),
// each headed by where its numbers come from, then the legend.
void print_best(const std::vector<BestRow>& rows, std::ostream& os);
nlohmann::ordered_json best_json(const std::vector<BestRow>& rows);
// `json` as text (indented by `indent`; -1: one line). Text from a damaged or foreign file may
// be no UTF-8: such bytes come out as U+FFFD instead of an exception.
std::string json_text(const nlohmann::ordered_json& json, int indent = 2);

// One line per run: id, experiment, model, batch, precision, target, status, times, #meas.
// `db_path` names the database when it has no runs.
void print_runs(const std::vector<RunRow>& rows, const std::string& db_path, std::ostream& os);

// A run's configuration, groups, measurement status counts and errors, and plans.
void print_run(const RunDetails& details, std::ostream& os);

// Per workload measured (ok) in both runs' views: each run's best candidate, where it comes
// from (the run itself or the run it was resumed from), its median and spread, the ratio B/A
// of the medians, and their sums and geometric mean; above, what each side stands on.
void print_comparison(const Comparison& comparison, std::ostream& os);

// Per set (target, GPU spec, model version): the points (with `with_points`), then the time
// and byte statistics, labelled with where each side comes from.
void print_accuracy(const std::vector<AccuracySet>& sets, bool with_points, std::ostream& os);
nlohmann::ordered_json accuracy_json(const std::vector<AccuracySet>& sets);

// What the columns of `best` mean (printed under its tables).
const char* best_legend();

enum class ExportFormat { kCsv, kJson };
// CSV: the table's columns with `config` after `threads`, then one `counter.<name>` column per
// counter name. JSON: an array of objects, the prediction's columns in a `prediction` object
// (null when there is none), plus `counters` and `samples_ms`.
void print_export(const ExportTable& table, ExportFormat format, std::ostream& os);

// The CSV form of an export as typed cells (the Python package's DataFrames): its columns, and
// one row of cells per exported row, `config` as text and each counter a number or NULL.
struct ExportGrid {
  std::vector<std::string> columns;
  std::vector<std::vector<Cell>> rows;
};
ExportGrid export_grid(const ExportTable& table);

} // namespace brickdl::query
