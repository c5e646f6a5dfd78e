#pragma once
// What the host-emulation tests share: one group's random inputs and weights (seeded), its
// generated plan run under the emulator, and the reference ops' output for the same data.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "kernels/cuda/codegen.h"
#include "kernels/cuda/emulator.h"
#include "kernels/cuda/rounded_reference.h"
#include "kernels/merged_executor.h"
#include "kernels/validation.h"
#include "kernels/weights.h"

namespace brickdl::cuda::test_support {

struct EmulatedGroup {
  KernelPlan plan;
  std::vector<kernels::Tensor> inputs; // one per external input (KernelPlan::input_ids)
  kernels::ModelWeights weights;
  EmulatorResult emu;
  kernels::GroupResult reference; // the reference ops, layer by layer (fp32)
  std::vector<float> rounded;     // the same with the plan's roundings (rounded_reference.h)

  std::vector<const kernels::Tensor*> input_ptrs() const {
    std::vector<const kernels::Tensor*> p;
    for (const auto& t : inputs)
      p.push_back(&t);
    return p;
  }
};

inline EmulatedGroup emulate_group(const Graph& g, const Candidate& c, const EmulatorOptions& eo,
                                   uint64_t seed, const CodegenOptions& co = {}) {
  EmulatedGroup r;
  r.plan = plan_kernels(g, c, co);
  std::vector<const float*> raw;
  for (int id : r.plan.input_ids)
    r.inputs.push_back(kernels::random_tensor(g.layer(id).out, seed, static_cast<uint64_t>(id)));
  for (const auto& t : r.inputs)
    raw.push_back(t.data());
  r.weights = kernels::make_weights(g, seed, c.group.first, c.group.last);
  std::vector<std::vector<float>> weights, biases;
  for (int id : r.plan.layer_ids) {
    weights.push_back(r.weights.at(id).weight);
    biases.push_back(r.weights.at(id).bias);
  }
  r.emu = emulate_plan(g, r.plan, raw, weights, biases, eo);
  Candidate lw = c;
  lw.strategy = Strategy::kLayerwise;
  lw.brick.cl = 1;
  r.reference = kernels::execute_group(g, lw, r.input_ptrs(), r.weights);
  r.rounded = rounded_reference(g, r.plan, r.input_ptrs(), r.weights);
  return r;
}

// An emulated group's output checked twice:
//  - against the reference with the plan's roundings, under rounded_tolerance: about one ulp
//    of what the kernels store, which a wrong activation, a dropped bias or a scaled output
//    exceeds (EmulatedChecks.* make those mistakes and see them fail);
//  - against the fp32 reference, under group_tolerance: the bound the measurers validate with
//    (kernels/validation.h), which must hold too;
// and not trivially so: the kernel's own output has a non-zero value.
struct EmulatedCheck {
  kernels::Comparison rounded, fp32;
  kernels::Tolerance rounded_tol, fp32_tol;
  bool nonzero = false;
};

inline EmulatedCheck check_emulated(const Graph& g, const EmulatedGroup& r) {
  EmulatedCheck c;
  const kernels::Tolerance def;
  c.rounded_tol = rounded_tolerance(g, r.plan);
  c.fp32_tol = kernels::group_tolerance(g, r.plan.candidate.group, def.atol, def.rtol);
  c.rounded = kernels::compare(r.emu.output, r.rounded, c.rounded_tol);
  c.fp32 = kernels::compare(r.emu.output, r.reference.output.values(), c.fp32_tol);
  for (float v : r.emu.output)
    c.nonzero = c.nonzero || (std::isfinite(v) && v != 0.f);
  return c;
}

// With BRICKDL_TEST_ERROR_TABLE=<file>, one tab-separated line per check is appended to the
// file: the test, `what`, the share of its bound the worst element used against either
// reference (Comparison::bound_used, rounded then fp32), and per reference the max relative
// error and its bounds (rounded: norm_rtol, rtol; fp32: norm_rtol). This is how the errors in
// results/kernels/rounding.md were gathered (scripts/rounding-report.py); without it, nothing is
// written.
inline void record_errors(const std::string& what, const EmulatedCheck& c) {
  const char* path = std::getenv("BRICKDL_TEST_ERROR_TABLE");
  if (path == nullptr || *path == 0)
    return;
  const ::testing::TestInfo* test = ::testing::UnitTest::GetInstance()->current_test_info();
  std::ofstream f(path, std::ios::app);
  f << (test != nullptr ? std::string(test->test_suite_name()) + "." + test->name() : "") << '\t'
    << what << '\t' << c.rounded.bound_used << '\t' << c.fp32.bound_used << '\t'
    << c.rounded.max_rel_error << '\t' << c.rounded_tol.norm_rtol << '\t' << c.rounded_tol.rtol
    << '\t' << c.fp32.max_rel_error << '\t' << c.fp32_tol.norm_rtol << '\n';
}

// check_emulated, asserted (the caller's SCOPED_TRACE says which case); `what` labels the
// recorded errors.
inline void expect_emulated_ok(const Graph& g, const EmulatedGroup& r, const std::string& what) {
  const EmulatedCheck c = check_emulated(g, r);
  EXPECT_TRUE(c.rounded.ok()) << "against the rounded reference: " << c.rounded.message;
  EXPECT_TRUE(c.fp32.ok()) << "against the fp32 reference: " << c.fp32.message;
  EXPECT_TRUE(c.nonzero) << "the kernel's output is all zeros (or not finite)";
  EXPECT_FALSE(r.emu.timed_out);
  record_errors(what, c);
}

} // namespace brickdl::cuda::test_support
