// What ptxas makes of the generated kernels, no GPU needed: registers, stack frame, spills,
// shared memory and NVRTC compile time per kernel, for one group of a zoo model in every
// strategy and precision.
//
//   kernel_report [model first last] [--batch N] [--brick B] [--cb C] [--nb N] [--cluster K]
//                 [--threads T] [--arch A]... [--precision P]... [--source DIR] [--mma-sync]
//
// --source DIR writes each plan's CUDA source to DIR/<strategy>-<precision>-sm<arch>.cu, to
// read what was compiled or to feed it to nvcc -cubin -I kernels/cuda/templates and a
// disassembler.
//
// Defaults: ResNet-50, batch 8, subgraph 1 of the paper's Fig 8 (layer1.0.conv1 ..
// layer1.0.conv3), 8x8 bricks, 256 threads, sm_80 and sm_90, fp32 / tf32 / bf16. Shared memory
// per block is the A100's for sm_80 and the H200's for sm_90.
// Compile times depend on the machine's load: run it alone.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <regex>

#include "core/gpu_spec.h"
#include "core/zoo.h"
#include "kernels/cuda/codegen.h"
#include "kernels/cuda/nvrtc_compiler.h"
#include "kernels/cuda/statuses.h"

namespace {

using namespace brickdl;

// Per plan: the worst kernel's registers, stack and spills, and its static shared memory.
struct PtxasInfo {
  int registers = -1, stack = -1, spill_stores = -1, spill_loads = -1, static_smem = 0;
};

// The largest value of `pattern`'s number over every kernel of the log; `fallback` if none.
int match_int(const std::string& log, const std::string& pattern, int fallback) {
  int v = fallback;
  const std::regex re(pattern);
  for (auto it = std::sregex_iterator(log.begin(), log.end(), re); it != std::sregex_iterator();
       ++it)
    v = std::max(v, std::stoi((*it)[1]));
  return v;
}

PtxasInfo parse_ptxas(const std::string& log) {
  PtxasInfo p;
  p.registers = match_int(log, "Used (\\d+) registers", -1);
  p.stack = match_int(log, "(\\d+) bytes stack frame", -1);
  p.spill_stores = match_int(log, "(\\d+) bytes spill stores", -1);
  p.spill_loads = match_int(log, "(\\d+) bytes spill loads", -1);
  p.static_smem = match_int(log, "(\\d+) bytes smem", 0);
  return p;
}

struct Options {
  std::string model = "resnet50", first = "layer1.0.conv1", last = "layer1.0.conv3";
  int batch = 8, brick = 8, threads = 256;
  int cb = 0, nb = 1; // channel block (0: all), batch block (images per unit)
  int cluster = 1;    // CTAs per unit (padded on sm_90 only)
  std::vector<int> archs = {80, 90};
  std::vector<std::string> precisions = {"fp32", "tf32", "bf16"};
  std::string source_dir; // --source: where the plans' sources go (empty: nowhere)
  bool mma_sync = false;  // --mma-sync: no wgmma on sm_90 (the warp-level path, to compare)
};

// Writes `source` to DIR/<strategy>-<precision>-sm<arch>.cu.
void write_source(const std::string& dir, const Graph& g, const Candidate& c, int arch,
                  const std::string& source) {
  const std::filesystem::path path =
      std::filesystem::path(dir) /
      fmt::format("{}-{}-sm{}.cu", strategy_name(c.strategy), dtype_name(g.dtype()), arch);
  std::ofstream out(path);
  out << source;
  if (!out)
    throw std::runtime_error("cannot write " + path.string());
}

void report_one(const Graph& g, const Candidate& c, int arch, const Options& o,
                cuda::NvrtcCompiler& nvrtc) {
  const std::string& source_dir = o.source_dir;
  const std::string what =
      fmt::format("{:<5} {:<26} sm_{}", dtype_name(g.dtype()), c.config_str(), arch);
  try {
    // The shared memory of the arch's GPU: what sizes memoized chunks (core/group.h
    // memoized_stream_chunk) and decides what fits, as when tuning for it.
    const GpuSpec& gpu = *find_gpu_spec(arch >= 90 ? "H200" : "A100-40GB");
    cuda::CodegenOptions co;
    co.max_smem_bytes =
        static_cast<int>(std::min<double>(co.max_smem_bytes, gpu.smem_per_block_bytes));
    co.max_cluster = cuda::max_cluster_for(arch);
    co.wgmma = cuda::wgmma_for(arch) && !o.mma_sync;
    const cuda::KernelPlan plan = cuda::plan_kernels(g, c, co);
    if (!source_dir.empty())
      write_source(source_dir, g, c, arch, plan.source);
    const auto module = nvrtc.compile(plan.source, arch);
    const PtxasInfo p = parse_ptxas(module->log);
    int64_t smem = 0;
    for (const auto& k : plan.launches)
      smem = std::max<int64_t>(smem, k.smem_bytes);
    const cuda::PlanPaths paths = cuda::plan_paths(plan);
    const int mma = paths.convs_mma, convs = paths.convs_mma + paths.convs_fma;
    fmt::print("{} {:>8} {:>5} {:>6} {:>6}/{:<6} {:>9} {:>6} {:>10.0f}\n", what,
               plan.launches.size(), p.registers, p.stack, p.spill_stores, p.spill_loads,
               smem + p.static_smem, fmt::format("{}/{}", mma, convs), module->compile_ms);
  } catch (const std::exception& e) {
    fmt::print("{} {}\n", what, e.what());
  }
}

} // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app("ptxas registers, spills, shared memory and NVRTC compile time per kernel");
  app.add_option("model", o.model, "zoo model");
  app.add_option("first", o.first, "first layer of the group");
  app.add_option("last", o.last, "last layer of the group");
  app.add_option("--batch", o.batch)->check(CLI::Range(1, 1024));
  app.add_option("--brick", o.brick, "square brick edge")->check(CLI::Range(1, 4096));
  app.add_option("--threads", o.threads)->check(CLI::Range(32, 1024));
  app.add_flag("--mma-sync", o.mma_sync,
               "sm_90 kernels on mma.sync instead of wgmma (what the tuner ran before sm_90a)");
  app.add_option("--cb", o.cb, "channel block (0: all channels)")->check(CLI::Range(0, 1 << 20));
  app.add_option("--nb", o.nb, "batch block (images per unit)")->check(CLI::Range(1, 1024));
  app.add_option("--cluster", o.cluster, "thread block cluster: CTAs per unit (sm_90, padded)")
      ->check(CLI::Range(1, kMaxCluster));
  app.add_option("--arch", o.archs, "sm_XX as XX");
  app.add_option("--precision", o.precisions)->check(CLI::IsMember(dtype_names()));
  app.add_option("--source", o.source_dir, "write each plan's CUDA source into this folder")
      ->check(CLI::ExistingDirectory);
  CLI11_PARSE(app, argc, argv);
  if (!cuda::NvrtcCompiler::is_supported()) {
    fmt::print(stderr, "kernel_report: built without CUDA (no NVRTC)\n");
    return 2;
  }
  try {
    cuda::NvrtcCompiler nvrtc;
    fmt::print("NVRTC {}; {} batch {}, {} .. {}\n", cuda::NvrtcCompiler::version(), o.model,
               o.batch, o.first, o.last);
    fmt::print("{:<5} {:<26} {:<5} {:>8} {:>5} {:>6} {:>13} {:>9} {:>6} {:>10}\n", "prec",
               "candidate", "arch", "kernels", "regs", "stack", "spill st/ld", "smem B", "mma",
               "compile ms");
    for (const std::string& name : o.precisions) {
      ZooOptions zo;
      zo.batch = o.batch;
      parse_dtype(name, &zo.dtype);
      const Graph g = fuse_for_inference(build_zoo_model(o.model, zo));
      const Group grp{g.find(o.first), g.find(o.last)};
      if (grp.first < 0 || grp.last < grp.first)
        throw std::runtime_error("no group " + o.first + " .. " + o.last + " in " + o.model);
      for (Strategy s : {Strategy::kPadded, Strategy::kMemoized, Strategy::kLayerwise}) {
        Candidate c;
        c.group = grp;
        c.strategy = s;
        if (o.cluster > 1 && s != Strategy::kPadded)
          continue; // clusters run padded units only
        c.brick = {1, o.brick, o.brick, o.cb, o.nb, o.cluster};
        c.threads = o.threads;
        for (int arch : o.archs)
          report_one(g, c, arch, o, nvrtc);
      }
    }
  } catch (const std::exception& e) {
    fmt::print(stderr, "kernel_report: {}\n", e.what());
    return 2;
  }
  return 0;
}
