#pragma once
// Random groups for property tests of the merged executor (and its agreement with the model).
#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "core/candidate.h"
#include "core/graph.h"
#include "core/graph_builder.h"

namespace brickdl::kernels::test_support {

struct RandomCase {
  Graph graph; // fused
  Group group;
  std::string text;
};

// A random graph whose tail (from a recorded layer on) is the group: 1-6 main layers of conv
// (kernel 1/3/5/7, stride 1/2, dilation 1/2, groups, bias, folded bn and activations),
// pools (ceil mode, count_include_pad), upsample, standalone bn / leaky relu, residual adds
// (with an external skip or an in-group one) and concat.
inline RandomCase random_case(std::mt19937& rng, int dims) {
  const auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const auto chance = [&](double p) { return std::bernoulli_distribution(p)(rng); };
  TensorShape in;
  in.spatial_rank = dims;
  in.n = pick(1, 2);
  in.c = pick(1, 4);
  if (dims == 3) {
    in.d = pick(3, 9);
    in.h = pick(3, 9);
    in.w = pick(3, 10);
  } else {
    in.h = pick(4, 23);
    in.w = pick(4, 23);
  }
  GraphBuilder b("random", in);
  std::string text = in.str() + ":";
  int x = b.input();
  std::vector<int> outside = {x};
  if (chance(0.5)) { // a layer before the group, so the group's input is not the graph's
    x = dims == 3 ? b.conv3d(x, pick(1, 4), 3, 1, 1) : b.conv2d(x, pick(1, 4), 3, 1, 1);
    outside.push_back(x);
  }
  std::vector<int> inside;
  std::string first_name;
  const int main_layers = pick(1, 6);
  for (int m = 0; m < main_layers; ++m) {
    const TensorShape s = b.shape(x);
    const int op = m == 0 ? pick(0, 2) : pick(0, 11);
    int y = -1;
    if (op <= 3) { // conv (most often)
      const std::vector<int> kernels =
          dims == 3 ? std::vector<int>{1, 3, 3, 5} : std::vector<int>{1, 3, 5, 7};
      int k = kernels[static_cast<size_t>(pick(0, 3))];
      const int stride = chance(0.2) ? 2 : 1;
      const int dil = k > 1 && chance(0.25) ? 2 : 1;
      // Half the convs keep the extent ("same" padding) so that residual adds fit.
      int pad =
          chance(0.5) ? dil * (k - 1) / 2 : pick(0, dil * (k - 1) / 2 + (chance(0.2) ? 1 : 0));
      const int64_t span = int64_t{dil} * (k - 1) + 1;
      const int64_t smallest = std::min({s.h, s.w, dims == 3 ? s.d : s.h});
      if (smallest + 2 * pad < span) {
        k = 1;
        pad = 0;
      }
      const int64_t cout = chance(0.5) ? s.c : pick(1, 5);
      const int groups = (s.c % 2 == 0 && cout % 2 == 0 && chance(0.3)) ? 2 : 1;
      const bool bias = chance(0.3);
      y = dims == 3 ? b.conv3d(x, cout, k, stride, pad, k > 1 ? dil : 1, groups, bias)
                    : b.conv2d(x, cout, k, stride, pad, k > 1 ? dil : 1, groups, bias);
      text += " conv" + std::to_string(k) + "s" + std::to_string(stride) + "p" +
              std::to_string(pad) + "d" + std::to_string(dil) + "g" + std::to_string(groups) + "c" +
              std::to_string(cout);
      if (m == 0)
        first_name = b.layer(y).name;
      inside.push_back(y);
      if (chance(0.5))
        y = b.batch_norm(y), inside.push_back(y), text += "+bn";
      if (chance(0.3))
        y = b.relu(y), inside.push_back(y), text += "+relu";
      else if (chance(0.2))
        y = b.leaky_relu(y, 0.2f), inside.push_back(y), text += "+leaky";
    } else if (op <= 5) { // pools
      const int k = pick(2, 3);
      const int64_t smallest = std::min({s.h, s.w, dims == 3 ? s.d : s.h});
      if (smallest < k)
        continue;
      const int stride = pick(1, 2), pad = pick(0, k / 2);
      Window w;
      const int first = dims == 3 ? 0 : 1;
      for (int a = first; a < 3; ++a)
        w.kernel[a] = k, w.stride[a] = stride, w.pad[a] = pad;
      const bool ceil_mode = chance(0.5);
      if (op == 4) {
        y = b.max_pool(x, w, ceil_mode);
        text += " maxpool";
      } else {
        y = b.avg_pool(x, w, chance(0.5), ceil_mode);
        text += " avgpool";
      }
      text += std::to_string(k) + "s" + std::to_string(stride) + "p" + std::to_string(pad) +
              (ceil_mode ? "ceil" : "");
      inside.push_back(y);
    } else if (op == 6 || op >= 10) { // residual add with an earlier tensor of the same shape
      std::vector<int> same;
      for (int t : outside)
        if (b.shape(t) == s)
          same.push_back(t);
      for (int t : inside)
        if (t != x && b.shape(t) == s)
          same.push_back(t);
      if (same.empty())
        continue;
      const int skip = same[static_cast<size_t>(pick(0, static_cast<int>(same.size()) - 1))];
      y = b.add(x, skip);
      const bool external = std::find(outside.begin(), outside.end(), skip) != outside.end();
      text += external ? " add(ext)" : " add(int)";
      inside.push_back(y);
      if (chance(0.5))
        y = b.relu(y), inside.push_back(y), text += "+relu";
    } else if (op == 7) { // upsample on small tensors
      if (s.h > 12 || s.w > 12 || (dims == 3 && s.d > 6))
        continue;
      const bool bilinear = chance(0.5);
      y = b.upsample(x, 2, bilinear);
      text += bilinear ? " up2bilinear" : " up2nearest";
      inside.push_back(y);
    } else if (op == 8) { // concat with an earlier tensor of the same spatial size
      std::vector<int> same;
      for (int t : inside) {
        const TensorShape o = b.shape(t);
        if (t != x && o.d == s.d && o.h == s.h && o.w == s.w && o.n == s.n)
          same.push_back(t);
      }
      if (same.empty())
        continue;
      y = b.concat({x, same[static_cast<size_t>(pick(0, static_cast<int>(same.size()) - 1))]});
      text += " concat";
      inside.push_back(y);
    } else { // op 9: standalone batch-norm or leaky relu (not after a conv, so not folded)
      y = chance(0.5) ? b.batch_norm(x) : b.leaky_relu(x, 0.3f);
      text += " " + std::string(op_name(b.layer(y).op));
      inside.push_back(y);
    }
    x = y;
  }
  RandomCase rc;
  rc.graph = fuse_for_inference(b.build());
  if (inside.empty())
    return random_case(rng, dims);
  const int first = first_name.empty() ? -1 : rc.graph.find(first_name);
  if (first < 0) {
    // The first main layer was a pool: find it as the first layer after the outside ones.
    rc.group = Group{static_cast<int>(outside.size()), rc.graph.size() - 1};
  } else {
    rc.group = Group{first, rc.graph.size() - 1};
  }
  rc.text = text;
  return rc;
}

inline BrickShape random_brick(std::mt19937& rng, int dims) {
  static const int kSizes[] = {1, 2, 3, 4, 5, 7, 8, 16, 32};
  std::uniform_int_distribution<int> s(0, 8), cb(0, 3);
  BrickShape b;
  b.d = dims == 3 ? kSizes[s(rng)] : 1;
  b.h = kSizes[s(rng)];
  b.w = kSizes[s(rng)];
  b.cb = cb(rng);
  return b;
}

} // namespace brickdl::kernels::test_support
