// Brick layout and receptive regions.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>

#include "core/graph_builder.h"
#include "kernels/bricks.h"
#include "kernels/region.h"
#include "kernels/weights.h"

namespace brickdl::kernels {
namespace {

TEST(BrickLayout, CountsForSizesThatDoNotDivide) {
  // 2 images, 5 channels / cb 2 = 3 blocks, 7/3, 9/4, 11/5 -> 3 bricks each axis.
  const BrickLayout l({2, 5, 7, 9, 11, 3}, BrickShape{3, 4, 5, 2});
  EXPECT_EQ(l.channel_blocks(), 3);
  EXPECT_EQ(l.bricks_along(0), 3);
  EXPECT_EQ(l.bricks_along(1), 3);
  EXPECT_EQ(l.bricks_along(2), 3);
  EXPECT_EQ(l.bricks_per_image(), 81);
  EXPECT_EQ(l.num_bricks(), 162);
  EXPECT_EQ(l.brick_elems(), 2 * 3 * 4 * 5);
  // The last brick along w holds columns 10..14 of which only 10 is inside.
  const BrickCoord far{1, 2, {2, 2, 2}};
  EXPECT_EQ(l.storage_region(far).str(), "c[4,6) d[6,9) h[8,12) w[10,15)");
  EXPECT_EQ(l.region(far).str(), "c[4,5) d[6,7) h[8,9) w[10,11)");
  // A brick larger than the tensor is clamped to it; cb = 0 means all channels.
  const BrickLayout big({1, 3, 1, 6, 6, 2}, BrickShape{8, 32, 32, 0});
  EXPECT_EQ(big.num_bricks(), 1);
  EXPECT_EQ(big.brick_elems(), 3 * 6 * 6);
}

TEST(BrickLayout, IndexCoordRoundTripAndOffsetsAreABijection) {
  const TensorShape s{2, 3, 5, 6, 7, 3};
  const BrickLayout l(s, BrickShape{2, 4, 3, 2});
  for (int64_t i = 0; i < l.num_bricks(); ++i)
    EXPECT_EQ(l.index(l.coord(i)), i);
  std::set<int64_t> seen;
  for (int64_t n = 0; n < s.n; ++n)
    for (int64_t c = 0; c < s.c; ++c)
      for (int64_t z = 0; z < s.d; ++z)
        for (int64_t y = 0; y < s.h; ++y)
          for (int64_t x = 0; x < s.w; ++x) {
            const int64_t o = l.offset(n, c, z, y, x);
            ASSERT_GE(o, 0);
            ASSERT_LT(o, l.storage_elems());
            // The element lies in the brick that brick_of names, inside its region.
            const BrickCoord b = l.brick_of(n, c, z, y, x);
            EXPECT_EQ(o / l.brick_elems(), l.index(b));
            const Region r = l.region(b);
            EXPECT_TRUE(c >= r.c0 && c < r.c1 && z >= r.lo[0] && z < r.hi[0] && y >= r.lo[1] &&
                        y < r.hi[1] && x >= r.lo[2] && x < r.hi[2]);
            EXPECT_TRUE(seen.insert(o).second) << "offset " << o << " used twice";
          }
}

TEST(BrickLayout, RoundTripOddSizesEveryBrickSize) {
  std::mt19937 rng(5);
  const std::vector<TensorShape> shapes = {
      {1, 1, 1, 1, 1, 2},  {2, 3, 1, 7, 13, 2}, {1, 5, 1, 31, 17, 2},
      {1, 2, 5, 9, 11, 3}, {2, 3, 3, 1, 10, 3},
  };
  for (const TensorShape& s : shapes) {
    const Tensor t = random_tensor(s, 11);
    ASSERT_EQ(std::count(t.values().begin(), t.values().end(), 0.0f), 0);
    for (int e = 1; e <= 32; ++e) {
      std::uniform_int_distribution<int> other(1, 32), cb(0, 4);
      const BrickShape b{s.spatial_rank == 3 ? other(rng) : 1, e, other(rng), cb(rng)};
      const BrickLayout l(s, b);
      const std::vector<float> bricked = to_bricks(t, l);
      ASSERT_EQ(static_cast<int64_t>(bricked.size()), l.storage_elems());
      EXPECT_EQ(from_bricks(bricked, l).values(), t.values()) << s.str() << " " << b.str();
      // Storage of partial bricks outside the tensor holds zeros (the tensor has none).
      const auto zeros = std::count(bricked.begin(), bricked.end(), 0.0f);
      EXPECT_EQ(zeros, l.storage_elems() - t.numel());
    }
  }
}

TEST(BrickLayout, NeighboursAndBorders) {
  const BrickLayout l({1, 4, 1, 10, 10, 2}, BrickShape{1, 4, 4, 2}); // 2 x 3 x 3 bricks
  const int64_t centre = l.index(BrickCoord{0, 0, {0, 1, 1}});
  EXPECT_EQ(l.neighbour(centre, 0, 0, 1, 0), l.index(BrickCoord{0, 0, {0, 2, 1}}));
  EXPECT_EQ(l.neighbour(centre, 0, 0, -1, -1), l.index(BrickCoord{0, 0, {0, 0, 0}}));
  EXPECT_EQ(l.neighbour(centre, 1, 0, 0, 1), l.index(BrickCoord{0, 1, {0, 1, 2}}));
  EXPECT_EQ(l.neighbour(centre, 0, 1, 0, 0), -1); // no depth neighbour in 2-D
  const int64_t corner = l.index(BrickCoord{0, 1, {0, 2, 2}});
  EXPECT_EQ(l.neighbour(corner, 0, 0, 1, 0), -1);
  EXPECT_EQ(l.neighbour(corner, 0, 0, 0, 1), -1);
  EXPECT_EQ(l.neighbour(corner, 1, 0, 0, 0), -1);
  EXPECT_EQ(l.neighbour(corner, 0, 0, -2, -2), l.index(BrickCoord{0, 1, {0, 0, 0}}));
}

TEST(BrickLayout, GatherWithZeroHalo) {
  const TensorShape s{2, 3, 4, 7, 9, 3};
  const Tensor t = random_tensor(s, 3);
  const BrickLayout l(s, BrickShape{3, 2, 4, 2});
  const std::vector<float> bricked = to_bricks(t, l);
  // A brick of image 1 plus a halo of 2 that sticks out of the tensor on every side, and one
  // channel past the last.
  Region r;
  r.c0 = 1;
  r.c1 = 4;
  r.lo = {-2, -2, 5};
  r.hi = {3, 4, 11};
  std::vector<float> out(static_cast<size_t>(r.volume()), -1.0f);
  gather_region(bricked.data(), l, 1, r, out.data());
  size_t k = 0;
  for (int64_t c = r.c0; c < r.c1; ++c)
    for (int64_t z = r.lo[0]; z < r.hi[0]; ++z)
      for (int64_t y = r.lo[1]; y < r.hi[1]; ++y)
        for (int64_t x = r.lo[2]; x < r.hi[2]; ++x, ++k) {
          const bool inside = c < s.c && z >= 0 && z < s.d && y >= 0 && y < s.h && x < s.w;
          EXPECT_EQ(out[k], inside ? t.at(1, c, z, y, x) : 0.0f)
              << c << " " << z << " " << y << " " << x;
        }
}

TEST(BrickLayout, BricksTouchingMatchesBruteForce) {
  const TensorShape s{2, 5, 6, 9, 10, 3};
  const BrickLayout l(s, BrickShape{4, 2, 3, 2});
  std::mt19937 rng(9);
  for (int trial = 0; trial < 200; ++trial) {
    std::uniform_int_distribution<int64_t> pos(-3, 12), ch(0, 5);
    Region r;
    r.c0 = ch(rng);
    r.c1 = r.c0 + 1 + ch(rng);
    for (size_t a = 0; a < 3; ++a) {
      r.lo[a] = pos(rng);
      r.hi[a] = r.lo[a] + 1 + pos(rng) / 2;
    }
    std::vector<int64_t> brute;
    for (int64_t i = 0; i < l.num_bricks(); ++i) {
      const BrickCoord b = l.coord(i);
      if (b.n == 1 && !intersect(l.region(b), r).empty())
        brute.push_back(i);
    }
    EXPECT_EQ(l.bricks_touching(1, r), brute) << r.str();
    EXPECT_EQ(l.count_touching(r), static_cast<int64_t>(brute.size())) << r.str();
  }
}

TEST(Region, InputNeedFollowsTheReceptiveFieldRule) {
  GraphBuilder b("t", TensorShape{1, 4, 1, 20, 20, 2});
  const int c = b.conv2d(b.input(), 6, 3, 2, 1);       // k3 s2 p1
  const int d = b.conv2d(b.input(), 4, 3, 1, 2, 2, 2); // k3 s1 p2 dil 2, 2 groups
  const int u = b.upsample(b.input(), 3, false);
  const int ub = b.upsample(b.input(), 2, true);
  const int cat = b.concat({c, c});
  const Graph g = b.build();
  Region out;
  out.c0 = 0;
  out.c1 = 1;
  out.lo = {0, 2, 0};
  out.hi = {1, 4, 10}; // rows [2, 3], columns [0, 9]
  // Rows: [2·2−1, 3·2−1+2] = [3, 7]; columns: [−1, 19] clipped to [0, 19]; all 4 channels.
  EXPECT_EQ(input_need(g, g.layer(c), 0, out).str(), "c[0,4) d[0,1) h[3,8) w[0,20)");
  // 2 groups of 2 channels: output channel 0 reads input channels 0-1; dilation 2, pad 2:
  // rows [2−2, 3−2+4] = [0, 5], columns [−2, 11] -> [0, 11].
  EXPECT_EQ(input_need(g, g.layer(d), 0, out).str(), "c[0,2) d[0,1) h[0,6) w[0,12)");
  out.c1 = 3; // output channels 0..2 span both groups
  EXPECT_EQ(input_need(g, g.layer(d), 0, out).str(), "c[0,4) d[0,1) h[0,6) w[0,12)");
  // Nearest by 3: rows [floor(2/3), floor(3/3)] = [0, 1], columns [0, 3].
  EXPECT_EQ(input_need(g, g.layer(u), 0, out).str(), "c[0,3) d[0,1) h[0,2) w[0,4)");
  // Bilinear by 2: rows [1−1, 1+1] = [0, 2], columns [−1, 5] -> [0, 5].
  EXPECT_EQ(input_need(g, g.layer(ub), 0, out).str(), "c[0,3) d[0,1) h[0,3) w[0,6)");
  // Concat of two 6-channel tensors: output channels [4, 8) read [4, 6) of the first and
  // [0, 2) of the second; [0, 3) reads nothing of the second.
  Region o2 = Region::whole(g.layer(cat).out);
  o2.c0 = 4;
  o2.c1 = 8;
  EXPECT_EQ(input_need(g, g.layer(cat), 0, o2).c0, 4);
  EXPECT_EQ(input_need(g, g.layer(cat), 0, o2).c1, 6);
  EXPECT_EQ(input_need(g, g.layer(cat), 1, o2).c0, 0);
  EXPECT_EQ(input_need(g, g.layer(cat), 1, o2).c1, 2);
  o2.c0 = 0;
  o2.c1 = 3;
  EXPECT_TRUE(input_need(g, g.layer(cat), 1, o2).empty());
}

TEST(Region, HullIntersectContains) {
  Region a, b;
  a.c1 = 2;
  a.lo = {0, 1, 1};
  a.hi = {1, 3, 3};
  b.c0 = 1;
  b.c1 = 4;
  b.lo = {0, 2, 0};
  b.hi = {1, 5, 2};
  EXPECT_EQ(hull(a, b).str(), "c[0,4) d[0,1) h[1,5) w[0,3)");
  EXPECT_EQ(intersect(a, b).str(), "c[1,2) d[0,1) h[2,3) w[1,2)");
  EXPECT_TRUE(hull(a, b).contains(a));
  EXPECT_FALSE(a.contains(b));
  EXPECT_EQ(hull(Region{}, a), a); // empty operands are ignored
  EXPECT_EQ(a.volume(), 2 * 1 * 2 * 2);
}

} // namespace
} // namespace brickdl::kernels
