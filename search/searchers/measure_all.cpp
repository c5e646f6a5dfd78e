// measure_all: the reference mode for studying the model. Plans like dp; measures every
// feasible candidate of the space (of the named subgraphs, when the experiment names some):
// the layerwise baselines first, then every group's best
// predicted candidate, then every group's second best, and so on (so that a budget cut keeps
// the most promising ones).
#include <algorithm>

#include "search/detail/searchers.h"

namespace brickdl::search {

namespace {

class MeasureAllSearcher final : public detail::DpSearcher {
public:
  using DpSearcher::DpSearcher;

protected:
  std::vector<CandidateRef> round_wishes(const Plan&) const override {
    std::vector<int> groups = space().subgraphs();
    if (groups.empty())
      for (size_t g = 0; g < space().groups().size(); ++g)
        groups.push_back(static_cast<int>(g));
    std::vector<CandidateRef> out = baselines(groups);
    std::vector<std::vector<int>> ranked;
    size_t longest = 0;
    for (int g : groups) {
      ranked.push_back(ranked_candidates(predicted(), g));
      longest = std::max(longest, ranked.back().size());
    }
    for (size_t r = 0; r < longest; ++r)
      for (size_t i = 0; i < groups.size(); ++i)
        if (r < ranked[i].size())
          out.push_back(CandidateRef{groups[i], ranked[i][r]});
    return out;
  }
};

} // namespace

namespace detail {
std::unique_ptr<Searcher> make_measure_all_searcher(const SearcherOptions& o) {
  return std::make_unique<MeasureAllSearcher>(o);
}
} // namespace detail

} // namespace brickdl::search
