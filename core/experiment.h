#pragma once
// ExperimentConfig: one YAML experiment file, validated. A minimal file is three lines:
//
//   model: resnet50
//   batch: 8
//   target: {gpu: A100-40GB}
//
// `model` and `target` are required; every other key has a default (batch: 1). Bad input throws
// UserError naming file, line, column and key, suggesting the nearest valid key or name; a
// graph whose shapes do not fit throws ShapeError at the layer (or the model) concerned.
//
// The keys (experiments/*.yaml are worked examples):
//   name            default: the file's stem
//   model           a zoo name (core/zoo.h); or an ONNX file, `path.onnx`, relative to the
//                   experiment file (core/onnx.h: batch and input_size default to the
//                   file's, and a dynamic one must be given); or {zoo: NAME, num_classes: N}; or
//                   {zoo: conv_chain, depth, channels, kernel, image, dims (2|3), stride,
//                   dilation, batch_norm, relu}; or an inline graph {input, layers}
//                   (core/yaml_graph.h)
//   batch           1 to 2^20
//   input_size      [H, W] or [D, H, W], matching the model's rank, each 1 to 32768;
//                   input_channels 1 to 65536 (every size is bounded: core/limits.h)
//   precision       dtype_names() (accepted here; a backend that cannot compute it is refused
//                   by search::check_precision: README "Precision")
//   target          {gpu: NAME, <GpuSpec field>: value, ...}, or `target: NAME`. NAME is a
//                   spec of core/gpu_spec.h or `custom`, which needs every field without a
//                   default (all but registers_per_thread_max and max_threads_per_block).
//                   Fields are > 0 (launch_overhead_us and atomic_ns may be 0).
//                   calibration: FILE, a device calibration (core/gpu_calibration.h), relative
//                   to the experiment file, measured against the spec `gpu:` names: its
//                   measured values replace the spec's; a field the target also sets itself
//                   keeps the experiment's value (said in the calibration's summary).
//   search          brick_sizes: powers of two from 1 to 64; brick_depths: the same, the
//                   depths of 3-D bricks (default: none, cubes); channel_blocks 0 to 65536;
//                   batch_blocks: images per unit of work, 1 to 1024 (default [1]; values
//                   above the batch act as the batch); clusters: CTAs per padded unit, 1 to
//                   16 (default [1]); max_group_len 1 to 64; strategies;
//                   threads: multiples of 32 in [32, 1024]; searcher; random_samples 1 to
//                   131072; each list at most 64 values, and at most 2^21 candidate layers in
//                   all (fused layers x (1 + ... + max_group_len) x configurations);
//                   partitions: lists of group lengths that each cover the whole fused graph
//                   (batch-norms and activations folded, the input not counted); subgraphs:
//                   {name, first, last} by layer name (name defaults to "first..last"). Lists
//                   hold no duplicates.
//   measurement     backend; warmup >= 0; repetitions >= 1; top_k >= 1; counters; flush_l2;
//                   collect_counters; timeout_s > 0; cpu_threads >= 0; rtol > 0; atol >= 0;
//                   budget_s >= 0; max_measurements >= 0; plan_check (bool, default true)
//   seed            integer >= 0, also the measurer's seed (MeasureOptions::seed)
//   database        path, relative to the working directory
//   output          folder; default out/<name>
#include <optional>
#include <string>
#include <vector>

#include "core/candidate.h"
#include "core/error.h"
#include "core/gpu_calibration.h"
#include "core/gpu_spec.h"
#include "core/graph.h"
#include "core/measurer.h"

namespace brickdl {

struct SearchSpaceConfig {
  // Brick extents tried per spatial dim (cubes for 3-D, squares for 2-D).
  std::vector<int> brick_sizes = {4, 8, 16, 32};
  // Depths (BrickShape::d) a 3-D group's bricks try with every size: bricks d × s × s. Empty
  // (the default): cubes s × s × s. Thin bricks along depth hold a shallower halo on chip: a
  // 3×3×3 conv pair's padded region of a 1 × 8 × 8 brick is 5 × 12 × 12 points, of an 8³
  // brick 12³ (what the paper's cubes cannot fit in shared memory at 64 channels and more).
  std::vector<int> brick_depths;
  std::vector<int> channel_blocks = {0}; // 0 = all channels
  // Images per unit of work (BrickShape::nb): each weight a unit reads serves nb images.
  std::vector<int> batch_blocks = {1};
  // Thread block clusters (BrickShape::cl, CTAs per unit; padded units without channel blocks,
  // on a target whose max_cluster allows them).
  std::vector<int> clusters = {1};
  int max_group_len = 4;
  std::vector<Strategy> strategies = {Strategy::kLayerwise, Strategy::kPadded, Strategy::kMemoized};
  std::vector<int> threads = {256};
  // A name of search/searcher.h's registry (search::searcher_names()); the search module
  // checks it (search::check_experiment), `searcher_at` says where it was given.
  std::string searcher = "dp";
  SourceLocation searcher_at;
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
  // A name of search/measurers.h's registry (search::backend_names()), checked by the search
  // module like the searcher; `backend_at` says where it was given.
  std::string backend = "auto";
  SourceLocation backend_at;
  MeasureOptions options;
  int top_k = 3;                     // candidates measured per group
  std::vector<std::string> counters; // empty = the backend's defaults
  int cpu_threads = 0;               // CPU backend worker threads (0 = usable CPUs)
  // A measuring CPU run times its re-planned plan inside the whole model against layerwise and
  // returns layerwise where the plan lost (search/plan_check.h).
  bool plan_check = true;
  // GPU ordinal to measure on (not YAML: MPI worker ranks and worker processes set it).
  int device = 0;
  // After a sticky device error, reset the device in this process (true: a run in process) or
  // report the device lost and let the process end (false: a measuring worker process,
  // distributed/process_pool.h). Not YAML.
  bool recover_in_process = true;
  double budget_s = 0;      // stop measuring after this many seconds (0 = no limit)
  int max_measurements = 0; // stop after this many candidates measured (0 = no limit)
};

// Values given on a command line (brickdl-tune --target, --precision, --batch, --input-size,
// --calibration) over those of an experiment file, for any experiment: they act as if the file
// said them (`target: {gpu: NAME}` with none of the file's own target fields, its calibration
// included; `precision`, `batch`, `input_size`; `target.calibration: FILE` with FILE relative to
// the working directory, over the target's own), and a run records them (its configuration's
// "overrides"). A bad value is a UserError naming the flag.
struct ExperimentOverrides {
  std::optional<std::string> gpu;       // a named GPU spec
  std::optional<std::string> precision; // fp32 | tf32 | bf16 | fp16
  std::optional<int> batch;
  std::vector<int64_t> input_size;        // [H, W] or [D, H, W]; empty: not given
  std::optional<std::string> calibration; // a calibration file (core/gpu_calibration.h)
  bool empty() const { return !gpu && !precision && !batch && input_size.empty() && !calibration; }
  // "H200, tf32, batch 8" for messages and folder names ("" when empty).
  std::string describe() const;
};

struct ExperimentConfig {
  std::string file; // the path it was loaded from ("" for inline)
  std::string name; // defaults to the file's stem

  // Model: a zoo name (with optional parameters) or an inline graph.
  std::string model; // zoo name, "custom" for an inline graph, or the ONNX path as given
  Graph graph;       // built at load time (unfused; the search fuses)
  int batch = 1;
  std::vector<int64_t> input_size; // optional override: [H, W] or [D, H, W]
  int64_t input_channels = 0;      // optional override (0 = model default)
  DType precision = DType::kF32;
  SourceLocation precision_at; // where it was given (empty key: the default)

  GpuSpec gpu; // named spec with overrides (and a calibration) applied
  // The device calibration applied to `gpu` (target.calibration or --calibration); unset
  // without one. gpu.name is then its spec_name ("H200+cal-1a2b3c4d") when it applied anything.
  std::optional<AppliedCalibration> calibration;
  SearchSpaceConfig search;
  MeasurementConfig measurement;
  uint64_t seed = 1;
  std::string database = "brickdl.db"; // relative paths are relative to the working dir
  std::string output_dir = "out";      // the loader's default is out/<name>; with
                                       // overrides, "-<their values>" is appended
  ExperimentOverrides overrides;       // what the command line changed
};

// Loads and validates an experiment file, with `overrides` over it. Throws UserError.
ExperimentConfig load_experiment(const std::string& path,
                                 const ExperimentOverrides& overrides = {});
// Same, from YAML text; `file` is used in error messages, and the paths inside (an ONNX model, a
// target's calibration) are relative to its folder, as in the file itself.
ExperimentConfig parse_experiment(const std::string& yaml_text, const std::string& file,
                                  const ExperimentOverrides& overrides = {});

// The valid top-level keys (for suggestions and docs).
std::vector<std::string> experiment_keys();
// The valid keys of the `search` and `measurement` sections.
std::vector<std::string> search_keys();
std::vector<std::string> measurement_keys();

// A model without an experiment file, as `brickdl-tune MODEL` (an ONNX file or a zoo name) and
// the Python package's Model.zoo / Model.onnx take it: every key at its default but `name` (the
// zoo name, or the file's stem), `model`, `target: H200` and the options given here.
struct BareModel {
  std::string model;                     // a zoo name, or a path ending in .onnx
  std::optional<int64_t> num_classes;    // a zoo model's classifier (unset: its default)
  std::optional<int64_t> input_channels; // unset: the model's
};
// True when `arg` names a zoo model (and no file of that name exists).
bool is_zoo_name(const std::string& arg);
// The experiment's YAML text.
std::string bare_model_yaml(const BareModel& model);
// The experiment of `yaml_text` (bare_model_yaml's, perhaps with more keys set), output folder
// out/<name>. The model's path is relative to the working directory, as given. A UserError about
// the text itself names the model instead ("the experiment of MODEL"): the user never wrote that
// text.
ExperimentConfig parse_bare_model(const std::string& yaml_text, const BareModel& model,
                                  const ExperimentOverrides& overrides = {});

} // namespace brickdl
