// Names come from the registries: the searchers (search/searcher.h) and the backends
// (search/measurers.h) are the only lists, and an experiment naming something else is refused
// at its place in the file with a suggestion and the registry's names.
#include <gtest/gtest.h>

#include <algorithm>

#include "core/error.h"
#include "core/experiment.h"
#include "search/driver.h"
#include "search/measurers.h"
#include "search/searcher.h"

namespace brickdl::search {
namespace {

std::vector<DType> dtype_list(const std::vector<std::string>& names) {
  std::vector<DType> v;
  for (const std::string& n : names) {
    DType t;
    EXPECT_TRUE(parse_dtype(n, &t)) << n;
    v.push_back(t);
  }
  return v;
}

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

// Each backend computes some precisions (search/measurers.h); another is refused where the
// backend was chosen, with the backends that compute it.
TEST(Names, BackendRefusesAPrecisionItCannotCompute) {
  const UserError cpu = refusal(kBase + "precision: tf32\nmeasurement: {backend: cpu}\n");
  EXPECT_EQ(cpu.where().line, 5);
  EXPECT_EQ(cpu.where().column, 24);
  EXPECT_EQ(cpu.where().key, "measurement.backend");
  EXPECT_EQ(cpu.bare_message(),
            "backend 'cpu' computes fp32 only; precision 'tf32' runs with backend 'cuda' or "
            "model-only with backend 'none' (--backend none)");
  for (const char* p : {"bf16", "fp16"}) {
    const UserError cpu16 = refusal(kBase + "precision: " + p + "\nmeasurement: {backend: cpu}\n");
    EXPECT_EQ(cpu16.bare_message(),
              std::string("backend 'cpu' computes fp32 only; precision '") + p +
                  "' runs with backend 'cuda' or model-only with backend 'none' (--backend none)");
  }
  // From the command line (brickdl-tune --backend): the flag is the place.
  ExperimentConfig e = parse_experiment(kBase + "precision: bf16\n", "exp.yaml");
  e.measurement.backend = "cpu";
  e.measurement.backend_at = SourceLocation{"the command line", 0, 0, "--backend"};
  try {
    check_precision(e);
    ADD_FAILURE() << "cpu accepted bf16";
  } catch (const UserError& err) {
    EXPECT_EQ(err.where().key, "--backend");
    EXPECT_NE(err.bare_message().find("backend 'cpu' computes fp32 only"), std::string::npos);
  }
}

TEST(Names, EveryBackendComputesWhatItLists) {
  EXPECT_EQ(backend_precisions("none"), dtype_list(dtype_names()));
  EXPECT_EQ(backend_precisions("cpu"), std::vector<DType>{DType::kF32});
  EXPECT_EQ(backend_precisions("cuda"),
            (std::vector<DType>{DType::kF32, DType::kTF32, DType::kBF16, DType::kF16}));
  EXPECT_EQ(backend_precisions("auto"), backend_precisions(resolve_backend("auto")));
  for (const std::string& b : backend_names()) {
    for (const std::string& p : dtype_names()) {
      const std::string yaml = kBase + "precision: " + p + "\nmeasurement: {backend: " + b + "}\n";
      DType t;
      ASSERT_TRUE(parse_dtype(p, &t));
      const std::vector<DType> runs = backend_precisions(b);
      if (std::find(runs.begin(), runs.end(), t) != runs.end()) {
        EXPECT_NO_THROW(check_precision(parse_experiment(yaml, "exp.yaml"))) << b << " " << p;
      } else {
        EXPECT_THROW(check_precision(parse_experiment(yaml, "exp.yaml")), UserError)
            << b << " " << p;
      }
    }
  }
}

// backend 'auto' (also the default) computes what it resolves to here: without a GPU the CPU
// backend, so tf32 is refused with the way out; the place is the precision when the backend
// is the default.
TEST(Names, AutoRefusesWhatItsResolutionCannotCompute) {
  std::string why_not;
  if (resolve_backend("auto", &why_not) == "cuda") {
    EXPECT_NO_THROW(check_precision(parse_experiment(kBase + "precision: tf32\n", "exp.yaml")));
    EXPECT_NO_THROW(check_precision(parse_experiment(kBase + "precision: fp16\n", "exp.yaml")));
    return;
  }
  const UserError e = refusal(kBase + "precision: tf32\n");
  EXPECT_EQ(e.where().line, 4);
  EXPECT_EQ(e.where().key, "precision");
  EXPECT_EQ(e.bare_message(), "backend 'auto' falls back to 'cpu' here (no usable GPU: " + why_not +
                                  "), which computes fp32 only; precision 'tf32' runs with "
                                  "backend 'cuda' or model-only with backend 'none' (--backend "
                                  "none)");
  EXPECT_NO_THROW(check_precision(parse_experiment(kBase + "precision: fp32\n", "exp.yaml")));
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
