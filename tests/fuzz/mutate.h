#pragma once
// Mutators of the fuzz targets (harness.h). Each takes an input and the case's generator and
// returns a changed input; every choice comes from the generator, so a case is reproducible.
//
//   mutate_bytes  byte level: flip bits, set bytes and 2/4/8-byte integers to extremes, insert,
//                 erase, duplicate or truncate ranges
//   mutate_yaml   structure aware (yaml-cpp): a scalar becomes an extreme number (0, -1, 2^31,
//                 2^63, 1e9, NaN, ...), a huge string, a word of `words` or another type;
//                 a key is deleted, renamed or added, a list element removed or repeated; a
//                 line duplicated (duplicate keys); sometimes bytes (mutate_bytes)
//   mutate_json   the same over nlohmann::json
#include <random>
#include <string>
#include <vector>

namespace brickdl::fuzz {

std::string mutate_bytes(const std::string& in, std::mt19937_64& rng);
std::string mutate_yaml(const std::string& in, std::mt19937_64& rng,
                        const std::vector<std::string>& words);
std::string mutate_json(const std::string& in, std::mt19937_64& rng,
                        const std::vector<std::string>& words);

// Extreme and ordinary numbers as text, shared by the structure-aware mutators.
const std::vector<std::string>& extreme_numbers();
// One of them, or a small change of `number` when it is one (so that cases also go deep).
std::string pick_number(std::mt19937_64& rng, const std::string& number);

} // namespace brickdl::fuzz
