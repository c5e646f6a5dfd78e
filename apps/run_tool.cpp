#include "apps/run_tool.h"

#include <iostream>

#include "core/error.h"

namespace brickdl {

int run_tool(const char* name, CLI::App& app, int argc, char** argv,
             const std::function<int()>& body) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // app.exit() prints the help (exit code 0) or the error and the usage.
    return app.exit(e) == 0 ? 0 : kExitUserError;
  }
  try {
    return body();
  } catch (const UserError& e) {
    std::cerr << name << ": error: " << printable(e.what(), /*keep_newlines=*/true) << '\n';
    return kExitUserError;
  } catch (const std::exception& e) {
    // InternalError (a broken invariant: a bug) and whatever else escaped.
    std::cerr << name << ": internal error: " << printable(e.what(), /*keep_newlines=*/true)
              << '\n';
    return kExitInternalError;
  }
}

} // namespace brickdl
