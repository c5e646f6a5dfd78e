#pragma once
// Small random graphs for the model's property tests: chains of convs (kernel 1/3/5, stride,
// dilation, padding up to half the dilated kernel, grouped convs), pools, upsamples, relus,
// residual adds and concats with earlier tensors, in 2-D or 3-D, batch 1 or 2.
#include <random>
#include <vector>

#include "core/candidate.h"
#include "core/graph_builder.h"

namespace brickdl::model::testing {

inline int pick(std::mt19937& rng, int lo, int hi) {
  return std::uniform_int_distribution<int>(lo, hi)(rng);
}

inline Graph random_graph(std::mt19937& rng, int dims, int layers) {
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
  GraphBuilder b("random", in);
  int cur = 0;
  const auto min_extent = [&](int id) {
    const TensorShape& s = b.shape(id);
    return dims == 3 ? std::min({s.d, s.h, s.w}) : std::min(s.h, s.w);
  };
  const auto max_extent = [&](int id) {
    const TensorShape& s = b.shape(id);
    return dims == 3 ? std::max({s.d, s.h, s.w}) : std::max(s.h, s.w);
  };
  const auto same_spatial = [&](int a, int c) {
    TensorShape x = b.shape(a), y = b.shape(c);
    x.c = y.c = 0;
    return x == y;
  };
  for (int step = 0; step < layers; ++step) {
    const int choice = pick(rng, 0, 9);
    const int64_t c = b.shape(cur).c;
    if (choice <= 4) {
      const int k =
          dims == 3 ? (pick(rng, 0, 1) ? 3 : 1) : std::vector<int>{1, 3, 5}[pick(rng, 0, 2)];
      const int dil = k > 1 ? pick(rng, 1, 2) : 1;
      const int pad = pick(rng, 0, dil * (k - 1) / 2);
      const int stride = min_extent(cur) >= 6 ? pick(rng, 1, 2) : 1;
      int64_t cout = pick(rng, 1, 4);
      int groups = 1;
      if (c % 2 == 0 && pick(rng, 0, 3) == 0) {
        groups = 2;
        cout = 2 * pick(rng, 1, 2);
      }
      const int64_t span = int64_t{dil} * (k - 1) + 1;
      if (min_extent(cur) + 2 * pad < span)
        continue;
      cur = dims == 3 ? b.conv3d(cur, cout, k, stride, pad, dil, groups)
                      : b.conv2d(cur, cout, k, stride, pad, dil, groups);
      if (pick(rng, 0, 2) == 0)
        cur = b.relu(b.batch_norm(cur));
    } else if (choice == 5) {
      if (min_extent(cur) >= 4 && pick(rng, 0, 1)) {
        cur = b.max_pool(cur, 2, 2);
      } else {
        cur = b.avg_pool(cur, 3, 1, 1);
      }
    } else if (choice == 6) {
      if (max_extent(cur) <= 7)
        cur = b.upsample(cur, 2, pick(rng, 0, 1) == 1);
    } else if (choice == 7) {
      // Residual add with an earlier tensor of the same shape, else a relu.
      std::vector<int> same;
      for (int id = 0; id < cur; ++id)
        if (b.shape(id) == b.shape(cur))
          same.push_back(id);
      cur = same.empty()
                ? b.relu(cur)
                : b.add(cur,
                        same[static_cast<size_t>(pick(rng, 0, static_cast<int>(same.size()) - 1))]);
    } else if (choice == 8) {
      std::vector<int> same;
      for (int id = 0; id < cur; ++id)
        if (same_spatial(id, cur))
          same.push_back(id);
      if (!same.empty())
        cur = b.concat(
            {same[static_cast<size_t>(pick(rng, 0, static_cast<int>(same.size()) - 1))], cur});
    } else {
      cur = b.relu(cur);
    }
  }
  if (cur == 0)
    cur = dims == 3 ? b.conv3d(0, 2, 3, 1, 1) : b.conv2d(0, 2, 3, 1, 1);
  return b.build();
}

// True when only the last layer of [first, last] is read outside it.
inline bool is_valid_group(const Graph& g, const Group& grp) {
  for (int id = grp.first; id < grp.last; ++id)
    for (int c : g.consumers(id))
      if (!grp.contains(c))
        return false;
  return true;
}

inline BrickShape random_brick(std::mt19937& rng) {
  static const int sizes[] = {1, 2, 3, 4, 5, 8};
  BrickShape b;
  b.d = sizes[pick(rng, 0, 5)];
  b.h = sizes[pick(rng, 0, 5)];
  b.w = sizes[pick(rng, 0, 5)];
  b.cb = pick(rng, 0, 3);
  return b;
}

} // namespace brickdl::model::testing
