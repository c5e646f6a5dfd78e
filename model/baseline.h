#pragma once
// The layerwise baseline of a whole model and its lower bounds.
//
//   fused Graph ──layerwise_baseline(model)──► one BaselineLayer per layer (the layer alone
//                                              as a layerwise group: DRAM bytes, time, its
//                                              lower bound), their sum, the same kernels
//                                              run back to back, and the whole-model bound
//
// Each layer is predicted as the search predicts a single-layer layerwise group: its inputs
// and weights come cold from DRAM (model/detail/memory.h), so the sum is exactly what the
// search's all-layerwise plan costs, every row is at least its bound, and speedups of a plan
// over the baseline compare like with like. `warm` runs the same kernels back to back with
// L2 kept between them (the LRU of model/detail/memory.h over the whole graph), closer to
// what cuDNN gets end to end; it is reported for reference.
#include <string>
#include <vector>

#include "core/graph.h"
#include "model/cost_model.h"

namespace brickdl::model {

struct BaselineLayer {
  int layer = 0;        // graph id
  Prediction predicted; // the layer alone, layerwise
  LowerBound bound;     // the layer alone as a group
};

struct Baseline {
  std::vector<BaselineLayer> layers; // graph ids 1 .. size − 1
  Prediction total;                  // Σ of the layers (counts, bytes and times added)
  Prediction warm;                   // the whole graph back to back, L2 kept between kernels
  LowerBound layer_bounds;           // Σ of the per-layer bounds
  LowerBound model_bound;            // the whole graph as one group: input, weights, output
};

Baseline layerwise_baseline(const CostModel& model, const Graph& fused);

// The layerwise baselines a plan is compared with (DESIGN.md, "Two baselines, both named"):
//   cudnn-fused    the honest one: one library call per layer, conv + bias + activation fused,
//                  the best algorithm (what layerwise candidates are, and what
//                  layerwise_baseline() predicts);
//   paper-unfused  the BrickDL paper's own (its public artifact): each conv with a fixed
//                  implicit-GEMM algorithm, then its bias (cudnnAddTensor), its batch-norm and
//                  its activation each as a pass of its own over the output.
enum class BaselineKind { kCudnnFused, kPaperUnfused };
const std::vector<std::string>& baseline_names(); // in enum order
const char* baseline_name(BaselineKind kind);
bool parse_baseline(const std::string& name, BaselineKind* kind);

// The paper's unfused baseline of groups of one fused graph. Each fused layer becomes the
// passes the paper's artifact runs (names: the layer's, then ".bias", ".bn", ".act"):
//
//   conv / linear / conv_transpose with bias b, folded batch-norm f, activation a
//     ─► the op without its epilogue ─► [bias pass if b or f] ─► [batch-norm pass if f]
//        ─► [activation pass if a]
//   any other layer with a fused activation ─► the op ─► [activation pass]
//
// (a folded batch-norm brings both passes, as the paper's ConvBatchnormLayer has a bias and
// a batch-norm). A bias or batch-norm pass is a per-channel affine (op batch_norm), an
// activation pass its op: each reads the output whole and writes it whole, one launch, in
// place (Layer::in_place): cudnnAddTensor has one tensor, C, for its input and its output,
// and the artifact calls cudnnActivationForward with x == y; the batch-norm pass, whose call
// the artifact's published source cuts off, is taken to do the same (as the cuDNN backend's
// stand-in, an in-place cudnnAddTensor, does). Their parameters are what the calls read:
// the bias pass C values (cudnnAddTensor's A), the batch-norm pass 4 · C
// (cudnnBatchNormalizationForwardInference's scale, bias, mean and variance). The group's
// passes are then predicted as one layerwise group of the unfused graph, with the same L2
// model as every layerwise group: a pass finds its input in L2 when it fits, and rewrites it
// there (no write-back); a pass over a tensor larger than the L2 share reads it from DRAM and
// writes it back. Not modelled: the fixed algorithm's own speed (the conv is charged at the
// library's roofline as in cudnn-fused), which the cuDNN backend measures
// (kernels/cuda/cudnn_layerwise.h); 16-bit data's batch-norm vectors, which cuDNN keeps in
// fp32 (charged at the data's width).
class PaperUnfusedBaseline {
public:
  // Throws UserError when the unfused graph exceeds a limit (core/limits.h).
  explicit PaperUnfusedBaseline(const Graph& fused);
  const Graph& graph() const { return unfused_; }
  // The unfused layers of a fused group (ids in graph()).
  Group unfused_group(const Group& fused_group) const;
  Prediction predict(const CostModel& model, const Group& fused_group) const;

private:
  Graph unfused_;
  std::vector<int> first_, last_; // per fused layer id: its passes in unfused_
};

// Adds the counts, bytes and times of `p` to `into` (feasible stays true only if both are).
void accumulate(Prediction& into, const Prediction& p);

} // namespace brickdl::model
