// brickdl-query: reads tuning databases (best configurations, runs, comparisons, exports of
// measurements and of the model's predictions) and merges them. Everything but `merge` opens the
// database read-only.
#include <fstream>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "apps/run_tool.h"
#include "core/error.h"
#include "core/store/merge.h"
#include "core/store/print.h"
#include "core/store/queries.h"
#include "core/store/tuning_db.h"

namespace {

using brickdl::TuningDb;
namespace query = brickdl::query;

// The command line: the options of every subcommand, filled by parsing.
struct Args {
  std::string db_path = "brickdl.db";
  // best
  query::BestFilter filter;
  std::optional<int> batch;
  bool json = false;
  // show, compare
  int64_t show_run = 0, run_a = 0, run_b = 0;
  bool own_only = false;
  // accuracy
  query::AccuracyFilter accuracy;
  bool summary_only = false;
  // export, predictions
  std::string format = "csv", out_path;
  std::optional<int64_t> export_run;
  // merge
  std::string merge_out;
  std::vector<std::string> merge_inputs;
  brickdl::MergeOptions merge_options;
};

CLI::App* add_best(CLI::App& app, Args& a) {
  CLI::App* best = app.add_subcommand(
      "best", "Best configuration per model, group, precision and batch, in one section per "
              "source of numbers: the fastest ok measurement on each measuring target (GPU, "
              "CPU), and the model's best prediction for each GPU spec; validations are never "
              "times");
  best->footer(std::string("Columns:\n") + query::best_legend() +
               "\nExample: the best brick and strategy for one layer of ResNet-50 on the "
               "H200 in tf32:\n  brickdl-query best --model resnet50 --gpu H200 --precision "
               "tf32 --layer layer3.0.conv2");
  best->add_option("--model", a.filter.model, "Only this model (zoo name or 'custom')");
  best->add_option("--gpu", a.filter.gpu, "Only runs that predicted for this GPU spec");
  best->add_option("--precision", a.filter.precision, "Only this precision")
      ->check(CLI::IsMember(brickdl::dtype_names()));
  best->add_option("--batch", a.batch, "Only this batch size")->check(CLI::PositiveNumber);
  best->add_option("--target", a.filter.target,
                   "Only sections whose target contains this ('gpu:', 'cpu:', 'model:H200')");
  best->add_option("--layer", a.filter.layer,
                   "Only groups that contain the layer of this name (e.g. layer3.0.conv2)");
  best->add_option("--source", a.filter.source, "Only measured or only predicted numbers")
      ->check(CLI::IsMember({"measured", "predicted"}));
  best->add_flag("--json", a.json, "JSON instead of a table");
  return best;
}

CLI::App* add_export(CLI::App& app, Args& a) {
  CLI::App* exp = app.add_subcommand(
      "export", "One row per measurement with its candidate, workload, run, target, "
                "prediction and counters");
  exp->add_option("--format", a.format, "csv or json")
      ->check(CLI::IsMember({"csv", "json"}))
      ->capture_default_str();
  exp->add_option("--run", a.export_run, "Only this run's measurements");
  exp->add_option("--out", a.out_path, "Write to this file instead of standard output");
  return exp;
}

CLI::App* add_predictions(CLI::App& app, Args& a) {
  CLI::App* pred = app.add_subcommand(
      "predictions", "One row per prediction of a run's candidates for its GPU spec (every "
                     "model version stored) with the workload, its first group and the "
                     "candidate");
  pred->add_option("--format", a.format, "csv or json")
      ->check(CLI::IsMember({"csv", "json"}))
      ->capture_default_str();
  pred->add_option("--run", a.export_run, "Only this run's predictions");
  pred->add_option("--out", a.out_path, "Write to this file instead of standard output");
  return pred;
}

CLI::App* add_merge(CLI::App& app, Args& a) {
  CLI::App* merge = app.add_subcommand(
      "merge", "Copy databases into OUT (created when absent), remapping ids; merging the same "
               "input again adds nothing");
  merge->add_option("OUT", a.merge_out, "The database to merge into")->required();
  merge->add_option("IN", a.merge_inputs, "Databases to copy from")->required();
  merge->add_flag("--allow-mixed-targets", a.merge_options.allow_mixed_targets,
                  "Accept measurements of different targets side by side");
  return merge;
}

int run_merge(const Args& a) {
  for (const auto& s : brickdl::merge_into(a.merge_out, a.merge_inputs, a.merge_options)) {
    std::cout << fmt::format(
        "merged {}: runs +{} ({} already present), measurements +{} ({} already present), "
        "predictions +{}, plans +{}, baselines +{}\n",
        s.input, s.runs_added, s.runs_present, s.measurements_added, s.measurements_present,
        s.predictions_added, s.plans_added, s.baselines_added);
  }
  return 0;
}

void run_best(TuningDb& db, const Args& a) {
  query::BestFilter filter = a.filter;
  filter.batch = a.batch;
  const auto rows = query::best(db, filter);
  if (a.json) {
    std::cout << query::json_text(query::best_json(rows)) << "\n";
  } else {
    query::print_best(rows, std::cout);
  }
}

// Prints an export (of measurements or of predictions) in --format to --out or stdout.
void write_export(const query::ExportTable& table, const Args& a) {
  const auto format = a.format == "json" ? query::ExportFormat::kJson : query::ExportFormat::kCsv;
  if (a.out_path.empty()) {
    query::print_export(table, format, std::cout);
    return;
  }
  std::ofstream out(a.out_path, std::ios::trunc);
  if (!out) {
    throw brickdl::UserError("cannot write '" + a.out_path +
                             "'; check that its folder exists and is writable");
  }
  query::print_export(table, format, out);
  out.close();
  if (!out)
    throw brickdl::UserError("writing '" + a.out_path + "' failed");
}

void run_export(TuningDb& db, const Args& a) {
  write_export(query::export_measurements(db, a.export_run, a.format == "json"), a);
}

// The subcommands, as parsed.
struct Commands {
  CLI::App *best, *runs, *show, *compare, *accuracy, *exp, *predictions, *merge;
};

CLI::App* add_accuracy(CLI::App& app, Args& a) {
  CLI::App* acc = app.add_subcommand(
      "accuracy", "Predicted vs measured: every ok measurement beside the model's prediction "
                  "of the same candidate, per target, GPU spec and model version, with the "
                  "relative error and Spearman's rank correlation of time and bytes");
  acc->add_option("--run", a.accuracy.run, "Only this run's measurements");
  acc->add_option("--target", a.accuracy.target, "Only targets whose fingerprint contains this");
  acc->add_flag("--summary", a.summary_only, "The statistics only, without a row per candidate");
  acc->add_flag("--json", a.json, "JSON instead of a table");
  return acc;
}

Commands add_commands(CLI::App& app, Args& a) {
  app.require_subcommand(1);
  app.add_option("--db", a.db_path, "The tuning database to read")->capture_default_str();
  Commands c{};
  c.best = add_best(app, a);
  c.runs = app.add_subcommand("runs", "List the tuning runs");
  c.show = app.add_subcommand("show", "A run's configuration, groups, measurements and plans");
  c.show->add_option("RUN", a.show_run, "Run id (see `runs`)")->required();
  c.compare = app.add_subcommand(
      "compare", "Per workload measured in both runs: each run's best candidate, median and "
                 "spread, and the ratio B/A. A run stands on its own measurements and those "
                 "it resumed from earlier runs on its target (each counted above the table)");
  c.compare->add_option("RUN_A", a.run_a, "Run id")->required();
  c.compare->add_option("RUN_B", a.run_b, "Run id")->required();
  c.compare->add_flag("--own", a.own_only,
                      "Only each run's own measurements (leave out what it resumed)");
  c.accuracy = add_accuracy(app, a);
  c.exp = add_export(app, a);
  c.predictions = add_predictions(app, a);
  c.merge = add_merge(app, a);
  // `--db` may also follow the subcommand.
  for (CLI::App* sub :
       {c.best, c.runs, c.show, c.compare, c.accuracy, c.exp, c.predictions, c.merge})
    sub->fallthrough();
  return c;
}

int run(const Commands& c, const Args& a) {
  if (c.merge->parsed())
    return run_merge(a);
  TuningDb db(a.db_path, TuningDb::Mode::kReadOnly);
  if (c.best->parsed()) {
    run_best(db, a);
  } else if (c.runs->parsed()) {
    query::print_runs(query::runs(db), db.path(), std::cout);
  } else if (c.show->parsed()) {
    query::print_run(query::run_details(db, a.show_run), std::cout);
  } else if (c.compare->parsed()) {
    query::print_comparison(query::compare_runs(db, a.run_a, a.run_b, a.own_only), std::cout);
  } else if (c.accuracy->parsed()) {
    const auto sets = query::accuracy(db, a.accuracy);
    if (a.json)
      std::cout << query::json_text(query::accuracy_json(sets)) << "\n";
    else
      query::print_accuracy(sets, !a.summary_only, std::cout);
  } else if (c.exp->parsed()) {
    run_export(db, a);
  } else if (c.predictions->parsed()) {
    write_export(query::export_predictions(db, a.export_run), a);
  }
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  CLI::App app{"brickdl-query: best configurations, runs, comparisons, predicted vs measured, "
               "exports of measurements and of predictions from a brickdl tuning database, and "
               "merging of databases"};
  Args a;
  const Commands commands = add_commands(app, a);
  return brickdl::run_tool("brickdl-query", app, argc, argv, [&] { return run(commands, a); });
}
