// Names come from the registries: the searchers (search/searcher.h) and the backends
// (search/measurers.h) are the only lists, and an experiment naming something else is refused
// at its place in the file with a suggestion and the registry's names.
#include <gtest/gtest.h>

#include "core/error.h"
#include "core/experiment.h"
#include "search/driver.h"
#include "search/measurers.h"
#include "search/searcher.h"

namespace brickdl::search {
namespace {

const std::string kBase = "model: micro_graphsize\ninput_size: [16, 16, 16]\ntarget: H200\n";

// The UserError check_experiment() throws for `yaml`.
UserError refusal(const std::string& yaml) {
  const ExperimentConfig e = parse_experiment(yaml, "exp.yaml");
  try {
    check_experiment(e);
  } catch (const UserError& err) {
    return err;
  }
  ADD_FAILURE() << "accepted: " << yaml;
  return UserError("none");
}

TEST(Names, UnknownSearcherIsRefusedWhereItIsGiven) {
  const UserError e = refusal(kBase + "search: {searcher: dpp}\n");
  EXPECT_EQ(e.where().file, "exp.yaml");
  EXPECT_EQ(e.where().line, 4);
  EXPECT_EQ(e.where().column, 20);
  EXPECT_EQ(e.where().key, "search.searcher");
  EXPECT_EQ(e.bare_message(),
            "unknown searcher 'dpp' (did you mean 'dp'?); valid: " + join_names(searcher_names()));
}

TEST(Names, UnknownBackendIsRefusedWhereItIsGiven) {
  const UserError e = refusal(kBase + "measurement: {backend: cuda12}\n");
  EXPECT_EQ(e.where().line, 4);
  EXPECT_EQ(e.where().column, 24);
  EXPECT_EQ(e.where().key, "measurement.backend");
  EXPECT_EQ(e.bare_message(), "unknown backend 'cuda12' (did you mean 'cuda'?); valid: " +
                                  join_names(backend_names()));
}

TEST(Names, EveryRegisteredNameIsAccepted) {
  for (const std::string& s : searcher_names()) {
    if (s == "partitions")
      continue; // needs search.partitions (below)
    EXPECT_NO_THROW(
        check_experiment(parse_experiment(kBase + "search: {searcher: " + s + "}\n", "exp.yaml")))
        << s;
  }
  for (const std::string& b : backend_names())
    EXPECT_NO_THROW(
        check_names(parse_experiment(kBase + "measurement: {backend: " + b + "}\n", "exp.yaml")))
        << b;
}

TEST(Names, PartitionsSearcherNeedsPartitions) {
  const UserError e = refusal(kBase + "search: {searcher: partitions}\n");
  EXPECT_EQ(e.where().key, "search.searcher");
  EXPECT_NE(e.bare_message().find("search.partitions"), std::string::npos) << e.what();
  EXPECT_NO_THROW(check_experiment(parse_experiment(
      kBase + "search: {searcher: partitions, partitions: [[3, 3]]}\n", "exp.yaml")));
}

} // namespace
} // namespace brickdl::search
