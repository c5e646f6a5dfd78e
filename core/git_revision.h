#pragma once
// The git revision this build was made from: HEAD's 12-digit short hash, "+dirty" appended when
// tracked files differed from HEAD, "unknown" outside a checkout; taken at every build
// (cmake/git_revision.cmake) and recorded with every tuning run. It lives in one generated
// source file, so a new commit recompiles that file only, not everything that includes core
// headers.
namespace brickdl {
const char* git_revision();
} // namespace brickdl
