// brickdl._brickdl: the module and its exceptions (bindings.h).
//
// Errors keep the command-line programs' split (apps/run_tool.h): a UserError (bad input) is
// brickdl.UserError, a ValueError, whose message is the one the programs print after
// "NAME: error: "; its file, line, column and key are attributes. An InternalError (a broken
// invariant: a bug) and any other C++ exception are brickdl.InternalError, a RuntimeError, as
// the programs say "internal error". Python exceptions raised in callbacks pass through as they
// are.
#include <new>

#include "core/error.h"
#include "python/src/bindings.h"

namespace brickdl::python {

namespace {

PyObject* g_user_error = nullptr;
PyObject* g_internal_error = nullptr;

void set_attr(PyObject* object, const char* name, nb::object value) {
  PyObject_SetAttrString(object, name, value.ptr());
}

void raise_user_error(const UserError& e) {
  const std::string message = printable(e.what(), /*keep_newlines=*/true);
  PyObject* exc = PyObject_CallFunction(g_user_error, "s", message.c_str());
  if (exc == nullptr)
    return; // the call's own error stays set
  const SourceLocation& at = e.where();
  const auto text = [](const std::string& v) {
    return v.empty() ? nb::none() : nb::object(nb::str(v.c_str()));
  };
  const auto number = [](int v) { return v > 0 ? nb::object(nb::int_(v)) : nb::none(); };
  // The place as the message names it: none when the message leaves it out.
  const bool named = !at.file.empty() && message.rfind(at.file, 0) == 0;
  set_attr(exc, "file", text(named ? at.file : ""));
  set_attr(exc, "line", number(named ? at.line : 0));
  set_attr(exc, "column", number(named ? at.column : 0));
  set_attr(exc, "key", text(at.key));
  PyErr_SetObject(g_user_error, exc);
  Py_DECREF(exc);
}

void translate(const std::exception_ptr& p, void*) {
  try {
    std::rethrow_exception(p);
  } catch (const UserError& e) {
    raise_user_error(e);
  } catch (const std::bad_alloc&) {
    throw; // nanobind's own translation: MemoryError
  } catch (const std::exception& e) {
    // InternalError, and whatever else escaped the library.
    PyErr_SetString(g_internal_error, printable(e.what(), /*keep_newlines=*/true).c_str());
  }
}

} // namespace

void bind_errors(nb::module_& m) {
  g_user_error = PyErr_NewExceptionWithDoc(
      "brickdl.UserError",
      "Bad input (a model, an experiment, a setting, a plan, a database): the message the "
      "command-line programs print after 'error:'. Attributes file, line, column and key say "
      "where, when known (else None).",
      PyExc_ValueError, nullptr);
  g_internal_error = PyErr_NewExceptionWithDoc(
      "brickdl.InternalError",
      "An invariant of brickdl broke: a bug (the programs' 'internal error'). Please report it "
      "with the message.",
      PyExc_RuntimeError, nullptr);
  m.attr("UserError") = nb::handle(g_user_error);
  m.attr("InternalError") = nb::handle(g_internal_error);
  nb::register_exception_translator(translate);
}

} // namespace brickdl::python

NB_MODULE(_brickdl, m) {
  m.doc() = "brickdl's C++ library for the Python package brickdl (use that package, not this "
            "module).";
  brickdl::python::bind_errors(m);
  brickdl::python::bind_models(m);
  brickdl::python::bind_tuning(m);
  brickdl::python::bind_running(m);
  brickdl::python::bind_database(m);
}
