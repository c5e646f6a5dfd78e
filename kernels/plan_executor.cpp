#include "kernels/plan_executor.h"

#include <algorithm>

#include "core/error.h"
#include "core/group.h"
#include "kernels/cpu/isa.h"

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

// The activations of a plan run: each layer's output, freed after its last reader ran.
class Activations {
public:
  Activations(const Graph& g, std::vector<Tensor> inputs, int lanes)
      : g_(g), out_(static_cast<size_t>(g.size())),
        last_reader_(static_cast<size_t>(g.size()), -1) {
    for (const Layer& l : g.layers())
      for (int p : l.inputs)
        last_reader_[static_cast<size_t>(p)] = l.id;
    BRICKDL_CHECK(static_cast<int>(inputs.size()) == g.num_inputs(),
                  "got " << inputs.size() << " inputs for a graph of " << g.num_inputs());
    for (int id = 0; id < g.num_inputs(); ++id) {
      Tensor& x = inputs[static_cast<size_t>(id)];
      BRICKDL_CHECK(x.shape() == g.layer(id).out, "input " << x.shape().str() << " for graph input "
                                                           << g.layer(id).name << " "
                                                           << g.layer(id).out.str());
      out_[static_cast<size_t>(id)] = cpu::to_blocked(x, lanes);
      x = Tensor();
    }
  }

  // The group's external inputs (core/group.h order), as execute_group takes them.
  std::vector<const cpu::BlockedTensor*> inputs_of(const Group& group) {
    std::vector<const cpu::BlockedTensor*> in;
    for (int p : group_external_inputs(g_, group))
      in.push_back(&out_[static_cast<size_t>(p)]);
    return in;
  }

  // Stores the outputs of layers [first, last] (the last layer's, and graph outputs before it)
  // and frees every input no later layer reads that is no graph output.
  void store(const Group& group, BlockedGroupResult& r) {
    out_[static_cast<size_t>(group.last)] = std::move(r.output);
    for (auto& [id, t] : r.inner_outputs)
      out_[static_cast<size_t>(id)] = std::move(t);
    for (int id = group.first; id <= group.last; ++id)
      for (int p : g_.layer(id).inputs)
        if (last_reader_[static_cast<size_t>(p)] <= group.last && !g_.is_output(p))
          out_[static_cast<size_t>(p)] = cpu::BlockedTensor();
  }

  std::vector<Tensor> take_outputs() {
    std::vector<Tensor> outs;
    for (int id : g_.outputs())
      outs.push_back(cpu::from_blocked(out_[static_cast<size_t>(id)]));
    return outs;
  }

private:
  const Graph& g_;
  std::vector<cpu::BlockedTensor> out_;
  std::vector<int> last_reader_;
};

// Plan entries in the order they run (by first layer).
std::vector<size_t> run_order(const std::vector<Candidate>& plan) {
  std::vector<size_t> order(plan.size());
  for (size_t k = 0; k < order.size(); ++k)
    order[k] = k;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return plan[a].group.first < plan[b].group.first; });
  return order;
}

// Adds a group's counters to the plan totals: its per-layer brick counts (group-relative)
// land at the graph ids of its layers.
void add_to_totals(const ExecCounters& group_counters, const Group& group, ExecCounters& totals) {
  ExecCounters shifted = group_counters;
  shifted.bricks_per_layer.insert(shifted.bricks_per_layer.begin(),
                                  static_cast<size_t>(group.first), 0);
  totals.add(shifted);
}

// Runs `c` on the stored activations, stores its output and returns its counters.
ExecCounters run_group(const Graph& g, const Candidate& c, Activations& acts,
                       const cpu::PackedModel& packed, const ExecOptions& options) {
  BlockedGroupResult r = execute_group(g, c, acts.inputs_of(c.group), packed, options);
  BRICKDL_CHECK(r.supported, "layers " << g.layer(c.group.first).name << " .. "
                                       << g.layer(c.group.last).name << ": " << r.reason);
  for (int id = c.group.first; id < c.group.last; ++id)
    BRICKDL_CHECK(!g.is_output(id) || r.inner_outputs.count(id),
                  "graph output " << g.layer(id).name << " was not kept by its group");
  acts.store(c.group, r);
  return std::move(r.counters);
}

} // namespace

const Tensor& PlanResult::output() const {
  BRICKDL_CHECK(outputs.size() == 1,
                "the graph has " << outputs.size() << " outputs; the caller expects one");
  return outputs[0];
}

PlanResult execute_plan(const Graph& g, const std::vector<Candidate>& plan, const Tensor& input,
                        const ModelWeights& weights, const ExecOptions& options,
                        const LayerProgress& progress) {
  BRICKDL_CHECK(g.num_inputs() == 1, "graph " << g.name() << " has " << g.num_inputs()
                                              << " inputs; the caller gives one");
  return execute_plan(g, plan, std::vector<Tensor>{input}, weights, options, progress);
}

PlanResult execute_plan(const Graph& g, const std::vector<Candidate>& plan,
                        std::vector<Tensor> inputs, const ModelWeights& weights,
                        const ExecOptions& options, const LayerProgress& progress) {
  validate_plan(g, plan);
  const std::vector<size_t> order = run_order(plan);
  PlanResult res;
  res.group_counters.resize(plan.size());
  res.counters.bricks_per_layer.assign(static_cast<size_t>(g.size()), 0);
  const int lanes = options.lanes > 0 ? options.lanes : cpu::lanes();
  const cpu::PackedModel packed(g, weights, lanes);
  Activations acts(g, std::move(inputs), lanes);
  size_t next = 0;
  for (int id = g.num_inputs(); id < g.size();) {
    Candidate c;
    if (next < order.size() && plan[order[next]].group.first == id) {
      const size_t k = order[next++];
      c = plan[k];
      res.group_counters[k] = run_group(g, c, acts, packed, options);
      add_to_totals(res.group_counters[k], c.group, res.counters);
    } else {
      // A layer outside every group: a one-layer layerwise group (the block kernels over the
      // whole tensor, multithreaded).
      c.group = Group{id, id};
      c.strategy = Strategy::kLayerwise;
      add_to_totals(run_group(g, c, acts, packed, options), c.group, res.counters);
    }
    id = c.group.last + 1;
    if (progress)
      progress(c.group.last);
  }
  res.outputs = acts.take_outputs();
  return res;
}

} // namespace brickdl::kernels
