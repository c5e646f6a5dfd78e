#pragma once
// Graphs the emulation, tensor-core and device tests share.
#include <cstdint>

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

} // namespace brickdl::cuda::test_support
