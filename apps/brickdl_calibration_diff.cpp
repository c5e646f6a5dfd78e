// brickdl-calibration-diff: how the model's plans change under a device calibration
// (core/gpu_calibration.h, docs/calibration.md). Each experiment is tuned model-only (backend
// none) for the calibration's spec, once with the spec's own values and once calibrated, into a
// temporary database removed afterwards: nothing reaches the user's database or output folders.
//
//   brickdl-calibration-diff CALIBRATION.json EXPERIMENT.yaml [more.yaml ...]
//                            [--precision P] [--batch N]
//
// The seven models of the result set: experiments/{resnet50,darknet53,deepcam,drn_c_26,
// inception_v4,vgg16_bn,resnet3d_34}.yaml. Exit status: 0 done, 2 bad input, 3 internal error.
#include <filesystem>
#include <iostream>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "apps/run_tool.h"
#include "core/experiment.h"
#include "core/gpu_calibration.h"
#include "search/calibration_diff.h"
#include "search/driver.h"

namespace {

using namespace brickdl;

struct Args {
  std::string calibration;
  std::vector<std::string> experiments;
  std::string precision = "tf32"; // the calibration's tensor fractions need tensor math
  std::optional<int> batch;
};

// A folder of its own under the system's temporary folder, removed with everything in it.
class TemporaryFolder {
public:
  TemporaryFolder() {
    std::random_device rd;
    const auto base = std::filesystem::temp_directory_path();
    for (int attempt = 0; attempt < 16; ++attempt) {
      path_ = base / fmt::format("brickdl-calibration-diff-{:016x}",
                                 (uint64_t{rd()} << 32) ^ uint64_t{rd()});
      if (std::filesystem::create_directory(path_))
        return;
    }
    throw UserError("cannot create a temporary folder in " + base.string());
  }
  ~TemporaryFolder() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TemporaryFolder(const TemporaryFolder&) = delete;
  TemporaryFolder& operator=(const TemporaryFolder&) = delete;
  std::string file(const std::string& name) const { return (path_ / name).string(); }

private:
  std::filesystem::path path_;
};

int run(const Args& a) {
  // The spec the calibration was measured against is the target of every run.
  const GpuCalibration cal =
      read_gpu_calibration(a.calibration, SourceLocation{"the command line", 0, 0, "CALIBRATION"});
  ExperimentOverrides plain;
  plain.gpu = cal.spec;
  plain.precision = a.precision;
  plain.batch = a.batch;
  ExperimentOverrides calibrated = plain;
  calibrated.calibration = a.calibration;
  std::vector<std::pair<ExperimentConfig, ExperimentConfig>> pairs;
  for (const std::string& path : a.experiments) // every file checked before any is tuned
    pairs.emplace_back(load_experiment(path, plain), load_experiment(path, calibrated));
  const ExperimentConfig& first = pairs.front().second;
  std::cout << first.calibration->summary() << '\n';
  for (const std::string& note : first.calibration->notes)
    std::cout << "note: " << note << '\n';
  const TemporaryFolder tmp;
  std::vector<search::CalibrationDiff> diffs;
  double seconds = 0;
  for (const auto& [before, after] : pairs) {
    diffs.push_back(search::diff_calibration(before, after, tmp.file("tuning.db")));
    seconds += diffs.back().seconds;
  }
  std::cout << '\n';
  search::print_calibration_diffs(diffs, std::cout);
  std::cerr << fmt::format("{} experiment(s) tuned twice, model only, in {:.1f} s\n", diffs.size(),
                           seconds);
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  Args a;
  CLI::App app{"brickdl-calibration-diff: how the model's plans change under a device "
               "calibration (model predictions; nothing is measured or written)"};
  app.add_option("calibration", a.calibration,
                 "a calibration file of brickdl-calibrate (docs/calibration.md)")
      ->required();
  app.add_option("experiment", a.experiments, "experiment YAML files, tuned in turn")->required();
  app.add_option("--precision", a.precision,
                 "the precision of every run (default tf32): " + join_names(dtype_names()));
  app.add_option("--batch", a.batch, "over the experiments' `batch`")
      ->check(CLI::Range(1, 1 << 20));
  return run_tool("brickdl-calibration-diff", app, argc, argv, [&] { return run(a); });
}
