// GPU tests of the CUDA backend. Each one calls GTEST_SKIP() without a usable device (reported
// skipped, never passed). The device run (scripts/device/run.sh) runs them on a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>
#include <string>

#include "core/graph_builder.h"
#include "kernels/cuda/codegen.h"
#include "kernels/cuda/cuda_measurer.h"
#include "kernels/cuda/cudnn_layerwise.h"
#include "kernels/cuda/cupti_profiler.h"
#include "kernels/cuda/detail/launch_spin.h"
#include "kernels/cuda/emulator.h"
#include "kernels/cuda/rounded_reference.h"
#include "kernels/merged_executor.h"
#include "kernels/validation.h"
#include "kernels/weights.h"
#include "tests/device/device_cases.h"
#include "tests/device/test_graphs.h"

namespace brickdl::cuda {
namespace {

#define BRICKDL_REQUIRE_GPU()                                                                      \
  do {                                                                                             \
    if (!cuda_device_available())                                                                  \
      GTEST_SKIP() << cuda_unavailable_reason();                                                   \
  } while (0)

constexpr uint64_t kSeed = 11;

struct Data {
  std::vector<kernels::Tensor> inputs;
  std::vector<const kernels::Tensor*> ptrs;
  kernels::ModelWeights weights;
};

Data make_data(const Graph& g, const Group& grp) {
  Data d;
  for (int id : group_external_inputs(g, grp))
    d.inputs.push_back(kernels::random_tensor(g.layer(id).out, kSeed, static_cast<uint64_t>(id)));
  for (const auto& t : d.inputs)
    d.ptrs.push_back(&t);
  d.weights = kernels::make_weights(g, kSeed, grp.first, grp.last);
  return d;
}

std::vector<float> cpu_reference(const Graph& g, const Group& grp, const Data& d) {
  Candidate lw;
  lw.group = grp;
  lw.strategy = Strategy::kLayerwise;
  return kernels::execute_group(g, lw, d.ptrs, d.weights).output.values();
}

// Max of |a − b| / (atol + rtol·|b|): <= 1 means every element is within tolerance.
double worst(const std::vector<float>& a, const std::vector<float>& b, double rtol, double atol) {
  EXPECT_EQ(a.size(), b.size());
  double w = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    const double d = std::fabs(double{a[i]} - b[i]);
    w = std::max(w, std::isfinite(d) ? d / (atol + rtol * std::fabs(double{b[i]})) : 1e30);
  }
  return w;
}

// The output of `plan` (made from g) under the host emulator, for the same data.
std::vector<float> emulated(const Graph& g, const KernelPlan& plan, const Data& d) {
  std::vector<const float*> raw;
  for (const auto& in : d.inputs)
    raw.push_back(in.data());
  std::vector<std::vector<float>> w, bias;
  for (int id : plan.layer_ids) {
    w.push_back(d.weights.at(id).weight);
    bias.push_back(d.weights.at(id).bias);
  }
  return emulate_plan(g, plan, raw, w, bias, {}).output;
}

double max_abs(const std::vector<float>& v) {
  double m = 0;
  for (float x : v)
    m = std::max(m, double{std::fabs(x)});
  return m;
}

// The code generator's options as run_on_device sets them for device 0.
CodegenOptions device_codegen() {
  const DeviceInfo dev = query_device(0);
  return codegen_for_device(dev.cc, dev.smem_optin_bytes);
}

using test_support::chain3d;
using test_support::DeviceCase;

Candidate make(Group g, Strategy s, BrickShape b, int threads = 128) {
  return test_support::make_candidate(g, s, b, threads);
}

Graph bottleneck(int batch, int64_t image, int64_t channels = 64) {
  return test_support::device_bottleneck(batch, image, channels);
}

// The cases of these four tests are device_cases.h's: the device bundle compiles their kernels
// ahead (device_test_kernels.cpp), so a lent GPU's minutes go to running them.
TEST(Device, GeneratedKernelsMatchTheCpuReference) {
  BRICKDL_REQUIRE_GPU();
  for (const DeviceCase& k : test_support::generated_cases()) {
    SCOPED_TRACE(k.label);
    const Data d = make_data(k.graph, k.candidate.group);
    const auto out =
        run_on_device(k.graph, k.candidate, DeviceRunner::kGenerated, d.ptrs, d.weights);
    EXPECT_LE(worst(out, cpu_reference(k.graph, k.candidate.group, d), 1e-4, 1e-5), 1.0);
  }
}

// The real mma.sync against its host twin: the same tensor-core plan on the GPU and under the
// emulator (same rounding, exact products) agrees to fp32 summation-order noise, so a wrong
// fragment mapping on either side fails here; both stay within the precision's tolerance
// of the fp32 reference, and so does cuDNN in TF32.
// (On a 9.0 device the blocks of whole warpgroups run wgmma, and so does their emulation.)
TEST(Device, TensorCoreKernelsMatchTheirHostEmulation) {
  BRICKDL_REQUIRE_GPU();
  const CodegenOptions co = device_codegen();
  for (const DeviceCase& k : test_support::tensor_core_cases()) {
    SCOPED_TRACE(k.label);
    const Graph& g = k.graph;
    const Candidate& c = k.candidate;
    const DType t = g.dtype();
    const Data d = make_data(g, c.group);
    const KernelPlan plan = plan_kernels(g, c, co);
    ASSERT_EQ(plan_paths(plan).convs_fma, 0); // every conv on tensor cores
    const auto host = emulated(g, plan, d);
    const auto out = run_on_device(g, c, DeviceRunner::kGenerated, d.ptrs, d.weights);
    const double scale = max_abs(host);
    // 16-bit storage rounds every stored value: a device order of fp32 additions that differs
    // from the host's can move one across a rounding boundary (a unit of the format), also
    // in an intermediate later layers read; fp32 storage differs only in that order.
    const double unit = t == DType::kBF16 ? 0x1p-8 : t == DType::kF16 ? 0x1p-11 : 0.0;
    EXPECT_LE(worst(out, host, 0, (1e-5 + 2 * unit) * scale), 1.0) << "device vs host emulation";
    const double tol = t == DType::kBF16 ? 0.03 : 0.005; // norm-wise, 3 layers, K <= 288
    EXPECT_LE(worst(out, cpu_reference(g, c.group, d), 0, tol * scale), 1.0) << "vs fp32";
    // The reference with the kernels' roundings, under the bound the emulated kernels meet
    // (kernels/cuda/rounded_reference.h): the hardware's own summation inside an mma must fit
    // it too. bound_used is printed so that a first run on a device shows the margin.
    const kernels::Comparison rounded = kernels::compare(
        out, rounded_reference(g, plan, d.ptrs, d.weights), rounded_tolerance(g, plan));
    EXPECT_TRUE(rounded.ok()) << "vs the rounded reference: " << rounded.message;
    std::printf("%s: device vs rounded reference: %.3g of the bound used\n", k.label.c_str(),
                rounded.bound_used);
    if (t == DType::kTF32 && c.strategy == Strategy::kLayerwise) {
      const auto cudnn = run_on_device(g, c, DeviceRunner::kCudnnTf32, d.ptrs, d.weights);
      EXPECT_LE(worst(cudnn, cpu_reference(g, c.group, d), 0, tol * scale), 1.0) << "cuDNN";
    }
  }
}

// The real wgmma (sm_90a) against its host twin: warpgroup tiles of 64 positions by 8, 16 and 32
// channels (mma_n 1, 2, 4), one and two of them per warpgroup (mma_m), weight tiles staged
// through the descriptor, streamed passes; the same plan on the GPU and under the emulator
// agrees to fp32 summation-order noise, so a wrong descriptor, core-matrix layout or fragment
// mapping fails here.
TEST(Device, WgmmaKernelsMatchTheirHostEmulation) {
  BRICKDL_REQUIRE_GPU();
  if (!wgmma_for(query_device(0).cc))
    GTEST_SKIP() << "wgmma needs compute capability 9.0";
  const CodegenOptions co = device_codegen();
  for (const DeviceCase& k : test_support::wgmma_cases()) {
    SCOPED_TRACE(k.label);
    const Graph& g = k.graph;
    const Candidate& c = k.candidate;
    const DType t = g.dtype();
    const Data d = make_data(g, c.group);
    const KernelPlan plan = plan_kernels(g, c, co);
    const PlanPaths paths = plan_paths(plan);
    ASSERT_GT(paths.convs_wgmma, 0);
    ASSERT_EQ(paths.convs_wgmma, paths.convs_mma);
    const auto host = emulated(g, plan, d);
    const auto out = run_on_device(g, c, DeviceRunner::kGenerated, d.ptrs, d.weights);
    const double scale = max_abs(host);
    const double unit = t == DType::kBF16 ? 0x1p-8 : t == DType::kF16 ? 0x1p-11 : 0.0;
    EXPECT_LE(worst(out, host, 0, (1e-5 + 2 * unit) * scale), 1.0) << "device vs host emulation";
  }
}

// Thread block clusters (sm_90): cuLaunchKernelEx with the cluster dims as a launch attribute,
// DSMEM reads through mapa and cluster barriers, against the host emulation of the same plan;
// 16 CTAs is the non-portable size (the loader opts in). fp32 (FMA) and tf32 (tensor cores).
TEST(Device, ClusterKernelsMatchTheirHostEmulation) {
  BRICKDL_REQUIRE_GPU();
  if (query_device(0).cc < 90)
    GTEST_SKIP() << "thread block clusters need sm_90";
  for (const DeviceCase& k : test_support::cluster_cases()) {
    SCOPED_TRACE(k.label);
    const Graph& g = k.graph;
    const Candidate& c = k.candidate;
    const Data d = make_data(g, c.group);
    const KernelPlan plan = plan_kernels(g, c);
    ASSERT_EQ(plan.launches[0].desc.cluster, c.brick.cl);
    const auto host = emulated(g, plan, d);
    const auto out = run_on_device(g, c, DeviceRunner::kGenerated, d.ptrs, d.weights);
    const double scale = max_abs(host);
    EXPECT_LE(worst(out, host, 0, 1e-5 * scale), 1.0) << "device vs host emulation";
  }
}

// The cuDNN baseline's newer calls: a grouped transposed conv (DeepCAM's window; batch-norm
// and relu folded in) as cudnnConvolutionBackwardData, sigmoid and clip (min 0) as
// activations, mul as cudnnOpTensor, and a dilated transposed conv with a bias of its own.
Graph decoder() {
  GraphBuilder b("decoder", TensorShape{2, 8, 1, 9, 11, 2});
  Window w;
  w.kernel = {1, 3, 3};
  w.stride = {1, 2, 2};
  w.pad = {0, 1, 1};
  int t = b.conv_transpose(b.input(), 8, w, {0, 1, 1}, 2, false, "deconv");
  t = b.relu(b.batch_norm(t, "deconv.bn"), "deconv.relu");
  const int m = b.mul(t, b.sigmoid(t, "sigmoid"), "mul");
  const int c = b.clip(m, 0.0f, 6.0f, "clip");
  w.stride = {1, 1, 1};
  w.pad = {0, 2, 2};
  w.dilation = {1, 2, 2};
  b.conv_transpose(c, 4, w, {0, 0, 0}, 1, true, "dilated_deconv");
  return fuse_for_inference(b.build());
}

TEST(Device, CudnnBaselineMatchesTheCpuReference) {
  BRICKDL_REQUIRE_GPU();
  if (!CudnnLayerwise::is_supported())
    GTEST_SKIP() << "built without cuDNN";
  GraphBuilder p("pools", TensorShape{2, 8, 1, 17, 17, 2});
  int x = p.relu(p.conv2d(p.input(), 8, 3, 1, 1, 1, 2, true, "grouped"));
  x = p.max_pool(x, 3, 2, 1, false, "max");
  x = p.leaky_relu(p.conv2d(x, 8, 3, 1, 2, 2, 1, true, "dilated"), 0.1f, "leaky");
  p.avg_pool(x, 2, 2, 0, false, "avg");
  const Graph pools = fuse_for_inference(p.build());
  for (const Graph& g : {bottleneck(2, 14), chain3d(10), pools, decoder()}) {
    const Group grp{1, g.size() - 1};
    const Data d = make_data(g, grp);
    const auto ref = cpu_reference(g, grp, d);
    const Candidate c = make(grp, Strategy::kLayerwise, {1, 8, 8, 0});
    SCOPED_TRACE(g.name());
    EXPECT_LE(worst(run_on_device(g, c, DeviceRunner::kCudnnStrictFp32, d.ptrs, d.weights), ref,
                    1e-4, 1e-5),
              1.0);
    // TF32 keeps 10 mantissa bits: a looser, still meaningful bound.
    EXPECT_LE(
        worst(run_on_device(g, c, DeviceRunner::kCudnnTf32, d.ptrs, d.weights), ref, 2e-2, 2e-2),
        1.0);
  }
}

// The layerwise baseline of a bottleneck's four layers (group 1-4), measured by the tuner's
// CUDA measurer: 5 cold repetitions, no counters.
MeasureResult measure_layerwise(const Graph& g) {
  MeasureOptions o;
  o.repetitions = 5;
  o.collect_counters = false;
  return make_cuda_measurer()->measure(g, make({1, 4}, Strategy::kLayerwise, {1, 8, 8, 0}), o);
}

// bf16 / fp16 cuDNN (16-bit tensors, FP32 accumulation) against the strict-FP32 CPU reference
// with the precision's tolerance; its output is widened from 16 bits, so every value is one of
// the format (a baseline that ran in fp32 would not be).
TEST(Device, SixteenBitCudnnBaselineMatchesTheCpuReference) {
  BRICKDL_REQUIRE_GPU();
  if (!CudnnLayerwise::is_supported())
    GTEST_SKIP() << "built without cuDNN";
  for (DType t : {DType::kBF16, DType::kF16}) {
    const Graph g = test_support::bottleneck_block(TensorShape{2, 64, 1, 14, 14, 2}, 32, t);
    SCOPED_TRACE(dtype_name(t));
    const Group grp{1, g.size() - 1};
    const Data d = make_data(g, grp);
    const auto ref = cpu_reference(g, grp, d);
    const Candidate c = make(grp, Strategy::kLayerwise, {1, 8, 8, 0});
    const auto out = run_on_device(g, c, DeviceRunner::kCudnnOfPrecision, d.ptrs, d.weights);
    const kernels::Tolerance tol = kernels::group_tolerance(g, grp, 1e-5, 1e-4);
    const kernels::Comparison cmp = kernels::compare(out, ref, tol);
    EXPECT_TRUE(cmp.ok()) << cmp.message;
    const int storage = storage_of(t);
    EXPECT_EQ(from_storage(to_storage(out.data(), out.size(), storage), storage), out);
    // cudnnFind may time an FMA kernel fastest for a small conv; some conv runs tensor ops.
    const CudnnLayerwise cudnn(g, grp, CudnnLayerwise::math_for(t));
    int tensor_ops = 0;
    for (const auto& choice : cudnn.choices())
      tensor_ops += choice.tensor_ops ? 1 : 0;
    EXPECT_GT(tensor_ops, 0) << cudnn.describe();
  }
}

// The tuner's layerwise baseline of a bf16 group: cuDNN in bf16, validated and timed, with
// tf32 cuDNN as its variant.
TEST(Device, LayerwiseBaselineRunsSixteenBitCudnn) {
  BRICKDL_REQUIRE_GPU();
  if (!CudnnLayerwise::is_supported())
    GTEST_SKIP() << "built without cuDNN";
  const MeasureResult r = measure_layerwise(
      test_support::bottleneck_block(TensorShape{2, 64, 1, 28, 28, 2}, 32, DType::kBF16));
  ASSERT_EQ(r.status, MeasureStatus::kOk) << r.error;
  EXPECT_GT(r.counters.at("variant.cudnn_bf16_ms"), 0);
  EXPECT_GT(r.counters.at("variant.cudnn_tf32_ms"), 0);
  EXPECT_GT(r.counters.at("cudnn_bf16.tensor_op_convs"), 0);
  EXPECT_NEAR(r.median_ms, r.counters.at("variant.cudnn_bf16_ms"), 1e-9);
}

// Strict FP32 never runs on tensor cores: every conv (forward and backward data, found
// fastest or exact) is on CUDNN_FMA_MATH, whatever math cudnnFind reported its entry under.
TEST(Device, StrictFp32CudnnRunsFmaMathOnly) {
  BRICKDL_REQUIRE_GPU();
  if (!CudnnLayerwise::is_supported())
    GTEST_SKIP() << "built without cuDNN";
  for (const Graph& g : {bottleneck(2, 14), decoder()}) {
    const Group grp{1, g.size() - 1};
    for (auto algos : {CudnnLayerwise::Algorithms::kFastest, CudnnLayerwise::Algorithms::kExact}) {
      const CudnnLayerwise strict(g, grp, CudnnLayerwise::Math::kStrictFp32, algos);
      SCOPED_TRACE(g.name() + ": " + strict.describe());
      ASSERT_FALSE(strict.choices().empty());
      for (const auto& c : strict.choices()) {
        EXPECT_EQ(c.math, "fma");
        EXPECT_FALSE(c.tensor_ops);
      }
    }
    const CudnnLayerwise tf32(g, grp, CudnnLayerwise::Math::kTf32);
    EXPECT_EQ(tf32.choices().size(),
              CudnnLayerwise(g, grp, CudnnLayerwise::Math::kStrictFp32).choices().size());
  }
}

// The TF32 baseline runs cuDNN's default math and never an algorithm that down-converts its
// fp32 inputs to FP16 (CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION), found fastest or the paper's.
TEST(Device, Tf32CudnnNeverDownConverts) {
  BRICKDL_REQUIRE_GPU();
  if (!CudnnLayerwise::is_supported())
    GTEST_SKIP() << "built without cuDNN";
  for (const Graph& g : {bottleneck(2, 14), decoder()}) {
    const Group grp{1, g.size() - 1};
    for (auto algos :
         {CudnnLayerwise::Algorithms::kFastest, CudnnLayerwise::Algorithms::kPaperUnfused}) {
      const CudnnLayerwise tf32(g, grp, CudnnLayerwise::Math::kTf32, algos);
      SCOPED_TRACE(g.name() + ": " + tf32.describe());
      ASSERT_FALSE(tf32.choices().empty());
      for (const auto& c : tf32.choices()) {
        EXPECT_NE(c.math_id,
                  static_cast<int>(CudnnLayerwise::LibraryMath::kTensorOpAllowConversion));
        EXPECT_NE(c.math, "allow_conversion");
      }
    }
  }
}

// Cold timing's spin lies before the start event: a run that enqueues nothing times the event
// pair alone, far below the spin (had the spin been inside, at least the spin); a run of 64
// launches was queued whole before the GPU reached the start event, and its kernels' own time
// is at most its wall time.
TEST(Device, ColdTimingSpinPrecedesTheStartEvent) {
  BRICKDL_REQUIRE_GPU();
  const ColdTimingCheck c = check_cold_timing(0, 64);
  std::cout << "cold timing: empty run " << c.empty_run_ms * 1e3 << " us (spin " << c.empty_spin_us
            << " us); 64 launches " << c.launches_ms * 1e3 << " us wall, "
            << c.launches_kernel_ms * 1e3 << " us kernels (spin " << c.launches_spin_us << " us, "
            << c.launches_short_runs << " short)\n";
  EXPECT_GE(c.empty_spin_us, detail::kSpinFloorUs);
  EXPECT_LT(c.empty_run_ms * 1e3, 0.5 * c.empty_spin_us);
  EXPECT_EQ(c.launches_short_runs, 0);
  EXPECT_GT(c.launches_ms, 0);
  if (c.launches_kernel_ms < 0)
    GTEST_SKIP() << "no CUPTI: kernel time not checked";
  EXPECT_GT(c.launches_kernel_ms, 0);
  EXPECT_LE(c.launches_kernel_ms, c.launches_ms);
}

// Every cold time of the layerwise baseline has its kernel time beside it (with CUPTI), at most
// the wall time: the difference is the GPU's idle time between the sequence's launches.
TEST(Device, LayerwiseVariantsReportKernelTimeBesideWallTime) {
  BRICKDL_REQUIRE_GPU();
  const MeasureResult r = measure_layerwise(bottleneck(2, 28));
  ASSERT_EQ(r.status, MeasureStatus::kOk) << r.error;
  EXPECT_GE(r.counters.at("launch_spin_us"), detail::kSpinFloorUs);
  if (!r.counters.count("kernel_time_ms"))
    GTEST_SKIP() << "no CUPTI kernel records";
  EXPECT_LE(r.counters.at("kernel_time_ms"), r.median_ms);
  int variants = 0;
  for (const auto& [key, ms] : r.counters) {
    const std::string suffix = "_kernel_ms";
    if (key.rfind("variant.", 0) != 0 || key.size() < suffix.size() ||
        key.compare(key.size() - suffix.size(), suffix.size(), suffix) != 0)
      continue;
    const std::string wall = key.substr(0, key.size() - suffix.size()) + "_ms";
    SCOPED_TRACE(key);
    ASSERT_TRUE(r.counters.count(wall));
    EXPECT_GT(ms, 0);
    EXPECT_LE(ms, r.counters.at(wall));
    ++variants;
  }
  EXPECT_GE(variants, CudnnLayerwise::is_supported() ? 3 : 1); // cuDNN x2 + paper, or own
}

// The layerwise baseline reports warm timings (no flush between repetitions) beside the cold
// ones, and what each cuDNN conv ran; its samples stay the cold baseline.
TEST(Device, LayerwiseBaselineReportsWarmTimesAndCudnnChoices) {
  BRICKDL_REQUIRE_GPU();
  const MeasureResult r = measure_layerwise(bottleneck(2, 28));
  ASSERT_EQ(r.status, MeasureStatus::kOk) << r.error;
  EXPECT_GT(r.counters.at("variant.own_layerwise_warm_ms"), 0);
  if (!CudnnLayerwise::is_supported())
    return;
  for (const char* key : {"fp32", "tf32"}) {
    SCOPED_TRACE(key);
    const std::string k = key;
    EXPECT_GT(r.counters.at("variant.cudnn_" + k + "_ms"), 0);
    EXPECT_GT(r.counters.at("variant.cudnn_" + k + "_warm_ms"), 0);
    EXPECT_TRUE(r.counters.count("cudnn_" + k + ".algo.0"));
  }
  EXPECT_EQ(r.counters.at("cudnn_fp32.tensor_op_convs"), 0);
  EXPECT_EQ(r.counters.at("cudnn_fp32.math.0"), 3);                       // CUDNN_FMA_MATH
  EXPECT_NEAR(r.median_ms, r.counters.at("variant.cudnn_fp32_ms"), 1e-9); // cold samples
}

// The BrickDL paper's own cuDNN baseline (Algorithms::kPaperUnfused): every conv on implicit
// GEMM, its bias, folded batch-norm and relu as calls of their own. A bottleneck: conv1 and
// conv2 4 calls each (conv, bias, batch-norm, relu), conv3 3 (no relu), add + relu 2: 13. The
// tuner's layerwise measurement validates and times it as a variant.
TEST(Device, PaperUnfusedCudnnBaselineRunsEveryPassOnItsOwn) {
  BRICKDL_REQUIRE_GPU();
  if (!CudnnLayerwise::is_supported())
    GTEST_SKIP() << "built without cuDNN";
  const Graph g = bottleneck(2, 28);
  const CudnnLayerwise paper(g, {1, 4}, CudnnLayerwise::Math::kStrictFp32,
                             CudnnLayerwise::Algorithms::kPaperUnfused);
  EXPECT_EQ(paper.calls_per_run(), 13) << paper.describe();
  ASSERT_EQ(paper.choices().size(), 3u);
  for (const auto& c : paper.choices())
    EXPECT_EQ(c.algo, "implicit_gemm");
  const MeasureResult r = measure_layerwise(g);
  ASSERT_EQ(r.status, MeasureStatus::kOk) << r.error;
  EXPECT_EQ(r.counters.at("variant.paper_unfused_calls"), 13);
  EXPECT_LE(r.counters.at("variant.paper_unfused_max_rel_error"), 1e-4);
  EXPECT_GT(r.counters.at("variant.paper_unfused_ms"), 0);
  EXPECT_GT(r.counters.at("variant.paper_unfused_warm_ms"), 0);
}

// The flush is a read sweep: after it, a kernel that writes nothing but evicts an L2's worth
// of lines causes no DRAM writes; after a memset (the old flush) it writes dirty lines back.
// Never run on a GPU yet: thresholds (1 MiB; a quarter of the L2) are first guesses.
TEST(Device, L2FlushLeavesNoDirtyLinesForTheTimedRun) {
  BRICKDL_REQUIRE_GPU();
  if (!CuptiProfiler::is_supported())
    GTEST_SKIP() << "built without CUPTI";
  FlushCheck c;
  try {
    c = check_l2_flush(0);
  } catch (const CudaError& e) {
    GTEST_SKIP() << "the profiler gave no counters (restricted to administrators?): " << e.what();
  }
  std::cout << "L2 flush check: DRAM bytes written after the flush " << c.after_flush_write_bytes
            << ", after a memset " << c.after_memset_write_bytes << " (L2 " << c.l2_bytes
            << " bytes)\n";
  EXPECT_LT(c.after_flush_write_bytes, 1 << 20);
  // The check can see dirty lines at all (else the first bound proves nothing).
  EXPECT_GT(c.after_memset_write_bytes, 0.25 * static_cast<double>(c.l2_bytes));
}

TEST(Device, MeasurerTimesValidatesAndCountsMemoClaims) {
  BRICKDL_REQUIRE_GPU();
  const Graph g = chain3d(24);
  const Candidate c = make({1, 3}, Strategy::kMemoized, {8, 8, 8, 0}, 128);
  auto m = make_cuda_measurer();
  EXPECT_EQ(m->backend(), "cuda");
  EXPECT_EQ(m->target().rfind("gpu:", 0), 0u) << m->target();
  EXPECT_NE(m->target().find("/sm"), std::string::npos) << m->target();
  MeasureOptions o;
  o.repetitions = 5;
  o.collect_counters = false;
  const MeasureResult r = m->measure(g, c, o);
  ASSERT_EQ(r.status, MeasureStatus::kOk) << r.error;
  EXPECT_EQ(r.samples_ms.size(), 5u);
  EXPECT_GT(r.median_ms, 0);
  EXPECT_LE(r.min_ms, r.median_ms);
  EXPECT_LE(r.max_rel_error, 1e-4);
  // 24^3 in 8^3 bricks: 27 bricks per layer; both intermediate layers entirely needed.
  EXPECT_EQ(r.counters.at("memo_claims"), 2 * 27);
  EXPECT_EQ(r.counters.at("bricks_computed"), 3 * 27);
  EXPECT_EQ(r.counters.at("memo_lookups"), r.counters.at("memo_claims") +
                                               r.counters.at("memo_hits") +
                                               r.counters.at("memo_conflicts"));
}

TEST(Device, CuptiCountersArePresentAndPlausible) {
  BRICKDL_REQUIRE_GPU();
  if (!CuptiProfiler::is_supported())
    GTEST_SKIP() << "built without CUPTI";
  const Graph g = bottleneck(4, 56);
  auto m = make_cuda_measurer();
  MeasureOptions o;
  o.repetitions = 3;
  for (Strategy s : {Strategy::kPadded, Strategy::kMemoized}) {
    const Candidate c = make({1, 4}, s, {1, 8, 8, 0}, 256);
    SCOPED_TRACE(c.config_str());
    const MeasureResult r = m->measure(g, c, o);
    ASSERT_EQ(r.status, MeasureStatus::kOk) << r.error;
    if (!r.counters.count("dram__bytes_read.sum"))
      GTEST_SKIP() << "the profiler gave no counters (restricted to administrators?)";
    const double in_bytes = 4.0 * 64 * 56 * 56 * 4, out_bytes = in_bytes;
    // Cold runs (L2 flushed): the input comes from DRAM, the output goes there, and no
    // intermediate should (L2 holds memoized bricks; padded keeps them on chip).
    EXPECT_GE(r.counters.at("dram__bytes_read.sum"), 0.9 * in_bytes);
    EXPECT_LE(r.counters.at("dram__bytes_read.sum"), 3.0 * (in_bytes + out_bytes));
    EXPECT_GE(r.counters.at("dram__bytes_write.sum"), 0.5 * out_bytes);
    EXPECT_GE(r.counters.at("lts__t_bytes.sum"), r.counters.at("dram__bytes_read.sum"));
    EXPECT_GT(r.counters.at("sm__cycles_elapsed.avg"), 0);
    EXPECT_GT(r.counters.at("gpu__time_duration.sum"), 0);
    // Thread-level FFMAs: at least one per useful MAC, at most the tile waste on top.
    const Data d = make_data(g, c.group);
    const auto cpu = kernels::execute_group(g, c, d.ptrs, d.weights);
    ASSERT_TRUE(cpu.supported);
    const double macs = static_cast<double>(cpu.counters.flops) / 2;
    EXPECT_GE(r.counters.at("smsp__sass_thread_inst_executed_op_ffma_pred_on.sum"), macs);
    EXPECT_LE(r.counters.at("smsp__sass_thread_inst_executed_op_ffma_pred_on.sum"), 1.6 * macs);
    if (s == Strategy::kMemoized) {
      // A claim is a CAS and a publish an exchange: two global atomics per computed brick.
      EXPECT_GE(r.counters.at("l1tex__t_requests_pipe_lsu_mem_global_op_atom.sum"),
                2 * r.counters.at("memo_claims"));
    }
  }
}

TEST(Device, MeasurerStatusesForFailingCandidates) {
  BRICKDL_REQUIRE_GPU();
  const Graph g = chain3d(16);
  const Candidate good = make({1, 3}, Strategy::kPadded, {4, 4, 4, 0});
  MeasureOptions o;
  o.repetitions = 2;
  o.collect_counters = false;

  CudaMeasurerOptions wrong;
  wrong.edit_plan = [](KernelPlan& p) {
    const std::string from = "g.layers[2].act = 1;", to = "g.layers[2].act = 2;";
    const auto at = p.source.find(from);
    ASSERT_NE(at, std::string::npos);
    p.source.replace(at, from.size(), to);
  };
  {
    const MeasureResult r = make_cuda_measurer(wrong)->measure(g, good, o);
    EXPECT_EQ(r.status, MeasureStatus::kWrongResult) << r.error;
    EXPECT_NE(r.error.find("differ from the reference"), std::string::npos) << r.error;
    EXPECT_TRUE(r.samples_ms.empty());
  }
  CudaMeasurerOptions broken;
  broken.edit_plan = [](KernelPlan& p) { p.source += "\n#error planted_compile_error\n"; };
  {
    const MeasureResult r = make_cuda_measurer(broken)->measure(g, good, o);
    EXPECT_EQ(r.status, MeasureStatus::kCompileError);
    EXPECT_NE(r.error.find("planted_compile_error"), std::string::npos) << r.error;
  }
  CudaMeasurerOptions endless; // runs ~2 s while the measurer allows 0.3 s
  endless.edit_plan = [](KernelPlan& p) {
    p.source = "#include \"kernels.cuh\"\n"
               "extern \"C\" __global__ void brickdl_group(const brickdl::dev::KernelArgs a) {\n"
               "  const long long t0 = clock64();\n"
               "  while (clock64() - t0 < 4000000000ll) {}\n"
               "  if (a.out && threadIdx.x == 0 && blockIdx.x == 0) a.out[0] = 0.f;\n"
               "}\n";
  };
  auto m = make_cuda_measurer(endless);
  {
    MeasureOptions quick = o;
    quick.timeout_s = 0.3;
    const MeasureResult r = m->measure(g, good, quick);
    EXPECT_EQ(r.status, MeasureStatus::kTimeout) << r.error;
    EXPECT_EQ(r.counters.at("device_reset"), 1); // still running after its 0.3 s of grace
  }
  // Unsupported, then a good candidate on a measurer that just recovered from failures.
  GraphBuilder cb("cat", TensorShape{1, 3, 1, 8, 8, 2});
  cb.concat({cb.conv2d(cb.input(), 4, 3, 1, 1), cb.input()});
  const Graph cat = fuse_for_inference(cb.build());
  auto ok = make_cuda_measurer();
  EXPECT_EQ(ok->measure(cat, make({1, 2}, Strategy::kPadded, {1, 4, 4, 0}), o).status,
            MeasureStatus::kUnsupported);
  const MeasureResult r = ok->measure(g, good, o);
  EXPECT_EQ(r.status, MeasureStatus::kOk) << r.error;
}

// One measurer through failures that do and do not need a device reset (statuses.h): a
// cooperative memoized time-out (the kernel set its flag and returned) and a kernel that
// outlives its 0.1 s deadline but finishes within its grace period (1 s) keep the device; an
// illegal address (sticky) resets it; each time the next good candidate measures fine.
TEST(Device, MeasurerResetsTheDeviceOnlyAfterStickyErrors) {
  BRICKDL_REQUIRE_GPU();
  const Graph g = chain3d(16);
  const Candidate good = make({1, 3}, Strategy::kPadded, {4, 4, 4, 0});
  const std::string head =
      "#include \"kernels.cuh\"\n"
      "extern \"C\" __global__ void brickdl_group(const brickdl::dev::KernelArgs a) {\n";
  const std::map<std::string, std::string> planted = {
      {"cooperative", head + "  if (threadIdx.x == 0 && blockIdx.x == 0) *a.error = 1;\n}\n"},
      {"slow", head + "  const long long t0 = clock64();\n"
                      "  while (clock64() - t0 < 400000000ll) {}\n}\n"}, // ~0.2 s
      {"sticky", head + "  *reinterpret_cast<volatile int*>(16) = 1;\n}\n"},
  };
  auto plant = std::make_shared<std::string>();
  CudaMeasurerOptions opt;
  opt.edit_plan = [plant, planted](KernelPlan& p) {
    if (!plant->empty())
      p.source = planted.at(*plant);
  };
  auto m = make_cuda_measurer(opt);
  MeasureOptions o;
  o.repetitions = 2;
  o.collect_counters = false;
  const struct {
    const char* plant;
    double timeout_s;
    MeasureStatus status;
    double reset;
  } cases[] = {{"cooperative", 60, MeasureStatus::kTimeout, 0},
               {"slow", 0.1, MeasureStatus::kTimeout, 0},
               {"sticky", 60, MeasureStatus::kLaunchError, 1}};
  for (const auto& c : cases) {
    SCOPED_TRACE(c.plant);
    *plant = c.plant;
    MeasureOptions quick = o;
    quick.timeout_s = c.timeout_s;
    const MeasureResult bad = m->measure(g, good, quick);
    EXPECT_EQ(bad.status, c.status) << bad.error;
    EXPECT_EQ(bad.counters.at("device_reset"), c.reset);
    plant->clear();
    const MeasureResult r = m->measure(g, good, o);
    EXPECT_EQ(r.status, MeasureStatus::kOk) << r.error;
  }
}

// Static shared memory counts toward the 48 KiB without opt-in: 44 KiB static + 8 KiB dynamic
// launches (the kernel is planted, so it is a wrong result, not a launch error); beyond the
// device's maximum it is unsupported, naming both numbers.
TEST(Device, StaticSharedMemoryCountsTowardTheOptIn) {
  BRICKDL_REQUIRE_GPU();
  const Graph g = chain3d(16);
  const Candidate good = make({1, 3}, Strategy::kPadded, {4, 4, 4, 0});
  auto dynamic = std::make_shared<int>(8 * 1024);
  CudaMeasurerOptions opt;
  opt.edit_plan = [dynamic](KernelPlan& p) {
    p.source = "#include \"kernels.cuh\"\n"
               "extern \"C\" __global__ void brickdl_group(const brickdl::dev::KernelArgs a) {\n"
               "  __shared__ float fixed[11 * 1024];\n" // 44 KiB
               "  extern __shared__ float dyn[];\n"
               "  fixed[threadIdx.x] = threadIdx.x;\n"
               "  dyn[threadIdx.x] = fixed[threadIdx.x ^ 1];\n"
               "  __syncthreads();\n"
               "  if (a.out && threadIdx.x == 0 && blockIdx.x == 0) a.out[0] = dyn[1];\n"
               "}\n";
    for (KernelLaunch& k : p.launches)
      k.smem_bytes = *dynamic;
  };
  auto m = make_cuda_measurer(opt);
  MeasureOptions o;
  o.repetitions = 2;
  o.collect_counters = false;
  const MeasureResult ran = m->measure(g, good, o);
  EXPECT_EQ(ran.status, MeasureStatus::kWrongResult) << ran.error;
  *dynamic = 1 << 20;
  const MeasureResult refused = m->measure(g, good, o);
  EXPECT_EQ(refused.status, MeasureStatus::kUnsupported) << refused.error;
  EXPECT_NE(refused.error.find("bytes of static"), std::string::npos) << refused.error;
  EXPECT_NE(refused.error.find("1048576 bytes of dynamic"), std::string::npos) << refused.error;
}

} // namespace
} // namespace brickdl::cuda
