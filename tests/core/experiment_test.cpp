// Experiment files: every key, the defaults, every class of bad input with file, line, column
// and key, and every file shipped in experiments/.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "core/error.h"
#include "core/experiment.h"
#include "core/onnx.h"
#include "core/zoo.h"

namespace brickdl {
namespace {

namespace fs = std::filesystem;

// Lines 1-8: an inline two-conv graph and a target. Tests append from line 9.
const std::string kBase =
    "model:\n"                                                             // 1
    "  input: {channels: 2, size: [8, 8]}\n"                               // 2
    "  layers:\n"                                                          // 3
    "    - {op: conv, name: c1, out_channels: 4, kernel: 3, padding: 1}\n" // 4
    "    - {op: relu, name: r1}\n"                                         // 5
    "    - {op: conv, name: c2, out_channels: 4, kernel: 3, padding: 1}\n" // 6
    "    - {op: relu, name: r2}\n"                                         // 7
    "target: {gpu: A100-40GB}\n";                                          // 8

// kBase with line `line` (1-based) replaced by `text`.
std::string base_with(int line, const std::string& text) {
  std::string out;
  size_t pos = 0;
  for (int l = 1; pos < kBase.size(); ++l) {
    const size_t end = kBase.find('\n', pos);
    out += l == line ? text + "\n" : kBase.substr(pos, end - pos + 1);
    pos = end + 1;
  }
  return out;
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

template <typename E = UserError>
E expect_error(const std::string& yaml, int line, int column, const std::string& key,
               const std::string& fragment) {
  try {
    parse_experiment(yaml, "exp.yaml");
  } catch (const E& e) {
    EXPECT_EQ(e.where().file, "exp.yaml") << e.what();
    EXPECT_EQ(e.where().line, line) << e.what();
    EXPECT_EQ(e.where().column, column) << e.what();
    EXPECT_EQ(e.where().key, key) << e.what();
    EXPECT_TRUE(contains(e.what(), fragment)) << "'" << fragment << "' not in: " << e.what();
    return e;
  }
  ADD_FAILURE() << "expected an error containing '" << fragment << "'";
  return E("none");
}

bool zoo_has(const std::string& name) {
  const auto names = zoo_names();
  return std::find(names.begin(), names.end(), name) != names.end();
}

// ---- values --------------------------------------------------------------------------------

TEST(Experiment, DefaultsOfAMinimalInlineExperiment) {
  const ExperimentConfig e = parse_experiment(kBase, "dir/small.yaml");
  EXPECT_EQ(e.file, "dir/small.yaml");
  EXPECT_EQ(e.name, "small"); // the file's stem
  EXPECT_EQ(e.model, "custom");
  EXPECT_EQ(e.batch, 1);
  EXPECT_EQ(e.precision, DType::kF32);
  EXPECT_TRUE(e.input_size.empty());
  EXPECT_EQ(e.input_channels, 0);
  ASSERT_EQ(e.graph.size(), 5);
  EXPECT_EQ(e.graph.input_shape(), (TensorShape{1, 2, 1, 8, 8, 2}));
  EXPECT_EQ(e.gpu.name, "A100-40GB");
  EXPECT_EQ(e.gpu.sm_count, 108);
  EXPECT_EQ(e.search.brick_sizes, (std::vector<int>{4, 8, 16, 32}));
  EXPECT_TRUE(e.search.brick_depths.empty()); // cubes
  EXPECT_EQ(e.search.channel_blocks, (std::vector<int>{0}));
  EXPECT_EQ(e.search.batch_blocks, (std::vector<int>{1}));
  EXPECT_EQ(e.search.max_group_len, 4);
  EXPECT_EQ(e.search.strategies,
            (std::vector<Strategy>{Strategy::kLayerwise, Strategy::kPadded, Strategy::kMemoized}));
  EXPECT_EQ(e.search.threads, (std::vector<int>{256}));
  EXPECT_EQ(e.search.searcher, "dp");
  EXPECT_EQ(e.search.random_samples, 1000);
  EXPECT_TRUE(e.search.partitions.empty());
  EXPECT_TRUE(e.search.subgraphs.empty());
  EXPECT_EQ(e.measurement.backend, "auto");
  EXPECT_EQ(e.measurement.options.warmup, 3);
  EXPECT_EQ(e.measurement.options.repetitions, 10);
  EXPECT_TRUE(e.measurement.options.flush_l2);
  EXPECT_EQ(e.measurement.options.timeout_s, 60);
  EXPECT_EQ(e.measurement.top_k, 3);
  EXPECT_TRUE(e.measurement.counters.empty());
  EXPECT_EQ(e.measurement.cpu_threads, 0);
  EXPECT_EQ(e.measurement.budget_s, 0);
  EXPECT_EQ(e.measurement.max_measurements, 0);
  EXPECT_EQ(e.seed, 1u);
  EXPECT_EQ(e.database, "brickdl.db");
  EXPECT_EQ(e.output_dir, "out/small");
}

// An experiment that sets every key.
ExperimentConfig full_experiment() {
  const std::string yaml = kBase + "name: full\n"
                                   "batch: 4\n"
                                   "input_size: [16, 12]\n"
                                   "input_channels: 3\n"
                                   "precision: fp16\n"
                                   "search:\n"
                                   "  brick_sizes: [8, 16]\n"
                                   "  brick_depths: [2, 1]\n"
                                   "  channel_blocks: [0, 32]\n"
                                   "  batch_blocks: [1, 4]\n"
                                   "  clusters: [1, 2]\n"
                                   "  max_group_len: 2\n"
                                   "  strategies: [memoized, layerwise]\n"
                                   "  threads: [128, 256]\n"
                                   "  searcher: random\n"
                                   "  random_samples: 50\n"
                                   "  partitions: [[1, 1], [2]]\n"
                                   "  subgraphs:\n"
                                   "    - {name: first pair, first: c1, last: r1}\n"
                                   "    - {first: c2, last: r2}\n"
                                   "measurement:\n"
                                   "  backend: cpu\n"
                                   "  warmup: 0\n"
                                   "  repetitions: 5\n"
                                   "  top_k: 2\n"
                                   "  counters: [dram__bytes_read.sum, flops]\n"
                                   "  flush_l2: false\n"
                                   "  collect_counters: false\n"
                                   "  timeout_s: 2.5\n"
                                   "  cpu_threads: 2\n"
                                   "  rtol: 1.0e-3\n"
                                   "  atol: 0\n"
                                   "  budget_s: 60\n"
                                   "  max_measurements: 7\n"
                                   "seed: 42\n"
                                   "database: runs/t.db\n"
                                   "output: results/full\n";
  return parse_experiment(yaml, "exp.yaml");
}

// Strings end up in JSON (run configs, reports), which holds UTF-8 only: other bytes (a file in
// Latin-1, a stray byte) are refused at their key, not met later as an internal error.
TEST(Experiment, StringsMustBeUtf8) {
  expect_error(kBase + "name: caf\xe9\n", 9, 7, "name", "expected UTF-8 text");
  expect_error(kBase + "name: \xed\xa0\x80\n", 9, 7, "name", "expected UTF-8 text"); // surrogate
  expect_error(kBase + "name: \xc0\xaf\n", 9, 7, "name", "expected UTF-8 text");     // overlong
  EXPECT_EQ(parse_experiment(kBase + "name: caf\xc3\xa9-\xf0\x9f\x9a\x80\n", "e.yaml").name,
            "caf\xc3\xa9-\xf0\x9f\x9a\x80");
}

TEST(Experiment, EveryTopLevelKey) {
  const ExperimentConfig e = full_experiment();
  EXPECT_EQ(e.name, "full");
  EXPECT_EQ(e.batch, 4);
  EXPECT_EQ(e.input_size, (std::vector<int64_t>{16, 12}));
  EXPECT_EQ(e.input_channels, 3);
  EXPECT_EQ(e.precision, DType::kF16);
  // The overrides reach the inline graph.
  EXPECT_EQ(e.graph.input_shape(), (TensorShape{4, 3, 1, 16, 12, 2}));
  EXPECT_EQ(e.graph.dtype(), DType::kF16);
  EXPECT_EQ(e.seed, 42u);
  EXPECT_EQ(e.database, "runs/t.db");
  EXPECT_EQ(e.output_dir, "results/full");
}

TEST(Experiment, EverySearchKey) {
  const ExperimentConfig e = full_experiment();
  EXPECT_EQ(e.search.brick_sizes, (std::vector<int>{8, 16}));
  EXPECT_EQ(e.search.brick_depths, (std::vector<int>{2, 1}));
  EXPECT_EQ(e.search.channel_blocks, (std::vector<int>{0, 32}));
  EXPECT_EQ(e.search.batch_blocks, (std::vector<int>{1, 4}));
  EXPECT_EQ(e.search.clusters, (std::vector<int>{1, 2}));
  EXPECT_EQ(e.search.max_group_len, 2);
  EXPECT_EQ(e.search.strategies,
            (std::vector<Strategy>{Strategy::kMemoized, Strategy::kLayerwise}));
  EXPECT_EQ(e.search.threads, (std::vector<int>{128, 256}));
  EXPECT_EQ(e.search.searcher, "random");
  EXPECT_EQ(e.search.random_samples, 50);
  EXPECT_EQ(e.search.partitions, (std::vector<std::vector<int>>{{1, 1}, {2}}));
  ASSERT_EQ(e.search.subgraphs.size(), 2u);
  EXPECT_EQ(e.search.subgraphs[0].name, "first pair");
  EXPECT_EQ(e.search.subgraphs[0].first, "c1");
  EXPECT_EQ(e.search.subgraphs[0].last, "r1");
  EXPECT_EQ(e.search.subgraphs[1].name, "c2..r2"); // default name
}

TEST(Experiment, EveryMeasurementKey) {
  const MeasurementConfig m = full_experiment().measurement;
  EXPECT_EQ(m.backend, "cpu");
  EXPECT_EQ(m.options.warmup, 0);
  EXPECT_EQ(m.options.repetitions, 5);
  EXPECT_EQ(m.top_k, 2);
  EXPECT_EQ(m.counters, (std::vector<std::string>{"dram__bytes_read.sum", "flops"}));
  EXPECT_FALSE(m.options.flush_l2);
  EXPECT_FALSE(m.options.collect_counters);
  EXPECT_DOUBLE_EQ(m.options.timeout_s, 2.5);
  EXPECT_EQ(m.cpu_threads, 2);
  EXPECT_DOUBLE_EQ(m.options.rtol, 1e-3);
  EXPECT_DOUBLE_EQ(m.options.atol, 0);
  EXPECT_DOUBLE_EQ(m.budget_s, 60);
  EXPECT_EQ(m.max_measurements, 7);
  EXPECT_EQ(m.options.seed, 42u); // the experiment's seed drives the measurer's inputs
}

TEST(Experiment, GpuOverridesAndShorthand) {
  const ExperimentConfig e = parse_experiment(
      base_with(8, "target: {gpu: a100-40gb, dram_bandwidth_gbs: 1400, l2_bytes: 41943040, "
                   "sm_count: 100, atomic_ns: 0}"),
      "exp.yaml");
  EXPECT_EQ(e.gpu.name, "A100-40GB");
  EXPECT_DOUBLE_EQ(e.gpu.dram_bandwidth_gbs, 1400);
  EXPECT_DOUBLE_EQ(e.gpu.l2_bytes, 41943040);
  EXPECT_EQ(e.gpu.sm_count, 100);
  EXPECT_DOUBLE_EQ(e.gpu.atomic_ns, 0); // a cost a study may switch off
  EXPECT_DOUBLE_EQ(e.gpu.fp32_tflops, find_gpu_spec("A100-40GB")->fp32_tflops); // untouched
  EXPECT_TRUE(contains(e.gpu.source,
                       "overridden by the experiment: dram_bandwidth_gbs, l2_bytes, sm_count"));

  const ExperimentConfig h = parse_experiment(base_with(8, "target: H200"), "exp.yaml");
  EXPECT_EQ(h.gpu.name, "H200");
  EXPECT_DOUBLE_EQ(h.gpu.dram_bandwidth_gbs, find_gpu_spec("H200")->dram_bandwidth_gbs);
}

TEST(Experiment, CustomGpuNeedsEveryField) {
  const std::string fields =
      "  dram_bandwidth_gbs: 900\n  dram_gb: 16\n  l2_bytes: 6291456\n"
      "  l2_bandwidth_gbs: 2500\n  smem_per_sm_bytes: 98304\n  smem_per_block_bytes: 65536\n"
      "  registers_per_sm: 65536\n  sm_count: 80\n  max_threads_per_sm: 2048\n"
      "  fp32_tflops: 15.7\n  tf32_tflops: 0.1\n  bf16_tflops: 125\n  fp16_tflops: 125\n"
      "  launch_overhead_us: 4\n  atomic_ns: 1.5\n";
  const ExperimentConfig e =
      parse_experiment(base_with(8, "target:\n  gpu: custom\n" + fields), "exp.yaml");
  EXPECT_EQ(e.gpu.name, "custom");
  EXPECT_EQ(e.gpu.sm_count, 80);
  EXPECT_DOUBLE_EQ(e.gpu.fp32_tflops, 15.7);
  EXPECT_EQ(e.gpu.max_threads_per_block, 1024); // a field with a default may be left out
  EXPECT_EQ(e.gpu.registers_per_thread_max, 255);

  // Leave out sm_count (line 9 + 7 = line 16 of the target's fields).
  std::string missing = fields;
  missing.erase(missing.find("  sm_count: 80\n"), 15);
  expect_error(base_with(8, "target:\n  gpu: custom\n" + missing), 9, 3, "target",
               "gpu: custom needs every GPU field; missing 'sm_count'");
}

TEST(Experiment, LoadsFromAFile) {
  const fs::path dir = fs::temp_directory_path() / "brickdl_experiment_test";
  fs::create_directories(dir);
  const fs::path file = dir / "chain_study.yaml";
  std::ofstream(file) << kBase << "batch: 2\n";
  const ExperimentConfig e = load_experiment(file.string());
  EXPECT_EQ(e.file, file.string());
  EXPECT_EQ(e.name, "chain_study");
  EXPECT_EQ(e.output_dir, "out/chain_study");
  EXPECT_EQ(e.graph.batch(), 2);
  fs::remove_all(dir);
}

// ---- bad input -----------------------------------------------------------------------------

TEST(ExperimentErrors, UnknownKeysAtEveryLevel) {
  expect_error(kBase + "serach: {}\n", 9, 1, "serach",
               "unknown key 'serach' in the experiment (did you mean 'search'?)");
  const UserError e = expect_error(kBase + "search: {brick_size: [4]}\n", 9, 10,
                                   "search.brick_size", "(did you mean 'brick_sizes'?)");
  EXPECT_TRUE(contains(e.what(), "valid keys: brick_sizes, channel_blocks")) << e.what();
  expect_error(kBase + "measurement:\n  repetition: 3\n", 10, 3, "measurement.repetition",
               "(did you mean 'repetitions'?)");
  expect_error(base_with(8, "target: {gpu: A100-40GB, l2_byte: 1}"), 8, 26, "target.l2_byte",
               "(did you mean 'l2_bytes'?)");
  expect_error(kBase + "search: {subgraphs: [{name: s, first: c1, end: r1}]}\n", 9, 43,
               "search.subgraphs[0].end", "unknown key 'end' in a subgraph");
  expect_error(kBase + "batch: 1\nbatch: 2\n", 10, 1, "batch", "key 'batch' is given twice");
}

TEST(ExperimentErrors, WrongTypes) {
  expect_error(kBase + "batch: eight\n", 9, 8, "batch", "expected an integer >= 1, got 'eight'");
  expect_error(kBase + "batch: 8.5\n", 9, 8, "batch", "expected an integer");
  expect_error(kBase + "search: [1]\n", 9, 9, "search", "expected search to be a mapping");
  expect_error(kBase + "search: {brick_sizes: 8}\n", 9, 23, "search.brick_sizes",
               "expected search.brick_sizes to be a list, got '8'");
  expect_error(kBase + "measurement: {flush_l2: sometimes}\n", 9, 25, "measurement.flush_l2",
               "expected true or false, got 'sometimes'");
  expect_error(base_with(8, "target: {gpu: A100-40GB, l2_bytes: big}"), 8, 36, "target.l2_bytes",
               "expected a number > 0, got 'big'");
  expect_error(kBase + "name: [a]\n", 9, 7, "name", "expected a string, got a list");
  expect_error(kBase + "seed: -1\n", 9, 7, "seed", "expected an integer >= 0");
  // A key without a value is not a default.
  expect_error(kBase + "batch:\n", 9, 1, "batch", "expected an integer >= 1, got nothing");
  expect_error(kBase + "measurement: {backend: }\n", 9, 15, "measurement.backend",
               "expected a string, got nothing");
}

TEST(ExperimentErrors, OutOfRange) {
  expect_error(kBase + "batch: 0\n", 9, 8, "batch", "expected an integer >= 1, got 0");
  expect_error(kBase + "search: {brick_sizes: [4, 8, 12]}\n", 9, 30, "search.brick_sizes[2]",
               "a brick size must be a power of two from 1 to 64");
  expect_error(kBase + "search: {brick_sizes: [4, 128]}\n", 9, 27, "search.brick_sizes[1]",
               "got 128");
  expect_error(kBase + "search: {brick_sizes: [8, 8]}\n", 9, 27, "search.brick_sizes[1]",
               "8 is listed twice");
  expect_error(kBase + "search: {brick_sizes: []}\n", 9, 23, "search.brick_sizes",
               "expected at least one value");
  // Brick depths (3-D groups): powers of two like the sizes; absent means cubes, so an empty
  // list is refused rather than read as "no depth".
  expect_error(kBase + "search: {brick_depths: [1, 3]}\n", 9, 28, "search.brick_depths[1]",
               "a brick depth must be a power of two from 1 to 64");
  expect_error(kBase + "search: {brick_depths: []}\n", 9, 24, "search.brick_depths",
               "expected at least one value");
  expect_error(kBase + "search: {max_group_len: 0}\n", 9, 25, "search.max_group_len",
               "expected an integer >= 1, got 0");
  expect_error(kBase + "search: {threads: [100]}\n", 9, 20, "search.threads[0]",
               "a multiple of 32 from 32 to 1024");
  expect_error(kBase + "search: {channel_blocks: [-8]}\n", 9, 27, "search.channel_blocks[0]",
               "a channel block must be >= 0");
  // Batch blocks: integers from 1 to 1024; values above the batch are the search space's call.
  expect_error(kBase + "search: {batch_blocks: [0]}\n", 9, 25, "search.batch_blocks[0]",
               "a batch block (images per unit of work) must be an integer from 1 to 1024, got 0");
  expect_error(kBase + "search: {batch_blocks: [1, -2]}\n", 9, 28, "search.batch_blocks[1]",
               "got -2");
  expect_error(kBase + "search: {batch_blocks: [2048]}\n", 9, 25, "search.batch_blocks[0]",
               "got 2048");
  expect_error(kBase + "search: {batch_blocks: [2.5]}\n", 9, 25, "search.batch_blocks[0]",
               "expected an integer");
  expect_error(kBase + "search: {batch_blocks: [4, 4]}\n", 9, 28, "search.batch_blocks[1]",
               "4 is listed twice in search.batch_blocks");
  expect_error(kBase + "search: {batch_blocks: []}\n", 9, 24, "search.batch_blocks",
               "expected at least one value");
  // Thread block clusters: 1 (none) to 16 CTAs per unit.
  expect_error(kBase + "search: {clusters: [0]}\n", 9, 21, "search.clusters[0]",
               "a thread block cluster (CTAs per unit) must be an integer from 1 to 16, got 0");
  expect_error(kBase + "search: {clusters: [1, 17]}\n", 9, 24, "search.clusters[1]", "got 17");
  expect_error(kBase + "measurement: {repetitions: 0}\n", 9, 28, "measurement.repetitions",
               "expected an integer >= 1, got 0");
  expect_error(kBase + "measurement: {budget_s: -1}\n", 9, 25, "measurement.budget_s",
               "expected a number >= 0, got -1");
  expect_error(kBase + "measurement: {max_measurements: -5}\n", 9, 33,
               "measurement.max_measurements", "expected an integer >= 0, got -5");
  expect_error(kBase + "measurement: {timeout_s: 0}\n", 9, 26, "measurement.timeout_s",
               "expected a number > 0, got 0");
  expect_error(kBase + "input_size: [1, 2, 3, 4]\n", 9, 13, "input_size",
               "expected [H, W] or [D, H, W], got a list of 4");
  expect_error(base_with(8, "target: {gpu: A100-40GB, smem_per_block_bytes: 200000}"), 8, 9,
               "target", "smem_per_block_bytes (200000) exceeds smem_per_sm_bytes (167936)");
}

TEST(ExperimentErrors, UnknownNamesListTheValidOnes) {
  const UserError g = expect_error(base_with(8, "target: {gpu: A100-40G}"), 8, 15, "target.gpu",
                                   "unknown GPU 'A100-40G' (did you mean 'A100-40GB'?)");
  EXPECT_TRUE(contains(g.what(), "valid: A100-40GB, A100-80GB, H100-SXM, H200, custom"));
  expect_error(kBase + "search: {strategies: [padded, memoised]}\n", 9, 31, "search.strategies[1]",
               "unknown strategy 'memoised' (did you mean 'memoized'?)");
  expect_error(kBase + "search: {strategies: [padded, padded]}\n", 9, 31, "search.strategies[1]",
               "padded is listed twice");
  // Searcher and backend names belong to the search module's registries, which check them
  // (tests/search/names_test.cpp); the loader keeps where they were given.
  const ExperimentConfig named = parse_experiment(
      kBase + "search: {searcher: dynamic}\nmeasurement: {backend: x}\n", "e.yaml");
  EXPECT_EQ(named.search.searcher_at.line, 9);
  EXPECT_EQ(named.search.searcher_at.key, "search.searcher");
  EXPECT_EQ(named.measurement.backend_at.line, 10);
  expect_error(kBase + "search: {searcher: ''}\n", 9, 20, "search.searcher", "empty");
  expect_error(kBase + "precision: fp8\n", 9, 12, "precision",
               "unknown precision 'fp8' (did you mean 'fp32'?); valid: fp32, tf32, bf16, fp16");
  expect_error("model: no_such_model\ntarget: {gpu: H200}\n", 1, 8, "model",
               "unknown model 'no_such_model'");
  expect_error("model: {zoo: conv_chain, depht: 3}\ntarget: {gpu: H200}\n", 1, 26, "model.depht",
               "unknown key 'depht' in the parameters of model conv_chain (did you mean "
               "'depth'?)");
}

TEST(ExperimentErrors, GraphProblemsPointAtTheLayer) {
  const ShapeError s = expect_error<ShapeError>(
      base_with(6, "    - {op: conv, name: c2, out_channels: 4, kernel: 11}"), 6, 7,
      "model.layers[2]", "layer 'c2' (conv)");
  EXPECT_TRUE(contains(s.what(), "does not fit")) << s.what();
  expect_error(base_with(6, "    - {op: conv, name: c1, out_channels: 4, kernel: 3}"), 6, 24,
               "model.layers[2].name", "duplicate layer name 'c1' (by layer 1)");
  expect_error(base_with(7, "    - {op: relu, name: r2, inputs: [c3]}"), 7, 37,
               "model.layers[3].inputs[0]", "unknown input 'c3'");
  expect_error(base_with(4, "    - {op: conv, name: c1, out_channels: 4, kernal: 3}"), 4, 45,
               "model.layers[0].kernal", "(did you mean 'kernel'?)");
  expect_error(base_with(2, "  input: {channels: 2, size: [8, 8]}\n  oops: 1"), 3, 3, "model.oops",
               "unknown key 'oops' in an inline graph");
  expect_error(base_with(3, "  layer:"), 3, 3, "model.layer",
               "unknown key 'layer' in an inline graph (did you mean 'layers'?)");
  expect_error("model: {layers_of: []}\ntarget: H200\n", 1, 8, "model",
               "expected `zoo: <name>` (a zoo model with parameters) or an inline graph");
}

TEST(ExperimentErrors, PartitionsAndSubgraphsMustFitTheGraph) {
  // The fused graph has 2 layers: c1 (+ r1) and c2 (+ r2).
  expect_error(kBase + "search: {partitions: [[1, 1], [3]]}\n", 9, 31, "search.partitions[1]",
               "partition [3] covers 3 layers, but the fused graph has 2");
  expect_error(kBase + "search: {partitions: [[1, 0, 1]]}\n", 9, 27, "search.partitions[0][1]",
               "expected an integer >= 1, got 0");
  expect_error(kBase + "search: {subgraphs: [{name: s, first: c1, last: r3}]}\n", 9, 49,
               "search.subgraphs[0].last", "no layer named 'r3'");
  expect_error(kBase + "search: {subgraphs: [{name: s, first: r2, last: c1}]}\n", 9, 49,
               "search.subgraphs[0].last", "comes before first layer 'r2'");
  expect_error(kBase + "search:\n  subgraphs:\n    - {name: s, first: c1, last: r1}\n"
                       "    - {name: s, first: c2, last: r2}\n",
               12, 14, "search.subgraphs[1].name", "duplicate subgraph name 's'");
}

TEST(ExperimentErrors, MissingPiecesEmptyFilesAndSyntax) {
  expect_error("target: {gpu: H200}\n", 1, 1, "model", "missing required key 'model'");
  expect_error(kBase.substr(0, kBase.find("target:")), 1, 1, "target",
               "missing required key 'target'");
  expect_error("", 0, 0, "", "the experiment is empty; a minimal experiment is:");
  expect_error("# only a comment\n", 0, 0, "", "the experiment is empty");
  expect_error("- model\n", 1, 1, "", "expected the experiment to be a mapping");
  expect_error(kBase + "batch: [1, 2\n", 10, 1, "", "YAML syntax error");
}

TEST(ExperimentErrors, UnreadableFiles) {
  try {
    load_experiment("no/such/dir/exp.yaml");
    FAIL() << "expected UserError";
  } catch (const UserError& e) {
    EXPECT_EQ(e.where().file, "no/such/dir/exp.yaml");
    EXPECT_TRUE(contains(e.what(), "cannot read the file")) << e.what();
  }
  const fs::path dir = fs::temp_directory_path() / "brickdl_experiment_dir.yaml";
  fs::create_directories(dir);
  try {
    load_experiment(dir.string());
    FAIL() << "expected UserError";
  } catch (const UserError& e) {
    EXPECT_TRUE(contains(e.what(), "is a directory")) << e.what();
  }
  fs::remove_all(dir);
}

// ---- zoo models (need core/zoo) ------------------------------------------------------------

TEST(ExperimentZoo, MinimalThreeLines) {
  const ExperimentConfig e =
      parse_experiment("model: resnet50\nbatch: 8\ntarget: {gpu: A100-40GB}\n", "minimal.yaml");
  EXPECT_EQ(e.model, "resnet50");
  EXPECT_EQ(e.name, "minimal");
  EXPECT_EQ(e.graph.input_shape(), (TensorShape{8, 3, 1, 224, 224, 2}));
  EXPECT_EQ(e.graph.layer(e.graph.output()).out, (TensorShape{8, 1000, 1, 1, 1, 0}));
}

TEST(ExperimentZoo, OverridesAndParameters) {
  const ExperimentConfig e = parse_experiment(
      "model: {zoo: resnet50, num_classes: 10}\ninput_size: [160, 160]\ntarget: H200\n",
      "exp.yaml");
  EXPECT_EQ(e.graph.input_shape(), (TensorShape{1, 3, 1, 160, 160, 2}));
  EXPECT_EQ(e.graph.layer(e.graph.output()).out.c, 10);
  // A 3-D size for a 2-D model.
  expect_error("model: resnet50\ninput_size: [16, 112, 112]\ntarget: H200\n", 2, 13, "input_size",
               "model resnet50 is 2-D; input_size needs 2 extents");
  // Too small an input: VGG's fifth 2x2 pool meets a 1x1 map (16 / 2^4); the builder's
  // ShapeError, at the model.
  expect_error<ShapeError>("model: vgg16_bn\ninput_size: [16, 16]\ntarget: H200\n", 1, 8, "model",
                           "model vgg16_bn with input_size [16, 16] does not fit");
  const UserError u = expect_error("model: resnet5\ntarget: H200\n", 1, 8, "model",
                                   "unknown model 'resnet5' (did you mean 'resnet50'?)");
  EXPECT_TRUE(contains(u.what(), "inception_v4")) << u.what();
  // Subgraphs name the zoo's layers.
  const ExperimentConfig s =
      parse_experiment("model: resnet50\ntarget: H200\nsearch:\n  subgraphs:\n"
                       "    - {name: block 1, first: layer1.0.conv1, last: layer1.0.relu_2}\n",
                       "exp.yaml");
  ASSERT_EQ(s.search.subgraphs.size(), 1u);
  EXPECT_LT(s.graph.find("layer1.0.conv1"), s.graph.find("layer1.0.relu_2"));
}

TEST(ExperimentZoo, ConvChainParameters) {
  // The Fig 10 chain: 6 x (3x3x3 conv + relu) on 3 x 112^3; fused, 6 layers after the input.
  const ExperimentConfig e = parse_experiment(
      "model: {zoo: conv_chain, depth: 6, channels: 3, kernel: 3, image: 112, dims: 3}\n"
      "target: {gpu: A100-40GB}\n"
      "search: {partitions: [[2, 2, 2], [3, 3], [4, 2], [6]]}\n",
      "exp.yaml");
  EXPECT_EQ(e.graph.input_shape(), (TensorShape{1, 3, 112, 112, 112, 3}));
  EXPECT_EQ(fuse_for_inference(e.graph).size(), 7);
  EXPECT_EQ(e.search.partitions.size(), 4u);
  // Every conv: 3*3*27 weights (+ 3 bias if any) and 112^3 * 3 * 81 MACs.
  const int conv = e.graph.layer(1).op == OpKind::kConv ? 1 : -1;
  ASSERT_EQ(conv, 1);
  EXPECT_EQ(e.graph.layer(1).macs, int64_t{112} * 112 * 112 * 3 * 81);
  expect_error("model: {zoo: conv_chain, dims: 4}\ntarget: H200\n", 1, 32, "model.dims",
               "expected an integer in [2, 3], got 4");
}

// conv_chain takes any input_size of rank 2 or 3, as the zoo does for brickdl-run.
TEST(ExperimentZoo, ConvChainTakesAnyInputSize) {
  const ExperimentConfig e =
      parse_experiment("model: {zoo: conv_chain, depth: 2}\ninput_size: [8, 16, 32]\n"
                       "target: H200\n",
                       "exp.yaml");
  EXPECT_EQ(e.graph.input_shape(), (TensorShape{1, 3, 8, 16, 32, 3}));
  EXPECT_EQ(e.graph.layer(e.graph.output()).out, (TensorShape{1, 3, 8, 16, 32, 3}));
  expect_error("model: {zoo: conv_chain, dims: 2}\ninput_size: [8, 8, 8]\ntarget: H200\n", 2, 13,
               "input_size", "model.dims is 2, but input_size has 3 extents");
}

// Every experiment file shipped with brickdl loads and its graph builds.
TEST(ExperimentFiles, AllShippedFilesLoad) {
  const fs::path dir = fs::path(BRICKDL_SOURCE_DIR) / "experiments";
  ASSERT_TRUE(fs::is_directory(dir)) << dir;
  int loaded = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() != ".yaml")
      continue;
    SCOPED_TRACE(entry.path().filename().string());
    try {
      const ExperimentConfig e = load_experiment(entry.path().string());
      EXPECT_GT(e.graph.size(), 1);
      EXPECT_FALSE(e.gpu.name.empty());
      ++loaded;
    } catch (const UserError& e) {
      ADD_FAILURE() << e.what();
    }
  }
  // The seven paper models, the two microbenchmarks and minimal.yaml at least.
  EXPECT_GE(loaded, 10);
}

TEST(ExperimentFiles, PaperSetup) {
  const fs::path dir = fs::path(BRICKDL_SOURCE_DIR) / "experiments";
  for (const char* m : {"resnet50", "vgg16_bn", "darknet53", "drn_c_26", "inception_v4"}) {
    const ExperimentConfig e = load_experiment((dir / (std::string(m) + ".yaml")).string());
    EXPECT_EQ(e.model, m);
    EXPECT_EQ(e.batch, 8) << m; // our choice: the paper does not state its batch size
    EXPECT_EQ(e.gpu.name, "A100-40GB") << m;
    EXPECT_EQ(e.measurement.backend, "auto") << m;
  }
  for (const char* m : {"resnet3d_34", "deepcam"}) {
    const ExperimentConfig e = load_experiment((dir / (std::string(m) + ".yaml")).string());
    EXPECT_EQ(e.batch, 1) << m;
    EXPECT_EQ(e.gpu.name, "A100-40GB") << m;
  }
  const ExperimentConfig quick = load_experiment((dir / "resnet50.yaml").string());
  EXPECT_DOUBLE_EQ(quick.measurement.budget_s, 60);
  EXPECT_EQ(quick.search.max_group_len, 4);
  const ExperimentConfig g = load_experiment((dir / "micro_graphsize.yaml").string());
  EXPECT_EQ(g.search.partitions, (std::vector<std::vector<int>>{{2, 2, 2}, {3, 3}, {4, 2}, {6}}));
  EXPECT_EQ(g.graph.input_shape(), (TensorShape{1, 3, 112, 112, 112, 3}));
  const ExperimentConfig b = load_experiment((dir / "micro_bricksize.yaml").string());
  EXPECT_EQ(b.search.brick_sizes, (std::vector<int>{4, 8, 16, 32}));
  EXPECT_EQ(b.graph.input_shape(), (TensorShape{1, 3, 224, 224, 224, 3}));
}

// ---- command-line overrides ----------------------------------------------------------------

TEST(ExperimentOverrides, ActAsIfTheFileSaidThem) {
  ExperimentOverrides o;
  o.gpu = "H200";
  o.precision = "tf32";
  o.batch = 4;
  o.input_size = {16, 12};
  // The file's own target fields are not applied to another GPU.
  const std::string yaml =
      base_with(8, "target: {gpu: A100-40GB, sm_count: 100}") + "output: out/small\n";
  const ExperimentConfig e = parse_experiment(yaml, "exp.yaml", o);
  EXPECT_EQ(e.gpu.name, "H200");
  EXPECT_EQ(e.gpu.sm_count, find_gpu_spec("H200")->sm_count);
  EXPECT_EQ(e.precision, DType::kTF32);
  EXPECT_EQ(e.precision_at.key, "--precision");
  EXPECT_EQ(e.batch, 4);
  EXPECT_EQ(e.graph.input_shape().n, 4);
  EXPECT_EQ(e.graph.input_shape().h, 16);
  EXPECT_EQ(e.graph.input_shape().w, 12);
  EXPECT_EQ(e.graph.dtype(), DType::kTF32);
  EXPECT_EQ(e.overrides.describe(), "H200, tf32, batch 4, input_size [16, 12]");
  // A run with other values does not overwrite the file's own output folder.
  EXPECT_EQ(e.output_dir, "out/small-H200-tf32-batch-4-input-size-16-12");
  // Without overrides: the file's values, its folder.
  const ExperimentConfig plain = parse_experiment(yaml, "exp.yaml");
  EXPECT_EQ(plain.gpu.sm_count, 100);
  EXPECT_EQ(plain.output_dir, "out/small");
  EXPECT_TRUE(plain.overrides.empty());
}

TEST(ExperimentOverrides, TargetMayStandInForAMissingOne) {
  ExperimentOverrides o;
  o.gpu = "A100-80GB";
  const std::string no_target = kBase.substr(0, kBase.find("target:"));
  EXPECT_EQ(parse_experiment(no_target, "exp.yaml", o).gpu.name, "A100-80GB");
}

TEST(ExperimentOverrides, BadValuesNameTheFlag) {
  const auto error_of = [](const ExperimentOverrides& o) {
    try {
      parse_experiment(kBase, "exp.yaml", o);
    } catch (const UserError& e) {
      EXPECT_EQ(e.where().file, "the command line") << e.what();
      return e.where().key + ": " + e.bare_message();
    }
    ADD_FAILURE() << "no error";
    return std::string();
  };
  ExperimentOverrides o;
  o.gpu = "H2000";
  EXPECT_TRUE(contains(error_of(o), "--target: unknown GPU 'H2000' (did you mean 'H200'?)"));
  o = {};
  o.precision = "fp64";
  EXPECT_TRUE(contains(error_of(o), "--precision: unknown precision 'fp64'"));
  o = {};
  o.batch = 0;
  EXPECT_TRUE(contains(error_of(o), "--batch: the batch must be 1 to"));
  o = {};
  o.input_size = {8, 8, 8, 8};
  EXPECT_TRUE(contains(error_of(o), "--input-size: expected H,W or D,H,W, got 4 values"));
  o.input_size = {8, 0};
  EXPECT_TRUE(contains(error_of(o), "--input-size: each extent must be 1 to"));
}

// `brickdl-tune resnet50` and brickdl.Model.zoo("resnet50"): the model with every key at its
// default, named after it, planned for the H200; its errors name the model, not the text.
TEST(BareModel, AZooNameIsAnExperimentWithTheDefaults) {
  const BareModel bare{"resnet50", std::nullopt, std::nullopt};
  ExperimentOverrides o;
  o.batch = 8;
  const ExperimentConfig e = parse_bare_model(bare_model_yaml(bare), bare, o);
  EXPECT_EQ(e.name, "resnet50");
  EXPECT_EQ(e.model, "resnet50");
  EXPECT_EQ(e.batch, 8);
  EXPECT_EQ(e.gpu.name, "H200");
  EXPECT_EQ(e.output_dir, "out/resnet50");
  EXPECT_EQ(e.search.brick_sizes, SearchSpaceConfig{}.brick_sizes);
  EXPECT_EQ(e.graph.layer(e.graph.size() - 1).out.c, 1000);
  EXPECT_TRUE(is_zoo_name("resnet50"));
  EXPECT_FALSE(is_zoo_name("resnet5"));
  EXPECT_FALSE(is_zoo_name("experiments/resnet50.yaml"));

  const BareModel ten{"resnet50", 10, std::nullopt};
  EXPECT_EQ(parse_bare_model(bare_model_yaml(ten), ten).graph.layers().back().out.c, 10);
}

TEST(BareModel, ErrorsNameTheModelNotTheTextWrittenForIt) {
  const BareModel bad{"resnet50", int64_t{0}, std::nullopt};
  try {
    parse_bare_model(bare_model_yaml(bad), bad);
    FAIL() << "num_classes 0 was accepted";
  } catch (const UserError& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.find("experiment of"), std::string::npos) << what;
    EXPECT_NE(what.find("num_classes"), std::string::npos) << what;
  }
}

// A model path on the command line (`brickdl-tune models/m.onnx`, Model.onnx) is relative to
// the working directory; one inside an experiment file, to the file's folder. The bare
// experiment's name in messages, "the experiment of models/m.onnx", is no file: its folder once
// made "the experiment of models/models/m.onnx" of the model.
TEST(BareModel, PathsAreRelativeToTheWorkingDirectoryOrTheExperimentsFolder) {
  const fs::path dir = fs::temp_directory_path() / ("brickdl_paths_" + std::to_string(::getpid()));
  fs::create_directories(dir / "models");
  fs::create_directories(dir / "experiments");
  const fs::path cwd = fs::current_path();
  fs::current_path(dir);
  // A graph without parameters: the export needs none.
  const ExperimentConfig src =
      parse_experiment("model:\n  input: {channels: 2, size: [8, 8]}\n  layers:\n    - {op: relu}\n"
                       "    - {op: max_pool, kernel: 2}\ntarget: H200\n",
                       "src.yaml");
  export_onnx(src.graph, {}, "models/m.onnx");
  std::ofstream("models/exp.yaml") << "model: m.onnx\ntarget: H200\n";
  std::ofstream("experiments/up.yaml") << "model: ../models/m.onnx\ntarget: H200\n";
  const auto layers = [](const std::function<ExperimentConfig()>& load) {
    try {
      return load().graph.size();
    } catch (const UserError& e) {
      ADD_FAILURE() << e.what();
      return 0;
    }
  };
  const BareModel bare{"models/m.onnx", std::nullopt, std::nullopt};
  EXPECT_EQ(layers([&] { return parse_bare_model(bare_model_yaml(bare), bare); }), 3);
  EXPECT_EQ(layers([] { return load_experiment("models/exp.yaml"); }), 3);
  EXPECT_EQ(layers([] { return load_experiment("experiments/up.yaml"); }), 3);
  EXPECT_EQ(
      layers([] { return parse_experiment("model: m.onnx\ntarget: H200\n", "models/x.yaml"); }), 3);
  std::ofstream("experiments/exp.yaml") << "model: m.onnx\ntarget: H200\n"; // not beside it
  std::string why;
  try {
    load_experiment("experiments/exp.yaml");
  } catch (const UserError& e) {
    why = e.what();
  }
  EXPECT_TRUE(contains(why, "experiments/m.onnx: cannot open the file ('m.onnx' is relative to "
                            "the experiment file's folder, experiments)"))
      << why;
  fs::current_path(cwd);
  fs::remove_all(dir);
}

} // namespace
} // namespace brickdl
