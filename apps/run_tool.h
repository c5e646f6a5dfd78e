#pragma once
// The error policy of every brickdl program, in one place:
//
//   command line (CLI11)  --help               → the help text on stdout, exit 0
//                         a bad or missing flag → CLI11's message and the usage, exit 2
//   body()                returns               → its exit status
//                         throws UserError      → "NAME: error: <file:line:col: key: what>", exit 2
//                         throws InternalError  → "NAME: internal error: <what>", exit 3
//                         throws anything else  → "NAME: internal error: <what>", exit 3
//
// A program builds its CLI::App, then returns run_tool(name, app, argc, argv, body) from
// main(); nothing else in it catches to exit. Messages are printed through printable()
// (core/error.h): a value quoted from a file never reaches the terminal as control bytes.
#include <functional>

#include <CLI/CLI.hpp>

namespace brickdl {

int run_tool(const char* name, CLI::App& app, int argc, char** argv,
             const std::function<int()>& body);

} // namespace brickdl
