// Database (bindings.h): a tuning database read through the store's queries, the ones behind
// brickdl-query (core/store/queries.h), so the schema checks, the read-only opening, a damaged
// or foreign file's refusal and every message are brickdl-query's. Tables cross as
// {"columns": [...], "rows": [[...]]}; the Python side makes DataFrames of them.
#include <algorithm>
#include <sstream>

#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "core/error.h"
#include "core/store/merge.h"
#include "core/store/print.h"
#include "core/store/queries.h"
#include "core/store/tuning_db.h"
#include "python/src/bindings.h"

namespace brickdl::python {

namespace {

nb::object cell(const query::Cell& c) {
  return std::visit(
      [](const auto& x) -> nb::object {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, std::nullptr_t>)
          return nb::none();
        else if constexpr (std::is_same_v<T, int64_t>)
          return nb::int_(x);
        else if constexpr (std::is_same_v<T, double>)
          return nb::float_(x);
        else
          return nb::str(x.c_str(), x.size());
      },
      c);
}

nb::dict table(const std::vector<std::string>& columns, nb::list rows) {
  nb::dict out;
  out["columns"] = columns;
  out["rows"] = rows;
  return out;
}

nb::dict grid_table(const query::ExportTable& t, bool with_samples) {
  const query::ExportGrid grid = query::export_grid(t);
  std::vector<std::string> columns = grid.columns;
  if (with_samples)
    columns.push_back("samples_ms");
  nb::list rows;
  for (size_t r = 0; r < grid.rows.size(); ++r) {
    nb::list row;
    for (const query::Cell& c : grid.rows[r])
      row.append(cell(c));
    if (with_samples)
      row.append(nb::cast(t.rows[r].samples_ms));
    rows.append(row);
  }
  return table(columns, rows);
}

nb::object opt(const std::optional<std::string>& s) {
  return s ? nb::object(nb::str(s->c_str())) : nb::none();
}

class Database {
public:
  explicit Database(const std::string& path) : db_(path, TuningDb::Mode::kReadOnly) {}

  const std::string& path() const { return db_.path(); }
  int schema_version() const { return db_.schema_version(); }

  nb::dict runs() {
    nb::list rows;
    for (const query::RunRow& r : query::runs(db_)) {
      nb::list row;
      for (nb::object v :
           {nb::cast(r.id), nb::cast(r.experiment), nb::cast(r.model), nb::cast(r.batch),
            nb::cast(r.precision), nb::cast(r.target), nb::cast(r.kind), nb::cast(r.status),
            nb::cast(r.started_at), opt(r.ended_at), nb::cast(r.measurements)})
        row.append(v);
      rows.append(row);
    }
    return table({"id", "experiment", "model", "batch", "precision", "target", "kind", "status",
                  "started_at", "ended_at", "measurements"},
                 rows);
  }

  // best and accuracy go through json_text, brickdl-query's own JSON text: it turns bytes of a
  // damaged or foreign file that are no UTF-8 into U+FFFD, which a Python str needs.
  nb::object best(const query::BestFilter& f) {
    return to_python(
        nlohmann::json::parse(query::json_text(query::best_json(query::best(db_, f)))));
  }

  nb::dict measurements(std::optional<int64_t> run, bool samples) {
    return grid_table(query::export_measurements(db_, run, samples), samples);
  }

  nb::dict predictions(std::optional<int64_t> run) {
    return grid_table(query::export_predictions(db_, run), false);
  }

  std::string show(int64_t run) {
    std::ostringstream os;
    query::print_run(query::run_details(db_, run), os);
    return os.str();
  }

  nb::object accuracy(std::optional<int64_t> run, const std::string& target) {
    const auto sets = query::accuracy(db_, query::AccuracyFilter{run, target});
    return to_python(nlohmann::json::parse(query::json_text(query::accuracy_json(sets))));
  }

private:
  TuningDb db_;
};

query::BestFilter best_filter(const std::string& model, const std::string& gpu,
                              const std::string& precision, std::optional<int> batch,
                              const std::string& target, const std::string& layer,
                              const std::string& source) {
  const std::vector<std::string> dtypes = dtype_names();
  if (!precision.empty() && std::find(dtypes.begin(), dtypes.end(), precision) == dtypes.end())
    throw UserError("best(precision='" + precision + "'): valid: " + join_names(dtypes));
  if (!source.empty() && source != "measured" && source != "predicted")
    throw UserError("best(source='" + source + "'): valid: measured, predicted");
  return query::BestFilter{model, gpu, precision, batch, target, layer, source};
}

// brickdl-query merge OUT IN...: every input copied into `out` (created when missing).
nb::list merge(const std::string& out, const std::vector<std::string>& inputs,
               bool allow_mixed_targets) {
  std::vector<MergeStats> stats;
  {
    nb::gil_scoped_release release;
    stats = merge_into(out, inputs, MergeOptions{allow_mixed_targets});
  }
  nb::list result;
  for (const MergeStats& s : stats) {
    nb::dict d;
    d["input"] = s.input;
    d["runs_added"] = s.runs_added;
    d["runs_present"] = s.runs_present;
    d["measurements_added"] = s.measurements_added;
    d["measurements_present"] = s.measurements_present;
    d["predictions_added"] = s.predictions_added;
    d["plans_added"] = s.plans_added;
    d["baselines_added"] = s.baselines_added;
    result.append(d);
  }
  return result;
}

} // namespace

void bind_database(nb::module_& m) {
  nb::class_<Database>(m, "Database", "A tuning database, open read-only (brickdl.Database).")
      .def(nb::init<const std::string&>(), nb::arg("path"))
      .def_prop_ro("path", &Database::path)
      .def_prop_ro("schema_version", &Database::schema_version)
      .def("runs", &Database::runs)
      .def(
          "best",
          [](Database& db, const std::string& model, const std::string& gpu,
             const std::string& precision, std::optional<int> batch, const std::string& target,
             const std::string& layer, const std::string& source) {
            return db.best(best_filter(model, gpu, precision, batch, target, layer, source));
          },
          nb::arg("model") = "", nb::arg("gpu") = "", nb::arg("precision") = "",
          nb::arg("batch") = nb::none(), nb::arg("target") = "", nb::arg("layer") = "",
          nb::arg("source") = "")
      .def("measurements", &Database::measurements, nb::arg("run") = nb::none(),
           nb::arg("samples") = false)
      .def("predictions", &Database::predictions, nb::arg("run") = nb::none())
      .def("show", &Database::show, nb::arg("run"))
      .def("accuracy", &Database::accuracy, nb::arg("run") = nb::none(), nb::arg("target") = "");
  m.def("merge", &merge, nb::arg("out"), nb::arg("inputs"), nb::arg("allow_mixed_targets"));
}

} // namespace brickdl::python
