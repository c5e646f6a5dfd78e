#pragma once
// Searchers: how a plan is found, and which candidates are worth measuring.
//
//            init(space, predicted cost)
//   driver ──────────────────────────────► Searcher ──plan(cost)──► Plan
//     │ ◄─────────── propose(n) ────────────┤   (candidates to measure next, best first)
//     └─ measure ────notify(results) ──────►│   (re-plans with what was measured)
//
// Planners (plan()):
//   dp          dynamic program over the topological order: best[i] = min over groups
//               [j+1, i] of best[j] + cost of the group's best candidate. Exact under the
//               given cost; equal-cost plans resolve by plan_before() (search/plan.h).
//   exhaustive  every partition × the best candidate of each group (small graphs only).
//   random      random partitions × random usable candidates; keeps the best sample.
//   topk, measure_all  plan like dp, differ in what they measure (below).
//   partitions  the experiment's explicit partitions × each merged strategy, one strategy
//               per partition; alternatives() lists them all (Fig 10).
//
// Measuring (propose()): the layerwise baselines of the plan's layers first, then the top_k
// best-predicted candidates of each group of the plan, rank by rank; named subgraphs
// (search.subgraphs) are measured as if they were groups of the plan. dp, exhaustive,
// random and partitions do one such round from the predicted plan. topk re-plans with the measured
// times after each round and measures the new plan's unmeasured groups the same way, until a
// round finds nothing new or max_rounds. measure_all measures every feasible candidate,
// baselines first, then rank by rank over all groups (only over the named subgraphs, when
// the experiment names some).
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "search/cost_table.h"
#include "search/plan.h"
#include "search/search_space.h"

namespace brickdl::search {

struct SearcherOptions {
  std::string name = "dp"; // dp | exhaustive | random | topk | measure_all | partitions
  int top_k = 3;           // candidates measured per group of the plan
  int random_samples = 1000;
  uint64_t seed = 1;
  int max_rounds = 4; // topk: measure / re-plan rounds
};

struct MeasuredCandidate {
  CandidateRef ref;
  double ms = kExcluded; // median time; kExcluded: failed; kNotMeasured: skipped (budget)
};

class Searcher {
public:
  explicit Searcher(SearcherOptions options) : options_(std::move(options)) {}
  virtual ~Searcher() = default;
  const SearcherOptions& options() const { return options_; }

  // Binds the searcher to a space and the model's cost. Call once, first; `space` must
  // outlive the searcher.
  void init(const SearchSpace& space, const CostMatrix& predicted);

  // The best plan this searcher finds under `cost`. Deterministic for a given seed. A plan
  // with cost kExcluded (and a note) when no usable plan exists.
  virtual Plan plan(const CostMatrix& cost) const = 0;
  // Other plans worth reporting next to the best one (partitions: every partition ×
  // strategy and the layerwise baseline), costed under `cost`.
  virtual std::vector<Plan> alternatives(const CostMatrix& /*cost*/) const { return {}; }

  // Up to `n` candidates to measure next, best first. Candidates may be proposed while
  // earlier ones are still being measured (parallel workers); a new round is planned only
  // once every proposed candidate was notify()'d, so an empty answer means "done" only when
  // nothing is pending (pending() == 0), else "wait for a result and ask again".
  std::vector<CandidateRef> propose(int n);
  int pending() const { return static_cast<int>(pending_.size()); }
  // Outcomes of proposed candidates (or of ones found already measured).
  void notify(const std::vector<MeasuredCandidate>& results);

  // The predicted cost combined with everything notified so far (search/cost_table.h).
  CombinedCosts current_costs() const;
  int rounds() const { return rounds_; } // measuring rounds planned so far
  // Candidates of the current round not proposed yet (for progress displays).
  int queued() const { return static_cast<int>(queue_.size() - queue_pos_); }

protected:
  // The candidates a measuring round wants, in priority order (duplicates and candidates
  // seen before are dropped by the caller). Default: baselines of the layers of
  // studied_groups(plan), then the top_k predicted candidates of those groups, rank by rank.
  virtual std::vector<CandidateRef> round_wishes(const Plan& plan) const;
  virtual int max_rounds() const { return 1; }

  const SearchSpace& space() const { return *space_; }
  const CostMatrix& predicted() const { return predicted_; }
  // The layerwise candidates of every layer of `groups`.
  std::vector<CandidateRef> baselines(const std::vector<int>& groups) const;
  // The plan's groups, then the space's named subgraphs not among them.
  std::vector<int> studied_groups(const Plan& plan) const;

private:
  SearcherOptions options_;
  const SearchSpace* space_ = nullptr;
  CostMatrix predicted_;
  CostMatrix measured_;
  void next_round();

  std::set<CandidateRef> seen_;     // queued or notified
  std::set<CandidateRef> notified_; // results known
  std::vector<CandidateRef> queue_;
  size_t queue_pos_ = 0;
  std::set<CandidateRef> pending_; // proposed, not notified yet
  int rounds_ = 0;
  bool converged_ = false;
};

// Throws UserError naming the valid searchers for an unknown name.
std::unique_ptr<Searcher> make_searcher(const SearcherOptions& options);
std::vector<std::string> searcher_names();

// The planners, also usable on their own.
Plan dp_plan(const SearchSpace& space, const CostMatrix& cost);
// Throws UserError when the graph has more than `max_partitions` partitions.
Plan exhaustive_plan(const SearchSpace& space, const CostMatrix& cost,
                     int64_t max_partitions = 2'000'000);
Plan random_plan(const SearchSpace& space, const CostMatrix& cost, int samples, uint64_t seed);
// Number of ways to tile the graph with the space's groups (saturates at INT64_MAX).
int64_t count_partitions(const SearchSpace& space);

} // namespace brickdl::search
