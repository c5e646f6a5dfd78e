// cuda_device_test_kernels: compiles ahead, without a GPU, the generated kernels of the device
// tests that compare kernels with a reference (device_cases.h), for the device of a named GPU
// spec, into the NVRTC disk cache the device bundle carries (scripts/device-bundle.sh). On a
// lent GPU the wgmma test then runs in seconds instead of spending a minute in NVRTC.
//
// Each case is planned with the options run_on_device uses on that device (codegen_for_device:
// the compute capability and the spec's opt-in shared memory), so the source, and with it the
// cache key (source, architecture, options, NVRTC version), is the one the test computes there.
//
//   cuda_device_test_kernels [--arch 90] [--spec H200] [--cache DIR] [--test NAME]...
//
// Prints one line per test (kernels compiled, already cached, refused, seconds). Exit status:
// 0 done; 1 a kernel failed to compile, drew a ptxas performance advisory (C75xx) or a stack
// frame of 128 bytes or more (named on stderr); 2 bad input; 3 internal error.
#include <iostream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "apps/run_tool.h"
#include "core/error.h"
#include "core/gpu_spec.h"
#include "kernels/cuda/codegen.h"
#include "kernels/cuda/nvrtc_compiler.h"
#include "kernels/cuda/statuses.h"
#include "tests/device/device_cases.h"

namespace {

using namespace brickdl;
using cuda::test_support::DeviceCase;
using cuda::test_support::DeviceCaseSet;

struct Options {
  int arch = 90; // the device's compute capability, major·10 + minor
  std::string spec = "H200";
  std::string cache = cuda::default_cache_dir();
  std::vector<std::string> tests; // empty: every set of device_case_sets()
};

std::vector<DeviceCaseSet> chosen_sets(const Options& o) {
  const auto& all = cuda::test_support::device_case_sets();
  if (o.tests.empty())
    return all;
  std::vector<DeviceCaseSet> out;
  for (const std::string& name : o.tests) {
    bool found = false;
    std::string known;
    for (const DeviceCaseSet& s : all) {
      known += (known.empty() ? "" : ", ") + std::string(s.test);
      if (name == s.test) {
        out.push_back(s);
        found = true;
      }
    }
    if (!found)
      throw UserError("--test: no device test '" + name +
                      "' compiles kernels ahead (known: " + known + ")");
  }
  return out;
}

int run(const Options& o) {
  if (!cuda::NvrtcCompiler::is_supported())
    throw UserError("brickdl was built without NVRTC (BRICKDL_ENABLE_CUDA): nothing to compile");
  if (o.cache.empty())
    throw UserError("--cache: no cache folder (set it, or BRICKDL_CACHE_DIR or HOME)");
  const GpuSpec* spec = find_gpu_spec(o.spec);
  if (!spec)
    throw UserError("--spec: unknown GPU spec '" + o.spec + "'");
  const int cc = o.arch;
  const cuda::CodegenOptions co =
      cuda::codegen_for_device(cc, static_cast<int64_t>(spec->smem_per_block_bytes));
  cuda::NvrtcCompiler nvrtc(o.cache);
  int failed_total = 0;
  for (const DeviceCaseSet& set : chosen_sets(o)) {
    int compiled = 0, cached = 0, refused = 0, failed = 0, flagged = 0;
    double ms = 0;
    for (const DeviceCase& k : set.cases()) {
      try {
        const cuda::KernelPlan plan = cuda::plan_kernels(k.graph, k.candidate, co);
        const int64_t hits = nvrtc.hits();
        const auto module = nvrtc.compile(plan.source, cc);
        if (nvrtc.hits() > hits) {
          ++cached;
        } else {
          ++compiled;
          ms += module->compile_ms;
          const std::string what = std::string(set.test) + " " + k.label;
          if (cuda::report_ptxas_flags(*module, "cuda_device_test_kernels", what, std::cerr) > 0)
            ++flagged;
        }
      } catch (const cuda::CompileError& e) {
        ++failed;
        std::cerr << "cuda_device_test_kernels: " << set.test << " " << k.label << ": " << e.what()
                  << "\n";
      } catch (const cuda::Unsupported&) {
        ++refused; // the test meets the same refusal on the device, where it fails
      }
    }
    fmt::print("cuda_device_test_kernels: {} ({}, sm_{}): {} compiled in {:.1f} s, {} already "
               "cached, {} refused by the code generator, {} failed to compile, {} flagged "
               "by ptxas\n",
               set.test, spec->name, cc, compiled, ms / 1e3, cached, refused, failed, flagged);
    failed_total += failed + flagged;
  }
  fmt::print("cuda_device_test_kernels: cache {} (NVRTC {})\n", o.cache,
             cuda::NvrtcCompiler::version());
  return failed_total ? 1 : 0;
}

} // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "cuda_device_test_kernels: compile ahead, without a GPU, the generated kernels of "
      "the device tests that compare kernels with a reference, for a GPU spec's device, "
      "into the NVRTC disk cache the device bundle carries. Exit 1 if a kernel failed "
      "to compile or drew a ptxas performance advisory (C75xx) or a stack frame of 128+ bytes."};
  Options o;
  app.add_option("--arch", o.arch, "the device's compute capability: 90 for sm_90 (default)")
      ->check(CLI::Range(50, 200));
  app.add_option("--spec", o.spec,
                 "the device's GPU spec: its opt-in shared memory (default H200)");
  app.add_option("--cache", o.cache,
                 "cache folder (default: BRICKDL_CACHE_DIR, else ~/.cache/brickdl)");
  app.add_option("--test", o.tests, "only this test's kernels (its gtest name; repeatable)");
  return run_tool("cuda_device_test_kernels", app, argc, argv, [&] { return run(o); });
}
