#pragma once
// FNV-1a: a 64-bit hash of text that is the same in every process, build and machine
// (std::hash is not), for cache keys, digests and seeds.
#include <cstdint>
#include <string_view>

namespace brickdl {

inline constexpr uint64_t kFnvOffsetBasis = 14695981039346656037ull;
inline constexpr uint64_t kFnvPrime = 1099511628211ull;

// `s` hashed on from `h`.
inline uint64_t fnv1a(std::string_view s, uint64_t h = kFnvOffsetBasis) {
  for (unsigned char c : s)
    h = (h ^ c) * kFnvPrime;
  return h;
}

// One field of a composite key: `s`, then its length, so that concatenations of fields
// cannot collide trivially ("ab" + "c" vs "a" + "bc").
inline uint64_t fnv1a_field(uint64_t h, std::string_view s) {
  return (fnv1a(s, h) ^ s.size()) * kFnvPrime;
}

} // namespace brickdl
