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

// Per workload measured (ok) in both runs: each run's best candidate with its median and
// spread, the ratio B/A of the medians, and their sums and geometric mean.
void print_comparison(const Comparison& comparison, std::ostream& os);

enum class ExportFormat { kCsv, kJson };
// CSV: the table's columns with `config` after `threads`, then one `counter.<name>` column per
// counter name. JSON: an array of objects, the prediction's columns in a `prediction` object
// (null when there is none), plus `counters` and `samples_ms`.
void print_export(const ExportTable& table, ExportFormat format, std::ostream& os);

} // namespace brickdl::query
