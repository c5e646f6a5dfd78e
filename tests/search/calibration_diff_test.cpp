// What a device calibration changes in the model's plans (search/calibration_diff.h), on the
// H200 tf32 ResNet-50 of experiments/resnet50.yaml, with the synthetic calibrations of
// tests/data/calibration/ (model predictions; nothing is measured).
#include <filesystem>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "core/experiment.h"
#include "search/calibration_diff.h"

namespace brickdl::search {
namespace {

const std::string kSource = BRICKDL_SOURCE_DIR;

CalibrationDiff diff(const std::string& calibration, const std::string& experiment) {
  ExperimentOverrides plain;
  plain.gpu = "H200";
  plain.precision = "tf32";
  ExperimentOverrides calibrated = plain;
  calibrated.calibration = kSource + "/tests/data/calibration/" + calibration;
  const std::string path = kSource + "/experiments/" + experiment;
  const std::string db = ::testing::TempDir() + "/calibration_diff_" + calibration + ".db";
  for (const char* suffix : {"", "-wal", "-shm"})
    std::filesystem::remove(db + suffix);
  return diff_calibration(load_experiment(path, plain), load_experiment(path, calibrated), db);
}

// wgmma at 0.3 of the peak (the spec's 0.75 of the library's rate is 0.45 of it), slower
// DRAM and L2: every merged tensor-core group costs more, so the plan predicts more and merges
// differently.
TEST(CalibrationDiff, ASlowerCalibrationChangesTheResNet50Plan) {
  const CalibrationDiff d = diff("h200_synthetic.json", "resnet50.yaml");
  EXPECT_EQ(d.spec_before, "H200");
  EXPECT_EQ(d.spec_after.rfind("H200+cal-", 0), 0u) << d.spec_after;
  EXPECT_GT(d.after.predicted_ms, d.before.predicted_ms * 1.05);
  EXPECT_GT(d.after.layerwise_predicted_ms, d.before.layerwise_predicted_ms); // DRAM, L2, launch
  EXPECT_FALSE(d.changes.empty());
  for (const GroupChange& c : d.changes)
    EXPECT_NE(c.before, c.after) << c.layers;

  std::ostringstream out;
  print_calibration_diffs({d}, out);
  EXPECT_NE(out.str().find("model predictions (backend none: nothing measured), tf32 for H200 "
                           "before and " +
                           d.spec_after + " after"),
            std::string::npos)
      << out.str();
  EXPECT_NE(out.str().find("resnet50: groups that changed"), std::string::npos);
}

// Values equal to what the spec already implies (measured rates are achieved ones: the peak
// times the model's default efficiency, the fractions times its compute efficiency) predict
// what the plain spec does: the calibration changes the name, nothing else.
TEST(CalibrationDiff, ACalibrationEqualToTheModelsAssumptionsChangesNothing) {
  const CalibrationDiff d = diff("h200_model_equivalent.json", "resnet50.yaml");
  EXPECT_NE(d.spec_after, d.spec_before);
  EXPECT_TRUE(d.changes.empty()) << d.changes.size() << " groups changed, first "
                                 << d.changes.front().layers;
  EXPECT_NEAR(d.after.predicted_ms, d.before.predicted_ms, 1e-9 * d.before.predicted_ms);
  EXPECT_NEAR(d.after.layerwise_predicted_ms, d.before.layerwise_predicted_ms,
              1e-9 * d.before.layerwise_predicted_ms);
  ASSERT_EQ(d.after.groups.size(), d.before.groups.size());
  for (size_t i = 0; i < d.before.groups.size(); ++i)
    EXPECT_NEAR(d.after.groups[i].predicted_ms, d.before.groups[i].predicted_ms,
                1e-9 * d.before.groups[i].predicted_ms)
        << d.before.groups[i].layer_names;
}

TEST(CalibrationDiff, ChangesAreByLayerRange) {
  PlanSummary before, after;
  PlanGroupSummary g;
  g.group = {1, 2};
  g.layer_names = "a .. b";
  g.candidate.strategy = Strategy::kPadded;
  before.groups.push_back(g);
  after.groups.push_back(g); // the same: not a change
  g.group = {3, 3};
  g.layer_names = "c";
  g.candidate.strategy = Strategy::kLayerwise;
  before.groups.push_back(g);
  g.group = {3, 4};
  g.layer_names = "c .. d";
  g.candidate.strategy = Strategy::kMemoized;
  after.groups.push_back(g);
  const std::vector<GroupChange> c = plan_changes(before, after);
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].layers, "c");
  EXPECT_EQ(c[0].before, "layerwise");
  EXPECT_EQ(c[0].after, "");
  EXPECT_EQ(c[1].layers, "c .. d");
  EXPECT_EQ(c[1].before, "");
  EXPECT_EQ(c[1].after.rfind("memoized", 0), 0u);
}

} // namespace
} // namespace brickdl::search
