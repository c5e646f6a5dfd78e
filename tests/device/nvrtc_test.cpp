// NVRTC compiles every kind of generated kernel for sm_80 and sm_90 (no GPU needed; skipped
// only when brickdl was built without CUDA).
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <regex>
#include <sstream>
#include <thread>

#include "core/graph_builder.h"
#include "kernels/cuda/codegen.h"
#include "kernels/cuda/nvrtc_compiler.h"
#include "kernels/cuda/statuses.h"
#include "tests/device/device_cases.h"
#include "tests/device/test_graphs.h"

namespace brickdl::cuda {
namespace {

Candidate make(Group g, Strategy s, BrickShape b, int threads = 256) {
  return test_support::make_candidate(g, s, b, threads);
}

Graph bottleneck(DType t = DType::kF32) {
  GraphBuilder b("bottleneck", TensorShape{8, 64, 1, 56, 56, 2}, t);
  const int x = b.input();
  int y = b.relu(b.batch_norm(b.conv2d(x, 64, 1, 1, 0, 1, 1, false, "conv1")));
  y = b.relu(b.batch_norm(b.conv2d(y, 64, 3, 1, 1, 1, 1, false, "conv2")));
  y = b.batch_norm(b.conv2d(y, 256, 1, 1, 0, 1, 1, false, "conv3"));
  const int d = b.batch_norm(b.conv2d(x, 256, 1, 1, 0, 1, 1, false, "downsample"));
  b.relu(b.add(y, d, "add"));
  return fuse_for_inference(b.build());
}

Graph chain3d() {
  GraphBuilder b("chain3d", TensorShape{1, 3, 112, 112, 112, 3});
  int x = b.input();
  for (int i = 0; i < 3; ++i)
    x = b.relu(b.conv3d(x, 3, 3, 1, 1));
  x = b.max_pool(x, 2, 2);
  return fuse_for_inference(b.build());
}

// No descriptor copies in local memory (that costs kilobytes of stack and spills); ptxas may
// still spill a few bytes on its own. `log`: ptxas -v output.
void expect_small_stack_frames(const std::string& log) {
  EXPECT_LT(ptxas_max_stack_frame(log), kLargeStackFrameBytes) << log;
}

struct Job {
  std::string what, source, symbol;
  int arch;
  std::string error;
  std::shared_ptr<const CompiledModule> module;
};

// Every case for sm_80 and sm_90, on two compiler threads (NVRTC programs compile
// independently; the cache is shared).
std::vector<Job> compile_all(NvrtcCompiler& compiler,
                             const std::vector<std::pair<const Graph*, Candidate>>& cases,
                             const std::vector<int>& archs = {80, 90}) {
  std::vector<Job> jobs;
  for (const auto& [g, c] : cases)
    for (int arch : archs) {
      CodegenOptions co; // as the measurer plans for a device of that arch
      co.wgmma = wgmma_for(arch);
      const KernelPlan plan = plan_kernels(*g, c, co);
      jobs.push_back({std::string(dtype_name(g->dtype())) + " " + c.config_str() + " sm_" +
                          std::to_string(arch),
                      plan.source, plan.launches[0].symbol, arch, "", nullptr});
    }
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i; (i = next.fetch_add(1)) < jobs.size();) {
      try {
        jobs[i].module = compiler.compile(jobs[i].source, jobs[i].arch);
      } catch (const CompileError& e) {
        jobs[i].error = std::string(e.what()) + "\n" + e.log();
      }
    }
  };
  std::thread other(work);
  work();
  other.join();
  return jobs;
}

void expect_compiled(const Job& j) {
  SCOPED_TRACE(j.what);
  ASSERT_TRUE(j.module) << j.error;
  ASSERT_GT(j.module->cubin.size(), 4u);
  EXPECT_EQ(j.module->cubin.substr(0, 4), std::string("\x7f"
                                                      "ELF",
                                                      4));
  EXPECT_NE(j.module->log.find(j.symbol), std::string::npos) << j.module->log; // ptxas -v
  expect_small_stack_frames(j.module->log);
  // No ptxas performance advisory (C75xx: C7515, C7520 wgmma serialized, ...) on any kernel:
  // the compiler keeps them apart, and the log itself has none either.
  EXPECT_TRUE(j.module->advisories.empty()) << j.module->advisories.front();
  EXPECT_FALSE(std::regex_search(j.module->log, std::regex("C75[0-9][0-9]"))) << j.module->log;
}

// bottleneck() in tf32, bf16 and fp16.
std::vector<Graph> tensor_core_bottlenecks() {
  std::vector<Graph> graphs;
  for (DType t : {DType::kTF32, DType::kBF16, DType::kF16})
    graphs.push_back(bottleneck(t));
  return graphs;
}

// Each candidate on each graph, graph by graph.
std::vector<std::pair<const Graph*, Candidate>> on_each(const std::vector<Graph>& graphs,
                                                        const std::vector<Candidate>& candidates) {
  std::vector<std::pair<const Graph*, Candidate>> cases;
  for (const Graph& g : graphs)
    for (const Candidate& c : candidates)
      cases.push_back({&g, c});
  return cases;
}

// Every case compiles for every arch within the compile-time budget.
void expect_compiled_in_budget(const std::vector<std::pair<const Graph*, Candidate>>& cases,
                               const std::vector<int>& archs) {
  NvrtcCompiler compiler;
  for (const Job& j : compile_all(compiler, cases, archs)) {
    expect_compiled(j);
    if (j.module)
      EXPECT_LT(j.module->compile_ms, 30000) << j.what; // generous: a shared 2-core machine
  }
}

TEST(Nvrtc, CompilesEveryKindOfKernelForSm80AndSm90) {
  if (!NvrtcCompiler::is_supported())
    GTEST_SKIP() << "built without CUDA";
  const Graph g2 = bottleneck();
  const Graph g3 = chain3d();
  const std::vector<std::pair<const Graph*, Candidate>> cases = {
      {&g2, make({1, 5}, Strategy::kPadded, {1, 8, 8, 0})},
      {&g2, make({1, 5}, Strategy::kMemoized, {1, 8, 8, 64}, 128)},
      {&g2, make({1, 5}, Strategy::kLayerwise, {1, 8, 8, 0})},
      {&g3, make({1, 4}, Strategy::kPadded, {1, 8, 8, 0})},
      {&g3, make({1, 4}, Strategy::kMemoized, {1, 16, 16, 0})},
  };
  NvrtcCompiler compiler;
  const std::vector<Job> jobs = compile_all(compiler, cases);
  for (const Job& j : jobs)
    expect_compiled(j);
  EXPECT_EQ(compiler.misses(), 10);
  // The same source again comes from the memory cache.
  const auto again = compiler.compile(plan_kernels(g2, cases[0].second).source, 90);
  EXPECT_TRUE(compiler.hits() == 1 && again->arch == 90);
}

// The tensor-core path (mma.sync TF32 m16n8k8, BF16 / FP16 m16n8k16, inline PTX) compiles for
// both architectures in every kernel kind, within the compile-time budget, with no large
// stack frames.
TEST(Nvrtc, CompilesTensorCoreKernelsInEveryPrecision) {
  if (!NvrtcCompiler::is_supported())
    GTEST_SKIP() << "built without CUDA";
  const std::vector<Graph> graphs = tensor_core_bottlenecks();
  auto cases = on_each(graphs, {make({1, 5}, Strategy::kPadded, {1, 8, 8, 0}),
                                make({1, 5}, Strategy::kMemoized, {1, 8, 8, 64}, 128)});
  cases.push_back({&graphs[0], make({1, 5}, Strategy::kLayerwise, {1, 8, 8, 0})});
  for (const auto& [g, c] : cases)
    EXPECT_EQ(plan_paths(plan_kernels(*g, c)).convs_fma, 0) << c.config_str(); // all MMA
  expect_compiled_in_budget(cases, {80, 90});
}

// The sm_90a path (wgmma.mma_async m64nNk8 TF32, m64nNk16 BF16 / FP16, A from registers, B
// through a shared-memory descriptor, inline PTX): ptxas accepts it for N = 8, 16 and 32 in every
// precision and kernel kind, without large stack frames; sm_80 plans of the same candidates keep
// mma.sync.
TEST(Nvrtc, CompilesWgmmaKernelsForSm90a) {
  if (!NvrtcCompiler::is_supported())
    GTEST_SKIP() << "built without CUDA";
  const std::vector<Graph> graphs = tensor_core_bottlenecks();
  auto cases = on_each(graphs, {make({1, 5}, Strategy::kPadded, {1, 8, 8, 0}),         // n32 tiles
                                make({1, 5}, Strategy::kMemoized, {1, 8, 8, 16}, 128), // n16
                                make({1, 5}, Strategy::kPadded, {1, 4, 4, 8}, 512)});  // n8 (cb 8)
  // ResNet-50's layer4 bottleneck (512 channels streamed in chunks, 7x7): one tile per
  // warpgroup, the accumulators in registers across the passes (tf32).
  GraphBuilder b("layer4", TensorShape{8, 2048, 1, 7, 7, 2}, DType::kTF32);
  const int x = b.input();
  int y = b.relu(b.batch_norm(b.conv2d(x, 512, 1, 1, 0, 1, 1, false, "conv1")));
  y = b.relu(b.batch_norm(b.conv2d(y, 512, 3, 1, 1, 1, 1, false, "conv2")));
  b.relu(b.add(b.batch_norm(b.conv2d(y, 2048, 1, 1, 0, 1, 1, false, "conv3")), x, "add"));
  const Graph layer4 = fuse_for_inference(b.build());
  const Candidate resident = make({2, 4}, Strategy::kMemoized, {1, 8, 8, 64, 2});
  cases.push_back({&layer4, resident});
  CodegenOptions co;
  co.wgmma = true;
  EXPECT_EQ(plan_kernels(layer4, resident, co).launches[0].desc.layers[0].acc_regs, 1);
  for (const auto& [g, c] : cases) {
    const PlanPaths paths = plan_paths(plan_kernels(*g, c, co));
    EXPECT_GT(paths.convs_wgmma, 0) << c.config_str();
    EXPECT_EQ(paths.convs_wgmma, paths.convs_mma) << c.config_str();
    EXPECT_EQ(paths.convs_fma, 0) << c.config_str();
    EXPECT_EQ(plan_paths(plan_kernels(*g, c)).convs_wgmma, 0) << c.config_str();
  }
  expect_compiled_in_budget(cases, {90});
}

// 16-bit global storage (bf16 / fp16: cvt.rn to store, exact widening to load, 16-bit
// __ldcg / __stcg for memoized bricks) on the FMA path too: a depthwise and a 3-channel conv
// cannot fill an n8 tile, so their packed 16-bit weights go through load_weights' vector loads.
TEST(Nvrtc, CompilesSixteenBitStorageOnBothConvPaths) {
  if (!NvrtcCompiler::is_supported())
    GTEST_SKIP() << "built without CUDA";
  std::vector<Graph> graphs;
  for (DType t : {DType::kBF16, DType::kF16}) {
    GraphBuilder b("narrow", TensorShape{2, 16, 1, 12, 12, 2}, t);
    int x = b.relu(b.conv2d(b.input(), 16, 3, 1, 1, 1, 16, true, "dw"));
    x = b.relu(b.conv2d(x, 16, 1, 1, 0, 1, 1, true, "pw"));
    b.conv2d(x, 3, 3, 1, 1, 1, 1, true, "narrow");
    graphs.push_back(fuse_for_inference(b.build()));
  }
  std::vector<std::pair<const Graph*, Candidate>> cases;
  for (const Graph& g : graphs) {
    cases.push_back({&g, make({1, g.size() - 1}, Strategy::kPadded, {1, 8, 8, 0})});
    cases.push_back({&g, make({1, g.size() - 1}, Strategy::kMemoized, {1, 4, 4, 0}, 128)});
  }
  for (const auto& [g, c] : cases) {
    const KernelPlan plan = plan_kernels(*g, c);
    const PlanPaths paths = plan_paths(plan);
    EXPECT_EQ(paths.storage, storage_of(g->dtype()));
    EXPECT_EQ(paths.convs_fma, 2) << c.config_str();
    EXPECT_EQ(paths.convs_mma, 1) << c.config_str();
  }
  NvrtcCompiler compiler;
  for (const Job& j : compile_all(compiler, cases))
    expect_compiled(j);
}

// Compiled, and no stack frame at all (expect_compiled allows a small one) on any kernel of the
// plan.
void expect_compiled_without_stack(const Job& j) {
  expect_compiled(j);
  if (!j.module)
    return;
  const std::string& log = j.module->log;
  int frames = 0;
  std::smatch m;
  for (auto it = log.cbegin();
       std::regex_search(it, log.cend(), m, std::regex("(\\d+) bytes stack frame"));
       it = m.suffix().first, ++frames)
    EXPECT_EQ(std::stoi(m[1]), 0) << j.what << "\n" << log;
  EXPECT_GT(frames, 0) << j.what << "\n" << log; // ptxas -v reported every kernel
}

// EfficientNet-B0's MBConv block (stage 2: 24 channels expanded to 144, 56x56, batch 8; SiLU
// after the expand and the depthwise conv, the residual add), merged whole: expand 1x1,
// depthwise 3x3 and project 1x1 in one kernel, in fp32, tf32 and bf16, padded, memoized and
// layer by layer, for sm_80 and sm_90 (wgmma, sm_90a): no C75xx advisory, no stack frame.
// Host emulation of the same block: EltwiseKernels.MbconvBlockMergedInEveryPrecision.
TEST(Nvrtc, CompilesMergedMbconvBlocks) {
  if (!NvrtcCompiler::is_supported())
    GTEST_SKIP() << "built without CUDA";
  std::vector<Graph> graphs;
  for (DType t : {DType::kF32, DType::kTF32, DType::kBF16})
    graphs.push_back(test_support::mbconv_block(TensorShape{8, 24, 1, 56, 56, 2}, 6, t));
  const Group grp{graphs[0].find("expand"), graphs[0].find("add")};
  ASSERT_EQ(grp.size(), 4);
  const auto cases = on_each(graphs, {make(grp, Strategy::kPadded, {1, 8, 8, 0}),
                                      make(grp, Strategy::kMemoized, {1, 8, 8, 0}, 128),
                                      make(grp, Strategy::kLayerwise, {1, 8, 8, 0})});
  NvrtcCompiler compiler;
  for (const Job& j : compile_all(compiler, cases, {80, 90}))
    expect_compiled_without_stack(j);
}

// The same block with its squeeze-excitation (test_graphs.h mbconv_se_block), at the same size:
// the group before the SE's pool (expand .. dw) and the group after it (the multiply by the
// SE vector, which reads D and s from global memory, project, add), each padded, memoized and
// layer by layer, fp32 / tf32 / bf16, sm_80 and sm_90a: no C75xx advisory, no stack frame.
// Host emulation: EltwiseKernels.MbconvWithSqueezeExcitationInEveryPrecision.
TEST(Nvrtc, CompilesMergedMbconvBlocksWithSqueezeExcitation) {
  if (!NvrtcCompiler::is_supported())
    GTEST_SKIP() << "built without CUDA";
  std::vector<Graph> graphs;
  for (DType t : {DType::kF32, DType::kTF32, DType::kBF16})
    graphs.push_back(test_support::mbconv_se_block(TensorShape{8, 24, 1, 56, 56, 2}, 6, t));
  const Graph& g = graphs[0];
  std::vector<Candidate> candidates;
  for (const Group grp :
       {Group{g.find("expand"), g.find("dw")}, Group{g.find("se"), g.find("add")}}) {
    candidates.push_back(make(grp, Strategy::kPadded, {1, 8, 8, 0}));
    candidates.push_back(make(grp, Strategy::kMemoized, {1, 8, 8, 0}, 128));
    candidates.push_back(make(grp, Strategy::kLayerwise, {1, 8, 8, 0}));
  }
  const auto cases = on_each(graphs, candidates);
  NvrtcCompiler compiler;
  for (const Job& j : compile_all(compiler, cases, {80, 90}))
    expect_compiled_without_stack(j);
}

// Thread block cluster kernels (sm_90 only: barrier.cluster, mapa) compile
// on the FMA and the tensor-core path; ResNet-50's layer3-like block, whole 14x14 images.
TEST(Nvrtc, CompilesClusterKernelsForSm90) {
  if (!NvrtcCompiler::is_supported())
    GTEST_SKIP() << "built without CUDA";
  std::vector<Graph> graphs;
  for (DType t : {DType::kF32, DType::kTF32}) {
    GraphBuilder b("layer3", TensorShape{8, 1024, 1, 14, 14, 2}, t);
    const int x = b.input();
    int y = b.relu(b.batch_norm(b.conv2d(x, 256, 1, 1, 0, 1, 1, false, "conv1")));
    y = b.relu(b.batch_norm(b.conv2d(y, 256, 3, 1, 1, 1, 1, false, "conv2")));
    b.relu(b.add(b.batch_norm(b.conv2d(y, 1024, 1, 1, 0, 1, 1, false, "conv3")), x, "add"));
    graphs.push_back(fuse_for_inference(b.build()));
  }
  // 8- and 16-CTA clusters (16: non-portable; the same source, the dims are set at launch)
  const auto cases = on_each(graphs, {make({1, 4}, Strategy::kPadded, {1, 16, 16, 0, 1, 8}),
                                      make({1, 4}, Strategy::kPadded, {1, 16, 16, 0, 1, 16})});
  EXPECT_EQ(plan_paths(plan_kernels(graphs[1], cases[2].second)).convs_fma, 0); // all MMA
  for (const auto& [g, c] : cases)
    EXPECT_EQ(plan_kernels(*g, c).source.find("__cluster_dims__"), std::string::npos);
  expect_compiled_in_budget(cases, {90});
}

// The advisories are picked out of a ptxas log line by line: the line ptxas 13.0 printed for
// the wgmma kernels before A was converted ahead of wgmma.fence, and no other line.
TEST(Nvrtc, PtxasAdvisoriesAreTheC75LinesOfTheLog) {
  const std::string c7520 =
      "ptxas info    : (C7520) Potential Performance Loss: wgmma.mma_async instructions are "
      "serialized due to program dependence on compiler-inserted WG.AR in divergent path in the "
      "function 'brickdl_group'";
  const std::string log =
      "ptxas info    : Compiling entry function 'brickdl_group' for 'sm_90a'\n" + c7520 +
      "\nptxas info    : Used 168 registers (C7520 named, no paren)\n" +
      "ptxas info    : (C75x1) not a code\nptxas info    : (C7515) last";
  const std::vector<std::string> got = ptxas_advisories(log);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0], c7520);
  EXPECT_EQ(got[1], "ptxas info    : (C7515) last");
  EXPECT_TRUE(ptxas_advisories("ptxas info    : Used 40 registers\n").empty());
  EXPECT_TRUE(ptxas_advisories("").empty());
}

// The precompiling tools' report (report_ptxas_flags): a line per advisory naming the tool and the
// kernel, and their count, which makes the tools exit 1; a module without any reports nothing.
TEST(Nvrtc, AdvisoriesAreReportedPerKernelAndCounted) {
  CompiledModule m;
  m.advisories = {"ptxas info    : (C7520) serialized", "ptxas info    : (C7515) also"};
  std::ostringstream out;
  EXPECT_EQ(report_ptxas_flags(m, "brickdl-precompile", "a .. b padded 8x8/n2 t256", out), 2);
  EXPECT_EQ(out.str(), "brickdl-precompile: a .. b padded 8x8/n2 t256: ptxas advisory: ptxas info"
                       "    : (C7520) serialized\n"
                       "brickdl-precompile: a .. b padded 8x8/n2 t256: ptxas advisory: ptxas info"
                       "    : (C7515) also\n");
  std::ostringstream none;
  EXPECT_EQ(report_ptxas_flags(CompiledModule{}, "tool", "kernel", none), 0);
  EXPECT_EQ(none.str(), "");
  // A stack frame of 128 bytes or more is flagged too (the log of the bf16 kernel that had one).
  CompiledModule spilled;
  spilled.log = "ptxas info    : Function properties for brickdl_group\n"
                "    992 bytes stack frame, 2612 bytes spill stores, 8376 bytes spill loads\n";
  std::ostringstream stack;
  EXPECT_EQ(report_ptxas_flags(spilled, "tool", "kernel", stack), 1);
  EXPECT_EQ(stack.str(), "tool: kernel: ptxas: a 992-byte stack frame\n");
}

// The largest stack frame of a ptxas -v log, over every function; 0 when it names none.
TEST(Nvrtc, LargestStackFrameOfTheLog) {
  EXPECT_EQ(ptxas_max_stack_frame("    0 bytes stack frame, 0 bytes spill stores\n"
                                  "    40 bytes stack frame\n    8 bytes stack frame\n"),
            40);
  EXPECT_EQ(ptxas_max_stack_frame("ptxas info    : Used 40 registers\n"), 0);
  EXPECT_EQ(ptxas_max_stack_frame(""), 0);
  EXPECT_LT(ptxas_max_stack_frame("    127 bytes stack frame"), kLargeStackFrameBytes);
}

TEST(Nvrtc, BrokenSourceIsACompileErrorWithTheLog) {
  if (!NvrtcCompiler::is_supported())
    GTEST_SKIP() << "built without CUDA";
  NvrtcCompiler compiler;
  try {
    compiler.compile(
        "#include \"kernels.cuh\"\nextern \"C\" __global__ void k() { undefined_x(); }\n", 90);
    FAIL() << "accepted a broken source";
  } catch (const CompileError& e) {
    EXPECT_NE(e.log().find("undefined_x"), std::string::npos) << e.log();
  }
}

TEST(Nvrtc, DiskCacheServesASecondCompiler) {
  if (!NvrtcCompiler::is_supported())
    GTEST_SKIP() << "built without CUDA";
  const auto dir = std::filesystem::path(BRICKDL_BINARY_DIR) / "nvrtc_cache_test";
  std::filesystem::remove_all(dir);
  const std::string src = "extern \"C\" __global__ void k(float* p) { p[threadIdx.x] = 1.f; }\n";
  const auto first = NvrtcCompiler(dir.string()).compile(src, 80);
  EXPECT_FALSE(first->from_cache);
  const auto second = NvrtcCompiler(dir.string()).compile(src, 80);
  EXPECT_TRUE(second->from_cache);
  EXPECT_EQ(first->cubin, second->cubin);
  std::filesystem::remove_all(dir);
}

} // namespace
} // namespace brickdl::cuda
