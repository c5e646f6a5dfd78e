// topk: plans like dp and measures the top_k predicted candidates of the plan's groups, then
// re-plans with the measured times and measures what the new plan has not measured, round
// after round (at most max_rounds) until a round adds nothing.
#include <algorithm>

#include "search/detail/searchers.h"

namespace brickdl::search {

namespace {

class TopkSearcher final : public detail::DpSearcher {
public:
  using DpSearcher::DpSearcher;

protected:
  int max_rounds() const override { return std::max(1, options().max_rounds); }
};

} // namespace

namespace detail {
std::unique_ptr<Searcher> make_topk_searcher(const SearcherOptions& o) {
  return std::make_unique<TopkSearcher>(o);
}
} // namespace detail

} // namespace brickdl::search
