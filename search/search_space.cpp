#include "search/search_space.h"

#include <algorithm>
#include <limits>

#include <fmt/format.h>

#include "core/error.h"

namespace brickdl::search {

namespace {

constexpr const char* kReasonNotSpatial =
    "a layer without bricks (no spatial extent, or a transposed conv): layerwise only";
constexpr const char* kReasonBrickCovers =
    "brick larger than every tensor of the group: same work as a smaller brick";
constexpr const char* kReasonDepthCovers =
    "brick depth beyond every tensor's depth: same work as a shallower brick";
constexpr const char* kReasonChannelsCover =
    "channel block covers all channels: same work as another channel block";
constexpr const char* kReasonBatchCovers =
    "batch block covers the whole batch: same work as another batch block";
constexpr const char* kReasonClusters =
    "cluster of several CTAs with memoized units or a channel block: clusters run padded units of "
    "every channel only";

// Largest spatial extent and channel count over the tensors a group reads and writes; the
// largest depth (3-D) and the largest height or width, for bricks whose depth is listed apart.
struct GroupExtent {
  int64_t spatial = 1;
  int64_t channels = 1;
  int64_t depth = 1;
  int64_t plane = 1;
};

GroupExtent group_extent(const Graph& g, const Group& grp) {
  GroupExtent e;
  auto take = [&](const TensorShape& s) {
    for (int a = 3 - s.spatial_rank; a < 3; ++a)
      e.spatial = std::max(e.spatial, s.dim(a));
    if (s.spatial_rank == 3)
      e.depth = std::max(e.depth, s.dim(0));
    if (s.spatial_rank >= 2)
      e.plane = std::max({e.plane, s.dim(1), s.dim(2)});
    e.channels = std::max(e.channels, s.c);
  };
  for (int id = grp.first; id <= grp.last; ++id) {
    take(g.layer(id).out);
    for (int in : g.layer(id).inputs)
      take(g.layer(in).out);
  }
  return e;
}

// The brick sizes worth trying for a group: every size smaller than the largest tensor
// extent, plus the smallest one that covers it (larger ones repeat its work).
std::vector<int> useful_sizes(const std::vector<int>& sorted, int64_t extent) {
  std::vector<int> out;
  for (int s : sorted) {
    out.push_back(s);
    if (s >= extent)
      break;
  }
  return out;
}

// Channel blocks: 0 (all channels) and any block >= the channel count do the same work;
// keep one of them (0 when listed, else the smallest covering block).
std::vector<int> useful_channel_blocks(const std::vector<int>& blocks, int64_t channels) {
  const bool has_all = std::find(blocks.begin(), blocks.end(), 0) != blocks.end();
  std::vector<int> out;
  bool covering_kept = has_all;
  for (int cb : blocks) {
    if (cb == 0) {
      out.push_back(0);
    } else if (cb < channels) {
      out.push_back(cb);
    } else if (!covering_kept) {
      out.push_back(cb);
      covering_kept = true;
    }
  }
  return out;
}

// Batch blocks (sorted, unique): a block >= the batch computes every image in one unit, so
// blocks above the batch are clamped to it and kept once (batch 8 with 1, 2, 4, 8, 16 keeps 1,
// 2, 4, 8; batch 1 keeps only 1). Per listed block: its clamped value, or 0 when an earlier
// block clamps to the same value.
std::vector<int> clamped_batch_blocks(const std::vector<int>& sorted, int64_t batch) {
  std::vector<int> out;
  int last = 0;
  for (int nb : sorted) {
    const int clamped = static_cast<int>(BrickShape::images_per_unit(nb, batch));
    out.push_back(clamped == last ? 0 : clamped);
    last = clamped;
  }
  return out;
}

template <typename T> std::vector<T> sorted_unique(std::vector<T> v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

} // namespace

int fused_layer_id(const Graph& fused, const std::string& name) {
  for (const Layer& l : fused.layers()) {
    if (l.name == name)
      return l.id;
    for (const auto& f : l.fused_from)
      if (f == name)
        return l.id;
  }
  return -1;
}

Candidate layerwise_candidate(const Group& group) {
  Candidate c;
  c.group = group;
  c.strategy = Strategy::kLayerwise;
  c.brick = BrickShape{1, 1, 1, 0};
  return c;
}

const Candidate& SearchSpace::candidate(CandidateRef r) const {
  return group(r.group).candidates.at(static_cast<size_t>(r.index));
}

int64_t SearchSpace::num_candidates() const {
  int64_t n = 0;
  for (const auto& g : groups_)
    n += static_cast<int64_t>(g.candidates.size());
  return n;
}

const std::vector<int>& SearchSpace::groups_ending_at(int layer) const {
  return ending_at_.at(static_cast<size_t>(layer));
}

const std::vector<int>& SearchSpace::groups_starting_at(int layer) const {
  return starting_at_.at(static_cast<size_t>(layer));
}

int SearchSpace::find(const Group& g) const {
  if (g.last < first_layer() || g.last >= num_layers())
    return -1;
  for (int i : groups_ending_at(g.last))
    if (groups_[static_cast<size_t>(i)].group == g)
      return i;
  return -1;
}

int SearchSpace::singleton(int layer) const {
  const int i = find(Group{layer, layer});
  BRICKDL_CHECK(i >= 0, "no singleton group for layer " << layer);
  return i;
}

namespace {

// The listed (sorted, duplicate-free) values of every candidate dimension of a merged group.
// `depths` holds the listed brick depths of a 3-D group, or one 0 (cubes; 2-D groups).
struct ListedValues {
  std::vector<int> sizes, depths, blocks, batch, clusters, threads;
  ListedValues(const SearchSpaceConfig& c, bool three_d)
      : sizes(sorted_unique(c.brick_sizes)),
        depths(three_d && !c.brick_depths.empty() ? sorted_unique(c.brick_depths)
                                                  : std::vector<int>{0}),
        blocks(sorted_unique(c.channel_blocks)), batch(sorted_unique(c.batch_blocks)),
        clusters(sorted_unique(c.clusters)), threads(sorted_unique(c.threads)) {}
  // Merged configurations per strategy: the product of the lists.
  int64_t product() const {
    int64_t n = 1;
    for (const auto* v : {&sizes, &depths, &blocks, &batch, &clusters, &threads})
      n *= static_cast<int64_t>(v->size());
    return n;
  }
};

bool is_three_d(const Graph& g, const Group& grp) {
  return g.layer(grp.last).out.spatial_rank == 3;
}

bool has(const std::vector<int>& v, int x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

} // namespace

// Every listed combination (strategy × size × channel block × batch block × cluster × threads)
// becomes a candidate or is counted under the first reason that removes it, so the listed
// product is exactly the candidates plus pruned_.
// With brick depths listed (3-D groups), a size is pruned by the plane's extents and a depth by
// the depths; without, a cube by every extent.
void SearchSpace::add_merged_candidates(GroupEntry* e, const SearchSpaceConfig& config) {
  const Group& grp = e->group;
  const bool three_d = is_three_d(graph_, grp);
  const ListedValues listed(config, three_d);
  const bool by_depth = listed.depths.front() != 0;
  const GroupExtent ext = group_extent(graph_, grp);
  const std::vector<int> sizes = useful_sizes(listed.sizes, by_depth ? ext.plane : ext.spatial);
  const std::vector<int> depths = by_depth ? useful_sizes(listed.depths, ext.depth) : listed.depths;
  const std::vector<int> blocks = useful_channel_blocks(listed.blocks, ext.channels);
  const std::vector<int> batch = clamped_batch_blocks(listed.batch, graph_.batch());
  for (Strategy s : merged_strategies_)
    for (int b : listed.sizes)
      for (int d : listed.depths)
        for (int cb : listed.blocks)
          for (int nb : batch)
            for (int cl : listed.clusters)
              for (int t : listed.threads) {
                const char* why = !has(sizes, b)     ? kReasonBrickCovers
                                  : !has(depths, d)  ? kReasonDepthCovers
                                  : !has(blocks, cb) ? kReasonChannelsCover
                                  : nb == 0          ? kReasonBatchCovers
                                  : cl > 1 && (s != Strategy::kPadded || cb != 0) ? kReasonClusters
                                                                                  : nullptr;
                if (why != nullptr) {
                  ++pruned_[why];
                  continue;
                }
                Candidate c;
                c.group = grp;
                c.strategy = s;
                c.brick = BrickShape{!three_d ? 1 : by_depth ? d : b, b, b, cb, nb, cl};
                c.threads = t;
                e->candidates.push_back(c);
              }
}

int SearchSpace::add_group(const Group& grp, const SearchSpaceConfig& config) {
  GroupEntry e;
  e.group = grp;
  e.signature = workload_signature(graph_, grp);
  e.description = workload_description(graph_, grp);
  e.layer_names = group_layer_names(graph_, grp);
  e.mergeable = brick_blocker(graph_, grp).empty();

  if (grp.size() == 1) {
    e.layerwise = 0;
    e.candidates.push_back(layerwise_candidate(grp));
  }
  // Enumerated: the layerwise candidate of a singleton and every listed merged configuration.
  const int64_t listed = static_cast<int64_t>(merged_strategies_.size()) *
                         ListedValues(config, is_three_d(graph_, grp)).product();
  enumerated_ += (grp.size() == 1 ? 1 : 0) + listed;
  if (e.mergeable) {
    add_merged_candidates(&e, config);
  } else if (listed > 0) {
    pruned_[kReasonNotSpatial] += listed;
  }
  groups_.push_back(std::move(e));
  const int index = static_cast<int>(groups_.size()) - 1;
  ending_at_[static_cast<size_t>(grp.last)].push_back(index);
  starting_at_[static_cast<size_t>(grp.first)].push_back(index);
  return index;
}

namespace {

[[noreturn]] void bad(const std::string& source, const std::string& key, const std::string& msg) {
  throw UserError(SourceLocation{source, 0, 0, key}, msg);
}

// Throws a UserError naming the key of the first list that is empty or holds a bad value.
void check_config(const SearchSpaceConfig& config, const std::string& source) {
  if (config.max_group_len < 1)
    bad(source, "search.max_group_len", fmt::format("must be >= 1, got {}", config.max_group_len));
  const auto check_list = [&](const std::vector<int>& v, const char* key, int min,
                              const char* empty, const char* what) {
    if (v.empty())
      bad(source, key, empty);
    for (int x : v)
      if (x < min)
        bad(source, key, fmt::format("{} must be >= {}, got {}", what, min, x));
  };
  check_list(config.brick_sizes, "search.brick_sizes", 1, "must list at least one size", "sizes");
  check_list(config.channel_blocks, "search.channel_blocks", 0,
             "must list at least one block (0 = all channels)", "blocks");
  check_list(config.batch_blocks, "search.batch_blocks", 1,
             "must list at least one batch block (1 = one image per unit of work)", "batch blocks");
  check_list(config.threads, "search.threads", 1, "must list at least one thread count",
             "thread counts");
  for (int d : config.brick_depths) // empty: cubes
    if (d < 1)
      bad(source, "search.brick_depths", fmt::format("depths must be >= 1, got {}", d));
  check_list(config.clusters, "search.clusters", 1,
             "must list at least one cluster size (1 = one CTA per unit)", "cluster sizes");
}

// The groups of every explicit partition, validated: each partition tiles the layers after
// the input with valid groups (which may be longer than max_group_len).
std::vector<std::vector<Group>>
partition_groups(const Graph& fused, const SearchSpaceConfig& config, const std::string& source) {
  const int n = fused.size();
  std::vector<std::vector<Group>> out;
  for (size_t p = 0; p < config.partitions.size(); ++p) {
    const std::string key = fmt::format("search.partitions[{}]", p);
    const auto& lens = config.partitions[p];
    int64_t sum = 0;
    for (int len : lens) {
      if (len < 1)
        bad(source, key, fmt::format("group lengths must be >= 1, got {}", len));
      sum += len;
    }
    if (sum != n - fused.num_inputs())
      bad(source, key,
          fmt::format("group lengths add up to {}, but the fused graph '{}' has {} layers "
                      "after its input{}; a partition must cover every layer once",
                      sum, fused.name(), n - fused.num_inputs(),
                      fused.num_inputs() > 1 ? "s" : ""));
    std::vector<Group>& groups = out.emplace_back();
    for (int len : lens) {
      const int first = groups.empty() ? fused.num_inputs() : groups.back().last + 1;
      const Group g{first, first + len - 1};
      const std::string why = group_invalid_reason(fused, g);
      if (!why.empty())
        bad(source, key, "group " + std::to_string(groups.size() + 1) + ": " + why);
      groups.push_back(g);
    }
  }
  return out;
}

// The named subgraphs as groups of the fused graph, validated.
std::vector<Group> subgraph_groups(const Graph& fused, const SearchSpaceConfig& config,
                                   const std::string& source) {
  std::vector<Group> out;
  for (size_t i = 0; i < config.subgraphs.size(); ++i) {
    const auto& sg = config.subgraphs[i];
    const std::string key = fmt::format("search.subgraphs[{}]", i);
    const Group g{fused_layer_id(fused, sg.first), fused_layer_id(fused, sg.last)};
    if (g.first < fused.num_inputs() || g.last < g.first)
      bad(source, key,
          fmt::format("subgraph '{}': layers '{}' .. '{}' are not a range of the fused "
                      "graph '{}' (brickdl-tune --describe lists its layers)",
                      sg.name, sg.first, sg.last, fused.name()));
    const std::string why = group_invalid_reason(fused, g);
    if (!why.empty())
      bad(source, key, fmt::format("subgraph '{}': {}", sg.name, why));
    out.push_back(g);
  }
  return out;
}

} // namespace

void SearchSpace::add_groups_up_to(int max_len, const std::vector<Group>& required,
                                   const SearchSpaceConfig& config) {
  const int n = graph_.size();
  for (int last = first_layer(); last < n; ++last) {
    for (int first = std::max(first_layer(), last - max_len + 1); first <= last; ++first) {
      const Group g{first, last};
      if (!is_valid_group(graph_, g))
        continue;
      const bool mergeable = brick_blocker(graph_, g).empty();
      const bool is_required = std::find(required.begin(), required.end(), g) != required.end();
      if (!mergeable && g.size() > 1 && !is_required)
        continue; // nothing to run it with
      add_group(g, config);
    }
  }
  // Required groups beyond max_len.
  for (const Group& g : required)
    if (find(g) < 0)
      add_group(g, config);
  const auto by = [&](auto key) {
    return [this, key](int a, int b) {
      return key(groups_[static_cast<size_t>(a)].group) <
             key(groups_[static_cast<size_t>(b)].group);
    };
  };
  for (auto& v : ending_at_)
    std::sort(v.begin(), v.end(), by([](const Group& g) { return g.first; }));
  for (auto& v : starting_at_)
    std::sort(v.begin(), v.end(), by([](const Group& g) { return g.last; }));
}

SearchSpace SearchSpace::build(const Graph& fused, const SearchSpaceConfig& config,
                               const std::string& source) {
  check_config(config, source);
  BRICKDL_CHECK(fused.size() > fused.num_inputs(),
                "graph '" << fused.name() << "' has no layer besides its inputs");
  const std::vector<std::vector<Group>> partitions = partition_groups(fused, config, source);
  const std::vector<Group> named = subgraph_groups(fused, config, source);

  SearchSpace sp;
  sp.graph_ = fused;
  for (Strategy s : config.strategies)
    if (s != Strategy::kLayerwise &&
        std::find(sp.merged_strategies_.begin(), sp.merged_strategies_.end(), s) ==
            sp.merged_strategies_.end())
      sp.merged_strategies_.push_back(s);
  sp.ending_at_.assign(static_cast<size_t>(fused.size()), {});
  sp.starting_at_.assign(static_cast<size_t>(fused.size()), {});
  std::vector<Group> required; // in the space whatever their length
  for (const auto& p : partitions)
    required.insert(required.end(), p.begin(), p.end());
  required.insert(required.end(), named.begin(), named.end());
  sp.add_groups_up_to(config.max_group_len, required, config);

  for (size_t i = 0; i < named.size(); ++i) {
    sp.subgraphs_.push_back(sp.find(named[i]));
    sp.subgraph_names_.push_back(config.subgraphs[i].name);
  }
  for (size_t p = 0; p < partitions.size(); ++p) {
    std::vector<int> idx;
    for (const Group& g : partitions[p])
      idx.push_back(sp.find(g));
    sp.partitions_.push_back(std::move(idx));
    sp.partition_labels_.push_back(fmt::format("{}", fmt::join(config.partitions[p], "+")));
  }
  int64_t pruned = 0;
  for (const auto& [reason, n] : sp.pruned_)
    pruned += n;
  BRICKDL_CHECK(sp.enumerated_ == sp.num_candidates() + pruned,
                "enumerated " << sp.enumerated_ << " != " << sp.num_candidates() << " built + "
                              << pruned << " pruned");
  return sp;
}

} // namespace brickdl::search
