#pragma once
// Whole-model execution of a plan on the CPU, what a user deploys:
//
//   inputs (NCHW) ──to blocked (timed: "convert in")──► segments in topological order ──►
//   outputs ──from blocked (timed: "convert out")──► NCHW
//
// A segment is a merged plan entry (padded / memoized: the brick kernels), or a maximal run of
// consecutive layers the plan runs layerwise (its layerwise entries and the layers outside every
// entry): through oneDNN with its own fusions (LayerwiseEngine::kOnednn: kernels/cpu/onednn.h),
// or the brick kernels' layerwise path (kBricks). Activations stay in the blocked layout
// (oneDNN's own) between segments, so the only layout conversions are at the plan's edges, and
// each is timed. Parameters are packed (and oneDNN's primitives made) once, before the first
// run. Activations are freed after their last reader.
#include <memory>
#include <string>
#include <vector>

#include "core/candidate.h"
#include "core/graph.h"
#include "kernels/cpu/onednn.h"
#include "kernels/merged_executor.h"
#include "kernels/reference.h" // LayerProgress
#include "kernels/tensor.h"
#include "kernels/weights.h"

namespace brickdl::kernels {

enum class LayerwiseEngine { kOnednn, kBricks };
const char* layerwise_engine_name(LayerwiseEngine e); // "onednn", "bricks"
// False for an unknown name.
bool parse_layerwise_engine(const std::string& s, LayerwiseEngine* out);

struct PlanOptions {
  ExecOptions exec; // threads, lanes
  LayerwiseEngine layerwise = LayerwiseEngine::kBricks;
  cpu::OnednnOptions onednn{true, true}; // oneDNN's post-ops and 1x1 + depthwise
  int warmup = 0;                        // untimed runs first
  int repetitions = 1;                   // timed runs (>= 1); the outputs are the last run's
  bool pin = true;                       // pin the threads (kernels/cpu/parallel.h ScopedPinning)
  // Layers where a run of layerwise layers must begin a segment of its own (each in
  // [graph.num_inputs(), graph.size())): a layerwise plan split where a merged plan's groups
  // begin and end times each group's layers alone (search/plan_check.h), through oneDNN's own
  // fusions within the segment only.
  std::vector<int> segment_starts;
};

// One segment's place and times.
struct SegmentTiming {
  int first = 0, last = 0;        // graph layer ids
  std::string engine;             // "padded 8x8", "memoized 4x4/c32", "onednn", "bricks"
  std::vector<double> samples_ms; // one per timed run
  std::vector<std::string> steps; // oneDNN's steps (kernels/cpu/onednn.h), or empty
};

struct PlanResult {
  std::vector<Tensor> outputs; // the graph's outputs, graph.outputs() order
  // The only output of a graph that has one (an internal error otherwise).
  const Tensor& output() const;
  // Summed over the plan's groups and the layers run layerwise between them. The per-layer
  // brick counts are indexed by the graph's layer id (bricks_per_layer has graph.size()
  // entries, 0 for the input and for layers run layerwise), so "bricks_computed.<i>" of
  // to_map() is layer i of the graph and bricks_computed() the plan's total. Layerwise layers
  // count what a layer-by-layer execution moves, whichever engine ran them.
  ExecCounters counters;
  // One per plan entry, in plan order; per-layer brick counts indexed from the entry's first
  // layer (as execute_group reports them).
  std::vector<ExecCounters> group_counters;
  // Times of the timed runs: per segment, the edges' conversions, and end to end (from NCHW in
  // to NCHW out, conversions included), one sample per run.
  std::vector<SegmentTiming> segments;
  std::vector<double> convert_in_ms, convert_out_ms, end_to_end_ms;
  int lanes = 0, threads = 0;
  // "<layer>: why" for every layer the layerwise engine could not run itself (oneDNN: ran on
  // the brick kernels; bricks: ran on the reference ops).
  std::vector<std::string> fallbacks;
};

// Throws UserError when the plan's groups overlap, are out of range, or cannot run
// (unsupported_reason). An empty plan runs every layer layerwise.
void validate_plan(const Graph& graph, const std::vector<Candidate>& plan);

// A plan made ready once (validated, parameters packed, oneDNN's primitives made) and run as
// often as wanted: what a caller that interleaves the runs of several plans needs
// (search/plan_check.h). `graph` and `weights` must outlive it.
class PreparedPlan {
public:
  PreparedPlan(const Graph& graph, std::vector<Candidate> plan, const ModelWeights& weights,
               PlanOptions options);
  ~PreparedPlan();
  PreparedPlan(const PreparedPlan&) = delete;
  PreparedPlan& operator=(const PreparedPlan&) = delete;

  // `warmup` untimed runs, then `repetitions` (>= 1) timed ones; the outputs are the last
  // run's. Every call returns results of its own runs only. The threads are pinned during the
  // call when the options say so.
  PlanResult run(const std::vector<Tensor>& inputs, int warmup, int repetitions,
                 const LayerProgress& progress = {});

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// `graph` is the graph the plan partitions (usually fused); `inputs` are its runtime inputs
// (graph.inputs() order). `progress`, when set, is called after each segment of the first run
// with the last layer it ran.
PlanResult execute_plan(const Graph& graph, const std::vector<Candidate>& plan,
                        std::vector<Tensor> inputs, const ModelWeights& weights,
                        const PlanOptions& options, const LayerProgress& progress = {});
// With ExecOptions alone: one run, layerwise layers on the brick kernels.
PlanResult execute_plan(const Graph& graph, const std::vector<Candidate>& plan,
                        std::vector<Tensor> inputs, const ModelWeights& weights,
                        const ExecOptions& options = {}, const LayerProgress& progress = {});
// The same for a graph of one input: `input` is the output of layer 0.
PlanResult execute_plan(const Graph& graph, const std::vector<Candidate>& plan, const Tensor& input,
                        const ModelWeights& weights, const ExecOptions& options = {},
                        const LayerProgress& progress = {});

} // namespace brickdl::kernels
