#include "kernels/plan_executor.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>

#include "core/error.h"
#include "core/group.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/region_ops.h"
#include "kernels/strategies/strategies.h"

namespace brickdl::kernels {

void validate_plan(const Graph& g, const std::vector<Candidate>& plan) {
  std::vector<int> owner(static_cast<size_t>(g.size()), -1);
  for (size_t k = 0; k < plan.size(); ++k) {
    const Candidate& c = plan[k];
    const std::string where = "plan entry " + std::to_string(k) + " (layers " +
                              std::to_string(c.group.first) + ".." + std::to_string(c.group.last) +
                              ")";
    const int first = std::max(g.num_inputs(), 1);
    if (c.group.first < first || c.group.last >= g.size() || c.group.first > c.group.last)
      throw UserError(
          where + ": first and last must satisfy " + std::to_string(first) +
          " <= first <= last <= " + std::to_string(g.size() - 1) +
          (first > 1 ? " (layers 0.." + std::to_string(first - 1) + " are the inputs)" : ""));
    for (int id = c.group.first; id <= c.group.last; ++id) {
      if (owner[static_cast<size_t>(id)] >= 0)
        throw UserError(where + ": layer " + std::to_string(id) + " is already in plan entry " +
                        std::to_string(owner[static_cast<size_t>(id)]));
      owner[static_cast<size_t>(id)] = static_cast<int>(k);
    }
    const std::string why = unsupported_reason(g, c);
    if (!why.empty())
      throw UserError(where + ": " + why);
  }
}

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// The activations of a plan run in the blocked layout: each layer's output, freed after its
// last reader ran.
class Activations {
public:
  Activations(const Graph& g)
      : g_(g), out_(static_cast<size_t>(g.size())),
        last_reader_(static_cast<size_t>(g.size()), -1) {
    for (const Layer& l : g.layers())
      for (int p : l.inputs)
        last_reader_[static_cast<size_t>(p)] = l.id;
  }

  void set(int id, cpu::BlockedTensor t) { out_[static_cast<size_t>(id)] = std::move(t); }
  const cpu::BlockedTensor& at(int id) const { return out_[static_cast<size_t>(id)]; }
  int last_reader(int id) const { return last_reader_[static_cast<size_t>(id)]; }

  std::vector<const cpu::BlockedTensor*> inputs_of(const Group& group) const {
    std::vector<const cpu::BlockedTensor*> in;
    for (int p : group_external_inputs(g_, group))
      in.push_back(&out_[static_cast<size_t>(p)]);
    return in;
  }
  std::vector<const cpu::BlockedTensor*> inputs_of(const Layer& l) const {
    std::vector<const cpu::BlockedTensor*> in;
    for (int p : l.inputs)
      in.push_back(&out_[static_cast<size_t>(p)]);
    return in;
  }

  // Frees every input of layers [first, last] that no later layer reads and that is no graph
  // output.
  void release(int first, int last) {
    for (int id = first; id <= last; ++id)
      for (int p : g_.layer(id).inputs)
        if (last_reader_[static_cast<size_t>(p)] <= last && !g_.is_output(p))
          out_[static_cast<size_t>(p)] = cpu::BlockedTensor();
  }

private:
  const Graph& g_;
  std::vector<cpu::BlockedTensor> out_;
  std::vector<int> last_reader_;
};

// A merged plan entry, or a run of layers the plan runs layerwise.
struct Segment {
  int first = 0, last = 0;
  int entry = -1;                           // the merged plan entry, or -1
  std::unique_ptr<cpu::OnednnGroup> onednn; // layerwise through oneDNN
  std::vector<int> keep;                    // layerwise: layers read after the segment
};

std::vector<Segment> make_segments(const Graph& g, const std::vector<Candidate>& plan,
                                   const Activations& acts, const std::vector<int>& starts) {
  std::vector<bool> starts_here(static_cast<size_t>(g.size()), false);
  for (int id : starts) {
    BRICKDL_CHECK(id >= g.num_inputs() && id < g.size(),
                  "segment start " << id << " outside layers " << g.num_inputs() << ".."
                                   << g.size() - 1);
    starts_here[static_cast<size_t>(id)] = true;
  }
  std::vector<int> merged_at(static_cast<size_t>(g.size()), -1);
  for (size_t k = 0; k < plan.size(); ++k)
    if (plan[k].strategy != Strategy::kLayerwise)
      merged_at[static_cast<size_t>(plan[k].group.first)] = static_cast<int>(k);
  std::vector<Segment> segs;
  for (int id = g.num_inputs(); id < g.size();) {
    Segment s;
    const int k = merged_at[static_cast<size_t>(id)];
    if (k >= 0) {
      s.first = id;
      s.last = plan[static_cast<size_t>(k)].group.last;
      s.entry = k;
    } else {
      s.first = id;
      s.last = id;
      while (s.last + 1 < g.size() && merged_at[static_cast<size_t>(s.last + 1)] < 0 &&
             !starts_here[static_cast<size_t>(s.last + 1)])
        ++s.last;
      for (int i = s.first; i < s.last; ++i)
        if (acts.last_reader(i) > s.last || g.is_output(i))
          s.keep.push_back(i);
    }
    id = s.last + 1;
    segs.push_back(std::move(s));
  }
  return segs;
}

// Adds a group's counters to the plan totals: its per-layer brick counts (group-relative)
// land at the graph ids of its layers.
void add_to_totals(const ExecCounters& group_counters, const Group& group, ExecCounters& totals) {
  ExecCounters shifted = group_counters;
  shifted.bricks_per_layer.insert(shifted.bricks_per_layer.begin(),
                                  static_cast<size_t>(group.first), 0);
  totals.add(shifted);
}

std::string merged_engine(const Candidate& c) {
  return std::string(strategy_name(c.strategy)) + " " + c.brick.str();
}

// The whole plan: the state made once (packed parameters, oneDNN primitives) and one run.
class PlanRun {
public:
  PlanRun(const Graph& g, const std::vector<Candidate>& plan, const ModelWeights& weights,
          const PlanOptions& o)
      : g_(g), plan_(plan), o_(o), lanes_(o.exec.lanes > 0 ? o.exec.lanes : cpu::lanes()),
        threads_(o.exec.threads > 0 ? o.exec.threads : usable_cpus()), packed_(g, weights, lanes_),
        probe_(g), segments_(make_segments(g, plan, probe_, o.segment_starts)) {
    packed_.pack(g.num_inputs(), g.size() - 1);
    for (Segment& s : segments_)
      if (s.entry < 0 && o.layerwise == LayerwiseEngine::kOnednn)
        s.onednn = std::make_unique<cpu::OnednnGroup>(g, Group{s.first, s.last}, packed_, o.onednn,
                                                      s.keep);
  }

  // One run: NCHW inputs to NCHW outputs, times appended to `res`.
  std::vector<Tensor> run(const std::vector<Tensor>& inputs, PlanResult& res, bool timed,
                          const LayerProgress& progress) {
    const auto start = Clock::now();
    Activations acts(g_);
    for (int id = 0; id < g_.num_inputs(); ++id)
      acts.set(id, cpu::to_blocked(inputs[static_cast<size_t>(id)], lanes_));
    const double in_ms = ms_since(start);
    for (size_t k = 0; k < segments_.size(); ++k) {
      const auto t0 = Clock::now();
      run_segment(segments_[k], acts, res);
      if (timed)
        res.segments[k].samples_ms.push_back(ms_since(t0));
      if (progress)
        progress(segments_[k].last);
    }
    const auto t1 = Clock::now();
    std::vector<Tensor> outs;
    for (int id : g_.outputs())
      outs.push_back(cpu::from_blocked(acts.at(id)));
    if (timed) {
      res.convert_in_ms.push_back(in_ms);
      res.convert_out_ms.push_back(ms_since(t1));
      res.end_to_end_ms.push_back(ms_since(start));
    }
    return outs;
  }

  // Segments, counters and fallbacks of the plan (before the first run).
  void describe(PlanResult& res) const {
    res.lanes = lanes_;
    res.threads = threads_;
    res.group_counters.resize(plan_.size());
    res.counters.bricks_per_layer.assign(static_cast<size_t>(g_.size()), 0);
    for (const Segment& s : segments_) {
      SegmentTiming t;
      t.first = s.first;
      t.last = s.last;
      t.engine = s.entry >= 0 ? merged_engine(plan_[static_cast<size_t>(s.entry)])
                              : layerwise_engine_name(o_.layerwise);
      if (s.onednn) {
        t.steps = s.onednn->steps();
        res.fallbacks.insert(res.fallbacks.end(), s.onednn->fallbacks().begin(),
                             s.onednn->fallbacks().end());
      }
      res.segments.push_back(std::move(t));
    }
    if (o_.layerwise == LayerwiseEngine::kBricks)
      for (int id = g_.num_inputs(); id < g_.size(); ++id) {
        const std::string why = cpu::whole_layer_fallback(g_, g_.layer(id));
        if (!why.empty() && !in_merged_entry(id))
          res.fallbacks.push_back(g_.layer(id).name + ": " + why);
      }
  }

  // The counters of every layerwise plan entry and of each layer outside every entry (a
  // one-layer layerwise group), as a layer-by-layer execution moves them.
  void count_layerwise(PlanResult& res) const {
    std::vector<bool> in_entry(static_cast<size_t>(g_.size()), false);
    for (size_t k = 0; k < plan_.size(); ++k) {
      const Group& grp = plan_[k].group;
      for (int id = grp.first; id <= grp.last; ++id)
        in_entry[static_cast<size_t>(id)] = true;
      if (plan_[k].strategy != Strategy::kLayerwise)
        continue;
      res.group_counters[k] = layerwise_counters(grp);
      add_to_totals(res.group_counters[k], grp, res.counters);
    }
    for (int id = g_.num_inputs(); id < g_.size(); ++id)
      if (!in_entry[static_cast<size_t>(id)])
        add_to_totals(layerwise_counters(Group{id, id}), Group{id, id}, res.counters);
  }

  int threads() const { return threads_; }
  // A new result: its group counters are taken again from its first run.
  void restart_counts() { counted_.assign(plan_.size(), false); }

private:
  ExecCounters layerwise_counters(const Group& grp) const {
    ExecCounters k = detail::layerwise_counters(detail::GroupInfo(g_, grp));
    for (int id = grp.first; id <= grp.last; ++id)
      k.useful_flops += 2 * g_.layer(id).macs;
    return k;
  }

  bool in_merged_entry(int id) const {
    for (const Candidate& c : plan_)
      if (c.strategy != Strategy::kLayerwise && c.group.contains(id))
        return true;
    return false;
  }

  void run_segment(const Segment& s, Activations& acts, PlanResult& res) {
    if (s.entry >= 0) {
      const Candidate& c = plan_[static_cast<size_t>(s.entry)];
      ExecOptions eo = o_.exec;
      eo.threads = threads_;
      BlockedGroupResult r = execute_group(g_, c, acts.inputs_of(c.group), packed_, eo);
      BRICKDL_CHECK(r.supported, "layers " << g_.layer(c.group.first).name << " .. "
                                           << g_.layer(c.group.last).name << ": " << r.reason);
      if (!counted_[static_cast<size_t>(s.entry)]) {
        res.group_counters[static_cast<size_t>(s.entry)] = r.counters;
        add_to_totals(r.counters, c.group, res.counters);
        counted_[static_cast<size_t>(s.entry)] = true;
      }
      acts.set(c.group.last, std::move(r.output));
      for (auto& [id, t] : r.inner_outputs)
        acts.set(id, std::move(t));
    } else if (s.onednn) {
      BlockedGroupResult r = s.onednn->run(acts.inputs_of(Group{s.first, s.last}), threads_);
      acts.set(s.last, std::move(r.output));
      for (auto& [id, t] : r.inner_outputs)
        acts.set(id, std::move(t));
    } else {
      for (int id = s.first; id <= s.last; ++id) {
        acts.set(id,
                 cpu::run_whole_layer(g_, packed_.at(id), acts.inputs_of(g_.layer(id)), threads_));
        acts.release(id, id);
      }
    }
    acts.release(s.first, s.last);
  }

  const Graph& g_;
  const std::vector<Candidate>& plan_;
  const PlanOptions& o_;
  const int lanes_, threads_;
  const cpu::PackedModel packed_;
  Activations probe_; // last readers, for the segments
  std::vector<Segment> segments_;
  std::vector<bool> counted_ = std::vector<bool>(plan_.size(), false);
};

} // namespace

const char* layerwise_engine_name(LayerwiseEngine e) {
  return e == LayerwiseEngine::kOnednn ? "onednn" : "bricks";
}

bool parse_layerwise_engine(const std::string& s, LayerwiseEngine* out) {
  if (s == "onednn" || s == "bricks") {
    *out = s == "onednn" ? LayerwiseEngine::kOnednn : LayerwiseEngine::kBricks;
    return true;
  }
  return false;
}

const Tensor& PlanResult::output() const {
  BRICKDL_CHECK(outputs.size() == 1,
                "the graph has " << outputs.size() << " outputs; the caller expects one");
  return outputs[0];
}

struct PreparedPlan::Impl {
  Impl(const Graph& g, std::vector<Candidate> p, const ModelWeights& weights, PlanOptions o)
      : graph(g), plan((validate_plan(g, p), std::move(p))), options(std::move(o)),
        run(g, plan, weights, options) {}
  const Graph& graph;
  const std::vector<Candidate> plan;
  const PlanOptions options;
  PlanRun run; // holds references to plan and options
};

PreparedPlan::PreparedPlan(const Graph& g, std::vector<Candidate> plan, const ModelWeights& weights,
                           PlanOptions options)
    : impl_(std::make_unique<Impl>(g, std::move(plan), weights, std::move(options))) {}

PreparedPlan::~PreparedPlan() = default;

PlanResult PreparedPlan::run(const std::vector<Tensor>& inputs, int warmup, int repetitions,
                             const LayerProgress& progress) {
  const Graph& g = impl_->graph;
  BRICKDL_CHECK(static_cast<int>(inputs.size()) == g.num_inputs(),
                "got " << inputs.size() << " inputs for a graph of " << g.num_inputs());
  for (int id = 0; id < g.num_inputs(); ++id)
    BRICKDL_CHECK(inputs[static_cast<size_t>(id)].shape() == g.layer(id).out,
                  "input " << inputs[static_cast<size_t>(id)].shape().str() << " for graph input "
                           << g.layer(id).name << " " << g.layer(id).out.str());
  BRICKDL_CHECK(repetitions >= 1 && warmup >= 0, "repetitions / warm-up");
  PlanRun& run = impl_->run;
  run.restart_counts();
  PlanResult res;
  run.describe(res);
  std::optional<cpu::ScopedPinning> pinning;
  if (impl_->options.pin)
    pinning.emplace(run.threads());
  for (int i = 0; i < warmup; ++i)
    run.run(inputs, res, false, i == 0 ? progress : LayerProgress{});
  for (int i = 0; i < repetitions; ++i)
    res.outputs = run.run(inputs, res, true, i == 0 && warmup == 0 ? progress : LayerProgress{});
  run.count_layerwise(res);
  return res;
}

PlanResult execute_plan(const Graph& g, const std::vector<Candidate>& plan,
                        std::vector<Tensor> inputs, const ModelWeights& weights,
                        const PlanOptions& options, const LayerProgress& progress) {
  PreparedPlan prepared(g, plan, weights, options);
  return prepared.run(inputs, options.warmup, options.repetitions, progress);
}

PlanResult execute_plan(const Graph& g, const std::vector<Candidate>& plan,
                        std::vector<Tensor> inputs, const ModelWeights& weights,
                        const ExecOptions& options, const LayerProgress& progress) {
  PlanOptions o;
  o.exec = options;
  return execute_plan(g, plan, std::move(inputs), weights, o, progress);
}

PlanResult execute_plan(const Graph& g, const std::vector<Candidate>& plan, const Tensor& input,
                        const ModelWeights& weights, const ExecOptions& options,
                        const LayerProgress& progress) {
  BRICKDL_CHECK(g.num_inputs() == 1, "graph " << g.name() << " has " << g.num_inputs()
                                              << " inputs; the caller gives one");
  return execute_plan(g, plan, std::vector<Tensor>{input}, weights, options, progress);
}

} // namespace brickdl::kernels
