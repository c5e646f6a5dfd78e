#pragma once
// Graphs the emulation, tensor-core and device tests share.
#include <algorithm>
#include <cstdint>
#include <string>

#include "core/graph.h"
#include "core/graph_builder.h"

namespace brickdl::cuda::test_support {

// A ResNet bottleneck block on `in` (fused): conv1 1x1 to `mid` channels, conv2 3x3 to `mid`,
// conv3 1x1 back to in.c, each with a folded batch-norm (relu after conv1 and conv2), then the
// input added and a relu. Layers conv1, conv2, conv3, add: group {1, 4}.
inline Graph bottleneck_block(const TensorShape& in, int64_t mid, DType t = DType::kF32) {
  GraphBuilder b("bottleneck", in, t);
  const int x = b.input();
  int y = b.relu(b.batch_norm(b.conv2d(x, mid, 1, 1, 0, 1, 1, false, "conv1")));
  y = b.relu(b.batch_norm(b.conv2d(y, mid, 3, 1, 1, 1, 1, false, "conv2")));
  y = b.batch_norm(b.conv2d(y, in.c, 1, 1, 0, 1, 1, false, "conv3"));
  b.relu(b.add(y, x, "add"));
  return fuse_for_inference(b.build());
}

// EfficientNet-B0's MBConv block on `in` (fused), without its squeeze-excitation
// (mbconv_se_block has it): expand 1x1 to
// in.c · ratio channels, BN, SiLU, depthwise 3x3 (stride 1), BN, SiLU, project 1x1 back to
// in.c, BN, plus the block's input. Fused layers expand, dw (each with its BN and a SiLU
// epilogue), project, add.
// The block of mbconv_block / mbconv_se_block: expand, depthwise (D), [the SE,] project, add.
inline Graph mbconv_graph(const TensorShape& in, int64_t ratio, DType t, bool se) {
  GraphBuilder b(se ? "mbconv_se" : "mbconv", in, t);
  const int x = b.input();
  const int64_t mid = in.c * ratio;
  int y = b.silu(b.batch_norm(b.conv2d(x, mid, 1, 1, 0, 1, 1, false, "expand")), "silu1");
  y = b.silu(b.batch_norm(b.conv2d(y, mid, 3, 1, 1, 1, mid, false, "dw")), "silu2");
  if (se) {
    int s = b.global_avg_pool(y, "se_pool");
    s = b.silu(b.conv2d(s, std::max<int64_t>(1, in.c / 4), 1, 1, 0, 1, 1, true, "se_fc1"),
               "se_silu");
    s = b.sigmoid(b.conv2d(s, mid, 1, 1, 0, 1, 1, true, "se_fc2"), "se_gate");
    y = b.channel_mul(y, s, "se");
  }
  y = b.batch_norm(b.conv2d(y, in.c, 1, 1, 0, 1, 1, false, "project"));
  b.add(y, x, "add");
  return fuse_for_inference(b.build());
}

inline Graph mbconv_block(const TensorShape& in, int64_t ratio, DType t = DType::kF32) {
  return mbconv_graph(in, ratio, t, false);
}

// The same block with its squeeze-excitation, as torchvision's EfficientNet-B0 builds it: after
// the depthwise conv's SiLU (D), s = sigmoid(fc2(silu(fc1(mean(D))))) with 1x1 convs fc1 (to
// in.c / 4 channels, at least 1) and fc2 (back, both with biases), then D · s (channel_mul,
// "se") feeds the projection. Fused layers (1..8) expand, dw (D), se_pool, se_fc1, se_fc2 (s:
// the SiLU and the sigmoid are epilogues), se, project, add: the pool ends the group of
// expand .. dw, and the group se .. add reads D and s from outside (docs/kernels.md, the SE
// vector).
inline Graph mbconv_se_block(const TensorShape& in, int64_t ratio, DType t = DType::kF32) {
  return mbconv_graph(in, ratio, t, true);
}

// The window of one conv of a random chain, drawn with pick(lo, hi) (uniform ints, in this
// order): kernel 1, 3 or 5 (1 or 3 in 3-D), stride 2 one time in four, dilation 2 one time in
// four, then (with_groups) 2 groups one time in `groups_one_in`, and a padding of "same" or
// one less.
struct RandomConv {
  int k = 1, stride = 1, dil = 1, groups = 1, pad = 0;
};
template <class Pick>
RandomConv random_conv(Pick& pick, int dims, bool with_groups, int groups_one_in = 3) {
  RandomConv c;
  c.k = pick(0, dims == 3 ? 1 : 2) * 2 + 1;
  c.stride = pick(0, 3) == 0 ? 2 : 1;
  c.dil = pick(0, 3) == 0 ? 2 : 1;
  if (with_groups)
    c.groups = pick(0, groups_one_in - 1) == 0 ? 2 : 1;
  c.pad = std::max(0, c.dil * (c.k - 1) / 2 - pick(0, 1));
  return c;
}

// Appends conv `c` with `ch` output channels and a bias to x (2-D or 3-D).
inline int add_conv(GraphBuilder& b, int x, int dims, const RandomConv& c, int64_t ch,
                    const std::string& name) {
  return dims == 3 ? b.conv3d(x, ch, c.k, c.stride, c.pad, c.dil, c.groups, true, name)
                   : b.conv2d(x, ch, c.k, c.stride, c.pad, c.dil, c.groups, true, name);
}

// Appends `depth` random layers to x, drawing with pick(lo, hi): a conv (kernel 1 or 3,
// dilation 2 one time in four, "same" padding, channels() outputs, stride 1 or 2), then one
// time in four a 3x3 max pool of stride 1. Returns the last layer.
template <class Pick, class Channels>
int add_conv_pool_layers(GraphBuilder& b, int x, int dims, int depth, Pick& pick,
                         Channels& channels) {
  for (int l = 0; l < depth; ++l) {
    const int k = pick(0, 1) * 2 + 1;
    const int dil = pick(0, 3) == 0 ? 2 : 1;
    x = dims == 3 ? b.conv3d(x, channels(), k, pick(1, 2), dil * (k - 1) / 2, dil)
                  : b.conv2d(x, channels(), k, pick(1, 2), dil * (k - 1) / 2, dil);
    if (pick(0, 3) == 0)
      x = b.max_pool(x, 3, 1, 1);
  }
  return x;
}

} // namespace brickdl::cuda::test_support
