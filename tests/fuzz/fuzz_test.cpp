// Fuzzing of every input brickdl reads (harness.h): experiment YAML, inline graphs, plan JSON,
// .npy files, tuning databases and ONNX models. Each target calls the library entry points
// the tools call (the same loaders, `--describe`, model-only tuning, the plan reader and the
// executors, the npy reader, TuningDb, the queries and merge) on seeded mutants of its seeds,
// each case in a forked child with a time and memory limit, and asserts that every case ends
// in success or a UserError (the tools' exit 0 or 2): never another exception (exit 3), a
// signal, a hang or unbounded memory. One target alone: --gtest_filter=Fuzz.<target>.
#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "core/error.h"
#include "core/experiment.h"
#include "core/gpu_spec.h"
#include "core/op_traits.h"
#include "core/zoo.h"
#include "search/searcher.h"
#include "tests/fuzz/harness.h"
#include "tests/fuzz/mutate.h"
#include "tests/fuzz/targets.h"

namespace brickdl::fuzz {
namespace {

namespace fs = std::filesystem;

std::vector<FuzzInput> with_seed_files(std::vector<FuzzInput> seeds, const std::string& target) {
  for (FuzzInput& c : input_files("seeds/" + target))
    seeds.push_back(std::move(c));
  return seeds;
}

// Names a mutant may put where a name goes: the registries' own lists and the keys.
std::vector<std::string> words() {
  std::vector<std::string> w = {"conv_chain", "custom", "zoo",  "input", "layers", "inputs",
                                "first",      "last",   "none", "cpu",   "cuda",   "auto"};
  for (const auto& list : {zoo_names(), experiment_keys(), op_names(), strategy_names(),
                           search::searcher_names(), gpu_spec_names(), dtype_names()})
    w.insert(w.end(), list.begin(), list.end());
  for (const char* k :
       {"out_channels",   "kernel",       "stride",        "padding",     "dilation",
        "groups",         "scale",        "out_features",  "channels",    "size",
        "depth",          "image",        "dims",          "num_classes", "brick_sizes",
        "channel_blocks", "batch_blocks", "max_group_len", "partitions",  "subgraphs",
        "threads",        "top_k"})
    w.push_back(k);
  return w;
}

TEST(Fuzz, experiment_yaml) {
  Target t;
  t.name = "experiment_yaml";
  t.suffix = ".yaml";
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(fs::path(BRICKDL_SOURCE_DIR) / "experiments"))
    if (e.path().extension() == ".yaml")
      files.push_back(e.path());
  std::sort(files.begin(), files.end());
  for (const fs::path& f : files)
    t.seeds.push_back({read_file(f), "experiments/" + f.filename().string()});
  t.seeds = with_seed_files(t.seeds, t.name);
  const std::vector<std::string> w = words();
  t.mutate = [w](const std::string& in, std::mt19937_64& rng) { return mutate_yaml(in, rng, w); };
  t.body = experiment_body;
  t.mutants = 600;
  run_target(t);
}

TEST(Fuzz, yaml_graph) {
  Target t;
  t.name = "yaml_graph";
  t.suffix = ".yaml";
  t.seeds = with_seed_files({}, t.name);
  const std::vector<std::string> w = words();
  t.mutate = [w](const std::string& in, std::mt19937_64& rng) { return mutate_yaml(in, rng, w); };
  t.body = yaml_graph_body;
  t.mutants = 600;
  run_target(t);
}

TEST(Fuzz, plan_json) {
  Target t;
  t.name = "plan_json";
  t.suffix = ".json";
  t.seeds = with_seed_files(plan_seeds(), t.name);
  const std::vector<std::string> w = {
      "padded", "memoized", "layerwise", "first",    "last",   "first_layer", "last_layer",
      "brick",  "cb",       "nb",        "strategy", "groups", "plan",        "threads",
      "d",      "h",        "w",         "c1",       "c2",     "sum",         "input"};
  t.mutate = [w](const std::string& in, std::mt19937_64& rng) { return mutate_json(in, rng, w); };
  t.body = plan_body;
  t.mutants = 600;
  run_target(t);
}

TEST(Fuzz, npy) {
  Target t;
  t.name = "npy";
  t.suffix = ".npy";
  t.seeds = with_seed_files(npy_seeds(), t.name);
  t.mutate = mutate_npy;
  t.body = npy_body;
  t.mutants = 800;
  run_target(t);
}

TEST(Fuzz, tuning_db) {
  Target t;
  t.name = "tuning_db";
  t.suffix = ".db";
  t.seeds = with_seed_files(db_seeds(), t.name);
  t.mutate = mutate_db;
  t.body = db_body;
  t.mutants = 150;
  t.limits.seconds = 5;
  run_target(t);
}

TEST(Fuzz, onnx) {
  Target t;
  t.name = "onnx";
  t.suffix = ".onnx";
  t.seeds = with_seed_files(onnx_seeds(), t.name);
  t.mutate = mutate_onnx;
  t.body = onnx_body;
  t.mutants = 600;
  run_target(t);
}

// The harness itself: each way a case can end is told apart.
TEST(FuzzHarness, ClassifiesEveryOutcome) {
  Limits limits;
  limits.seconds = 0.3;
  limits.memory_bytes = int64_t{256} << 20;
  const auto run = [&](const std::function<void(const FuzzInput&)>& body) {
    return run_isolated(body, FuzzInput{"", "test"}, limits);
  };
  EXPECT_EQ(run([](const FuzzInput&) {}).outcome, Outcome::kSuccess);
  EXPECT_EQ(run([](const FuzzInput&) { throw UserError("bad input"); }).outcome,
            Outcome::kUserError);
  const CaseResult internal = run([](const FuzzInput&) { throw InternalError("a bug"); });
  EXPECT_EQ(internal.outcome, Outcome::kFailure);
  EXPECT_EQ(internal.symptom, "internal error: a bug");
  const CaseResult crash = run([](const FuzzInput&) { std::raise(SIGSEGV); });
  EXPECT_EQ(crash.outcome, Outcome::kFailure);
  // AddressSanitizer reports the SEGV itself and exits 1.
  EXPECT_TRUE(crash.symptom.rfind("signal 11", 0) == 0 ||
              crash.symptom.find("AddressSanitizer: SEGV") != std::string::npos)
      << crash.symptom;
  const CaseResult hang = run([](const FuzzInput&) {
    for (volatile bool spin = true; spin;) {
    }
  });
  EXPECT_EQ(hang.symptom.rfind("hang", 0), 0u) << hang.symptom;
  limits.seconds = 20; // time to fill the memory limit on a busy machine
  const CaseResult memory = run([](const FuzzInput&) {
    std::vector<std::vector<char>> hog;
    for (;;)
      hog.emplace_back(size_t{16} << 20, 'x'); // touched: resident, too
  });
  EXPECT_EQ(memory.symptom.rfind("memory", 0), 0u) << memory.symptom;
}

} // namespace
} // namespace brickdl::fuzz
