#include "core/describe.h"

#include <algorithm>
#include <array>
#include <vector>

#include <fmt/format.h>

#include "core/candidate.h"
#include "core/zoo.h"

namespace brickdl {

namespace {

// "25,557,032": digits grouped by three, independent of the locale.
std::string with_commas(int64_t v) {
  std::string digits = std::to_string(v < 0 ? -v : v);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0)
      out += ',';
    out += digits[i];
  }
  return v < 0 ? "-" + out : out;
}

// Decimal units (1 KB = 1e3 bytes), as bandwidths are quoted.
std::string bytes_str(int64_t b) {
  const double x = static_cast<double>(b);
  if (b < 1000)
    return fmt::format("{} B", b);
  if (x < 1e6)
    return fmt::format("{:.1f} KB", x / 1e3);
  if (x < 1e9)
    return fmt::format("{:.1f} MB", x / 1e6);
  return fmt::format("{:.2f} GB", x / 1e9);
}

std::string epilogue_str(const Layer& l) {
  std::string s;
  if (l.bias && !l.bn_folded)
    s += " bias";
  if (l.bn_folded)
    s += " +bn";
  if (l.activation == Activation::kLeakyRelu)
    s += fmt::format(" +leaky_relu {:g}", l.leaky_slope);
  else if (l.activation == Activation::kClip)
    s += fmt::format(" +clip [{:g}, {:g}]", l.clip_min, l.clip_max);
  else if (l.activation != Activation::kNone)
    s += std::string(" +") + activation_name(l.activation);
  return s;
}

std::string inputs_str(const Layer& l) {
  if (l.inputs.empty())
    return "-";
  return fmt::format("{}", fmt::join(l.inputs, ","));
}

std::string gpu_str(const GpuSpec& g) {
  return fmt::format(
      "{}: {} SMs, DRAM {:g} GB/s {:g} GB, L2 {:g} MiB {:g} GB/s, smem {:g} KiB/SM "
      "{:g} KiB/block {:g} GB/s, {} threads/SM, {} registers/SM, FP32 {:g} TFLOPS (TF32 {:g}, "
      "BF16 {:g}, FP16 {:g}; mma.sync reaches {:g} of them, wgmma {:g}), clusters of up to {} "
      "CTAs, "
      "launch {:g} us, atomic {:g} ns",
      g.name, g.sm_count, g.dram_bandwidth_gbs, g.dram_gb, g.l2_bytes / (1024.0 * 1024.0),
      g.l2_bandwidth_gbs, g.smem_per_sm_bytes / 1024.0, g.smem_per_block_bytes / 1024.0,
      g.smem_bandwidth_gbs, g.max_threads_per_sm, g.registers_per_sm, g.fp32_tflops, g.tf32_tflops,
      g.bf16_tflops, g.fp16_tflops, g.mma_sync_fraction, g.wgmma_fraction, g.max_cluster,
      g.launch_overhead_us, g.atomic_ns);
}

std::string search_str(const SearchSpaceConfig& s) {
  std::vector<std::string> strategies;
  for (Strategy st : s.strategies)
    strategies.emplace_back(strategy_name(st));
  std::string out = fmt::format(
      "searcher {}; bricks {}; channel blocks {}; batch blocks {}; clusters {}; strategies {}; "
      "max group {}; threads {}",
      s.searcher, fmt::join(s.brick_sizes, ", "), fmt::join(s.channel_blocks, ", "),
      fmt::join(s.batch_blocks, ", "), fmt::join(s.clusters, ", "), fmt::join(strategies, ", "),
      s.max_group_len, fmt::join(s.threads, ", "));
  if (!s.brick_depths.empty()) // absent: cubes, as before the key existed
    out += fmt::format("; 3-D brick depths {}", fmt::join(s.brick_depths, ", "));
  if (s.searcher == "random")
    out += fmt::format("; {} samples", s.random_samples);
  if (!s.partitions.empty()) {
    std::vector<std::string> parts;
    for (const auto& p : s.partitions)
      parts.push_back(fmt::format("{}", fmt::join(p, "+")));
    out += fmt::format("; partitions {}", fmt::join(parts, ", "));
  }
  return out;
}

std::string measurement_str(const MeasurementConfig& m) {
  const MeasureOptions& o = m.options;
  std::string s = fmt::format("backend {}; warmup {}, repetitions {}, top-k {}, flush L2 {}, "
                              "timeout {:g} s, rtol {:g}",
                              m.backend, o.warmup, o.repetitions, m.top_k,
                              o.flush_l2 ? "yes" : "no", o.timeout_s, o.rtol);
  if (m.budget_s > 0)
    s += fmt::format(", budget {:g} s", m.budget_s);
  if (m.max_measurements > 0)
    s += fmt::format(", at most {} measurements", m.max_measurements);
  if (!m.plan_check)
    s += ", no plan check";
  if (!m.counters.empty())
    s += fmt::format(", counters {}", fmt::join(m.counters, ", "));
  return s;
}

// The calibration's summary, its notes, and what it shows but never applies (what failed,
// the reference values, the CUPTI metrics).
template <class Line> void describe_calibration(const AppliedCalibration& c, const Line& line) {
  line("calibration", c.summary() + " (" + c.given_by + " " + c.file + ")");
  for (const CalibratedField& f : c.fields)
    if (!f.how.empty())
      line("", f.key + ": " + f.how);
  for (const std::string& n : c.notes)
    line("", "note: " + n);
  for (const auto& [key, why] : c.source.failed)
    line("", "not measured: " + key + ": " + why);
  for (const CalibrationValue& v : c.source.reference)
    line("", fmt::format("reference (shown, not applied): {} {:g}{}", v.key, v.value,
                         v.how.empty() ? "" : " (" + v.how + ")"));
  if (!c.source.metrics.empty() || !c.source.unknown_metrics.empty())
    line("", fmt::format("CUPTI metrics (shown, not applied): {} read, {} unknown to CUPTI",
                         c.source.metrics.size(), c.source.unknown_metrics.size()));
}

// "a 1x8x16x16, b 1x16x8x8": each input or output by name (an output's own name, and its
// layer's when they differ) and shape.
std::string inputs_outputs_str(const Graph& g, const std::vector<int>& ids,
                               const std::vector<GraphOutput>& outputs) {
  std::vector<std::string> parts;
  for (size_t k = 0; k < ids.size(); ++k) {
    const Layer& l = g.layer(ids[k]);
    std::string name = l.name;
    if (!outputs.empty() && outputs[k].name != l.name)
      name = outputs[k].name + " (layer " + l.name + ")";
    parts.push_back(name + " " + l.out.str());
  }
  return fmt::format("{}", fmt::join(parts, ", "));
}

} // namespace

std::string describe_op(const Layer& l) {
  return op_name(l.op) + attribute_display(l) + epilogue_str(l);
}

void describe_graph(const Graph& graph, std::ostream& os) {
  struct Row {
    std::string id, name, op, inputs, shape, params, macs, bytes;
  };
  std::vector<Row> rows;
  rows.push_back({"id", "layer", "op", "inputs", "output", "params", "MACs", "out bytes"});
  for (const auto& l : graph.layers()) {
    rows.push_back({std::to_string(l.id), l.name, describe_op(l), inputs_str(l), l.out.str(),
                    with_commas(l.params), with_commas(l.macs),
                    bytes_str(graph.output_bytes(l.id))});
  }
  std::array<size_t, 8> width{};
  for (const auto& r : rows) {
    const std::array<const std::string*, 8> cells = {&r.id,    &r.name,   &r.op,   &r.inputs,
                                                     &r.shape, &r.params, &r.macs, &r.bytes};
    for (size_t i = 0; i < cells.size(); ++i)
      width[i] = std::max(width[i], cells[i]->size());
  }
  // Text columns left-aligned, numbers right-aligned, two spaces apart.
  for (size_t k = 0; k < rows.size(); ++k) {
    const Row& r = rows[k];
    os << fmt::format("{:>{}}  {:<{}}  {:<{}}  {:<{}}  {:<{}}  {:>{}}  {:>{}}  {:>{}}", r.id,
                      width[0], r.name, width[1], r.op, width[2], r.inputs, width[3], r.shape,
                      width[4], r.params, width[5], r.macs, width[6], r.bytes, width[7]);
    // No trailing blanks: the last column is right-aligned, so nothing to trim.
    os << '\n';
    if (k == 0) {
      size_t total = 2 * (width.size() - 1);
      for (size_t w : width)
        total += w;
      os << std::string(total, '-') << '\n';
    }
  }
  const int64_t params = graph.total_params();
  const int64_t macs = graph.total_macs();
  const double weight_bytes = static_cast<double>(params) * dtype_bytes(graph.dtype());
  os << fmt::format(
      "total: {} layers, {} params, {} MACs ({:.3f} GMACs, {:.3f} GFLOPs), activations "
      "{:.3f} MB, weights {:.3f} MB ({})\n",
      graph.size() - graph.num_inputs(), with_commas(params), with_commas(macs),
      static_cast<double>(macs) / 1e9, 2.0 * static_cast<double>(macs) / 1e9,
      static_cast<double>(graph.activation_bytes()) / 1e6, weight_bytes / 1e6,
      dtype_name(graph.dtype()));
  // A graph of one input (layer 0) and one output (the last layer) says nothing more.
  if (graph.num_inputs() > 1 || graph.outputs().size() > 1) {
    os << "inputs: " << inputs_outputs_str(graph, graph.inputs(), {}) << '\n';
    os << "outputs: " << inputs_outputs_str(graph, graph.outputs(), graph.output_refs()) << '\n';
  }
}

void describe_experiment(const ExperimentConfig& e, std::ostream& os) {
  const auto line = [&](const char* key, const std::string& value) {
    os << fmt::format("{:<12} {}\n", key, value);
  };
  line("experiment", e.file.empty() ? e.name : fmt::format("{} ({})", e.name, e.file));
  std::string model = e.model;
  if (e.model == "custom") {
    model += " (inline graph)";
  } else {
    for (const auto& z : zoo())
      if (z.name == e.model)
        model += ": " + z.description;
  }
  line("model", model);
  const Graph& g = e.graph;
  if (g.size() > 0) {
    if (g.num_inputs() == 1 && g.outputs().size() == 1)
      line("graph", fmt::format("{} layers, input {}, output {}", g.size() - 1,
                                g.input_shape().str(), g.layer(g.output()).out.str()));
    else
      line("graph", fmt::format("{} layers, inputs {}; outputs {}", g.size() - g.num_inputs(),
                                inputs_outputs_str(g, g.inputs(), {}),
                                inputs_outputs_str(g, g.outputs(), g.output_refs())));
  }
  line("batch", std::to_string(e.batch));
  line("precision", dtype_name(e.precision));
  line("target", gpu_str(e.gpu));
  if (!e.gpu.source.empty())
    line("", "source: " + e.gpu.source);
  if (e.calibration)
    describe_calibration(*e.calibration, line);
  line("search", search_str(e.search));
  for (const auto& s : e.search.subgraphs)
    line("", fmt::format("subgraph '{}': {} .. {}", s.name, s.first, s.last));
  line("measurement", measurement_str(e.measurement));
  line("seed", std::to_string(e.seed));
  line("database", e.database);
  line("output", e.output_dir);
  os << '\n';
  if (g.size() > 0)
    describe_graph(g, os);
}

} // namespace brickdl
