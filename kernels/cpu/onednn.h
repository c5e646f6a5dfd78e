#pragma once
// oneDNN, the library PyTorch runs on a CPU, as the honest layerwise baseline of the CPU
// target: the layers of a group run one oneDNN primitive each, on the same blocked layout as
// the brick kernels (nChw8c / nChw16c: oneDNN's own), so no reorder happens between them.
//
//   layers ──prepare (once: primitive descriptors, weights reordered to oneDNN's format)──►
//   steps ──run(inputs, threads)──► the last layer's output (and inner graph outputs)
//
// oneDNN's own fusions, as PyTorch's oneDNN paths use them (OnednnOptions):
//  - post_ops: a conv or linear layer takes its bias, its epilogue activation, a following
//    residual add (a binary post-op reading the other operand) and that add's activation; a
//    binary op takes its activation;
//  - depthwise: a 1×1 conv followed by a 3×3 depthwise conv (stride 1 or 2, padding 1) is one
//    primitive (oneDNN's depthwise post-op), as in MobileNetV2 / EfficientNet blocks.
// A layer oneDNN cannot run (layer norm, slice, channel shuffle, an unfolded batch-norm,
// conv_transpose, pad, flatten; a pool or upsample whose arithmetic oneDNN does not match) runs
// on the brick kernels' layerwise path (kernels/cpu/region_ops.h run_whole_layer): fallbacks()
// names each, and reports print them.
#include <memory>
#include <string>
#include <vector>

#include "core/group.h"
#include "kernels/cpu/blocked.h"
#include "kernels/cpu/packed.h"
#include "kernels/merged_executor.h"

namespace brickdl::kernels::cpu {

struct OnednnOptions {
  bool post_ops = true;   // bias, activation and residual-add post-ops
  bool depthwise = false; // the 1×1 + depthwise fusion
};

class OnednnGroup {
public:
  // Prepares layers [group.first, group.last] of `graph` for inputs in `packed`'s lanes. The
  // range need not be a valid merged group: `keep` names layers of it whose outputs are read
  // after it (run returns them in inner_outputs, and no fusion swallows them). The graph and
  // `packed` (its weights) must outlive it.
  OnednnGroup(const Graph& graph, const Group& group, const PackedModel& packed,
              const OnednnOptions& options = {}, const std::vector<int>& keep = {});
  ~OnednnGroup();
  OnednnGroup(const OnednnGroup&) = delete;
  OnednnGroup& operator=(const OnednnGroup&) = delete;

  // The group's output (and its inner layers that are graph outputs or kept) from its external
  // inputs
  // (core/group.h order), on `threads` OpenMP threads. Thread-compatible: one run at a time.
  BlockedGroupResult run(const std::vector<const BlockedTensor*>& inputs, int threads) const;

  // One line per step: the oneDNN implementation and the layers it covers, e.g.
  // "layer1.0.conv3 + layer1.0.add: brg:avx512_core (conv, post-ops: binary_add, relu)".
  const std::vector<std::string>& steps() const;
  // "<layer>: why" for each layer that ran on the brick kernels instead.
  const std::vector<std::string>& fallbacks() const;

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// "oneDNN 2.6.3 (OpenMP, Debian libdnnl)" and the ISA it dispatches to.
std::string onednn_version();

} // namespace brickdl::kernels::cpu
