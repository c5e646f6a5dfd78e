#pragma once
// ExperimentConfig: one YAML experiment file, validated. A minimal file is three lines:
//
//   model: resnet50
//   batch: 8
//   target: {gpu: A100-40GB}
//
// Every other key has a default. Bad input throws UserError naming file, line, column and
// key, suggesting the nearest valid key or name.
#include <optional>
#include <string>
#include <vector>

#include "core/candidate.h"
#include "core/gpu_spec.h"
#include "core/graph.h"
#include "core/measurer.h"

namespace brickdl {

struct SearchSpaceConfig {
  // Brick extents tried per spatial dim (cubes for 3-D, squares for 2-D).
  std::vector<int> brick_sizes = {4, 8, 16, 32};
  std::vector<int> channel_blocks = {0};  // 0 = all channels
  int max_group_len = 4;
  std::vector<Strategy> strategies = {Strategy::kLayerwise, Strategy::kPadded,
                                      Strategy::kMemoized};
  std::vector<int> threads = {256};
  std::string searcher = "dp";  // dp | exhaustive | random | topk | measure_all
  int random_samples = 1000;
  // Explicit partitions to evaluate (each a list of group lengths, e.g. [2,2,2]); when
  // non-empty the search evaluates exactly these partitions of the graph.
  std::vector<std::vector<int>> partitions;
  // Named subgraphs (by first/last layer name) for per-subgraph studies (Figs 8-9).
  struct Subgraph {
    std::string name;
    std::string first, last;
  };
  std::vector<Subgraph> subgraphs;
};

struct MeasurementConfig {
  std::string backend = "auto";  // auto | cuda | cpu | none
  MeasureOptions options;
  int top_k = 3;                 // candidates measured per group
  std::vector<std::string> counters;  // empty = the backend's defaults
  int cpu_threads = 0;           // CPU backend worker threads (0 = hardware concurrency)
  double budget_s = 0;           // stop measuring after this many seconds (0 = no limit)
  int max_measurements = 0;      // stop after this many candidates measured (0 = no limit)
};

struct ExperimentConfig {
  std::string file;  // the path it was loaded from ("" for inline)
  std::string name;  // defaults to the file's stem

  // Model: a zoo name (with optional parameters) or an inline graph.
  std::string model;       // zoo name, or "custom" for an inline graph
  Graph graph;             // built at load time (unfused; the search fuses)
  int batch = 1;
  std::vector<int64_t> input_size;  // optional override: [H, W] or [D, H, W]
  int64_t input_channels = 0;       // optional override (0 = model default)
  DType precision = DType::kF32;

  GpuSpec gpu;  // named spec with overrides applied
  SearchSpaceConfig search;
  MeasurementConfig measurement;
  uint64_t seed = 1;
  std::string database = "brickdl.db";  // relative paths are relative to the working dir
  std::string output_dir = "out";
};

// Loads and validates an experiment file. Throws UserError.
ExperimentConfig load_experiment(const std::string& path);
// Same, from YAML text; `file` is used in error messages.
ExperimentConfig parse_experiment(const std::string& yaml_text, const std::string& file);

// The valid top-level keys (for suggestions and docs).
std::vector<std::string> experiment_keys();

}  // namespace brickdl
