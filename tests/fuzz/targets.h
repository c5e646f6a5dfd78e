#pragma once
// The fuzz targets' seeds, mutators and bodies (harness.h). A body runs in the forked child
// on one input and makes the library calls a tool makes with it; it throws what they throw.
//
//   target           body: what a tool does with the input
//   experiment_yaml  brickdl-tune X.yaml --describe, then --backend none (small graphs)
//   yaml_graph       the inline graph loader, --describe's model report, model-only tuning,
//                    and brickdl-run of the tuned plan (small graphs)
//   plan_json        brickdl-run --plan: read, validate and execute a plan on a small graph
//   npy              brickdl-run --input: read_npy and read_npy_tensor
//   tuning_db        brickdl-query (read-only queries and printing), merge from it and into
//                    it, brickdl-tune --backend none --db into it
//   onnx             brickdl-tune MODEL.onnx --describe / --backend none, brickdl-run of it
#include <random>
#include <string>
#include <vector>

#include "core/experiment.h"
#include "tests/fuzz/harness.h"

namespace brickdl::fuzz {

// A file in the scratch folder named after this process (a child's own), holding `bytes`.
std::string write_case_file(const std::string& bytes, const std::string& suffix);
// Tunes `exp` model-only (brickdl-tune --backend none) into the database `db_path` and writes
// its outputs, as the tool does; the database's clock gives fixed times.
void tune_model_only(ExperimentConfig exp, const std::string& db_path);
// Whether executing `fused` on the CPU is cheap enough for a fuzz case.
bool small_enough_to_run(const Graph& fused);

void experiment_body(const FuzzInput& in);
void yaml_graph_body(const FuzzInput& in);

std::vector<FuzzInput> plan_seeds();
void plan_body(const FuzzInput& in);

std::vector<FuzzInput> npy_seeds();
std::string mutate_npy(const std::string& in, std::mt19937_64& rng);
void npy_body(const FuzzInput& in);

std::vector<FuzzInput> db_seeds();
std::string mutate_db(const std::string& in, std::mt19937_64& rng);
void db_body(const FuzzInput& in);

std::vector<FuzzInput> onnx_seeds();
std::string mutate_onnx(const std::string& in, std::mt19937_64& rng);
void onnx_body(const FuzzInput& in);

} // namespace brickdl::fuzz
