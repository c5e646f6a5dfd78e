// brickdl-query: reads tuning databases (best configurations, runs, comparisons, exports)
// and merges them. Everything but `merge` opens the database read-only.
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "core/error.h"
#include "core/query.h"
#include "core/store.h"
#include "core/store_merge.h"

namespace {

using brickdl::TuningDb;
namespace query = brickdl::query;

void remove_database(const std::string& path) {
  std::error_code ec;
  for (const char* suffix : {"", "-wal", "-shm", "-journal"})
    std::filesystem::remove(path + suffix, ec);
}

int run(int argc, char** argv) {
  CLI::App app{"brickdl-query: best configurations, runs, comparisons and exports from a brickdl "
               "tuning database, and merging of databases"};
  app.require_subcommand(1);
  std::string db_path = "brickdl.db";
  app.add_option("--db", db_path, "The tuning database to read")->capture_default_str();

  // best
  CLI::App* best = app.add_subcommand(
      "best", "Best configuration per model, group, target, precision and batch: the fastest "
              "ok measurement, else the best prediction (marked 'predicted')");
  query::BestFilter filter;
  std::optional<int> batch;
  bool json = false;
  best->add_option("--model", filter.model, "Only this model (zoo name or 'custom')");
  best->add_option("--gpu", filter.gpu, "Only runs that predicted for this GPU spec");
  best->add_option("--precision", filter.precision, "Only this precision")
      ->check(CLI::IsMember({"fp32", "fp16", "bf16"}));
  best->add_option("--batch", batch, "Only this batch size")->check(CLI::PositiveNumber);
  best->add_option("--target", filter.target, "Only targets whose fingerprint contains this");
  best->add_flag("--json", json, "JSON instead of a table");

  // runs, show, compare
  CLI::App* runs = app.add_subcommand("runs", "List the tuning runs");
  CLI::App* show = app.add_subcommand("show", "A run's configuration, groups, measurements and "
                                              "plans");
  int64_t show_run = 0;
  show->add_option("RUN", show_run, "Run id (see `runs`)")->required();
  CLI::App* compare = app.add_subcommand(
      "compare", "Per workload measured in both runs: each run's best candidate, median and "
                 "spread, and the ratio B/A");
  int64_t run_a = 0, run_b = 0;
  compare->add_option("RUN_A", run_a, "Run id")->required();
  compare->add_option("RUN_B", run_b, "Run id")->required();

  // export
  CLI::App* exp = app.add_subcommand(
      "export", "One row per measurement with its candidate, workload, run, target, "
                "prediction and counters");
  std::string format = "csv", out_path;
  std::optional<int64_t> export_run;
  exp->add_option("--format", format, "csv or json")
      ->check(CLI::IsMember({"csv", "json"}))
      ->capture_default_str();
  exp->add_option("--run", export_run, "Only this run's measurements");
  exp->add_option("--out", out_path, "Write to this file instead of standard output");

  // merge
  CLI::App* merge = app.add_subcommand(
      "merge", "Copy databases into OUT (created when absent), remapping ids; merging the same "
               "input again adds nothing");
  std::string merge_out;
  std::vector<std::string> merge_inputs;
  brickdl::MergeOptions merge_options;
  merge->add_option("OUT", merge_out, "The database to merge into")->required();
  merge->add_option("IN", merge_inputs, "Databases to copy from")->required();
  merge->add_flag("--allow-mixed-targets", merge_options.allow_mixed_targets,
                  "Accept measurements of different targets side by side");

  // `--db` may also follow the subcommand.
  for (CLI::App* sub : {best, runs, show, compare, exp, merge})
    sub->fallthrough();

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : brickdl::kExitUserError;
  }

  if (merge->parsed()) {
    const bool existed = std::filesystem::exists(merge_out);
    try {
      TuningDb out(merge_out);
      for (const auto& s : brickdl::merge_databases(out, merge_inputs, merge_options)) {
        std::cout << fmt::format(
            "merged {}: runs +{} ({} already present), measurements +{} ({} already present), "
            "predictions +{}, plans +{}, baselines +{}\n",
            s.input, s.runs_added, s.runs_present, s.measurements_added, s.measurements_present,
            s.predictions_added, s.plans_added, s.baselines_added);
      }
    } catch (...) {
      if (!existed)
        remove_database(merge_out); // a refused merge leaves no new file
      throw;
    }
    return 0;
  }

  TuningDb db(db_path, TuningDb::Mode::kReadOnly);
  if (best->parsed()) {
    filter.batch = batch;
    const auto rows = query::best(db, filter);
    if (json) {
      std::cout << query::best_json(rows).dump(2) << "\n";
    } else {
      query::print_best(rows, std::cout);
    }
  } else if (runs->parsed()) {
    query::print_runs(db, std::cout);
  } else if (show->parsed()) {
    query::print_run(db, show_run, std::cout);
  } else if (compare->parsed()) {
    query::print_comparison(db, run_a, run_b, std::cout);
  } else if (exp->parsed()) {
    const auto fmt = format == "json" ? query::ExportFormat::kJson : query::ExportFormat::kCsv;
    if (out_path.empty()) {
      query::export_measurements(db, fmt, export_run, std::cout);
    } else {
      std::ofstream out(out_path, std::ios::trunc);
      if (!out) {
        throw brickdl::UserError("cannot write '" + out_path +
                                 "'; check that its folder exists and is writable");
      }
      query::export_measurements(db, fmt, export_run, out);
      out.close();
      if (!out)
        throw brickdl::UserError("writing '" + out_path + "' failed");
    }
  }
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const brickdl::UserError& e) {
    std::cerr << "brickdl-query: error: " << e.what() << "\n";
    return brickdl::kExitUserError;
  } catch (const brickdl::InternalError& e) {
    std::cerr << "brickdl-query: " << e.what() << "\n";
    return brickdl::kExitInternalError;
  } catch (const std::exception& e) {
    std::cerr << "brickdl-query: internal error: " << e.what() << "\n";
    return brickdl::kExitInternalError;
  }
}
