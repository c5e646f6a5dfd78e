#pragma once
// The extension module brickdl._brickdl (nanobind): the C++ library as the Python package
// (python/brickdl/__init__.py) calls it. Each file binds one concern:
//
//   module.cpp    the module, its exceptions (UserError, InternalError) and their translation
//   convert.cpp   nlohmann::json ↔ Python objects (reports, rows and settings cross as JSON)
//   models.cpp    Experiment: a zoo model, an ONNX file or an experiment file, with settings
//   tuning.cpp    tune(): the driver on a thread of its own, the GIL released, progress and
//                 Ctrl-C handled on the caller's thread
//   running.cpp   run(): a plan executed on the CPU with numpy inputs and outputs
//   database.cpp  Database: the queries of brickdl-query, and merging
//
// Nothing here computes what the library computes: every function calls the same C++ as the
// command-line programs, so a plan, a database row and an error message are theirs.
#include <string>

#include <nanobind/nanobind.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/experiment.h"

namespace brickdl::python {

namespace nb = nanobind;

// A JSON value as the Python object json.loads would give (dict, list, str, int, float, bool,
// None).
nb::object to_python(const nlohmann::json& value);
// A JSON text from the Python side (settings, plans): a UserError naming `what` when it is not
// JSON.
nlohmann::json parse_json(const std::string& text, const std::string& what);

// The experiment of a brickdl._brickdl.Experiment object (models.cpp).
const ExperimentConfig& experiment_config(nb::handle model);

// A UserError about a setting of tune() (brickdl-tune's flag, or a key of the experiment that
// `keys` set) rethrown naming that keyword: "brickdl.tune(): top_k: ..."; others as they are.
[[noreturn]] void rethrow_as_setting(const UserError& err, const nlohmann::json& keys);

void bind_errors(nb::module_& m);
void bind_models(nb::module_& m);
void bind_tuning(nb::module_& m);
void bind_running(nb::module_& m);
void bind_database(nb::module_& m);

} // namespace brickdl::python
