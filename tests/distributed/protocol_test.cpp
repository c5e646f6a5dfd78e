// distributed/protocol.h without MPI: the messages' JSON round trips, how rank 0 splits the workers
// among targets, the space digest, and the launcher's environment.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/graph_builder.h"
#include "distributed/protocol.h"

namespace brickdl::distributed {
namespace {

using nlohmann::json;

// What goes over the wire: the message as text, parsed back.
json through_text(const json& j) {
  return json::parse(j.dump());
}

// ---- MeasureResult --------------------------------------------------------------------------

constexpr MeasureStatus kAllStatuses[] = {MeasureStatus::kOk,          MeasureStatus::kCompileError,
                                          MeasureStatus::kLaunchError, MeasureStatus::kTimeout,
                                          MeasureStatus::kWrongResult, MeasureStatus::kUnsupported};

// Every field away from its default, so a field the round trip drops shows.
MeasureResult full_result(MeasureStatus status) {
  MeasureResult r;
  r.status = status;
  r.error = status == MeasureStatus::kOk ? "" : "failed: \"quoted\"\nsecond line";
  r.samples_ms = {1.25, 0.5, 3.0e-3, 2.0};
  r.median_ms = 1.125;
  r.min_ms = 0.003;
  r.max_ms = 2.0;
  r.p25_ms = 0.375;
  r.p75_ms = 1.4375;
  r.max_rel_error = 2.5e-7;
  r.counters = {{"dram__bytes_read.sum", 1.5e9}, {"flops", 42}, {"memo_hits", 0}};
  return r;
}

void expect_same(const MeasureResult& a, const MeasureResult& b) {
  EXPECT_EQ(a.status, b.status);
  EXPECT_EQ(a.error, b.error);
  EXPECT_EQ(a.samples_ms, b.samples_ms);
  EXPECT_EQ(a.median_ms, b.median_ms);
  EXPECT_EQ(a.min_ms, b.min_ms);
  EXPECT_EQ(a.max_ms, b.max_ms);
  EXPECT_EQ(a.p25_ms, b.p25_ms);
  EXPECT_EQ(a.p75_ms, b.p75_ms);
  EXPECT_EQ(a.max_rel_error, b.max_rel_error);
  EXPECT_EQ(a.counters, b.counters);
}

TEST(ResultJson, RoundTripsEveryFieldForEveryStatus) {
  for (MeasureStatus s : kAllStatuses) {
    SCOPED_TRACE(measure_status_name(s));
    const MeasureResult r = full_result(s);
    const json j = to_json(r);
    EXPECT_EQ(j.at("status").get<std::string>(), measure_status_name(s));
    expect_same(result_from_json(j), r);
    expect_same(result_from_json(through_text(j)), r);
  }
}

TEST(ResultJson, RoundTripsAnEmptyResult) {
  const MeasureResult r; // no samples, no counters
  expect_same(result_from_json(through_text(to_json(r))), r);
}

// JSON has no NaN or infinity (dump() would write null): a wrong result with NaN outputs
// (max_rel_error = inf, kernels/validation.cpp) must still arrive as what it is, not end an
// MPI run as an internal error.
TEST(ResultJson, NonFiniteNumbersSurviveTheWire) {
  MeasureResult r = full_result(MeasureStatus::kWrongResult);
  r.max_rel_error = std::numeric_limits<double>::infinity();
  r.samples_ms = {1.0, std::numeric_limits<double>::quiet_NaN()};
  r.min_ms = -std::numeric_limits<double>::infinity();
  r.counters["nan_counter"] = std::numeric_limits<double>::quiet_NaN();
  const MeasureResult back = result_from_json(through_text(to_json(r)));
  EXPECT_EQ(back.max_rel_error, r.max_rel_error);
  EXPECT_EQ(back.min_ms, r.min_ms);
  ASSERT_EQ(back.samples_ms.size(), 2u);
  EXPECT_EQ(back.samples_ms[0], 1.0);
  EXPECT_TRUE(std::isnan(back.samples_ms[1]));
  EXPECT_TRUE(std::isnan(back.counters.at("nan_counter")));
  // A string that is no number is still refused.
  json j = to_json(r);
  j["median_ms"] = "infinite";
  EXPECT_THROW(result_from_json(j), InternalError);
}

TEST(ResultJson, MissingKeyThrowsInternalError) {
  const json full = to_json(full_result(MeasureStatus::kOk));
  ASSERT_EQ(full.size(), 10u); // every key below is one the reader needs
  for (const auto& [key, value] : full.items()) {
    SCOPED_TRACE(key);
    json j = full;
    j.erase(key);
    EXPECT_THROW(result_from_json(j), InternalError);
  }
}

TEST(ResultJson, UnknownStatusThrowsInternalErrorNamingIt) {
  json j = to_json(full_result(MeasureStatus::kOk));
  j["status"] = "exploded";
  try {
    result_from_json(j);
    FAIL() << "no exception";
  } catch (const InternalError& e) {
    EXPECT_NE(std::string(e.what()).find("exploded"), std::string::npos) << e.what();
  }
}

TEST(ResultJson, WrongTypeThrowsInternalError) {
  const json full = to_json(full_result(MeasureStatus::kOk));
  const std::vector<std::pair<std::string, json>> wrong = {{"status", 0},
                                                           {"error", 1},
                                                           {"samples_ms", "fast"},
                                                           {"samples_ms", {"a"}},
                                                           {"median_ms", "1.0"},
                                                           {"min_ms", nullptr},
                                                           {"max_ms", json::array()},
                                                           {"p25_ms", "0.375"},
                                                           {"p75_ms", "x"},
                                                           {"max_rel_error", "0"},
                                                           {"counters", {1, 2}},
                                                           {"counters", {{"flops", "many"}}}};
  for (const auto& [key, value] : wrong) {
    SCOPED_TRACE(key + " = " + value.dump());
    json j = full;
    j[key] = value;
    EXPECT_THROW(result_from_json(j), InternalError);
  }
  EXPECT_THROW(result_from_json(json::array()), InternalError);
  EXPECT_THROW(result_from_json(json()), InternalError);
}

// ---- Hello ----------------------------------------------------------------------------------

TEST(HelloJson, RoundTripsEveryField) {
  Hello h;
  h.rank = 7;
  h.host = "node-3";
  h.target = "gpu:NVIDIA H200/sm90/550.54/12.4/9.1#siteA";
  h.backend = "cuda";
  h.digest = "0123456789abcdef/42";
  h.error = "";
  h.device = "0000:3b:00.0";
  for (const std::string error : {"", "it is worker 5 of host node-3, which has 4 GPU(s)"}) {
    h.error = error;
    const Hello back = hello_from_json(through_text(to_json(h)));
    EXPECT_EQ(back.rank, h.rank);
    EXPECT_EQ(back.host, h.host);
    EXPECT_EQ(back.target, h.target);
    EXPECT_EQ(back.backend, h.backend);
    EXPECT_EQ(back.digest, h.digest);
    EXPECT_EQ(back.error, h.error);
    EXPECT_EQ(back.device, h.device);
  }
}

TEST(HelloJson, MalformedThrowsInternalError) {
  const json full = to_json(Hello{3, "h", "cpu:x", "cpu", "d/1", ""});
  for (const auto& [key, value] : full.items()) {
    SCOPED_TRACE(key);
    json missing = full;
    missing.erase(key);
    EXPECT_THROW(hello_from_json(missing), InternalError);
    json wrong = full;
    wrong[key] = key == "rank" ? json("three") : json(3);
    EXPECT_THROW(hello_from_json(wrong), InternalError);
  }
}

// ---- assign_workers -------------------------------------------------------------------------

const std::string kDigest = "00000000cafef00d/120";

Hello hello(int rank, const std::string& target, const std::string& digest = kDigest,
            const std::string& error = "", const std::string& backend = "cuda") {
  return Hello{rank, "host" + std::to_string(rank), target, backend, digest, error};
}

bool mentions(const std::string& text, const std::string& word) {
  return text.find(word) != std::string::npos;
}

std::vector<int> refused_ranks(const Assignment& a) {
  std::vector<int> out;
  for (const auto& [rank, why] : a.refused)
    out.push_back(rank);
  return out;
}

TEST(AssignWorkers, MajorityTargetWinsOverTheLowestRank) {
  const Assignment a = assign_workers(
      {hello(1, "gpu:A100"), hello(2, "gpu:H200"), hello(3, "gpu:H200"), hello(4, "gpu:H200")},
      kDigest, false);
  ASSERT_EQ(a.runs.size(), 1u);
  EXPECT_EQ(a.runs[0].target, "gpu:H200");
  EXPECT_EQ(a.runs[0].backend, "cuda");
  EXPECT_EQ(a.runs[0].ranks, (std::vector<int>{2, 3, 4}));
  ASSERT_EQ(a.refused.size(), 1u);
  EXPECT_EQ(a.refused[0].first, 1);
}

TEST(AssignWorkers, TieGoesToTheTargetOfTheLowestRank) {
  // A answers first, but B holds the lowest rank (2).
  const Assignment a = assign_workers(
      {hello(3, "gpu:A"), hello(5, "gpu:A"), hello(4, "gpu:B"), hello(2, "gpu:B")}, kDigest, false);
  ASSERT_EQ(a.runs.size(), 1u);
  EXPECT_EQ(a.runs[0].target, "gpu:B");
  EXPECT_EQ(a.runs[0].ranks, (std::vector<int>{2, 4}));
  EXPECT_EQ(refused_ranks(a), (std::vector<int>{3, 5}));
}

TEST(AssignWorkers, MinorityTargetIsRefusedNamingBothTargetsAndEachTarget) {
  const Assignment a = assign_workers(
      {hello(1, "gpu:H200"), hello(2, "gpu:A100"), hello(3, "gpu:H200"), hello(4, "cpu:EPYC")},
      kDigest, false);
  ASSERT_EQ(a.runs.size(), 1u);
  EXPECT_EQ(a.runs[0].target, "gpu:H200");
  ASSERT_EQ(refused_ranks(a), (std::vector<int>{2, 4}));
  for (const auto& [rank, why] : a.refused) {
    SCOPED_TRACE(why);
    EXPECT_TRUE(mentions(why, rank == 2 ? "gpu:A100" : "cpu:EPYC"));
    EXPECT_TRUE(mentions(why, "gpu:H200"));
    EXPECT_TRUE(mentions(why, "--each-target"));
  }
}

TEST(AssignWorkers, WorkerWithAnErrorIsRefusedWithItsOwnError) {
  const std::string error = "it is worker 5 of host node-1, which has 4 GPU(s)";
  // Its digest differs too: its own error is the reason given.
  const Assignment a = assign_workers(
      {hello(1, "gpu:H200"), hello(2, "", "", error), hello(3, "", "feedface/7", error)}, kDigest,
      false);
  ASSERT_EQ(a.runs.size(), 1u);
  EXPECT_EQ(a.runs[0].ranks, (std::vector<int>{1}));
  ASSERT_EQ(a.refused.size(), 2u);
  EXPECT_EQ(a.refused[0], std::make_pair(2, error));
  EXPECT_EQ(a.refused[1], std::make_pair(3, error));
}

TEST(AssignWorkers, WorkerWithAnotherDigestIsRefusedNamingBothDigests) {
  const Assignment a = assign_workers(
      {hello(1, "gpu:H200"), hello(2, "gpu:H200", "feedfacefeedface/99"), hello(3, "gpu:H200")},
      kDigest, true);
  ASSERT_EQ(a.runs.size(), 1u);
  EXPECT_EQ(a.runs[0].ranks, (std::vector<int>{1, 3}));
  ASSERT_EQ(a.refused.size(), 1u);
  EXPECT_EQ(a.refused[0].first, 2);
  const std::string& why = a.refused[0].second;
  EXPECT_TRUE(mentions(why, "feedfacefeedface/99")) << why;
  EXPECT_TRUE(mentions(why, kDigest)) << why;
  EXPECT_TRUE(mentions(why, "different experiment")) << why;
}

TEST(AssignWorkers, EachTargetRunsEveryTargetMajorityFirst) {
  const Assignment a = assign_workers(
      {hello(1, "gpu:A100"), hello(2, "gpu:H200"), hello(3, "gpu:H200"),
       hello(4, "cpu:EPYC", kDigest, "", "cpu"), hello(5, "gpu:A100"), hello(6, "gpu:H200")},
      kDigest, true);
  EXPECT_TRUE(a.refused.empty());
  ASSERT_EQ(a.runs.size(), 3u);
  EXPECT_EQ(a.runs[0].target, "gpu:H200");
  EXPECT_EQ(a.runs[0].ranks, (std::vector<int>{2, 3, 6}));
  EXPECT_EQ(a.runs[1].target, "gpu:A100");
  EXPECT_EQ(a.runs[1].ranks, (std::vector<int>{1, 5}));
  EXPECT_EQ(a.runs[2].target, "cpu:EPYC");
  EXPECT_EQ(a.runs[2].backend, "cpu");
  EXPECT_EQ(a.runs[2].ranks, (std::vector<int>{4}));
}

TEST(AssignWorkers, EachTargetBreaksTiesByTheLowestRank) {
  const Assignment a = assign_workers(
      {hello(4, "gpu:A"), hello(6, "gpu:A"), hello(5, "gpu:B"), hello(3, "gpu:B")}, kDigest, true);
  ASSERT_EQ(a.runs.size(), 2u);
  EXPECT_EQ(a.runs[0].target, "gpu:B");
  EXPECT_EQ(a.runs[1].target, "gpu:A");
}

TEST(AssignWorkers, RanksAscendAndRefusedAreSortedByRank) {
  // Answers in descending rank order; refusals of every kind interleaved.
  const Assignment a =
      assign_workers({hello(8, "gpu:H200"), hello(7, "gpu:A100"), hello(6, "gpu:H200", "other/1"),
                      hello(5, "gpu:H200"), hello(4, "", "", "no GPU"), hello(3, "gpu:H200"),
                      hello(2, "gpu:A100"), hello(1, "gpu:H200")},
                     kDigest, false);
  ASSERT_EQ(a.runs.size(), 1u);
  EXPECT_EQ(a.runs[0].ranks, (std::vector<int>{1, 3, 5, 8}));
  EXPECT_EQ(refused_ranks(a), (std::vector<int>{2, 4, 6, 7}));
}

TEST(AssignWorkers, AllRefusedLeavesNoRun) {
  for (bool each_target : {false, true}) {
    const Assignment a = assign_workers(
        {hello(1, "", "", "cuDNN missing"), hello(2, "gpu:H200", "other/3")}, kDigest, each_target);
    EXPECT_TRUE(a.runs.empty());
    EXPECT_EQ(refused_ranks(a), (std::vector<int>{1, 2}));
  }
  const Assignment none = assign_workers({}, kDigest, false);
  EXPECT_TRUE(none.runs.empty());
  EXPECT_TRUE(none.refused.empty());
}

// Two workers that would measure on one GPU (same host and PCI bus id, e.g. more workers than
// GPUs on a node): the lower rank keeps it, the other is refused naming both. The same bus id
// on another host is another GPU; CPU workers (no device) never clash.
TEST(AssignWorkers, TwoWorkersOnOneGpuRefusesTheHigherRank) {
  std::vector<Hello> hs = {hello(3, "gpu:A"), hello(1, "gpu:A"), hello(2, "gpu:A"),
                           hello(4, "cpu:X"), hello(5, "cpu:X")};
  hs[0].host = hs[1].host = "n1";
  hs[2].host = "n2";
  hs[0].device = hs[1].device = hs[2].device = "0000:3b:00.0";
  hs[3].host = hs[4].host = "n1";
  const Assignment a = assign_workers(hs, kDigest, true);
  ASSERT_EQ(a.refused.size(), 1u);
  EXPECT_EQ(a.refused[0].first, 3);
  EXPECT_TRUE(mentions(a.refused[0].second, "0000:3b:00.0")) << a.refused[0].second;
  EXPECT_TRUE(mentions(a.refused[0].second, "rank 1")) << a.refused[0].second;
  ASSERT_EQ(a.runs.size(), 2u);
  EXPECT_EQ(a.runs[0].ranks, (std::vector<int>{1, 2}));
  EXPECT_EQ(a.runs[1].ranks, (std::vector<int>{4, 5}));
}

// ---- digests --------------------------------------------------------------------------------

// Measurement settings that shape a result change the digest; the backend (resolved on each
// node) and what only rank 0 uses (top_k, budgets) do not.
TEST(MeasurementDigest, CoversWhatShapesAResult) {
  const MeasurementConfig base;
  const std::string d = measurement_digest(base);
  EXPECT_EQ(d, measurement_digest(MeasurementConfig{}));
  const auto with = [&](auto edit) {
    MeasurementConfig m;
    edit(m);
    return measurement_digest(m);
  };
  EXPECT_NE(with([](MeasurementConfig& m) { m.options.repetitions = 11; }), d);
  EXPECT_NE(with([](MeasurementConfig& m) { m.options.warmup = 1; }), d);
  EXPECT_NE(with([](MeasurementConfig& m) { m.options.seed = 2; }), d);
  EXPECT_NE(with([](MeasurementConfig& m) { m.options.rtol = 1e-3; }), d);
  EXPECT_NE(with([](MeasurementConfig& m) { m.options.flush_l2 = false; }), d);
  EXPECT_NE(with([](MeasurementConfig& m) { m.cpu_threads = 1; }), d);
  EXPECT_NE(with([](MeasurementConfig& m) { m.counters = {"dram__bytes_read.sum"}; }), d);
  EXPECT_EQ(with([](MeasurementConfig& m) { m.backend = "cpu"; }), d);
  EXPECT_EQ(with([](MeasurementConfig& m) { m.top_k = 7; }), d);
  EXPECT_EQ(with([](MeasurementConfig& m) { m.budget_s = 60; }), d);
}

// Two residual blocks and a 1x1 conv (as tests/search/driver_test.cpp), `channels` wide.
Graph two_block_graph(int64_t channels = 8) {
  GraphBuilder b("blocks", TensorShape{1, channels, 1, 16, 16, 2});
  int x = b.input();
  for (int i = 0; i < 2; ++i) {
    const int y = b.relu(b.conv2d(x, channels, 3, 1, 1));
    x = b.relu(b.add(b.conv2d(y, channels, 3, 1, 1), x));
  }
  b.conv2d(x, channels, 1);
  return b.build();
}

SearchSpaceConfig small_config() {
  SearchSpaceConfig c;
  c.brick_sizes = {4, 8};
  c.max_group_len = 3;
  return c;
}

std::string digest_of(const Graph& g, const SearchSpaceConfig& c) {
  return space_digest(search::SearchSpace::build(fuse_for_inference(g), c));
}

TEST(SpaceDigest, EqualForTheSameGraphAndConfig) {
  const search::SearchSpace a =
      search::SearchSpace::build(fuse_for_inference(two_block_graph()), small_config());
  const search::SearchSpace b =
      search::SearchSpace::build(fuse_for_inference(two_block_graph()), small_config());
  const std::string d = space_digest(a);
  EXPECT_EQ(d, space_digest(b));
  EXPECT_EQ(d, space_digest(a)); // and stable on one space
  // "<16 hex digits>/<candidates>"
  ASSERT_EQ(d.find('/'), 16u) << d;
  EXPECT_EQ(d.substr(0, 16).find_first_not_of("0123456789abcdef"), std::string::npos) << d;
  EXPECT_EQ(d.substr(17), std::to_string(a.num_candidates()));
}

TEST(SpaceDigest, DiffersWhenTheConfigDiffers) {
  const std::string base = digest_of(two_block_graph(), small_config());
  SearchSpaceConfig other_bricks = small_config();
  other_bricks.brick_sizes = {4, 16};
  SearchSpaceConfig other_len = small_config();
  other_len.max_group_len = 2;
  SearchSpaceConfig other_threads = small_config();
  other_threads.threads = {128};
  EXPECT_NE(digest_of(two_block_graph(), other_bricks), base);
  EXPECT_NE(digest_of(two_block_graph(), other_len), base);
  EXPECT_NE(digest_of(two_block_graph(), other_threads), base);
}

TEST(SpaceDigest, DiffersWithTheSameCandidateCount) {
  // Same number of bricks and threads, so the same count: only the hash can tell them apart.
  SearchSpaceConfig other_bricks = small_config();
  other_bricks.brick_sizes = {4, 16};
  const search::SearchSpace a =
      search::SearchSpace::build(fuse_for_inference(two_block_graph()), small_config());
  const search::SearchSpace b =
      search::SearchSpace::build(fuse_for_inference(two_block_graph()), other_bricks);
  ASSERT_EQ(a.num_candidates(), b.num_candidates());
  EXPECT_NE(space_digest(a), space_digest(b));
}

TEST(SpaceDigest, DiffersWhenTheGraphDiffers) {
  EXPECT_NE(digest_of(two_block_graph(16), small_config()),
            digest_of(two_block_graph(8), small_config()));
}

TEST(ExperimentDigest, JoinsTheSpaceAndTheMeasurement) {
  const search::SearchSpace a =
      search::SearchSpace::build(fuse_for_inference(two_block_graph()), small_config());
  MeasurementConfig m;
  EXPECT_EQ(experiment_digest(a, m), space_digest(a) + "+" + measurement_digest(m));
  MeasurementConfig other;
  other.options.repetitions = 3;
  EXPECT_NE(experiment_digest(a, m), experiment_digest(a, other));
}

// ---- launcher_world_size / launcher_rank ----------------------------------------------------

constexpr const char* kLauncherVars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_SIZE", "PMI_SIZE",
                                         "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"};

// Each test starts with no launcher variable set and leaves the environment as it found it.
class LauncherEnv : public ::testing::Test {
protected:
  void SetUp() override {
    for (const char* name : kLauncherVars) {
      const char* v = std::getenv(name);
      saved_[name] = v ? std::optional<std::string>(v) : std::nullopt;
      unsetenv(name);
    }
  }
  void TearDown() override {
    for (const auto& [name, value] : saved_) {
      if (value)
        setenv(name.c_str(), value->c_str(), 1);
      else
        unsetenv(name.c_str());
    }
  }
  static void set(const char* name, const char* value) { setenv(name, value, 1); }

private:
  std::map<std::string, std::optional<std::string>> saved_;
};

// The launcher's world size and this process's rank, as read now.
void expect_launcher(int size, int rank) {
  EXPECT_EQ(launcher_world_size(), size);
  EXPECT_EQ(launcher_rank(), rank);
}

TEST_F(LauncherEnv, NoneSetIsZero) {
  expect_launcher(0, 0);
}

TEST_F(LauncherEnv, ReadsOpenMpi) {
  set("OMPI_COMM_WORLD_SIZE", "4");
  set("OMPI_COMM_WORLD_RANK", "3");
  expect_launcher(4, 3);
}

TEST_F(LauncherEnv, ReadsPmixAndPmi) {
  set("PMIX_SIZE", "6");
  set("PMIX_RANK", "5");
  expect_launcher(6, 5);
  unsetenv("PMIX_SIZE");
  unsetenv("PMIX_RANK");
  set("PMI_SIZE", "9");
  set("PMI_RANK", "8");
  expect_launcher(9, 8);
}

TEST_F(LauncherEnv, OpenMpiBeforePmixBeforePmi) {
  set("PMI_SIZE", "9");
  set("PMI_RANK", "8");
  set("PMIX_SIZE", "6");
  set("PMIX_RANK", "5");
  expect_launcher(6, 5);
  set("OMPI_COMM_WORLD_SIZE", "4");
  set("OMPI_COMM_WORLD_RANK", "3");
  expect_launcher(4, 3);
}

TEST_F(LauncherEnv, RankZeroIsARank) {
  set("OMPI_COMM_WORLD_RANK", "0");
  set("PMI_RANK", "7");
  EXPECT_EQ(launcher_rank(), 0);
}

TEST_F(LauncherEnv, GarbageIsIgnored) {
  for (const char* bad : {"abc", "-3", "", "4x", "2.5", "99999999999999999999", " 4", "+4"}) {
    SCOPED_TRACE(std::string("'") + bad + "'");
    set("OMPI_COMM_WORLD_SIZE", bad);
    set("OMPI_COMM_WORLD_RANK", bad);
    EXPECT_EQ(launcher_world_size(), 0);
    EXPECT_EQ(launcher_rank(), 0);
    // ... and the next launcher's variable is read instead.
    set("PMI_SIZE", "3");
    set("PMI_RANK", "2");
    EXPECT_EQ(launcher_world_size(), 3);
    EXPECT_EQ(launcher_rank(), 2);
    unsetenv("PMI_SIZE");
    unsetenv("PMI_RANK");
  }
}

TEST_F(LauncherEnv, SizeZeroMeansNoLauncher) {
  set("OMPI_COMM_WORLD_SIZE", "0");
  EXPECT_EQ(launcher_world_size(), 0);
  set("PMIX_SIZE", "2");
  EXPECT_EQ(launcher_world_size(), 2);
}

} // namespace
} // namespace brickdl::distributed
