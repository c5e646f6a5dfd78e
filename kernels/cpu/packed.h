#pragma once
// Parameters of a layer packed for the CPU kernels of one lane count, once per plan (or per
// measured group), never per call:
//
//   conv (not depthwise)  [group][m-block][tap][cin / group][mb]     column-major GEMM panels
//                                                                   of mb = kConvBlockM output
//                                                                   channels (fewer in a group's
//                                                                   last block): one panel's
//                                                                   rows are contiguous
//   depthwise conv        [channel block][tap][lane]                one vector per tap
//   linear                [in][out]                                 lda = out
//   bias                  [out channels rounded up to whole blocks], zeros beyond
//
// Other layers keep their stored form (kernels/weights.h): the per-channel affine of an
// unfolded batch-norm, a layer norm's gamma and beta, and the reference's parameters of the
// layers computed through it (conv_transpose).
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "core/graph.h"
#include "kernels/cpu/blocked.h"
#include "kernels/weights.h"

namespace brickdl::kernels::cpu {

// Output channels per GEMM panel of a conv (m): the tile of one call stays in L1.
inline constexpr int64_t kConvBlockM = 64;

struct PackedLayer {
  const Layer* layer = nullptr;
  int lanes = 8;
  bool depthwise = false;            // a conv with groups = in = out channels
  AlignedFloats weight;              // packed as above; null for layers without packed weights
  std::vector<float> bias;           // packed as above; empty: none
  std::vector<float> scale;          // batch-norm (unfolded) / layer norm: per channel, padded
  std::vector<float> shift;          // the same for the shift / beta
  const LayerWeights* raw = nullptr; // the stored form (what the reference takes)
};

// Packs `layer`'s parameters `w` (stored form) for `lanes`. `w` must outlive the result.
PackedLayer pack_layer(const Graph& graph, const Layer& layer, const LayerWeights& w, int lanes);

// The packed layers of a graph for one lane count: packed on first use (thread-safe), kept
// until destroyed. The weights must outlive it.
class PackedModel {
public:
  PackedModel(const Graph& graph, const ModelWeights& weights, int lanes);
  ~PackedModel();
  PackedModel(const PackedModel&) = delete;
  PackedModel& operator=(const PackedModel&) = delete;

  const Graph& graph() const { return *graph_; }
  int lanes() const { return lanes_; }
  const PackedLayer& at(int id) const;
  // Packs layers [first, last] now (outside a timed region).
  void pack(int first, int last) const;

private:
  const Graph* graph_;
  const ModelWeights* weights_;
  int lanes_;
  struct State;
  std::unique_ptr<State> state_;
};

} // namespace brickdl::kernels::cpu
