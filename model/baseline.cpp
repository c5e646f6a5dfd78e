#include "model/baseline.h"

#include <algorithm>
#include <utility>

#include "core/error.h"
#include "core/graph_builder.h"
#include "core/op_traits.h"

namespace brickdl::model {

void accumulate(Prediction& into, const Prediction& p) {
  into.feasible = into.feasible && p.feasible;
  into.flops += p.flops;
  into.useful_flops += p.useful_flops;
  into.redundant_flops += p.redundant_flops;
  into.bricks_per_layer.insert(into.bricks_per_layer.end(), p.bricks_per_layer.begin(),
                               p.bricks_per_layer.end());
  into.thread_blocks += p.thread_blocks;
  into.bytes_input += p.bytes_input;
  into.bytes_weight += p.bytes_weight;
  into.bytes_intermediate_load += p.bytes_intermediate_load;
  into.bytes_intermediate_store += p.bytes_intermediate_store;
  into.bytes_output += p.bytes_output;
  into.l1_bytes += p.l1_bytes;
  into.l2_bytes += p.l2_bytes;
  into.dram_bytes += p.dram_bytes;
  into.dram_read_bytes += p.dram_read_bytes;
  into.dram_write_bytes += p.dram_write_bytes;
  into.memo_lookups += p.memo_lookups;
  into.atomics_compulsory += p.atomics_compulsory;
  into.atomics_conflict += p.atomics_conflict;
  into.time_ms += p.time_ms;
  into.t_dram_ms += p.t_dram_ms;
  into.t_l2_ms += p.t_l2_ms;
  into.t_compute_ms += p.t_compute_ms;
  into.t_atomic_compulsory_ms += p.t_atomic_compulsory_ms;
  into.t_atomic_conflict_ms += p.t_atomic_conflict_ms;
  into.t_launch_ms += p.t_launch_ms;
  into.t_sync_ms += p.t_sync_ms;
  into.bound_dram_ms += p.bound_dram_ms;
  into.bound_l2_ms += p.bound_l2_ms;
  into.bound_compute_ms += p.bound_compute_ms;
  into.launches += p.launches;
  into.barriers += p.barriers;
}

Baseline layerwise_baseline(const CostModel& model, const Graph& fused) {
  BRICKDL_CHECK(fused.size() > fused.num_inputs(), "graph '" << fused.name() << "' has no layer");
  Baseline b;
  Candidate c;
  c.strategy = Strategy::kLayerwise;
  for (int id = fused.num_inputs(); id < fused.size(); ++id) {
    c.group = {id, id};
    BaselineLayer row;
    row.layer = id;
    row.predicted = model.predict(fused, c);
    row.bound = model.lower_bound(fused, c.group);
    accumulate(b.total, row.predicted);
    b.layer_bounds.dram_bytes += row.bound.dram_bytes;
    b.layer_bounds.flops += row.bound.flops;
    b.layer_bounds.time_ms += row.bound.time_ms;
    b.layers.push_back(std::move(row));
  }
  c.group = {fused.num_inputs(), fused.size() - 1};
  b.warm = model.predict(fused, c);
  b.model_bound = model.lower_bound(fused, c.group);
  return b;
}

const std::vector<std::string>& baseline_names() {
  static const std::vector<std::string> names = {"cudnn-fused", "paper-unfused"};
  return names;
}

const char* baseline_name(BaselineKind kind) {
  return baseline_names()[static_cast<size_t>(kind)].c_str();
}

bool parse_baseline(const std::string& name, BaselineKind* kind) {
  const auto& names = baseline_names();
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == name) {
      *kind = static_cast<BaselineKind>(i);
      return true;
    }
  }
  return false;
}

namespace {

bool has_epilogue_passes(const Layer& l) {
  return l.op == OpKind::kConv || l.op == OpKind::kLinear || l.op == OpKind::kConvTranspose;
}

// Adds the activation pass of `act` after `x`.
int add_activation_pass(GraphBuilder& b, int x, const Layer& l) {
  return b.activation(x, l.activation, l, l.name + ".act");
}

// Per-channel vectors a pass reads: cudnnAddTensor the bias (A, 1 × C × 1 × 1);
// cudnnBatchNormalizationForwardInference bnScale, bnBias, estimatedMean, estimatedVariance.
constexpr int64_t kBiasPassVectors = 1;
constexpr int64_t kBatchNormPassVectors = 4;

} // namespace

PaperUnfusedBaseline::PaperUnfusedBaseline(const Graph& fused) {
  GraphBuilder b(fused.name() + " (paper-unfused)", fused.layer(0).out, fused.dtype(),
                 fused.layer(0).name);
  const int n = fused.size();
  first_.assign(static_cast<size_t>(n), 0);
  last_.assign(static_cast<size_t>(n), 0);
  std::vector<std::pair<int, int64_t>> pass_vectors; // each pass: its id, its vectors of C
  for (int id = 1; id < fused.num_inputs(); ++id)
    first_[static_cast<size_t>(id)] = last_[static_cast<size_t>(id)] =
        b.add_input(fused.layer(id).out, fused.layer(id).name);
  for (int id = fused.num_inputs(); id < n; ++id) {
    Layer l = fused.layer(id);
    const Activation act = l.activation;
    const bool bias = has_epilogue_passes(l) && l.bias;
    const bool bn = has_epilogue_passes(l) && l.bn_folded;
    for (int& in : l.inputs)
      in = last_[static_cast<size_t>(in)];
    l.activation = Activation::kNone;
    if (has_epilogue_passes(l)) {
      l.bias = false;
      l.bn_folded = false;
    }
    int x = b.add_layer(l);
    first_[static_cast<size_t>(id)] = x;
    if (bias || bn) {
      x = b.batch_norm(x, l.name + ".bias");
      pass_vectors.emplace_back(x, kBiasPassVectors);
    }
    if (bn) {
      x = b.batch_norm(x, l.name + ".bn");
      pass_vectors.emplace_back(x, kBatchNormPassVectors);
    }
    if (act != Activation::kNone && !traits(l.op).is_activation) {
      x = add_activation_pass(b, x, fused.layer(id));
      pass_vectors.emplace_back(x, 0);
    }
    last_[static_cast<size_t>(id)] = x;
  }
  for (const GraphOutput& o : fused.output_refs())
    b.mark_output(last_[static_cast<size_t>(o.layer)], o.name);
  const Graph built = b.build();
  // The passes as the artifact calls them: each rewrites the output in place (cudnnAddTensor's
  // C is its input and its output; the artifact passes x == y to the others) and reads its
  // per-channel vectors, not the batch-norm layer's 2 · C.
  std::vector<Layer> layers = built.layers();
  for (const auto& [pass, vectors] : pass_vectors) {
    Layer& p = layers[static_cast<size_t>(pass)];
    p.in_place = true;
    if (p.op == OpKind::kBatchNorm)
      p.params = vectors * p.out.c;
  }
  unfused_ =
      Graph(built.name(), built.dtype(), std::move(layers), built.params(), built.output_refs());
}

Group PaperUnfusedBaseline::unfused_group(const Group& g) const {
  BRICKDL_CHECK(g.first >= std::max(unfused_.num_inputs(), 1) && g.first <= g.last &&
                g.last < static_cast<int>(first_.size()));
  return Group{first_[static_cast<size_t>(g.first)], last_[static_cast<size_t>(g.last)]};
}

Prediction PaperUnfusedBaseline::predict(const CostModel& model, const Group& fused_group) const {
  Candidate c;
  c.strategy = Strategy::kLayerwise;
  c.group = unfused_group(fused_group);
  return model.predict(unfused_, c);
}

} // namespace brickdl::model
