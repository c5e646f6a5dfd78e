#pragma once
// Starting a program of the build from a test: stdout and stderr into files, the process id
// back (tune_e2e_test.cpp, tune_mpi_test.cpp).
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>

#include <string>
#include <vector>

extern char** environ;

namespace brickdl::testing {

// Starts argv[0] (searched on PATH when it has no '/') with `argv`, its stdout written to
// `out` and its stderr to `err`. Returns its pid, or -1 when it could not start.
inline pid_t spawn_logged(std::vector<std::string> argv, const std::string& out,
                          const std::string& err) {
  std::vector<char*> args;
  for (auto& a : argv)
    args.push_back(a.data());
  args.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&fa, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = -1;
  const int rc = posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  return rc == 0 ? pid : -1;
}

// Waits for `pid` to end; its wait status, or -1 when it is not a child of this process.
inline int wait_for(pid_t pid) {
  int status = 0;
  return waitpid(pid, &status, 0) == pid ? status : -1;
}

} // namespace brickdl::testing
