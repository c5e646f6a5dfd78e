#pragma once
// The search space: every group a fused graph can be cut into, and every candidate of each.
//
//   fused Graph + SearchSpaceConfig ──build()──► SearchSpace
//        groups: contiguous [first, last] of the topological order (layer 0, the input, is
//                never in a group), at most max_group_len layers, only the last layer's output
//                read outside the group (inputs from outside are allowed: residual skips)
//        candidates per group: layerwise (singleton groups only) + bricks (× brick depths, 3-D
//                groups of an experiment that lists them) × channel blocks × batch blocks ×
//                merged strategies × threads
//        enumerated = candidates + pruned: every listed combination (the layerwise candidate of
//                a singleton, and merged strategies × sizes × channel blocks × batch blocks ×
//                clusters × threads, each list without duplicates) is either built or counted
//                under the first structural reason that leaves it out (same work as another
//                candidate, a layer without bricks, a cluster that cannot run it); the model's
//                infeasibility is counted by evaluate(), see search/evaluation.h
//
// Layerwise runs every layer as its own library kernel, so a layerwise group of k layers is
// the same work as k layerwise singletons; only singletons carry the layerwise candidate. It
// is always in the space, whatever `strategies` says: it is the baseline every speedup is
// measured against and the only way to run layers without spatial extent (global pool,
// flatten, linear), whose groups are layerwise-only.
#include <compare>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/candidate.h"
#include "core/experiment.h"
#include "core/graph.h"

namespace brickdl::search {

// A candidate by position: space.group(group).candidates[index].
struct CandidateRef {
  int group = -1;
  int index = -1;
  auto operator<=>(const CandidateRef&) const = default;
};

struct GroupEntry {
  Group group;
  std::string signature;             // workload key (core/group.h)
  std::string description;           // human-readable
  std::string layer_names;           // "a .. b"
  bool mergeable = true;             // false: some layer is not brickable; layerwise only
  int layerwise = -1;                // index of the layerwise candidate (singletons), else -1
  std::vector<Candidate> candidates; // layerwise first, then strategy × brick × cb × nb × threads
};

class SearchSpace {
public:
  // Enumerates the groups and candidates of `fused` (a fuse_for_inference() result).
  // `source` (the experiment file) is named in errors. Throws UserError for a bad config
  // (max_group_len < 1, empty brick list, partitions that do not tile the graph or cut it
  // where a group would have two outputs, subgraphs that are no valid group). Partition and
  // subgraph groups are in the space whatever their length.
  static SearchSpace build(const Graph& fused, const SearchSpaceConfig& config,
                           const std::string& source = "");

  const Graph& graph() const { return graph_; }
  int num_layers() const { return graph_.size(); } // including the input layer 0
  // The first layer a group may hold: the one after the graph's inputs (1 for one input). A
  // plan tiles first_layer() .. num_layers() − 1.
  int first_layer() const { return graph_.num_inputs(); }
  const std::vector<GroupEntry>& groups() const { return groups_; }
  const GroupEntry& group(int i) const { return groups_.at(static_cast<size_t>(i)); }
  const Candidate& candidate(CandidateRef r) const;
  int64_t num_candidates() const;

  // Group indices ending (starting) at a layer, in order of increasing `first` (`last`).
  const std::vector<int>& groups_ending_at(int layer) const;
  const std::vector<int>& groups_starting_at(int layer) const;
  int find(const Group& g) const; // index, or -1
  int singleton(int layer) const; // the group [layer, layer]

  // Candidates left out before the model ran (never built), by reason.
  const std::map<std::string, int64_t>& pruned() const { return pruned_; }
  // Every listed combination of the space's groups: num_candidates() + the pruned ones.
  int64_t enumerated() const { return enumerated_; }

  // Explicit partitions (config.partitions) as group indices, and their labels ("3+3").
  const std::vector<std::vector<int>>& partitions() const { return partitions_; }
  const std::vector<std::string>& partition_labels() const { return partition_labels_; }

  // Named subgraphs (config.subgraphs) as group indices, and their names. They are groups
  // studied on their own (Figs 8-9): the searchers measure them besides the plan's groups.
  const std::vector<int>& subgraphs() const { return subgraphs_; }
  const std::vector<std::string>& subgraph_names() const { return subgraph_names_; }

  // The merged strategies of the config (padded / memoized), in config order.
  const std::vector<Strategy>& merged_strategies() const { return merged_strategies_; }

private:
  int add_group(const Group& g, const SearchSpaceConfig& config);
  // The padded / memoized candidates of a mergeable group, without the sizes, channel blocks
  // and batch blocks that repeat another's work (counted in pruned_).
  void add_merged_candidates(GroupEntry* e, const SearchSpaceConfig& config);
  // Every valid group of at most `max_len` layers (but those of several layers that only
  // layerwise could run, unless `required`), then the `required` groups still missing; sorts
  // the ending / starting indexes.
  void add_groups_up_to(int max_len, const std::vector<Group>& required,
                        const SearchSpaceConfig& config);

  Graph graph_;
  std::vector<GroupEntry> groups_;
  std::vector<std::vector<int>> ending_at_, starting_at_;
  std::map<std::string, int64_t> pruned_;
  int64_t enumerated_ = 0;
  std::vector<std::vector<int>> partitions_;
  std::vector<std::string> partition_labels_;
  std::vector<int> subgraphs_;
  std::vector<std::string> subgraph_names_;
  std::vector<Strategy> merged_strategies_;
};

// The id in `fused` of the layer that an unfused layer name became (itself, or the layer it
// was folded into by fuse_for_inference), or -1.
int fused_layer_id(const Graph& fused, const std::string& name);

// The canonical layerwise candidate of a singleton group (brick and threads are irrelevant
// and fixed, so the database holds one row per layer workload).
Candidate layerwise_candidate(const Group& group);

} // namespace brickdl::search
