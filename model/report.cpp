#include "model/report.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/describe.h"
#include "model/baseline.h"

namespace brickdl::model {

namespace {

std::string clip_text(const std::string& s, size_t width) {
  if (s.size() <= width)
    return s;
  return s.substr(0, width - 1) + "~";
}

double ratio(double a, double b) {
  return b > 0 ? a / b : 0.0;
}

} // namespace

void describe_model(const Graph& fused, const GpuSpec& gpu, std::ostream& os) {
  describe_model(fused, CostModel(gpu), os);
}

void describe_model(const Graph& fused, const CostModel& model, std::ostream& os) {
  const Baseline b = layerwise_baseline(model, fused);
  const GpuSpec& gpu = model.gpu();
  os << fmt::format("Model report: {} ({}, batch {}) on {} [{}]\n", fused.name(),
                    dtype_name(fused.dtype()), fused.batch(), gpu.name, CostModel::version());
  os << "Layerwise baseline: one library kernel per layer, each predicted alone with cold "
        "inputs (as the search's single-layer groups).\nLower bound: the layer's inputs, "
        "weights and output moved once at peak DRAM bandwidth, its FLOPs at peak rate.\n";
  os << fmt::format("{:>4}  {:<18} {:<26} {:<18} {:>10} {:>10} {:>10} {:>10} {:>7} {:>7}\n", "id",
                    "layer", "op", "output", "DRAM MB", "time us", "LB MB", "LB us", "DRAM/LB",
                    "time/LB");
  for (const BaselineLayer& r : b.layers) {
    const Layer& l = fused.layer(r.layer);
    const Prediction& p = r.predicted;
    os << fmt::format("{:>4}  {:<18} {:<26} {:<18} {:>10.3f} {:>10.2f} {:>10.3f} {:>10.2f} "
                      "{:>7.2f} {:>7.2f}\n",
                      l.id, clip_text(l.name, 18), clip_text(describe_op(l), 26),
                      clip_text(l.out.str(), 18), p.dram_bytes / 1e6, p.time_ms * 1e3,
                      r.bound.dram_bytes / 1e6, r.bound.time_ms * 1e3,
                      ratio(p.dram_bytes, r.bound.dram_bytes), ratio(p.time_ms, r.bound.time_ms));
  }
  os << fmt::format("{:>4}  {:<64} {:>10.3f} {:>10.2f} {:>10.3f} {:>10.2f} {:>7.2f} {:>7.2f}\n",
                    "sum", fmt::format("{} layers, {} launches", b.layers.size(), b.total.launches),
                    b.total.dram_bytes / 1e6, b.total.time_ms * 1e3,
                    b.layer_bounds.dram_bytes / 1e6, b.layer_bounds.time_ms * 1e3,
                    ratio(b.total.dram_bytes, b.layer_bounds.dram_bytes),
                    ratio(b.total.time_ms, b.layer_bounds.time_ms));
  os << fmt::format(
      "Baseline time split: DRAM-bound {:.2f} us, L2-bound {:.2f} us, compute-bound {:.2f} us, "
      "launches {:.2f} us.\n",
      b.total.bound_dram_ms * 1e3, b.total.bound_l2_ms * 1e3, b.total.bound_compute_ms * 1e3,
      b.total.t_launch_ms * 1e3);
  os << fmt::format("The same kernels back to back, L2 kept between them: {:.3f} MB, {:.2f} us.\n",
                    b.warm.dram_bytes / 1e6, b.warm.time_ms * 1e3);
  os << fmt::format(
      "Whole model as one group (graph input, all weights, output once; every FLOP at peak): "
      "{:.3f} MB, {:.2f} us; the baseline is {:.2f}x its DRAM bytes and {:.2f}x its time.\n",
      b.model_bound.dram_bytes / 1e6, b.model_bound.time_ms * 1e3,
      ratio(b.total.dram_bytes, b.model_bound.dram_bytes),
      ratio(b.total.time_ms, b.model_bound.time_ms));
}

} // namespace brickdl::model
