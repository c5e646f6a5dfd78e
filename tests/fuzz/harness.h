#pragma once
// Deterministic, seeded fuzzing inside the test suite (tests/fuzz/fuzz_test.cpp).
//
//   seeds (tests/fuzz/seeds/<target>/, experiments/, inputs made at start) and the corpus
//   (tests/fuzz/corpus/<target>/: inputs that once failed, replayed as they are)
//        │  the first cases: every seed, then every corpus input, as they are; then mutants of
//        │  the seeds, every choice drawn from a generator seeded with (target, case number),
//        │  so case i is always the same input
//        ▼
//   run_isolated(): fork; the child limits its address space (RLIMIT_AS) and time (a timer
//   signal), runs the target's body on the input — the same library calls the tools make —
//   and exits 0 (success), 2 (UserError), 3 (any other exception: what the tools print as
//   "internal error", exit 3), 4 (std::bad_alloc: the memory limit); the parent also kills a
//   child past its time or resident memory (sanitizer builds cannot limit RLIMIT_AS).
//        │
//        ▼
//   Tally per target: success / user error / failure. A failure that known_failures.h does not
//   list fails the test, with the case number and how to run that case alone:
//
//     BRICKDL_FUZZ_CASE=N     run only case N of each selected target
//     BRICKDL_FUZZ_DUMP=FILE  write that case's input to FILE (to give it to the tools)
//     BRICKDL_FUZZ_CASES=M    mutants per target (default: the target's own count)
//     BRICKDL_FUZZ_VERBOSE=1  print every failure (default: the first 20 new, 3 known)
#include <chrono>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace brickdl::fuzz {

// One input: its bytes and a label saying where it came from (seed file or mutation).
struct FuzzInput {
  std::string bytes;
  std::string origin;
};

enum class Outcome { kSuccess, kUserError, kFailure };

struct CaseResult {
  Outcome outcome = Outcome::kSuccess;
  std::string symptom; // for a failure: "internal error: ...", "signal 11", "hang", "memory"
  double seconds = 0;
};

struct Limits {
  double seconds = 2.0;           // wall time per case
  int64_t memory_bytes = 1 << 30; // on top of what the process holds when it forks
};

// The scratch folder of this test process (created on first use, removed at exit).
const std::string& scratch_dir();

// Runs `body(input)` in a forked child under `limits`; see the diagram above.
CaseResult run_isolated(const std::function<void(const FuzzInput&)>& body, const FuzzInput& input,
                        const Limits& limits);

// A target: its seeds, how to mutate one (with the case's generator), and what to run.
struct Target {
  std::string name;             // also the folders tests/fuzz/seeds/<name>/ and corpus/<name>/
  std::string suffix;           // file suffix of its inputs (".yaml", ".npy", ...)
  std::vector<FuzzInput> seeds; // mutated; never empty
  std::function<std::string(const std::string&, std::mt19937_64&)> mutate;
  std::function<void(const FuzzInput&)> body;
  int mutants = 500;
  Limits limits;
};

// The bytes of the file at `path` ("" when it cannot be read).
std::string read_file(const std::string& path);

// The files of tests/fuzz/<folder>/ (e.g. "seeds/npy"), sorted by name.
std::vector<FuzzInput> input_files(const std::string& folder);

// Runs every case of `target` (seeds, tests/fuzz/corpus/<name>/, mutants; or the one
// BRICKDL_FUZZ_CASE names), prints the tally and each
// failure with the case number and the command that reruns it; adds a gtest failure for every
// failure not listed in known_failures.h.
void run_target(const Target& target);

} // namespace brickdl::fuzz
