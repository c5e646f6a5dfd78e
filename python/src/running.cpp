// run() (bindings.h): a model executed on the CPU, layer by layer or by a plan's merged groups,
// as brickdl-run executes it (kernels/plan_executor.h): numpy arrays in and out, and with
// check the outputs against the layer-by-layer reference under brickdl-run --check's tolerance.
#include <chrono>

#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "core/error.h"
#include "kernels/npy.h"
#include "kernels/plan_executor.h"
#include "kernels/plan_io.h"
#include "kernels/reference.h"
#include "kernels/validation.h"
#include "kernels/weights.h"
#include "python/src/bindings.h"

namespace brickdl::python {

namespace {

using kernels::Tensor;
using FloatArray = nb::ndarray<const float, nb::c_contig, nb::device::cpu>;
using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// The runtime inputs: the given arrays (graph.inputs() order; shapes checked), or seeded random
// ones when none is given.
std::vector<Tensor> input_tensors(const Graph& g, const std::vector<FloatArray>& given,
                                  uint64_t seed) {
  std::vector<Tensor> inputs;
  for (size_t k = 0; k < g.inputs().size(); ++k) {
    const Layer& in = g.layer(g.inputs()[k]);
    if (given.empty()) {
      inputs.push_back(kernels::random_tensor(in.out, seed, k));
      continue;
    }
    const FloatArray& a = given[k];
    kernels::NpyArray array;
    for (size_t d = 0; d < a.ndim(); ++d)
      array.shape.push_back(static_cast<int64_t>(a.shape(d)));
    array.data.assign(a.data(), a.data() + a.size());
    inputs.push_back(kernels::npy_to_tensor(std::move(array), in.out, "brickdl.run inputs",
                                            "input '" + in.name + "'"));
  }
  return inputs;
}

// The plan of a brickdl.Plan (its plan.json text) for `g`; a plan made for another batch,
// precision or workload is refused, as brickdl-run refuses it.
std::vector<Candidate> plan_for(const Graph& g, const std::string& plan_json) {
  if (plan_json.empty())
    return {};
  const std::string what = "the plan";
  std::vector<Candidate> plan = kernels::parse_plan_json(plan_json, what, g);
  const std::vector<std::string> mismatches =
      kernels::plan_mismatches(kernels::parse_plan_origin(plan_json, what), g, plan);
  if (!mismatches.empty())
    throw UserError("the plan does not fit this run: " + join_names(mismatches, "; ") +
                    "; run the model, batch, input size and precision it was made for");
  kernels::validate_plan(g, plan);
  return plan;
}

nb::object numpy_array(Tensor&& t) {
  const std::vector<int64_t> shape = kernels::npy_shape(t.shape());
  auto* values = new std::vector<float>(std::move(t.values()));
  nb::capsule owner(values, [](void* p) noexcept { delete static_cast<std::vector<float>*>(p); });
  std::vector<size_t> dims(shape.begin(), shape.end());
  return nb::cast(nb::ndarray<nb::numpy, float>(values->data(), dims.size(), dims.data(), owner));
}

// The outputs against the layer-by-layer reference, one entry per output (brickdl-run --check).
nlohmann::json check(const Graph& g, const std::vector<Tensor>& inputs,
                     const kernels::ModelWeights& weights, const std::vector<Tensor>& outputs,
                     double* reference_ms) {
  const Clock::time_point t0 = Clock::now();
  const std::vector<Tensor> refs =
      kernels::run_graph_outputs(g, inputs, weights, kernels::Accumulation::kF32);
  *reference_ms = ms_since(t0);
  // Computed in fp32 whatever the graph's precision (kernels/validation.h).
  const kernels::Tolerance tol = kernels::fp32_group_tolerance(g, Group{0, g.size() - 1});
  nlohmann::json out = nlohmann::json::array();
  for (size_t k = 0; k < outputs.size(); ++k) {
    const kernels::Comparison c = kernels::compare(outputs[k].values(), refs[k].values(), tol);
    out.push_back({{"name", g.output_refs()[k].name},
                   {"passed", c.ok()},
                   {"max_abs_error", c.max_abs_error},
                   {"max_rel_error", c.max_rel_error},
                   {"elements_beyond_tolerance", c.bad},
                   {"undefined_elements", c.undefined},
                   {"atol", tol.atol},
                   {"rtol", tol.rtol},
                   {"norm_rtol", tol.norm_rtol},
                   {"summary", kernels::check_summary(c, tol)},
                   {"message", c.message}});
  }
  return out;
}

nb::dict run(nb::handle model, const std::string& plan_json, const std::vector<FloatArray>& given,
             uint64_t seed, int threads, bool with_check) {
  const Graph g = fuse_for_inference(experiment_config(model).graph);
  if (!given.empty() && given.size() != g.inputs().size())
    throw InternalError("run: the Python side passes one array per input");
  const Clock::time_point t0 = Clock::now();
  std::vector<Tensor> inputs = input_tensors(g, given, seed);
  const std::vector<Candidate> plan = plan_for(g, plan_json);
  nlohmann::json checks;
  double plan_ms = 0, reference_ms = -1;
  std::vector<Tensor> outputs;
  {
    nb::gil_scoped_release release;
    const kernels::ModelWeights weights = kernels::model_weights(g, seed);
    // As brickdl-run: layerwise layers through oneDNN, merged groups on the brick kernels;
    // plan_ms is the run itself (NCHW in to NCHW out), not the packing before it.
    kernels::PlanOptions po;
    po.exec.threads = threads;
    po.layerwise = kernels::LayerwiseEngine::kOnednn;
    kernels::PlanResult result = kernels::execute_plan(g, plan, inputs, weights, po);
    plan_ms = result.end_to_end_ms.empty() ? 0.0 : result.end_to_end_ms.front();
    if (with_check)
      checks = check(g, inputs, weights, result.outputs, &reference_ms);
    outputs = std::move(result.outputs);
  }
  nb::dict out;
  nb::list arrays;
  for (Tensor& t : outputs)
    arrays.append(numpy_array(std::move(t)));
  out["outputs"] = arrays;
  std::vector<std::string> names;
  for (const GraphOutput& o : g.output_refs())
    names.push_back(o.name);
  out["names"] = names;
  out["groups"] = plan.size();
  out["check"] = to_python(checks);
  out["plan_ms"] = plan_ms;
  out["reference_ms"] = reference_ms >= 0 ? nb::object(nb::float_(reference_ms)) : nb::none();
  out["total_ms"] = ms_since(t0);
  return out;
}

} // namespace

void bind_running(nb::module_& m) {
  m.def("run", &run, nb::arg("model"), nb::arg("plan_json"), nb::arg("inputs"), nb::arg("seed"),
        nb::arg("threads"), nb::arg("check"));
}

} // namespace brickdl::python
