#pragma once
// Constructors of the concrete searchers (search/searchers/*.cpp), for make_searcher().
#include <memory>

#include "search/searcher.h"

namespace brickdl::search::detail {

// Plans with dp_plan(); the base of topk and measure_all.
class DpSearcher : public Searcher {
public:
  using Searcher::Searcher;
  Plan plan(const CostMatrix& cost) const override { return dp_plan(space(), cost); }
};

std::unique_ptr<Searcher> make_dp_searcher(const SearcherOptions& options);
std::unique_ptr<Searcher> make_exhaustive_searcher(const SearcherOptions& options);
std::unique_ptr<Searcher> make_random_searcher(const SearcherOptions& options);
std::unique_ptr<Searcher> make_topk_searcher(const SearcherOptions& options);
std::unique_ptr<Searcher> make_measure_all_searcher(const SearcherOptions& options);
std::unique_ptr<Searcher> make_partitions_searcher(const SearcherOptions& options);

} // namespace brickdl::search::detail
