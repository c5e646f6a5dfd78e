#include "core/store/merge.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <set>

#include <fmt/format.h>

#include "core/error.h"
#include "core/store/detail/access.h"
#include "core/store/detail/sqlite.h"

namespace brickdl {

using store::detail::Statement;
using store::detail::StoreAccess;

namespace {

// The targets of a database's timings (validations, CPU checks of a GPU plan's outputs, time
// nothing and mix with anything).
std::vector<std::string> measured_targets(sqlite3* db) {
  Statement st(db,
               "SELECT DISTINCT t.fingerprint FROM measurements m JOIN targets t "
               "ON t.id = m.target_id WHERE t.fingerprint NOT LIKE '%#validation' ORDER BY 1",
               "listing measured targets");
  std::vector<std::string> out;
  while (st.step())
    out.push_back(st.text(0));
  return out;
}

// An integrity-check line about a row's values, not the file's structure.
bool breaks_a_constraint(const std::string& problem) {
  return problem.rfind("CHECK constraint failed in ", 0) == 0 ||
         problem.rfind("NULL value in ", 0) == 0;
}

int64_t mapped(const std::map<int64_t, int64_t>& ids, int64_t id, const char* what) {
  auto it = ids.find(id);
  // The input passed verify_schema, but SQLite does not enforce references unless asked to.
  if (it == ids.end()) {
    throw UserError(fmt::format("the input refers to {} {} that it does not contain; it is "
                                "damaged, restore it from a copy",
                                what, id));
  }
  return it->second;
}

// Copies one input into the output; runs inside the output's transaction.
class Merger {
public:
  Merger(TuningDb& out, TuningDb& in)
      : out_(out), o_(StoreAccess::connection(out)), i_(StoreAccess::connection(in)) {}

  void run(MergeStats* stats) {
    stats_ = stats;
    copy_targets();
    copy_workloads();
    copy_candidates();
    copy_runs();
    copy_run_groups();
    copy_predictions();
    copy_baseline_predictions();
    copy_measurements();
    copy_plans();
    copy_baselines();
  }

private:
  int changes() const { return sqlite3_changes(o_); }
  // The input row being copied, named when the output refuses it.
  void at(const std::string& table, int64_t id) {
    row_table_ = table;
    row_id_ = id;
  }

public:
  std::string row() const { return fmt::format("{} id {}", row_table_, row_id_); }

private:
  void copy_targets() {
    Statement st(i_, "SELECT id, fingerprint, backend, description FROM targets",
                 "reading targets");
    while (st.step()) {
      at("targets", st.int64(0));
      targets_[st.int64(0)] = out_.target_id(st.text(1), st.text(2), st.text(3));
    }
  }

  void copy_workloads() {
    Statement st(i_, "SELECT id, signature, num_layers, description, macs FROM workloads",
                 "reading workloads");
    while (st.step()) {
      at("workloads", st.int64(0));
      workloads_[st.int64(0)] =
          out_.workload_id({st.text(1), static_cast<int>(st.int64(2)), st.text(3), st.int64(4)});
    }
  }

  void copy_candidates() {
    // The input is at the current version (read-only opens migrate a copy): every column of
    // the unique key, bn and cl included, is there; candidates that differ in it stay apart.
    Statement st(
        i_, "SELECT id, workload_id, strategy, bd, bh, bw, cb, bn, cl, threads FROM candidates",
        "reading candidates");
    Statement insert(
        o_,
        "INSERT INTO candidates (workload_id, strategy, bd, bh, bw, cb, bn, cl, threads) "
        "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9) ON CONFLICT DO NOTHING",
        "merging candidates");
    Statement find(o_,
                   "SELECT id FROM candidates WHERE workload_id = ?1 AND strategy = ?2 AND "
                   "bd = ?3 AND bh = ?4 AND bw = ?5 AND cb = ?6 AND bn = ?7 AND cl = ?8 AND "
                   "threads = ?9",
                   "merging candidates");
    while (st.step()) {
      for (Statement* s : {&insert, &find}) {
        s->reset();
        s->bind(1, mapped(workloads_, st.int64(1), "workload"));
        for (int c = 2; c <= 9; ++c)
          s->bind_column(c, st, c);
      }
      at("candidates", st.int64(0));
      insert.run();
      if (!find.step())
        throw UserError(fmt::format("'{}' is damaged: a candidate just merged is not found by "
                                    "its key; restore it from a copy",
                                    out_.path()));
      candidates_[st.int64(0)] = find.int64(0);
    }
  }

  void copy_runs() {
    Statement st(i_,
                 "SELECT id, experiment, experiment_path, config_json, model, batch, precision, "
                 "gpu_spec, target_id, git_revision, started_at, ended_at, status, host, pid, "
                 "process_start, heartbeat_at FROM runs",
                 "reading runs");
    Statement find(o_,
                   "SELECT id, status FROM runs WHERE experiment = ?1 AND model = ?2 AND "
                   "batch = ?3 AND precision = ?4 AND target_id = ?5 AND git_revision = ?6 AND "
                   "started_at = ?7",
                   "merging runs");
    Statement update(o_, "UPDATE runs SET status = ?1, ended_at = ?2 WHERE id = ?3",
                     "merging runs");
    Statement insert(o_,
                     "INSERT INTO runs (experiment, experiment_path, config_json, model, batch, "
                     "precision, gpu_spec, target_id, git_revision, started_at, ended_at, "
                     "status, host, pid, process_start, heartbeat_at) VALUES (?1, ?2, ?3, ?4, "
                     "?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)",
                     "merging runs");
    while (st.step()) {
      const int64_t target = mapped(targets_, st.int64(8), "target");
      find.reset();
      find.bind_column(1, st, 1).bind_column(2, st, 4).bind_column(3, st, 5);
      find.bind_column(4, st, 6).bind(5, target).bind_column(6, st, 9).bind_column(7, st, 10);
      if (find.step()) {
        // The same run: an input that saw it finish completes a copy that was still running.
        runs_[st.int64(0)] = find.int64(0);
        ++stats_->runs_present;
        if (find.text(1) == "running" && st.text(12) != "running") {
          update.reset();
          update.bind_column(1, st, 12).bind_column(2, st, 11).bind(3, find.int64(0)).run();
        }
        continue;
      }
      insert.reset();
      for (int c = 1; c <= 16; ++c)
        insert.bind_column(c, st, c);
      insert.bind(8, target);
      at("runs", st.int64(0));
      insert.run();
      runs_[st.int64(0)] = sqlite3_last_insert_rowid(o_);
      ++stats_->runs_added;
    }
  }

  void copy_run_groups() {
    Statement st(i_,
                 "SELECT run_id, workload_id, first_layer, last_layer, layer_names, label "
                 "FROM run_groups",
                 "reading run groups");
    Statement insert(o_,
                     "INSERT INTO run_groups (run_id, workload_id, first_layer, last_layer, "
                     "layer_names, label) VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT DO NOTHING",
                     "merging run groups");
    while (st.step()) {
      insert.reset();
      insert.bind(1, mapped(runs_, st.int64(0), "run"))
          .bind(2, mapped(workloads_, st.int64(1), "workload"));
      for (int c = 3; c <= 6; ++c)
        insert.bind_column(c, st, c - 1);
      at("run_groups (run_id)", st.int64(0));
      insert.run();
    }
  }

  void copy_predictions() {
    copy_prediction_rows("predictions", "candidate_id", candidates_, "candidate",
                         "gpu_spec, model_version, feasible, reason, time_ms, time_dram_ms, "
                         "time_l2_ms, time_compute_ms, time_atomics_compulsory_ms, "
                         "time_atomics_conflict_ms, time_other_ms, flops, redundant_flops, "
                         "l1_bytes, l2_bytes, dram_bytes, dram_lower_bound, atomics_compulsory, "
                         "atomics_conflict");
  }

  // The other layerwise baselines' predictions, counted with the predictions.
  void copy_baseline_predictions() {
    copy_prediction_rows("baseline_predictions", "workload_id", workloads_, "workload",
                         "gpu_spec, model_version, baseline, time_ms, time_dram_ms, time_l2_ms, "
                         "time_compute_ms, time_atomics_compulsory_ms, time_atomics_conflict_ms, "
                         "time_other_ms, flops, redundant_flops, l1_bytes, l2_bytes, dram_bytes, "
                         "dram_lower_bound, atomics_compulsory, atomics_conflict, launches");
  }

  // Copies `table`, whose first column `key` is an id of `ids` (remapped) and whose other
  // columns are `rest`; a row already present is kept.
  void copy_prediction_rows(const char* table, const char* key,
                            const std::map<int64_t, int64_t>& ids, const char* id_what,
                            const char* rest) {
    const std::string cols = fmt::format("{}, {}", key, rest);
    Statement st(i_, fmt::format("SELECT {} FROM {} ORDER BY rowid", cols, table),
                 fmt::format("reading {}", table));
    const int num_cols = st.column_count();
    std::string params;
    for (int c = 1; c <= num_cols; ++c)
      params += fmt::format("{}?{}", c > 1 ? ", " : "", c);
    Statement insert(
        o_,
        fmt::format("INSERT INTO {} ({}) VALUES ({}) ON CONFLICT DO NOTHING", table, cols, params),
        fmt::format("merging {}", table));
    const std::string where = fmt::format("{} ({})", table, key);
    while (st.step()) {
      insert.reset();
      for (int c = 0; c < num_cols; ++c)
        insert.bind_column(c + 1, st, c);
      insert.bind(1, mapped(ids, st.int64(0), id_what));
      at(where, st.int64(0));
      insert.run();
      stats_->predictions_added += changes();
    }
  }

  void copy_measurements() {
    Statement st(i_,
                 "SELECT id, candidate_id, target_id, run_id, status, error, median_ms, min_ms, "
                 "max_ms, p25_ms, p75_ms, max_rel_error, created_at FROM measurements ORDER BY id",
                 "reading measurements");
    Statement insert(o_,
                     "INSERT INTO measurements (candidate_id, target_id, run_id, status, error, "
                     "median_ms, min_ms, max_ms, p25_ms, p75_ms, max_rel_error, created_at) "
                     "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12) "
                     "ON CONFLICT (candidate_id, target_id, run_id) DO NOTHING",
                     "merging measurements");
    Statement samples(i_, "SELECT idx, time_ms FROM samples WHERE measurement_id = ?1",
                      "reading samples");
    Statement insert_sample(o_,
                            "INSERT INTO samples (measurement_id, idx, time_ms) "
                            "VALUES (?1, ?2, ?3)",
                            "merging samples");
    Statement counters(i_, "SELECT name, value FROM counters WHERE measurement_id = ?1",
                       "reading counters");
    Statement insert_counter(o_,
                             "INSERT INTO counters (measurement_id, name, value) "
                             "VALUES (?1, ?2, ?3)",
                             "merging counters");
    while (st.step()) {
      insert.reset();
      insert.bind(1, mapped(candidates_, st.int64(1), "candidate"))
          .bind(2, mapped(targets_, st.int64(2), "target"))
          .bind(3, mapped(runs_, st.int64(3), "run"));
      for (int c = 4; c <= 12; ++c)
        insert.bind_column(c, st, c);
      at("measurements", st.int64(0));
      insert.run();
      if (changes() == 0) {
        ++stats_->measurements_present;
        continue;
      }
      ++stats_->measurements_added;
      const int64_t id = sqlite3_last_insert_rowid(o_);
      at("samples of measurements", st.int64(0));
      samples.reset();
      samples.bind(1, st.int64(0));
      while (samples.step()) {
        insert_sample.reset();
        insert_sample.bind(1, id).bind_column(2, samples, 0).bind_column(3, samples, 1).run();
      }
      at("counters of measurements", st.int64(0));
      counters.reset();
      counters.bind(1, st.int64(0));
      while (counters.step()) {
        insert_counter.reset();
        insert_counter.bind(1, id).bind_column(2, counters, 0).bind_column(3, counters, 1).run();
      }
    }
  }

  void copy_plans() {
    Statement st(i_,
                 "SELECT id, run_id, kind, json, predicted_ms, measured_ms, "
                 "layerwise_predicted_ms, layerwise_measured_ms, created_at FROM plans ORDER BY id",
                 "reading plans");
    Statement find(o_, "SELECT 1 FROM plans WHERE run_id = ?1 AND kind = ?2 AND created_at = ?3",
                   "merging plans");
    Statement insert(o_,
                     "INSERT INTO plans (run_id, kind, json, predicted_ms, measured_ms, "
                     "layerwise_predicted_ms, layerwise_measured_ms, created_at) "
                     "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                     "merging plans");
    Statement groups(i_,
                     "SELECT idx, candidate_id, first_layer, last_layer FROM plan_groups "
                     "WHERE plan_id = ?1",
                     "reading plan groups");
    Statement insert_group(o_,
                           "INSERT INTO plan_groups (plan_id, idx, candidate_id, first_layer, "
                           "last_layer) VALUES (?1, ?2, ?3, ?4, ?5)",
                           "merging plan groups");
    while (st.step()) {
      const int64_t run = mapped(runs_, st.int64(1), "run");
      find.reset();
      find.bind(1, run).bind_column(2, st, 2).bind_column(3, st, 8);
      if (find.step())
        continue;
      insert.reset();
      for (int c = 1; c <= 8; ++c)
        insert.bind_column(c, st, c);
      insert.bind(1, run);
      at("plans", st.int64(0));
      insert.run();
      const int64_t plan = sqlite3_last_insert_rowid(o_);
      ++stats_->plans_added;
      at("plan_groups of plans", st.int64(0));
      groups.reset();
      groups.bind(1, st.int64(0));
      while (groups.step()) {
        insert_group.reset();
        insert_group.bind(1, plan)
            .bind_column(2, groups, 0)
            .bind(3, mapped(candidates_, groups.int64(1), "candidate"))
            .bind_column(4, groups, 2)
            .bind_column(5, groups, 3)
            .run();
      }
    }
  }

  void copy_baselines() {
    Statement st(i_,
                 "SELECT target_id, model, batch, precision, framework, median_ms, min_ms, "
                 "max_ms, p25_ms, p75_ms, samples_json, created_at, id FROM baselines "
                 "ORDER BY id",
                 "reading baselines");
    Statement find(o_,
                   "SELECT 1 FROM baselines WHERE target_id = ?1 AND model = ?2 AND batch = ?3 "
                   "AND precision = ?4 AND framework = ?5 AND created_at = ?6",
                   "merging baselines");
    Statement insert(o_,
                     "INSERT INTO baselines (target_id, model, batch, precision, framework, "
                     "median_ms, min_ms, max_ms, p25_ms, p75_ms, samples_json, created_at) "
                     "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
                     "merging baselines");
    while (st.step()) {
      const int64_t target = mapped(targets_, st.int64(0), "target");
      find.reset();
      find.bind(1, target);
      for (int c = 2; c <= 5; ++c)
        find.bind_column(c, st, c - 1);
      find.bind_column(6, st, 11);
      if (find.step())
        continue;
      insert.reset();
      for (int c = 1; c <= 12; ++c)
        insert.bind_column(c, st, c - 1);
      insert.bind(1, target);
      at("baselines", st.int64(12));
      insert.run();
      ++stats_->baselines_added;
    }
  }

  TuningDb& out_;
  sqlite3* o_;
  sqlite3* i_;
  MergeStats* stats_ = nullptr;
  std::string row_table_ = "targets";
  int64_t row_id_ = 0;
  std::map<int64_t, int64_t> targets_, workloads_, candidates_, runs_; // input id → output id
};

} // namespace

std::vector<MergeStats> merge_databases(TuningDb& out, const std::vector<std::string>& inputs,
                                        const MergeOptions& options) {
  BRICKDL_CHECK(out.mode() == TuningDb::Mode::kReadWrite, "merging into a read-only database");
  // Open and check every input before writing anything.
  std::vector<std::unique_ptr<TuningDb>> dbs;
  for (const std::string& path : inputs) {
    std::error_code ec;
    if (std::filesystem::equivalent(path, out.path(), ec)) {
      throw UserError("'" + path +
                      "' is the output database itself; pass other databases to "
                      "merge into it");
    }
    dbs.push_back(std::make_unique<TuningDb>(path, TuningDb::Mode::kReadOnly));
    // A damaged input is refused before anything is merged. Rows that only break a CHECK or
    // NOT NULL constraint are left to the copy, which names the row when OUT refuses it.
    const std::vector<std::string> problems = dbs.back()->integrity_problems();
    if (!std::all_of(problems.begin(), problems.end(), breaks_a_constraint))
      dbs.back()->check_integrity();
  }

  std::map<std::string, std::vector<std::string>> where; // measured target → databases
  for (const auto& fp : measured_targets(StoreAccess::connection(out)))
    where[fp].push_back(out.path());
  for (const auto& db : dbs)
    for (const auto& fp : measured_targets(StoreAccess::connection(*db)))
      where[fp].push_back(db->path());
  if (where.size() > 1 && !options.allow_mixed_targets) {
    std::vector<std::string> parts;
    for (const auto& [fp, paths] : where)
      parts.push_back("'" + fp + "' (" + join_names(paths) + ")");
    throw UserError(
        "refusing to merge measurements of different targets: " + join_names(parts, "; ") +
        ". Results never mix targets silently: merge each target into its own "
        "database, or pass --allow-mixed-targets to keep them side by side (every "
        "measurement keeps its target)");
  }

  // One transaction for all inputs: a refused row leaves OUT as it was.
  std::vector<MergeStats> stats;
  out.in_transaction([&] {
    for (const auto& db : dbs) {
      MergeStats s;
      s.input = db->path();
      Merger merger(out, *db);
      try {
        merger.run(&s);
      } catch (const store::detail::ConstraintError& e) {
        throw UserError(fmt::format(
            "'{}': {} breaks the schema's constraints ({}); the input is damaged or was written "
            "by another program. Nothing was merged: repair or delete that row in a copy of "
            "the input, or leave the input out",
            db->path(), merger.row(), e.detail()));
      }
      stats.push_back(s);
    }
  });
  return stats;
}

std::vector<MergeStats> merge_into(const std::string& out, const std::vector<std::string>& inputs,
                                   const MergeOptions& options) {
  const bool existed = std::filesystem::exists(out);
  try {
    TuningDb db(out);
    return merge_databases(db, inputs, options);
  } catch (...) {
    if (!existed) {
      std::error_code ec;
      for (const char* suffix : {"", "-wal", "-shm", "-journal"})
        std::filesystem::remove(out + suffix, ec);
    }
    throw;
  }
}

} // namespace brickdl
