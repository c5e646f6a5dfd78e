#include "kernels/cpu/onednn.h"

#include <dnnl.hpp>

#include <algorithm>
#include <map>
#include <optional>

#include "core/error.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/region_ops.h"
#include "kernels/detail/group_info.h"

#ifdef BRICKDL_OPENMP
#include <omp.h>
#endif

namespace brickdl::kernels::cpu {

namespace {

namespace dn = dnnl;
using md = dn::memory::desc;
using dims = dn::memory::dims;
constexpr auto kF32 = dn::memory::data_type::f32;

#ifdef BRICKDL_OPENMP
// OpenMP's thread count for oneDNN's primitives during a run, and the caller's back after it
// (the reference ops and the fallbacks after a run take OpenMP's count as they found it).
class OmpThreads {
public:
  explicit OmpThreads(int n) : saved_(omp_get_max_threads()) { omp_set_num_threads(n); }
  ~OmpThreads() { omp_set_num_threads(saved_); }
  OmpThreads(const OmpThreads&) = delete;
  OmpThreads& operator=(const OmpThreads&) = delete;

private:
  int saved_;
};
#endif

dn::engine& engine() {
  static dn::engine e(dn::engine::kind::cpu, 0);
  return e;
}

// The blocked layout as oneDNN describes it (a flat tensor as one pixel per image).
md act_md(const TensorShape& s, int lanes) {
  using tag = dn::memory::format_tag;
  const bool l16 = lanes == 16;
  if (s.spatial_rank == 3)
    return md({s.n, s.c, s.d, s.h, s.w}, kF32, l16 ? tag::aBcde16b : tag::aBcde8b);
  return md({s.n, s.c, s.h, s.w}, kF32, l16 ? tag::aBcd16b : tag::aBcd8b);
}

// A flat tensor as a matrix (N, C) whose rows are whole blocks apart.
md flat_md(const TensorShape& s, int lanes) {
  return md({s.n, s.c}, kF32, dims{ceil_div(s.c, lanes) * lanes, 1});
}

// The plain (NCHW / NCDHW / NC) layout of a tensor, dense.
md plain_md(const TensorShape& s) {
  using tag = dn::memory::format_tag;
  if (s.spatial_rank == 3)
    return md({s.n, s.c, s.d, s.h, s.w}, kF32, tag::ncdhw);
  if (s.spatial_rank == 2)
    return md({s.n, s.c, s.h, s.w}, kF32, tag::nchw);
  return md({s.n, s.c}, kF32, tag::nc);
}

// A reorder between two layouts, made once.
dn::reorder make_reorder(const md& from, const md& to) {
  return dn::reorder(dn::reorder::primitive_desc(engine(), from, engine(), to));
}

// Spatial axes oneDNN sees: d, h, w for 3-D, h, w for 2-D.
std::vector<int> spatial_axes(const TensorShape& s) {
  return s.spatial_rank == 3 ? std::vector<int>{0, 1, 2} : std::vector<int>{1, 2};
}

struct WindowDims {
  dims strides, kernel, dilation, pad_l, pad_r;
};

// oneDNN's window of `l` (dilation counted from 0); pad_r is what makes oneDNN's output extent
// the graph's (ceil mode included).
WindowDims window_dims(const Layer& l, const TensorShape& in) {
  WindowDims w;
  for (int a : spatial_axes(in)) {
    const size_t i = static_cast<size_t>(a);
    const int64_t k = l.window.kernel[i], s = l.window.stride[i], d = l.window.dilation[i];
    const int64_t pl = l.window.pad[i];
    w.strides.push_back(s);
    w.kernel.push_back(k);
    w.dilation.push_back(d - 1);
    w.pad_l.push_back(pl);
    w.pad_r.push_back((l.out.dim(a) - 1) * s + d * (k - 1) + 1 - in.dim(a) - pl);
  }
  return w;
}

// Appends activation `a` as eltwise post-ops; false when oneDNN has no such eltwise.
bool append_act(dn::post_ops& po, Activation a, float slope, float lo, float hi) {
  using alg = dn::algorithm;
  switch (a) {
  case Activation::kNone: return true;
  case Activation::kRelu: po.append_eltwise(1.f, alg::eltwise_relu, 0.f, 0.f); return true;
  case Activation::kLeakyRelu: po.append_eltwise(1.f, alg::eltwise_relu, slope, 0.f); return true;
  case Activation::kClip: po.append_eltwise(1.f, alg::eltwise_clip_v2, lo, hi); return true;
  case Activation::kSigmoid: po.append_eltwise(1.f, alg::eltwise_logistic, 0.f, 0.f); return true;
  case Activation::kSilu: po.append_eltwise(1.f, alg::eltwise_swish, 1.f, 0.f); return true;
  case Activation::kHardSwish:
    po.append_eltwise(1.f, alg::eltwise_hardswish, 0.f, 0.f);
    return true;
  case Activation::kHardSigmoid:
    po.append_eltwise(1.f, alg::eltwise_linear, 1.f / 6.f, 0.5f);
    po.append_eltwise(1.f, alg::eltwise_clip_v2, 0.f, 1.f);
    return true;
  case Activation::kGelu: po.append_eltwise(1.f, alg::eltwise_gelu_erf, 0.f, 0.f); return true;
  }
  return false;
}

bool append_epilogue(dn::post_ops& po, const Layer& l) {
  return append_act(po, l.activation, l.leaky_slope, l.clip_min, l.clip_max);
}

// A tensor a step reads: external input k of the group, or group layer i's output.
struct TensorRef {
  bool external = false;
  int index = 0;
};

struct Step {
  std::string text;
  std::string impl; // oneDNN's implementation ("brg:avx512_core", "ref:any", ...)
  int out = -1;     // the group layer whose output the step writes
  bool fallback = false;
  dn::primitive prim;
  md dst_md;
  std::vector<std::pair<int, TensorRef>> args; // (oneDNN argument, tensor)
  std::vector<md> arg_mds;
  std::unordered_map<int, dn::memory> constants; // weights and biases, reordered once
  // oneDNN's JIT kernels want a plain source for a conv of fewer channels than a block (a
  // stem on the image) and dense tensors for an inner product: the step reorders its first
  // source into `plain_src` before it runs, or runs into `plain_dst` and reorders from it.
  std::optional<md> plain_src, plain_dst;
  dn::primitive src_reorder, dst_reorder;
};

// Owned copy of `v` as a oneDNN memory of `desc`.
dn::memory owned(const md& desc, const std::vector<float>& v) {
  dn::memory m(desc, engine());
  std::copy(v.begin(), v.end(), static_cast<float*>(m.get_data_handle()));
  return m;
}

// `user` (a plain layout over `data`) reordered into `want`, owned.
dn::memory reordered(const md& user, const float* data, const md& want) {
  dn::memory src(user, engine(), const_cast<float*>(data));
  dn::memory dst(want, engine());
  dn::stream s(engine());
  dn::reorder(src, dst).execute(s, src, dst);
  s.wait();
  return dst;
}

// The user layout of a conv's stored weights ([Cout][Cin/g][k...], kernels/weights.h).
md conv_weights_md(const Layer& l, int64_t cin, int rank) {
  using tag = dn::memory::format_tag;
  dims ks;
  for (int a = rank == 3 ? 0 : 1; a < 3; ++a)
    ks.push_back(l.window.kernel[static_cast<size_t>(a)]);
  dims d;
  if (l.groups > 1)
    d = {l.groups, l.out_channels / l.groups, cin / l.groups};
  else
    d = {l.out_channels, cin};
  d.insert(d.end(), ks.begin(), ks.end());
  tag t =
      l.groups > 1 ? (rank == 3 ? tag::goidhw : tag::goihw) : (rank == 3 ? tag::oidhw : tag::oihw);
  return md(d, kF32, t);
}

} // namespace

struct OnednnGroup::Impl {
  const Graph& g;
  const Group group;
  const PackedModel& packed;
  const OnednnOptions options;
  const int lanes;
  detail::GroupInfo info;
  std::vector<Step> steps;
  std::vector<std::string> texts, fallbacks;
  std::vector<int> last_use; // [group layer] last step reading it
  std::vector<bool> kept;    // [group layer] its output is returned

  Impl(const Graph& graph, const Group& grp, const PackedModel& p, const OnednnOptions& o,
       const std::vector<int>& keep)
      : g(graph), group(grp), packed(p), options(o), lanes(p.lanes()), info(graph, grp),
        kept(static_cast<size_t>(info.size), false) {
    for (int i = 0; i < info.size; ++i)
      kept[static_cast<size_t>(i)] = g.is_output(layer(i).id);
    for (int id : keep)
      if (grp.contains(id))
        kept[static_cast<size_t>(id - grp.first)] = true;
  }

  const Layer& layer(int i) const { return info.layer(i); }
  TensorRef ref(int i, int slot) const {
    const detail::Source s = info.slot_source[static_cast<size_t>(i)][static_cast<size_t>(slot)];
    return {s.external, s.index};
  }
  const TensorShape& shape_of(int id) const { return g.layer(id).out; }
  // Layer i's output is read only by layer j of the group, and it leaves no group.
  bool only_read_by(int i, int j) const {
    const auto& c = info.consumers[static_cast<size_t>(i)];
    return !kept[static_cast<size_t>(i)] && i != info.last() && c.size() == 1 && c[0].first == j;
  }

  // The add after conv i that can be its binary post-op (options.post_ops; the conv read only
  // by it, the other operand of the same shape), and the add's slot of that operand; or -1.
  int fusable_add(int i, int* other_slot) const {
    const Layer& l = layer(i);
    if (!options.post_ops || i + 1 >= info.size || layer(i + 1).op != OpKind::kAdd ||
        !only_read_by(i, i + 1))
      return -1;
    const Layer& a = layer(i + 1);
    const size_t slot = a.inputs[0] == l.id ? 1 : 0;
    if (a.inputs[1 - slot] != l.id || a.inputs[slot] == l.id || shape_of(a.inputs[slot]) != a.out ||
        l.out != a.out)
      return -1;
    *other_slot = static_cast<int>(slot);
    return i + 1;
  }

  void prepare();
  bool conv_step(int i, Step& st, int* covered);
  bool conv_dw_step(int i, Step& st);
  bool linear_step(int i, Step& st);
  bool pool_step(int i, Step& st, std::string* why);
  bool binary_step(int i, Step& st, std::string* why);
  bool eltwise_step(int i, Step& st);
  bool concat_step(int i, Step& st);
  bool resample_step(int i, Step& st);
};

// A conv with its bias and epilogue as post-ops, and with options.post_ops a following residual
// add (a binary post-op) and that add's activation. *covered is the add's index when fused.
bool OnednnGroup::Impl::conv_step(int i, Step& st, int* covered) {
  const Layer& l = layer(i);
  const TensorShape& in = shape_of(l.inputs[0]);
  const WindowDims w = window_dims(l, in);
  int other_slot = -1;
  const int add = fusable_add(i, &other_slot);
  const md wmd = conv_weights_md(l, in.c, in.spatial_rank);
  const md bias_md = l.bias ? md({l.out_channels}, kF32, dn::memory::format_tag::x) : md();
  for (int attempt = add >= 0 ? 0 : 1; attempt < 2; ++attempt) {
    const bool with_add = attempt == 0;
    dn::post_ops po;
    if (!append_epilogue(po, l))
      return false;
    const int binary_index = po.len();
    if (with_add) {
      po.append_binary(dn::algorithm::binary_add, act_md(layer(add).out, lanes));
      if (!append_epilogue(po, layer(add)))
        continue;
    }
    dn::primitive_attr attr;
    attr.set_post_ops(po);
    try {
      const bool plain = in.c < lanes; // a stem: oneDNN's JIT takes its image plain
      const md src = plain ? plain_md(in) : act_md(in, lanes);
      const dn::convolution_forward::desc d(
          dn::prop_kind::forward_inference, dn::algorithm::convolution_direct, src,
          md(wmd.dims(), kF32, dn::memory::format_tag::any), bias_md, act_md(l.out, lanes),
          w.strides, w.dilation, w.pad_l, w.pad_r);
      const dn::convolution_forward::primitive_desc pd(d, attr, engine());
      const PackedLayer& p = packed.at(l.id);
      st.prim = dn::convolution_forward(pd);
      st.args = {{DNNL_ARG_SRC, ref(i, 0)}};
      st.arg_mds = {act_md(in, lanes)};
      if (plain) {
        st.plain_src = src;
        st.src_reorder = make_reorder(act_md(in, lanes), src);
      }
      if (with_add) {
        st.args.push_back(
            {DNNL_ARG_ATTR_MULTIPLE_POST_OP(binary_index) | DNNL_ARG_SRC_1, ref(add, other_slot)});
        st.arg_mds.push_back(act_md(layer(add).out, lanes));
      }
      st.constants[DNNL_ARG_WEIGHTS] = reordered(wmd, p.raw->weight.data(), pd.weights_desc());
      if (l.bias)
        st.constants[DNNL_ARG_BIAS] = owned(bias_md, p.raw->bias);
      st.out = with_add ? add : i;
      st.dst_md = act_md(layer(st.out).out, lanes);
      st.impl = pd.impl_info_str();
      st.text = l.name + (with_add ? " + " + layer(add).name : "") + ": " + pd.impl_info_str() +
                (with_add ? " (conv, residual add as a binary post-op)" : " (conv)");
      *covered = with_add ? add : -1;
      return true;
    } catch (const dn::error&) {
      if (!with_add)
        throw;
    }
  }
  return false;
}

// A 1×1 conv and the 3×3 depthwise conv after it as one primitive (oneDNN's depthwise post-op).
bool OnednnGroup::Impl::conv_dw_step(int i, Step& st) {
  const Layer& l = layer(i);
  const TensorShape& in = shape_of(l.inputs[0]);
  if (i + 1 >= info.size || in.spatial_rank != 2 || !only_read_by(i, i + 1))
    return false;
  const Layer& d = layer(i + 1);
  const auto square = [](const std::array<int, 3>& a, int v) { return a[1] == v && a[2] == v; };
  const bool one = l.op == OpKind::kConv && l.groups == 1 && square(l.window.kernel, 1) &&
                   square(l.window.stride, 1) && square(l.window.pad, 0);
  const bool dw = d.op == OpKind::kConv && d.groups == l.out.c && d.out_channels == l.out.c &&
                  square(d.window.kernel, 3) && square(d.window.pad, 1) &&
                  square(d.window.dilation, 1) &&
                  (square(d.window.stride, 1) || square(d.window.stride, 2));
  if (!one || !dw)
    return false;
  dn::post_ops po;
  if (!append_epilogue(po, l))
    return false;
  po.append_dw(kF32, kF32, kF32, 3, d.window.stride[2], 1, 0, {});
  if (!append_epilogue(po, d))
    return false;
  dn::primitive_attr attr;
  attr.set_post_ops(po);
  const md wmd = conv_weights_md(l, in.c, 2);
  const md bias_md = md({l.out_channels}, kF32, dn::memory::format_tag::x);
  const WindowDims w = window_dims(l, in);
  const dn::convolution_forward::desc cd(
      dn::prop_kind::forward_inference, dn::algorithm::convolution_direct, act_md(in, lanes),
      md(wmd.dims(), kF32, dn::memory::format_tag::any), l.bias ? bias_md : md(),
      act_md(l.out, lanes), w.strides, w.dilation, w.pad_l, w.pad_r);
  const dn::convolution_forward::primitive_desc pd(cd, attr, engine());
  if (pd.dst_desc() != act_md(d.out, lanes))
    return false;
  const PackedLayer& p = packed.at(l.id);
  const PackedLayer& q = packed.at(d.id);
  st.prim = dn::convolution_forward(pd);
  st.args = {{DNNL_ARG_SRC, ref(i, 0)}};
  st.arg_mds = {act_md(in, lanes)};
  st.constants[DNNL_ARG_WEIGHTS] = reordered(wmd, p.raw->weight.data(), pd.weights_desc());
  if (l.bias)
    st.constants[DNNL_ARG_BIAS] = owned(bias_md, p.raw->bias);
  const int dw_w = DNNL_ARG_ATTR_POST_OP_DW | DNNL_ARG_WEIGHTS;
  const md dw_user({d.out_channels, 1, 1, 3, 3}, kF32, dn::memory::format_tag::goihw);
  st.constants[dw_w] =
      reordered(dw_user, q.raw->weight.data(), pd.query_md(dn::query::exec_arg_md, dw_w));
  const md dw_bias({d.out_channels}, kF32, dn::memory::format_tag::x);
  st.constants[DNNL_ARG_ATTR_POST_OP_DW | DNNL_ARG_BIAS] =
      owned(dw_bias,
            d.bias ? q.raw->bias : std::vector<float>(static_cast<size_t>(d.out_channels), 0.0f));
  st.out = i + 1;
  st.dst_md = act_md(d.out, lanes);
  st.impl = pd.impl_info_str();
  st.text = l.name + " + " + d.name + ": " + pd.impl_info_str() + " (1x1 conv + depthwise post-op)";
  return true;
}

bool OnednnGroup::Impl::linear_step(int i, Step& st) {
  const Layer& l = layer(i);
  const TensorShape& in = shape_of(l.inputs[0]);
  if (in.spatial() != 1)
    return false;
  dn::post_ops po;
  if (!append_epilogue(po, l))
    return false;
  dn::primitive_attr attr;
  attr.set_post_ops(po);
  const md wmd({l.out_channels, in.c}, kF32, dn::memory::format_tag::ab);
  const md bias_md({l.out_channels}, kF32, dn::memory::format_tag::x);
  const md src = plain_md(TensorShape{in.n, in.c, 1, 1, 1, 0});
  const md dst = plain_md(l.out);
  const dn::inner_product_forward::desc d(dn::prop_kind::forward_inference, src,
                                          md(wmd.dims(), kF32, dn::memory::format_tag::any),
                                          l.bias ? bias_md : md(), dst);
  const dn::inner_product_forward::primitive_desc pd(d, attr, engine());
  const PackedLayer& p = packed.at(l.id);
  st.prim = dn::inner_product_forward(pd);
  st.args = {{DNNL_ARG_SRC, ref(i, 0)}};
  st.arg_mds = {in.c % lanes != 0 ? flat_md(in, lanes) : src};
  if (in.c % lanes != 0) {
    st.plain_src = src;
    st.src_reorder = make_reorder(flat_md(in, lanes), src);
  }
  if (l.out.c % lanes != 0) {
    st.plain_dst = dst;
    st.dst_reorder = make_reorder(dst, flat_md(l.out, lanes));
  }
  st.constants[DNNL_ARG_WEIGHTS] = reordered(wmd, p.raw->weight.data(), pd.weights_desc());
  if (l.bias)
    st.constants[DNNL_ARG_BIAS] = owned(bias_md, p.raw->bias);
  st.out = i;
  st.dst_md = l.out.c % lanes != 0 ? flat_md(l.out, lanes) : dst;
  st.impl = pd.impl_info_str();
  st.text = l.name + ": " + pd.impl_info_str() + " (inner product)";
  return true;
}

// Max / average pools and the global average pool (a pool over the whole image).
bool OnednnGroup::Impl::pool_step(int i, Step& st, std::string* why) {
  const Layer& l = layer(i);
  const TensorShape& in = shape_of(l.inputs[0]);
  WindowDims w;
  dn::algorithm alg = dn::algorithm::pooling_max;
  md dst = act_md(l.out, lanes);
  if (l.op == OpKind::kGlobalAvgPool) {
    alg = dn::algorithm::pooling_avg_include_padding;
    dims out_dims{in.n, in.c};
    for (int a : spatial_axes(in)) {
      w.strides.push_back(1);
      w.kernel.push_back(in.dim(a));
      w.dilation.push_back(0);
      w.pad_l.push_back(0);
      w.pad_r.push_back(0);
      out_dims.push_back(1);
    }
    dst = act_md(TensorShape{in.n, in.c, 1, 1, 1, in.spatial_rank}, lanes);
  } else {
    w = window_dims(l, in);
    if (l.op == OpKind::kAvgPool) {
      alg = l.count_include_pad ? dn::algorithm::pooling_avg_include_padding
                                : dn::algorithm::pooling_avg_exclude_padding;
      for (size_t a = 0; a < w.pad_r.size(); ++a)
        if (l.count_include_pad && w.pad_r[a] > w.pad_l[a]) {
          *why = "a ceil-mode average pool counting padding: oneDNN divides by another count";
          return false;
        }
    }
  }
  const dn::pooling_v2_forward::desc d(dn::prop_kind::forward_inference, alg, act_md(in, lanes),
                                       dst, w.strides, w.kernel, w.dilation, w.pad_l, w.pad_r);
  const dn::pooling_v2_forward::primitive_desc pd(d, engine());
  st.prim = dn::pooling_v2_forward(pd);
  st.args = {{DNNL_ARG_SRC, ref(i, 0)}};
  st.arg_mds = {act_md(in, lanes)};
  st.out = i;
  st.dst_md = dst;
  st.impl = pd.impl_info_str();
  st.text = l.name + ": " + pd.impl_info_str() + " (pooling)";
  return true;
}

// add, sub, mul, div, channel_mul, with the add's activation as a post-op. oneDNN broadcasts
// only its second source: a broadcast first operand is swapped where the op commutes.
bool OnednnGroup::Impl::binary_step(int i, Step& st, std::string* why) {
  const Layer& l = layer(i);
  if (lanes != isa().lanes) {
    // Seen in tests: oneDNN 2.6's jit:uni binary on a blocked layout whose block is not its
    // ISA's vector (nChw8c on AVX-512, nChw16c on AVX2) gives wrong values (normwise error 0.5
    // to 0.7 on a 2x19x5x7 add) and stores past the tensor's end.
    *why = "oneDNN 2.6's binary kernels miscompute a layout of another ISA's lanes";
    return false;
  }
  int a = 0, b = 1;
  if (shape_of(l.inputs[0]) != l.out) {
    if (l.op == OpKind::kSub || l.op == OpKind::kDiv || shape_of(l.inputs[1]) != l.out)
      return false;
    std::swap(a, b);
  }
  const dn::algorithm alg = l.op == OpKind::kAdd   ? dn::algorithm::binary_add
                            : l.op == OpKind::kSub ? dn::algorithm::binary_sub
                            : l.op == OpKind::kDiv ? dn::algorithm::binary_div
                                                   : dn::algorithm::binary_mul;
  dn::post_ops po;
  if (!append_epilogue(po, l))
    return false;
  dn::primitive_attr attr;
  attr.set_post_ops(po);
  const md m0 = act_md(shape_of(l.inputs[static_cast<size_t>(a)]), lanes);
  const md m1 = act_md(shape_of(l.inputs[static_cast<size_t>(b)]), lanes);
  const dn::binary::desc d(alg, m0, m1, act_md(l.out, lanes));
  const dn::binary::primitive_desc pd(d, attr, engine());
  st.prim = dn::binary(pd);
  st.args = {{DNNL_ARG_SRC_0, ref(i, a)}, {DNNL_ARG_SRC_1, ref(i, b)}};
  st.arg_mds = {m0, m1};
  st.out = i;
  st.dst_md = act_md(l.out, lanes);
  st.impl = pd.impl_info_str();
  st.text = l.name + ": " + pd.impl_info_str() + " (binary)";
  return true;
}

bool OnednnGroup::Impl::eltwise_step(int i, Step& st) {
  const Layer& l = layer(i);
  dn::post_ops po;
  const Activation act = op_activation(l.op);
  if (act == Activation::kHardSigmoid ||
      !append_act(po, act, l.leaky_slope, l.clip_min, l.clip_max))
    return false;
  float scale, alpha, beta;
  dn::algorithm alg;
  po.get_params_eltwise(0, scale, alg, alpha, beta);
  const md m = act_md(l.out, lanes);
  const dn::eltwise_forward::desc d(dn::prop_kind::forward_inference, alg, m, alpha, beta);
  const dn::eltwise_forward::primitive_desc pd(d, engine());
  st.prim = dn::eltwise_forward(pd);
  st.args = {{DNNL_ARG_SRC, ref(i, 0)}};
  st.arg_mds = {m};
  st.out = i;
  st.dst_md = m;
  st.impl = pd.impl_info_str();
  st.text = l.name + ": " + pd.impl_info_str() + " (eltwise)";
  return true;
}

bool OnednnGroup::Impl::concat_step(int i, Step& st) {
  const Layer& l = layer(i);
  std::vector<md> srcs;
  for (size_t k = 0; k < l.inputs.size(); ++k) {
    srcs.push_back(act_md(shape_of(l.inputs[k]), lanes));
    st.args.push_back({DNNL_ARG_MULTIPLE_SRC + static_cast<int>(k), ref(i, static_cast<int>(k))});
    st.arg_mds.push_back(srcs.back());
  }
  const dn::concat::primitive_desc pd(act_md(l.out, lanes), 1, srcs, engine());
  st.prim = dn::concat(pd);
  st.out = i;
  st.dst_md = act_md(l.out, lanes);
  st.impl = pd.impl_info_str();
  st.text = l.name + ": " + pd.impl_info_str() + " (concat)";
  return true;
}

bool OnednnGroup::Impl::resample_step(int i, Step& st) {
  const Layer& l = layer(i);
  const md src = act_md(shape_of(l.inputs[0]), lanes), dst = act_md(l.out, lanes);
  const dn::resampling_forward::desc d(
      dn::prop_kind::forward_inference,
      l.bilinear ? dn::algorithm::resampling_linear : dn::algorithm::resampling_nearest, src, dst);
  const dn::resampling_forward::primitive_desc pd(d, engine());
  st.prim = dn::resampling_forward(pd);
  st.args = {{DNNL_ARG_SRC, ref(i, 0)}};
  st.arg_mds = {src};
  st.out = i;
  st.dst_md = dst;
  st.impl = pd.impl_info_str();
  st.text = l.name + ": " + pd.impl_info_str() + " (resampling)";
  return true;
}

// Long on purpose: one case per op oneDNN runs, each falling back to the brick kernels.
void OnednnGroup::Impl::prepare() {
  (void)isa(); // oneDNN's ISA is set before its first primitive
  std::vector<bool> done(static_cast<size_t>(info.size), false);
  for (int i = 0; i < info.size; ++i) {
    if (done[static_cast<size_t>(i)])
      continue;
    const Layer& l = layer(i);
    Step st;
    std::string why;
    bool ok = false;
    int covered = -1;
    try {
      switch (l.op) {
      case OpKind::kConv:
        ok = (options.depthwise && conv_dw_step(i, st)) || conv_step(i, st, &covered);
        if (ok && st.out == i + 1)
          covered = i + 1;
        break;
      case OpKind::kLinear: ok = linear_step(i, st); break;
      case OpKind::kMaxPool:
      case OpKind::kAvgPool:
      case OpKind::kGlobalAvgPool: ok = pool_step(i, st, &why); break;
      case OpKind::kAdd:
      case OpKind::kSub:
      case OpKind::kMul:
      case OpKind::kDiv:
      case OpKind::kChannelMul: ok = binary_step(i, st, &why); break;
      case OpKind::kConcat: ok = concat_step(i, st); break;
      case OpKind::kUpsample: ok = resample_step(i, st); break;
      default:
        if (traits(l.op).is_activation)
          ok = eltwise_step(i, st);
        break;
      }
    } catch (const dn::error& e) {
      why = std::string("oneDNN refused it (") + e.what() + ")";
      ok = false;
    }
    if (ok && st.impl.find("ref:") != std::string::npos) {
      // oneDNN's reference loops (a conv of few channels, a 3-D shape its JIT does not take)
      // run hundreds of times slower than its JIT kernels: a baseline that slow proves
      // nothing, so the brick kernels run it, and the report says so.
      why = "oneDNN has only its reference implementation (" + st.impl + ") for it";
      ok = false;
    }
    if (!ok) {
      if (why.empty())
        why = std::string("oneDNN has no primitive for ") + op_name(l.op) + " here";
      st = Step{};
      st.fallback = true;
      st.out = i;
      st.text = l.name + ": brick kernels (" + why + ")";
      fallbacks.push_back(l.name + ": " + why);
      covered = -1;
    }
    if (covered >= 0)
      done[static_cast<size_t>(covered)] = true;
    texts.push_back(st.text);
    steps.push_back(std::move(st));
  }
  last_use.assign(static_cast<size_t>(info.size), -1);
  for (size_t s = 0; s < steps.size(); ++s) {
    const Step& st = steps[s];
    if (st.fallback) {
      for (const detail::Source& src : info.slot_source[static_cast<size_t>(st.out)])
        if (!src.external)
          last_use[static_cast<size_t>(src.index)] = static_cast<int>(s);
      continue;
    }
    for (const auto& [arg, r] : st.args)
      if (!r.external)
        last_use[static_cast<size_t>(r.index)] = static_cast<int>(s);
  }
}

OnednnGroup::OnednnGroup(const Graph& graph, const Group& group, const PackedModel& packed,
                         const OnednnOptions& options, const std::vector<int>& keep)
    : impl_(std::make_unique<Impl>(graph, group, packed, options, keep)) {
  impl_->prepare();
}

OnednnGroup::~OnednnGroup() = default;

const std::vector<std::string>& OnednnGroup::steps() const {
  return impl_->texts;
}
const std::vector<std::string>& OnednnGroup::fallbacks() const {
  return impl_->fallbacks;
}

BlockedGroupResult OnednnGroup::run(const std::vector<const BlockedTensor*>& inputs,
                                    int threads) const {
  const Impl& m = *impl_;
  BRICKDL_CHECK(inputs.size() == m.info.external_ids.size(),
                "oneDNN group needs " << m.info.external_ids.size() << " inputs");
  std::vector<BlockedTensor> outs(static_cast<size_t>(m.info.size));
  const auto tensor = [&](const TensorRef& r) -> const BlockedTensor& {
    return r.external ? *inputs[static_cast<size_t>(r.index)] : outs[static_cast<size_t>(r.index)];
  };
#ifdef BRICKDL_OPENMP
  const OmpThreads omp_threads(std::max(threads, 1));
#endif
  dn::stream stream(engine());
  for (size_t s = 0; s < m.steps.size(); ++s) {
    const Step& st = m.steps[s];
    if (st.fallback) {
      std::vector<const BlockedTensor*> in;
      for (const detail::Source& src : m.info.slot_source[static_cast<size_t>(st.out)])
        in.push_back(&tensor({src.external, src.index}));
      outs[static_cast<size_t>(st.out)] =
          run_whole_layer(m.g, m.packed.at(m.layer(st.out).id), in, threads);
    } else {
      BlockedTensor y(m.layer(st.out).out, m.lanes);
      std::unordered_map<int, dn::memory> args = st.constants;
      for (size_t k = 0; k < st.args.size(); ++k)
        args.emplace(st.args[k].first,
                     dn::memory(st.arg_mds[k], engine(),
                                const_cast<float*>(tensor(st.args[k].second).data())));
      if (st.plain_src) {
        dn::memory plain(*st.plain_src, engine());
        st.src_reorder.execute(stream,
                               {{DNNL_ARG_FROM, args.at(DNNL_ARG_SRC)}, {DNNL_ARG_TO, plain}});
        args[DNNL_ARG_SRC] = plain;
      }
      dn::memory dst(st.dst_md, engine(), y.data());
      std::optional<dn::memory> plain_dst;
      if (st.plain_dst)
        plain_dst.emplace(*st.plain_dst, engine());
      args.emplace(DNNL_ARG_DST, plain_dst ? *plain_dst : dst);
      st.prim.execute(stream, args);
      if (plain_dst)
        st.dst_reorder.execute(stream, {{DNNL_ARG_FROM, *plain_dst}, {DNNL_ARG_TO, dst}});
      stream.wait();
      outs[static_cast<size_t>(st.out)] = std::move(y);
    }
    for (int i = 0; i < m.info.last(); ++i)
      if (m.last_use[static_cast<size_t>(i)] == static_cast<int>(s) &&
          !m.kept[static_cast<size_t>(i)])
        outs[static_cast<size_t>(i)] = BlockedTensor();
  }
  BlockedGroupResult res;
  for (int i = 0; i < m.info.last(); ++i)
    if (m.kept[static_cast<size_t>(i)])
      res.inner_outputs.emplace(m.layer(i).id, std::move(outs[static_cast<size_t>(i)]));
  res.output = std::move(outs.back());
  res.fallbacks = m.fallbacks;
  return res;
}

std::string onednn_version() {
  const dnnl_version_t* v = dnnl_version();
  return "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." +
         std::to_string(v->patch) + " (" +
         (v->cpu_runtime == DNNL_RUNTIME_OMP ? "OpenMP" : "another CPU runtime") + ")";
}

} // namespace brickdl::kernels::cpu
