// brickdl-precompile: compiles ahead, for a GPU architecture, the generated kernels that tuning
// an experiment with the cuda backend would compile on the GPU machine, into the NVRTC disk
// cache that machine then reads (BRICKDL_CACHE_DIR). No GPU is needed. A lent GPU's minutes
// then go to measuring, not compiling (the device bundle carries the cache).
//
// Which candidates: those the searchers measure first: every candidate of the experiment's
// named subgraphs and partitions' groups (all groups when it names neither), and the
// layerwise candidate of each of their layers (the baselines). A candidate the code generator
// refuses (too much shared memory, no template) is counted and skipped, as the tuner would
// record it. The cache key is the source, the architecture, the options and the NVRTC
// version: a machine with another NVRTC compiles afresh, nothing is wrong then.
//
// A kernel that ptxas compiles with a performance advisory (C75xx: wgmma serialized, ...) or a
// stack frame of 128 bytes or more (spills) is a defect of the templates: it is named on stderr
// and counted as a failure ("flagged by ptxas").
//
// Exit status: 0 done (refused candidates included); 1 a kernel failed to compile or was flagged
// by ptxas; 2 bad input; 3 internal error.
#include <iostream>
#include <set>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "apps/run_tool.h"
#include "core/error.h"
#include "core/experiment.h"
#include "core/graph.h"
#include "kernels/cuda/codegen.h"
#include "kernels/cuda/nvrtc_compiler.h"
#include "kernels/cuda/statuses.h"
#include "search/search_space.h"

namespace {

using namespace brickdl;

struct Options {
  std::vector<std::string> experiments;
  int arch = 90;
  std::string cache = cuda::default_cache_dir();
};

struct Tally {
  int compiled = 0, cached = 0, refused = 0, failed = 0;
  int flagged = 0; // by ptxas: an advisory (C75xx) or a large stack frame
  double compile_ms = 0;
};

// The groups whose candidates the searchers measure: subgraphs and partition groups, else all.
std::vector<int> measured_groups(const search::SearchSpace& space) {
  std::set<int> groups(space.subgraphs().begin(), space.subgraphs().end());
  for (const auto& p : space.partitions())
    groups.insert(p.begin(), p.end());
  if (groups.empty())
    for (size_t g = 0; g < space.groups().size(); ++g)
      groups.insert(static_cast<int>(g));
  return {groups.begin(), groups.end()};
}

// A candidate to compile and the group it is for ("layer1.0.conv1 .. layer1.0.relu_2").
struct Job {
  const search::GroupEntry* group;
  Candidate candidate;
};

// The candidates to compile: each measured group's, then its layers' layerwise baselines.
std::vector<Job> candidates(const search::SearchSpace& space) {
  std::vector<Job> out;
  std::set<int> baselines;
  for (int g : measured_groups(space)) {
    const search::GroupEntry& e = space.group(g);
    for (const Candidate& c : e.candidates)
      out.push_back({&e, c});
    for (int layer = e.group.first; layer <= e.group.last; ++layer)
      baselines.insert(space.singleton(layer));
  }
  for (int s : baselines) {
    if (s < 0)
      continue;
    const search::GroupEntry& e = space.group(s);
    if (e.layerwise >= 0)
      out.push_back({&e, e.candidates.at(static_cast<size_t>(e.layerwise))});
  }
  return out;
}

void compile_one(const Graph& g, const Job& job, const Options& o, const GpuSpec& spec,
                 cuda::NvrtcCompiler& nvrtc, Tally& t) {
  const Candidate& c = job.candidate;
  const std::string what = job.group->layer_names + " " + c.config_str();
  cuda::CodegenOptions codegen;
  codegen.max_smem_bytes =
      static_cast<int>(std::min<double>(codegen.max_smem_bytes, spec.smem_per_block_bytes));
  codegen.max_cluster = std::min(cuda::max_cluster_for(o.arch), spec.max_cluster);
  codegen.wgmma = cuda::wgmma_for(o.arch); // as the measurer on that device
  try {
    const cuda::KernelPlan plan = cuda::plan_kernels(g, c, codegen);
    const int64_t hits = nvrtc.hits();
    const auto module = nvrtc.compile(plan.source, o.arch);
    if (nvrtc.hits() > hits) {
      ++t.cached;
    } else {
      ++t.compiled;
      t.compile_ms += module->compile_ms;
      if (cuda::report_ptxas_flags(*module, "brickdl-precompile", what, std::cerr) > 0)
        ++t.flagged;
    }
  } catch (const cuda::CompileError& e) {
    ++t.failed;
    std::cerr << "brickdl-precompile: " << what << ": " << e.what() << "\n";
  } catch (const cuda::Unsupported&) {
    ++t.refused;
  }
}

int run(const Options& o) {
  if (!cuda::NvrtcCompiler::is_supported())
    throw UserError("brickdl was built without NVRTC (BRICKDL_ENABLE_CUDA): nothing to compile");
  if (o.cache.empty())
    throw UserError("--cache: no cache folder (set it, or BRICKDL_CACHE_DIR or HOME)");
  cuda::NvrtcCompiler nvrtc(o.cache);
  int failed = 0;
  for (const std::string& path : o.experiments) {
    const ExperimentConfig exp = load_experiment(path);
    const Graph fused = fuse_for_inference(exp.graph);
    const search::SearchSpace space = search::SearchSpace::build(fused, exp.search, exp.file);
    Tally t;
    for (const Job& job : candidates(space))
      compile_one(fused, job, o, exp.gpu, nvrtc, t);
    fmt::print("brickdl-precompile: {} ({}, sm_{}): {} compiled in {:.1f} s, {} already cached, "
               "{} refused by the code generator, {} failed to compile, {} flagged "
               "by ptxas\n",
               path, dtype_name(fused.dtype()), o.arch, t.compiled, t.compile_ms / 1e3, t.cached,
               t.refused, t.failed, t.flagged);
    failed += t.failed + t.flagged;
  }
  fmt::print("brickdl-precompile: cache {} (NVRTC {})\n", o.cache, cuda::NvrtcCompiler::version());
  return failed ? 1 : 0;
}

} // namespace

int main(int argc, char** argv) {
  CLI::App app{"brickdl-precompile: compile ahead, for a GPU architecture, the generated kernels "
               "that tuning these experiments with the cuda backend would compile, into the "
               "NVRTC disk cache a GPU machine reads (no GPU needed). Exit 1 if a kernel "
               "failed to compile or drew a ptxas performance advisory (C75xx) or a stack frame of "
               "128+ bytes."};
  Options o;
  app.add_option("experiment", o.experiments, "experiment YAML files")->required();
  app.add_option("--arch", o.arch, "compute capability as a number: 90 for sm_90 (default)")
      ->check(CLI::Range(50, 200));
  app.add_option("--cache", o.cache,
                 "cache folder (default: BRICKDL_CACHE_DIR, else ~/.cache/brickdl)");
  return run_tool("brickdl-precompile", app, argc, argv, [&] { return run(o); });
}
