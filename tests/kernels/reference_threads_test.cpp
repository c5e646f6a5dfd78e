// The reference ops on 1, 2 and 3 OpenMP threads give bit-identical outputs: their parallel
// loops split the output elements only, never a reduction, so the thread count cannot change
// a result. Two small graphs cover every loop nest of kernels/reference.cpp (conv with groups,
// stride, dilation and an epilogue, conv_transpose, 3-D conv, the pools, linear, layer norm,
// the elementwise and structural ops), in fp32 and fp64 accumulation. Odd extents leave the
// threads uneven shares.
#include <gtest/gtest.h>

#include <cstring>

#include "core/graph_builder.h"
#include "kernels/reference.h"
#include "kernels/weights.h"

#ifdef BRICKDL_OPENMP
#include <omp.h>
#endif

namespace brickdl::kernels {
namespace {

// Every layer of `g` through run_layer, each output kept (index = layer id).
std::vector<Tensor> every_layer(const Graph& g, const ModelWeights& w, Accumulation acc) {
  std::vector<Tensor> out(static_cast<size_t>(g.size()));
  out[0] = random_tensor(g.layer(0).out, 5);
  for (int id = 1; id < g.size(); ++id) {
    std::vector<const Tensor*> in;
    for (int p : g.layer(id).inputs)
      in.push_back(&out[static_cast<size_t>(p)]);
    out[static_cast<size_t>(id)] = run_layer(g.layer(id), in, w.at(id), acc);
  }
  return out;
}

// The copy of layer `id` with activation `a` as its epilogue, added after the others.
int with_epilogue(GraphBuilder& b, int id, Activation a) {
  Layer l = b.layer(id);
  l.name.clear();
  l.activation = a;
  l.leaky_slope = 0.2f;
  return b.add_layer(l);
}

Window window3(int k, int s, int p, int d = 1) {
  Window w;
  w.kernel = {k, k, k};
  w.stride = {s, s, s};
  w.pad = {p, p, p};
  w.dilation = {d, d, d};
  return w;
}

Graph graph_2d() {
  GraphBuilder b("threads_2d", TensorShape{3, 8, 1, 13, 11, 2});
  const int x = b.input();
  const int grouped = b.conv2d(x, 12, 3, 2, 2, 2, 4, true); // groups 4, stride 2, dilation 2
  with_epilogue(b, grouped, Activation::kLeakyRelu);
  const int depthwise = b.conv2d(x, 8, 3, 1, 1, 1, 8);
  Window tw;
  tw.kernel = {1, 3, 3};
  tw.stride = {1, 2, 2};
  tw.pad = {0, 1, 1};
  b.conv_transpose(depthwise, 6, tw, {0, 1, 1}, 2, true);
  b.max_pool(x, 3, 2, 1, true);
  b.avg_pool(x, 3, 2, 1, false);
  const int gap = b.global_avg_pool(depthwise);
  b.linear(b.flatten(gap), 7);
  b.linear(b.flatten(x), 5, false);
  b.layer_norm(depthwise);
  b.batch_norm(x);
  b.relu(b.add(x, depthwise));
  b.leaky_relu(b.sub(x, depthwise), 0.3f);
  b.sigmoid(b.mul(x, depthwise));
  b.gelu(b.div(x, depthwise));
  b.silu(b.channel_mul(x, gap));
  b.hard_swish(x);
  b.hard_sigmoid(b.clip(x, -0.5f, 0.5f));
  b.pad(x, {0, 2, -1}, {0, -1, 3}, 0.5f);
  b.concat({b.slice(x, 1, 6), b.channel_shuffle(x, 4), depthwise});
  b.upsample(x, 2, true);
  b.upsample(x, 3, false);
  return b.build();
}

Graph graph_3d() {
  GraphBuilder b("threads_3d", TensorShape{2, 6, 7, 9, 5, 3});
  const int x = b.input();
  b.conv3d(x, 9, 3, 2, 2, 2, 3, true); // groups 3, stride 2, dilation 2
  b.conv3d(x, 4, 3, 1, 1);
  b.max_pool(x, window3(3, 2, 1, 2), true);
  b.avg_pool(x, 3, 2, 1, true);
  b.global_avg_pool(x);
  b.layer_norm(x);
  b.upsample(x, 2, true);
  return b.build();
}

TEST(ReferenceThreads, OutputsBitIdenticalOnOneTwoAndThreeThreads) {
#ifndef BRICKDL_OPENMP
  GTEST_SKIP() << "built without OpenMP: the reference runs on one thread";
#else
  const int saved = omp_get_max_threads();
  for (const Graph& g : {graph_2d(), graph_3d()}) {
    const ModelWeights w = make_weights(g, 11);
    for (Accumulation acc : {Accumulation::kF32, Accumulation::kF64}) {
      omp_set_num_threads(1);
      const std::vector<Tensor> one = every_layer(g, w, acc);
      for (int threads : {2, 3}) {
        omp_set_num_threads(threads);
        ASSERT_EQ(omp_get_max_threads(), threads);
        const std::vector<Tensor> many = every_layer(g, w, acc);
        for (int id = 1; id < g.size(); ++id) {
          const Tensor& a = one[static_cast<size_t>(id)];
          const Tensor& b = many[static_cast<size_t>(id)];
          ASSERT_EQ(a.shape(), b.shape()) << g.layer(id).name;
          EXPECT_EQ(std::memcmp(a.data(), b.data(), sizeof(float) * static_cast<size_t>(a.numel())),
                    0)
              << g.name() << " layer " << g.layer(id).name << " on " << threads << " threads, "
              << (acc == Accumulation::kF64 ? "fp64" : "fp32") << " accumulation";
        }
      }
    }
  }
  omp_set_num_threads(saved);
#endif
}

} // namespace
} // namespace brickdl::kernels
