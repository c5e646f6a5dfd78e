#pragma once
// The git revision this build was configured from (`git describe --always --dirty`, "unknown"
// outside a checkout), recorded with every tuning run. It lives in one generated source file,
// so a new commit recompiles that file only, not everything that includes core headers.
namespace brickdl {
const char* git_revision();
} // namespace brickdl
