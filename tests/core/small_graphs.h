#pragma once
// Small hand-made graphs shared by the tests of several modules.
#include "core/graph.h"
#include "core/graph_builder.h"

namespace brickdl::testing {

// input → c1 → c2 → c3 → add(c3, c1) → c4, fused: 1 c1, 2 c2, 3 c3, 4 add, 5 c4.
inline Graph residual_graph() {
  GraphBuilder b("res", TensorShape{1, 8, 1, 16, 16, 2});
  const int c1 = b.conv2d(b.input(), 8, 3, 1, 1, 1, 1, false, "c1");
  const int c2 = b.relu(b.conv2d(c1, 8, 3, 1, 1, 1, 1, false, "c2"));
  const int c3 = b.conv2d(c2, 8, 3, 1, 1, 1, 1, false, "c3");
  const int a = b.relu(b.add(c3, c1, "add"));
  b.conv2d(a, 8, 1, 1, 0, 1, 1, false, "c4");
  return fuse_for_inference(b.build());
}

} // namespace brickdl::testing
