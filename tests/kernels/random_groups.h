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

// Builds random_case()'s graph one main layer at a time; every draw comes from `rng` in a
// fixed order, so a seed always gives the same case.
class RandomGroupBuilder {
public:
  RandomGroupBuilder(std::mt19937& rng, int dims) : rng_(rng), dims_(dims), b_("random", input()) {
    text_ = b_.shape(0).str() + ":";
    x_ = b_.input();
    outside_ = {x_};
    if (chance(0.5)) { // a layer before the group, so the group's input is not the graph's
      x_ = conv(x_, pick(1, 4), 3, 1, 1, 1, 1, false);
      outside_.push_back(x_);
    }
  }

  // Adds main layer m (and its epilogue layers); nothing when the drawn op does not fit.
  void add_main_layer(int m) {
    const int op = m == 0 ? pick(0, 2) : pick(0, 11);
    int y = -1;
    if (op <= 3) // conv (most often)
      y = add_conv(m == 0);
    else if (op <= 5)
      y = add_pool(op == 4);
    else if (op == 6 || op >= 10)
      y = add_residual();
    else if (op == 7)
      y = add_upsample();
    else if (op == 8)
      y = add_concat();
    else
      y = add_standalone();
    if (y >= 0)
      x_ = y;
  }

  RandomCase finish() {
    RandomCase rc;
    rc.graph = fuse_for_inference(b_.build());
    const int first = first_name_.empty() ? -1 : rc.graph.find(first_name_);
    // When the first main layer was a pool, it is the first layer after the outside ones.
    rc.group = Group{first < 0 ? static_cast<int>(outside_.size()) : first, rc.graph.size() - 1};
    rc.text = text_;
    return rc;
  }
  bool empty() const { return inside_.empty(); }

private:
  int pick(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  bool chance(double p) { return std::bernoulli_distribution(p)(rng_); }
  int64_t smallest(const TensorShape& s) const {
    return std::min({s.h, s.w, dims_ == 3 ? s.d : s.h});
  }

  TensorShape input() {
    TensorShape in;
    in.spatial_rank = dims_;
    in.n = pick(1, 3); // 3: a ragged last batch block for nb = 2
    in.c = pick(1, 4);
    if (dims_ == 3) {
      in.d = pick(3, 9);
      in.h = pick(3, 9);
      in.w = pick(3, 10);
    } else {
      in.h = pick(4, 23);
      in.w = pick(4, 23);
    }
    return in;
  }

  int conv(int x, int64_t cout, int k, int stride, int pad, int dil, int groups, bool bias) {
    return dims_ == 3 ? b_.conv3d(x, cout, k, stride, pad, dil, groups, bias)
                      : b_.conv2d(x, cout, k, stride, pad, dil, groups, bias);
  }

  // conv (kernel 1/3/5/7, stride 1/2, dilation 1/2, groups, bias) with an optional folded bn
  // and activation.
  int add_conv(bool first) {
    const TensorShape s = b_.shape(x_);
    const std::vector<int> kernels =
        dims_ == 3 ? std::vector<int>{1, 3, 3, 5} : std::vector<int>{1, 3, 5, 7};
    int k = kernels[static_cast<size_t>(pick(0, 3))];
    const int stride = chance(0.2) ? 2 : 1;
    const int dil = k > 1 && chance(0.25) ? 2 : 1;
    // Half the convs keep the extent ("same" padding) so that residual adds fit.
    int pad = chance(0.5) ? dil * (k - 1) / 2 : pick(0, dil * (k - 1) / 2 + (chance(0.2) ? 1 : 0));
    if (smallest(s) + 2 * pad < int64_t{dil} * (k - 1) + 1) {
      k = 1;
      pad = 0;
    }
    const int64_t cout = chance(0.5) ? s.c : pick(1, 5);
    const int groups = (s.c % 2 == 0 && cout % 2 == 0 && chance(0.3)) ? 2 : 1;
    const bool bias = chance(0.3);
    int y = conv(x_, cout, k, stride, pad, k > 1 ? dil : 1, groups, bias);
    text_ += " conv" + std::to_string(k) + "s" + std::to_string(stride) + "p" +
             std::to_string(pad) + "d" + std::to_string(dil) + "g" + std::to_string(groups) + "c" +
             std::to_string(cout);
    if (first)
      first_name_ = b_.layer(y).name;
    inside_.push_back(y);
    if (chance(0.5))
      y = b_.batch_norm(y), inside_.push_back(y), text_ += "+bn";
    if (chance(0.3))
      y = b_.relu(y), inside_.push_back(y), text_ += "+relu";
    else if (chance(0.2))
      y = b_.leaky_relu(y, 0.2f), inside_.push_back(y), text_ += "+leaky";
    return y;
  }

  // Max or average pool (ceil mode, count_include_pad).
  int add_pool(bool max) {
    const int k = pick(2, 3);
    if (smallest(b_.shape(x_)) < k)
      return -1;
    const int stride = pick(1, 2), pad = pick(0, k / 2);
    Window w;
    for (int a = dims_ == 3 ? 0 : 1; a < 3; ++a)
      w.kernel[a] = k, w.stride[a] = stride, w.pad[a] = pad;
    const bool ceil_mode = chance(0.5);
    const int y = max ? b_.max_pool(x_, w, ceil_mode) : b_.avg_pool(x_, w, chance(0.5), ceil_mode);
    text_ += std::string(max ? " maxpool" : " avgpool") + std::to_string(k) + "s" +
             std::to_string(stride) + "p" + std::to_string(pad) + (ceil_mode ? "ceil" : "");
    inside_.push_back(y);
    return y;
  }

  // Residual add with an earlier tensor of the same shape (external skip or in-group).
  int add_residual() {
    const TensorShape s = b_.shape(x_);
    std::vector<int> same;
    for (int t : outside_)
      if (b_.shape(t) == s)
        same.push_back(t);
    for (int t : inside_)
      if (t != x_ && b_.shape(t) == s)
        same.push_back(t);
    if (same.empty())
      return -1;
    const int skip = same[static_cast<size_t>(pick(0, static_cast<int>(same.size()) - 1))];
    int y = b_.add(x_, skip);
    const bool external = std::find(outside_.begin(), outside_.end(), skip) != outside_.end();
    text_ += external ? " add(ext)" : " add(int)";
    inside_.push_back(y);
    if (chance(0.5))
      y = b_.relu(y), inside_.push_back(y), text_ += "+relu";
    return y;
  }

  // Upsample by 2 on small tensors.
  int add_upsample() {
    const TensorShape s = b_.shape(x_);
    if (s.h > 12 || s.w > 12 || (dims_ == 3 && s.d > 6))
      return -1;
    const bool bilinear = chance(0.5);
    const int y = b_.upsample(x_, 2, bilinear);
    text_ += bilinear ? " up2bilinear" : " up2nearest";
    inside_.push_back(y);
    return y;
  }

  // Concat with an earlier tensor of the group of the same spatial size.
  int add_concat() {
    const TensorShape s = b_.shape(x_);
    std::vector<int> same;
    for (int t : inside_) {
      const TensorShape o = b_.shape(t);
      if (t != x_ && o.d == s.d && o.h == s.h && o.w == s.w && o.n == s.n)
        same.push_back(t);
    }
    if (same.empty())
      return -1;
    const int y =
        b_.concat({x_, same[static_cast<size_t>(pick(0, static_cast<int>(same.size()) - 1))]});
    text_ += " concat";
    inside_.push_back(y);
    return y;
  }

  // Standalone batch-norm or leaky relu (not after a conv, so not folded).
  int add_standalone() {
    const int y = chance(0.5) ? b_.batch_norm(x_) : b_.leaky_relu(x_, 0.3f);
    text_ += " " + std::string(op_name(b_.layer(y).op));
    inside_.push_back(y);
    return y;
  }

  std::mt19937& rng_;
  int dims_;
  GraphBuilder b_;
  std::string text_, first_name_;
  int x_ = 0;
  std::vector<int> outside_, inside_;
};

// A random graph whose tail (from a recorded layer on) is the group: 1-6 main layers of conv
// (kernel 1/3/5/7, stride 1/2, dilation 1/2, groups, bias, folded bn and activations),
// pools (ceil mode, count_include_pad), upsample, standalone bn / leaky relu, residual adds
// (with an external skip or an in-group one) and concat.
inline RandomCase random_case(std::mt19937& rng, int dims) {
  RandomGroupBuilder builder(rng, dims);
  const int main_layers = std::uniform_int_distribution<int>(1, 6)(rng);
  for (int m = 0; m < main_layers; ++m)
    builder.add_main_layer(m);
  if (builder.empty())
    return random_case(rng, dims);
  return builder.finish();
}

inline BrickShape random_brick(std::mt19937& rng, int dims) {
  static const int kSizes[] = {1, 2, 3, 4, 5, 7, 8, 16, 32};
  std::uniform_int_distribution<int> s(0, 8), cb(0, 3);
  BrickShape b;
  b.d = dims == 3 ? kSizes[s(rng)] : 1;
  b.h = kSizes[s(rng)];
  b.w = kSizes[s(rng)];
  b.cb = cb(rng);
  static const int kBatchBlocks[] = {1, 1, 2, 3}; // 3 > a batch of 2: clamped
  b.nb = kBatchBlocks[cb(rng)];
  return b;
}

} // namespace brickdl::kernels::test_support
