#include "search/search_space.h"

#include <algorithm>
#include <limits>

#include <fmt/format.h>

#include "core/error.h"

namespace brickdl::search {

namespace {

constexpr const char* kReasonNotSpatial = "layer without spatial extent: layerwise only";
constexpr const char* kReasonBrickCovers =
    "brick larger than every tensor of the group: same work as a smaller brick";
constexpr const char* kReasonChannelsCover =
    "channel block covers all channels: same work as another channel block";

// Largest spatial extent and channel count over the tensors a group reads and writes.
struct GroupExtent {
  int64_t spatial = 1;
  int64_t channels = 1;
};

GroupExtent group_extent(const Graph& g, const Group& grp) {
  GroupExtent e;
  auto take = [&](const TensorShape& s) {
    for (int a = 3 - s.spatial_rank; a < 3; ++a)
      e.spatial = std::max(e.spatial, s.dim(a));
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
std::vector<int> useful_sizes(const std::vector<int>& sorted, int64_t extent, int64_t* pruned) {
  std::vector<int> out;
  bool covered = false;
  for (int s : sorted) {
    if (covered) {
      ++*pruned;
      continue;
    }
    out.push_back(s);
    covered = s >= extent;
  }
  return out;
}

// Channel blocks: 0 (all channels) and any block >= the channel count do the same work;
// keep one of them (0 when listed, else the smallest covering block).
std::vector<int> useful_channel_blocks(const std::vector<int>& blocks, int64_t channels,
                                       int64_t* pruned) {
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
    } else {
      ++*pruned;
    }
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
  if (g.last < 1 || g.last >= num_layers())
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
  const std::vector<int> sizes = sorted_unique(config.brick_sizes);
  const std::vector<int> threads = sorted_unique(config.threads);
  const int64_t per_brick =
      static_cast<int64_t>(merged_strategies_.size()) * static_cast<int64_t>(threads.size());
  if (!e.mergeable) {
    pruned_[kReasonNotSpatial] += per_brick * static_cast<int64_t>(sizes.size()) *
                                  static_cast<int64_t>(config.channel_blocks.size());
  } else {
    const GroupExtent ext = group_extent(graph_, grp);
    int64_t pruned_sizes = 0, pruned_blocks = 0;
    const std::vector<int> bricks = useful_sizes(sizes, ext.spatial, &pruned_sizes);
    const std::vector<int> blocks =
        useful_channel_blocks(sorted_unique(config.channel_blocks), ext.channels, &pruned_blocks);
    if (pruned_sizes > 0)
      pruned_[kReasonBrickCovers] +=
          pruned_sizes * per_brick * static_cast<int64_t>(blocks.size() + pruned_blocks);
    if (pruned_blocks > 0)
      pruned_[kReasonChannelsCover] +=
          pruned_blocks * per_brick * static_cast<int64_t>(bricks.size());
    const bool three_d = graph_.layer(grp.last).out.spatial_rank == 3;
    for (Strategy s : merged_strategies_)
      for (int b : bricks)
        for (int cb : blocks)
          for (int t : threads) {
            Candidate c;
            c.group = grp;
            c.strategy = s;
            c.brick = BrickShape{three_d ? b : 1, b, b, cb};
            c.threads = t;
            e.candidates.push_back(c);
          }
  }
  groups_.push_back(std::move(e));
  const int index = static_cast<int>(groups_.size()) - 1;
  ending_at_[static_cast<size_t>(grp.last)].push_back(index);
  starting_at_[static_cast<size_t>(grp.first)].push_back(index);
  return index;
}

SearchSpace SearchSpace::build(const Graph& fused, const SearchSpaceConfig& config,
                               const std::string& source) {
  auto bad = [&](const std::string& key, const std::string& msg) {
    throw UserError(SourceLocation{source, 0, 0, key}, msg);
  };
  if (config.max_group_len < 1)
    bad("search.max_group_len", fmt::format("must be >= 1, got {}", config.max_group_len));
  if (config.brick_sizes.empty())
    bad("search.brick_sizes", "must list at least one size");
  for (int s : config.brick_sizes)
    if (s < 1)
      bad("search.brick_sizes", fmt::format("sizes must be >= 1, got {}", s));
  if (config.channel_blocks.empty())
    bad("search.channel_blocks", "must list at least one block (0 = all channels)");
  for (int cb : config.channel_blocks)
    if (cb < 0)
      bad("search.channel_blocks", fmt::format("blocks must be >= 0, got {}", cb));
  if (config.threads.empty())
    bad("search.threads", "must list at least one thread count");
  for (int t : config.threads)
    if (t < 1)
      bad("search.threads", fmt::format("thread counts must be >= 1, got {}", t));
  BRICKDL_CHECK(fused.size() >= 2, "graph '" << fused.name() << "' has no layer besides its input");

  SearchSpace sp;
  sp.graph_ = fused;
  for (Strategy s : config.strategies)
    if (s != Strategy::kLayerwise &&
        std::find(sp.merged_strategies_.begin(), sp.merged_strategies_.end(), s) ==
            sp.merged_strategies_.end())
      sp.merged_strategies_.push_back(s);
  const int n = fused.size();
  sp.ending_at_.assign(static_cast<size_t>(n), {});
  sp.starting_at_.assign(static_cast<size_t>(n), {});

  // Explicit partitions: validated first, their groups may be longer than max_group_len.
  std::vector<Group> extra;
  for (size_t p = 0; p < config.partitions.size(); ++p) {
    const std::string key = fmt::format("search.partitions[{}]", p);
    const auto& lens = config.partitions[p];
    int64_t sum = 0;
    for (int len : lens) {
      if (len < 1)
        bad(key, fmt::format("group lengths must be >= 1, got {}", len));
      sum += len;
    }
    if (sum != n - 1)
      bad(key, fmt::format("group lengths add up to {}, but the fused graph '{}' has {} layers "
                           "after its input; a partition must cover every layer once",
                           sum, fused.name(), n - 1));
    int first = 1;
    for (int len : lens) {
      const Group g{first, first + len - 1};
      if (!is_valid_group(fused, g))
        bad(key, fmt::format("the group of layers '{}' .. '{}' has an output read outside it "
                             "before its last layer; a group may be read only through its "
                             "last layer",
                             fused.layer(g.first).name, fused.layer(g.last).name));
      extra.push_back(g);
      first += len;
    }
  }

  // Named subgraphs: each must be a group of the fused graph.
  std::vector<Group> named;
  for (size_t i = 0; i < config.subgraphs.size(); ++i) {
    const auto& sg = config.subgraphs[i];
    const std::string key = fmt::format("search.subgraphs[{}]", i);
    const Group g{fused_layer_id(fused, sg.first), fused_layer_id(fused, sg.last)};
    if (g.first < 1 || g.last < g.first)
      bad(key, fmt::format("subgraph '{}': layers '{}' .. '{}' are not a range of the fused "
                           "graph '{}' (brickdl-tune --describe lists its layers)",
                           sg.name, sg.first, sg.last, fused.name()));
    if (!is_valid_group(fused, g))
      bad(key, fmt::format("subgraph '{}': layers '{}' .. '{}' have an output read outside them "
                           "before their last layer; a group may be read only through its "
                           "last layer",
                           sg.name, sg.first, sg.last));
    named.push_back(g);
    extra.push_back(g);
  }

  for (int last = 1; last < n; ++last) {
    for (int first = std::max(1, last - config.max_group_len + 1); first <= last; ++first) {
      const Group g{first, last};
      if (!is_valid_group(fused, g))
        continue;
      const bool mergeable = brick_blocker(fused, g).empty();
      const bool in_partition = std::find(extra.begin(), extra.end(), g) != extra.end();
      if (!mergeable && g.size() > 1 && !in_partition)
        continue; // nothing to run it with
      sp.add_group(g, config);
    }
  }
  // Partition groups beyond max_group_len.
  for (const Group& g : extra)
    if (sp.find(g) < 0)
      sp.add_group(g, config);
  for (auto& v : sp.ending_at_)
    std::sort(v.begin(), v.end(), [&](int a, int b) {
      return sp.groups_[static_cast<size_t>(a)].group.first <
             sp.groups_[static_cast<size_t>(b)].group.first;
    });
  for (auto& v : sp.starting_at_)
    std::sort(v.begin(), v.end(), [&](int a, int b) {
      return sp.groups_[static_cast<size_t>(a)].group.last <
             sp.groups_[static_cast<size_t>(b)].group.last;
    });

  for (size_t i = 0; i < named.size(); ++i) {
    sp.subgraphs_.push_back(sp.find(named[i]));
    sp.subgraph_names_.push_back(config.subgraphs[i].name);
  }
  size_t at = 0;
  for (const auto& lens : config.partitions) {
    std::vector<int> idx;
    std::string label;
    for (int len : lens) {
      idx.push_back(sp.find(extra[at++]));
      label += (label.empty() ? "" : "+") + std::to_string(len);
    }
    sp.partitions_.push_back(std::move(idx));
    sp.partition_labels_.push_back(std::move(label));
  }
  return sp;
}

} // namespace brickdl::search
