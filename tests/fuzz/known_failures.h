#pragma once
// Fuzz failures that are known and being fixed elsewhere, listed in ONE place so that they do
// not fail the fuzz test meanwhile. A failure of target `target` whose symptom contains
// `symptom` is counted and printed as known instead of failing the test; the tally each target
// prints shows how many known failures are left. Empty the entry with its fix.
#include <array>

namespace brickdl::fuzz {

struct KnownFailure {
  const char* target;  // a fuzz target (Fuzz.<target>)
  const char* symptom; // a substring of the failure's symptom
  const char* why;     // what it is, and the branch that fixes it
};

// Empty: every failure fails the test. An entry: {"target", "symptom substring", "what it is,
// and where it is being fixed"}.
inline constexpr std::array<KnownFailure, 0> kKnownFailures{};

} // namespace brickdl::fuzz
