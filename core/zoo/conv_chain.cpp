// Chains of identical convolutions: the parametric generator build_conv_chain() and the two
// microbenchmarks of the BrickDL paper built from it.
//
// Layer i (1-based) is "conv<i>" [+ "bn<i>"] [+ "relu<i>"]; every conv keeps the channel count,
// has no bias, and pads by dilation * (kernel - 1) / 2 ("same" for odd kernels at stride 1).
//  - micro_graphsize (Fig 10): 6 layers of 3x3x3 conv + relu, 3 channels, 112^3, batch 1.
//  - micro_bricksize (Fig 11): 3 such layers on 224^3.
// The paper speaks of "conv layers" only; the relu is the activation each conv of a CNN
// carries, and it fuses into the conv as an epilogue.
#include <string>

#include "core/error.h"
#include "core/graph_builder.h"
#include "core/limits.h"
#include "core/zoo/builders.h"

namespace brickdl {

namespace {

void require_at_least(const char* key, int64_t value, int64_t min) {
  if (value < min)
    throw UserError("conv chain option '" + std::string(key) +
                    "' must be >= " + std::to_string(min) + ", got " + std::to_string(value));
}

// A value in [min, limit.max] (core/limits.h).
void require_within(const char* key, int64_t value, int64_t min, const SizeLimit& limit) {
  require_at_least(key, value, min);
  if (value > limit.max)
    throw UserError("conv chain option '" + std::string(key) + "' is " + std::to_string(value) +
                    ": " + limit_text(limit));
}

// The chain on an explicit input shape (which may be non-cubic when a zoo user overrides it).
Graph conv_chain_on(const std::string& name, const TensorShape& in, const ConvChainOptions& o) {
  require_within("depth", o.depth, 1, kMaxLayers);
  require_within("kernel", o.kernel, 1, kMaxKernel);
  require_within("stride", o.stride, 1, kMaxWindowParam);
  require_within("dilation", o.dilation, 1, kMaxWindowParam);
  GraphBuilder b(name, in, o.dtype);
  const int pad = o.dilation * (o.kernel - 1) / 2;
  int x = b.input();
  for (int i = 1; i <= o.depth; ++i) {
    const std::string n = std::to_string(i);
    x = in.spatial_rank == 3
            ? b.conv3d(x, in.c, o.kernel, o.stride, pad, o.dilation, 1, false, "conv" + n)
            : b.conv2d(x, in.c, o.kernel, o.stride, pad, o.dilation, 1, false, "conv" + n);
    if (o.batch_norm)
      x = b.batch_norm(x, "bn" + n);
    if (o.relu)
      x = b.relu(x, "relu" + n);
  }
  return b.build();
}

Graph chain_model(const std::string& name, const ZooOptions& options, int depth, int64_t image) {
  zoo_detail::reject_classes(name, options);
  ConvChainOptions o;
  o.depth = depth;
  o.dtype = options.dtype;
  const TensorShape in =
      zoo_detail::resolve_input(name, options, o.channels, {image, image, image});
  return conv_chain_on(name, in, o);
}

} // namespace

Graph build_conv_chain(const ConvChainOptions& o) {
  require_at_least("channels", o.channels, 1);
  require_at_least("batch", o.batch, 1);
  std::vector<int64_t> size = o.input_size;
  if (size.empty()) {
    if (o.dims != 2 && o.dims != 3)
      throw UserError("conv chain option 'dims' must be 2 or 3, got " + std::to_string(o.dims));
    require_at_least("image", o.image, 1);
    size.assign(static_cast<size_t>(o.dims), o.image);
  }
  if (size.size() != 2 && size.size() != 3)
    throw UserError("model 'conv_chain': input_size must be [H, W] (a 2-D chain) or [D, H, W] "
                    "(a 3-D chain), got " +
                    std::to_string(size.size()) + " extents");
  for (int64_t e : size)
    require_at_least("input_size", e, 1);
  TensorShape in;
  in.n = o.batch;
  in.c = o.channels;
  in.spatial_rank = static_cast<int>(size.size());
  in.d = size.size() == 3 ? size[0] : 1;
  in.h = size[size.size() - 2];
  in.w = size[size.size() - 1];
  return conv_chain_on("conv_chain", in, o);
}

namespace zoo_detail {

Graph build_micro_graphsize(const ZooOptions& options) {
  return chain_model("micro_graphsize", options, 6, 112);
}

Graph build_micro_bricksize(const ZooOptions& options) {
  return chain_model("micro_bricksize", options, 3, 224);
}

// The generator's defaults, with the spatial rank taken from input_size (2 or 3 extents).
Graph build_conv_chain_model(const ZooOptions& options) {
  reject_classes("conv_chain", options);
  ConvChainOptions o;
  o.dtype = options.dtype;
  o.batch = options.batch;
  if (options.input_channels != 0)
    o.channels = options.input_channels;
  o.input_size = options.input_size;
  return build_conv_chain(o);
}

} // namespace zoo_detail

} // namespace brickdl
