#pragma once
// Small random graphs for the model's property tests: chains of convs (kernel 1/3/5, stride,
// dilation, padding up to half the dilated kernel, grouped convs), pools, upsamples, relus,
// residual adds and concats with earlier tensors, in 2-D or 3-D, batch 1 or 2.
#include <algorithm>
#include <random>
#include <vector>

#include "core/candidate.h"
#include "core/graph_builder.h"

namespace brickdl::model::testing {

inline int pick(std::mt19937& rng, int lo, int hi) {
  return std::uniform_int_distribution<int>(lo, hi)(rng);
}

// The input: batch 1 or 2, 1 to 4 channels, 4 to 7 (3-D) or 5 to 12 (2-D) per spatial axis.
inline TensorShape random_input(std::mt19937& rng, int dims) {
  TensorShape in;
  in.n = pick(rng, 1, 2);
  in.c = pick(rng, 1, 4);
  in.spatial_rank = dims;
  if (dims == 3) {
    in.d = pick(rng, 4, 7);
    in.h = pick(rng, 4, 7);
    in.w = pick(rng, 4, 7);
  } else {
    in.h = pick(rng, 5, 12);
    in.w = pick(rng, 5, 12);
  }
  return in;
}

// Smallest and largest spatial extent of tensor `id`.
inline int64_t min_extent(const GraphBuilder& b, int dims, int id) {
  const TensorShape& s = b.shape(id);
  return dims == 3 ? std::min({s.d, s.h, s.w}) : std::min(s.h, s.w);
}
inline int64_t max_extent(const GraphBuilder& b, int dims, int id) {
  const TensorShape& s = b.shape(id);
  return dims == 3 ? std::max({s.d, s.h, s.w}) : std::max(s.h, s.w);
}

// A conv on `cur` (kernel 1/3/5, dilation, padding, stride, maybe 2 groups), sometimes with
// batch norm and relu; `cur` unchanged when its extent is too small for the kernel.
inline int add_random_conv(std::mt19937& rng, GraphBuilder& b, int dims, int cur) {
  const int64_t c = b.shape(cur).c;
  const int k = dims == 3 ? (pick(rng, 0, 1) ? 3 : 1) : std::vector<int>{1, 3, 5}[pick(rng, 0, 2)];
  const int dil = k > 1 ? pick(rng, 1, 2) : 1;
  const int pad = pick(rng, 0, dil * (k - 1) / 2);
  const int stride = min_extent(b, dims, cur) >= 6 ? pick(rng, 1, 2) : 1;
  int64_t cout = pick(rng, 1, 4);
  int groups = 1;
  if (c % 2 == 0 && pick(rng, 0, 3) == 0) {
    groups = 2;
    cout = 2 * pick(rng, 1, 2);
  }
  const int64_t span = int64_t{dil} * (k - 1) + 1;
  if (min_extent(b, dims, cur) + 2 * pad < span)
    return cur;
  cur = dims == 3 ? b.conv3d(cur, cout, k, stride, pad, dil, groups)
                  : b.conv2d(cur, cout, k, stride, pad, dil, groups);
  if (pick(rng, 0, 2) == 0)
    cur = b.relu(b.batch_norm(cur));
  return cur;
}

// One of `ids`, at random.
inline int pick_one(std::mt19937& rng, const std::vector<int>& ids) {
  return ids[static_cast<size_t>(pick(rng, 0, static_cast<int>(ids.size()) - 1))];
}

// Residual add with an earlier tensor of the same shape, else a relu.
inline int add_residual_or_relu(std::mt19937& rng, GraphBuilder& b, int cur) {
  std::vector<int> same;
  for (int id = 0; id < cur; ++id)
    if (b.shape(id) == b.shape(cur))
      same.push_back(id);
  return same.empty() ? b.relu(cur) : b.add(cur, pick_one(rng, same));
}

// Concat of an earlier tensor of the same spatial shape with `cur`; `cur` when there is none.
inline int add_random_concat(std::mt19937& rng, GraphBuilder& b, int cur) {
  const auto same_spatial = [&](int a, int c) {
    TensorShape x = b.shape(a), y = b.shape(c);
    x.c = y.c = 0;
    return x == y;
  };
  std::vector<int> same;
  for (int id = 0; id < cur; ++id)
    if (same_spatial(id, cur))
      same.push_back(id);
  return same.empty() ? cur : b.concat({pick_one(rng, same), cur});
}

inline Graph random_graph(std::mt19937& rng, int dims, int layers) {
  GraphBuilder b("random", random_input(rng, dims));
  int cur = 0;
  for (int step = 0; step < layers; ++step) {
    const int choice = pick(rng, 0, 9);
    if (choice <= 4) {
      cur = add_random_conv(rng, b, dims, cur);
    } else if (choice == 5) {
      if (min_extent(b, dims, cur) >= 4 && pick(rng, 0, 1)) {
        cur = b.max_pool(cur, 2, 2);
      } else {
        cur = b.avg_pool(cur, 3, 1, 1);
      }
    } else if (choice == 6) {
      if (max_extent(b, dims, cur) <= 7)
        cur = b.upsample(cur, 2, pick(rng, 0, 1) == 1);
    } else if (choice == 7) {
      cur = add_residual_or_relu(rng, b, cur);
    } else if (choice == 8) {
      cur = add_random_concat(rng, b, cur);
    } else {
      cur = b.relu(cur);
    }
  }
  if (cur == 0)
    cur = dims == 3 ? b.conv3d(0, 2, 3, 1, 1) : b.conv2d(0, 2, 3, 1, 1);
  return b.build();
}

inline BrickShape random_brick(std::mt19937& rng) {
  static const int sizes[] = {1, 2, 3, 4, 5, 8};
  BrickShape b;
  b.d = sizes[pick(rng, 0, 5)];
  b.h = sizes[pick(rng, 0, 5)];
  b.w = sizes[pick(rng, 0, 5)];
  b.cb = pick(rng, 0, 3);
  b.nb = pick(rng, 1, 3);
  return b;
}

} // namespace brickdl::model::testing
