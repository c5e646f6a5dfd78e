#include "kernels/plan_executor.h"

#include <algorithm>

#include "core/error.h"

namespace brickdl::kernels {

void validate_plan(const Graph& g, const std::vector<Candidate>& plan) {
  std::vector<int> owner(static_cast<size_t>(g.size()), -1);
  for (size_t k = 0; k < plan.size(); ++k) {
    const Candidate& c = plan[k];
    const std::string where = "plan entry " + std::to_string(k) + " (layers " +
                              std::to_string(c.group.first) + ".." + std::to_string(c.group.last) +
                              ")";
    if (c.group.first < 1 || c.group.last >= g.size() || c.group.first > c.group.last)
      throw UserError(where + ": first and last must satisfy 1 <= first <= last <= " +
                      std::to_string(g.size() - 1));
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

PlanResult execute_plan(const Graph& g, const std::vector<Candidate>& plan0, const Tensor& input,
                        const ModelWeights& weights, const ExecOptions& options) {
  validate_plan(g, plan0);
  BRICKDL_CHECK(input.shape() == g.input_shape(),
                "input " << input.shape().str() << " for graph input " << g.input_shape().str());
  std::vector<size_t> order(plan0.size());
  for (size_t k = 0; k < order.size(); ++k)
    order[k] = k;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return plan0[a].group.first < plan0[b].group.first; });

  PlanResult res;
  res.group_counters.resize(plan0.size());
  std::vector<Tensor> out(static_cast<size_t>(g.size()));
  std::vector<int> last_reader(static_cast<size_t>(g.size()), -1);
  for (const Layer& l : g.layers())
    for (int p : l.inputs)
      last_reader[static_cast<size_t>(p)] = l.id;
  const auto release_inputs = [&](int first, int last) {
    for (int id = first; id <= last; ++id)
      for (int p : g.layer(id).inputs)
        if (last_reader[static_cast<size_t>(p)] <= last && p != g.output())
          out[static_cast<size_t>(p)] = Tensor();
  };
  out[0] = input;

  size_t next = 0;
  for (int id = 1; id < g.size();) {
    if (next < order.size() && plan0[order[next]].group.first == id) {
      const Candidate& c = plan0[order[next]];
      std::vector<const Tensor*> in;
      for (int p : group_external_inputs(g, c.group))
        in.push_back(&out[static_cast<size_t>(p)]);
      GroupResult r = execute_group(g, c, in, weights, options);
      BRICKDL_CHECK(r.supported, "plan group: " << r.reason);
      out[static_cast<size_t>(c.group.last)] = std::move(r.output);
      res.group_counters[order[next]] = r.counters;
      ExecCounters totals = r.counters;
      totals.bricks_per_layer.clear();
      res.counters.add(totals);
      release_inputs(c.group.first, c.group.last);
      id = c.group.last + 1;
      ++next;
      continue;
    }
    // A layer outside every group: a one-layer layerwise group (the block kernels over the
    // whole tensor, multithreaded).
    Candidate single;
    single.group = Group{id, id};
    single.strategy = Strategy::kLayerwise;
    std::vector<const Tensor*> in;
    for (int p : group_external_inputs(g, single.group))
      in.push_back(&out[static_cast<size_t>(p)]);
    GroupResult r = execute_group(g, single, in, weights, options);
    BRICKDL_CHECK(r.supported, "layer " << g.layer(id).name << ": " << r.reason);
    out[static_cast<size_t>(id)] = std::move(r.output);
    r.counters.bricks_per_layer.clear();
    res.counters.add(r.counters);
    release_inputs(id, id);
    ++id;
  }
  res.output = std::move(out.back());
  return res;
}

} // namespace brickdl::kernels
