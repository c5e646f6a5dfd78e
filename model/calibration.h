#pragma once
// Calibration: fits the model's coefficients to measured rows of one target, and says how
// accurate the model is.
//
//   rows (Prediction under coefficients c, measured time, measured DRAM bytes)
//     ──calibrate(rows, c, gpu)──► NNLS on the time components ──► Coefficients c'
//     ──accuracy(rows)──────────► median / worst relative error, Spearman rank correlation
//
// The time model is linear in its coefficients once each kernel's bounding term is fixed:
//   time = bound_dram / e_dram + bound_l2 / e_l2 + bound_compute / e_compute
//          + claims · atomic_ns + conflicts · wait · (brick time) + launches · launch_us
//          + barriers · barrier_ns / concurrent
// so the fit finds non-negative multipliers m of the seven components of the predictions
// (Prediction::bound_*_ms, t_atomic_*, t_launch_ms, t_sync_ms), minimising the squared
// RELATIVE error (each row divided by its measured time, so fast kernels count as much as
// slow ones), and folds them into the coefficients (e' = e / m, cost' = cost · m). The
// bounding term of a kernel can change with the new coefficients: re-predict with c' and
// fit again; two or three rounds settle.
#include <array>
#include <string>
#include <vector>

#include <Eigen/Dense>

#include "core/gpu_spec.h"
#include "model/cost_model.h"

namespace brickdl::model {

struct MeasuredRow {
  Prediction predicted; // under the coefficients being refined
  double measured_ms = 0;
  double measured_dram_bytes = -1; // < 0: not measured (CPU backend, no counters)
};

struct Accuracy {
  int rows = 0;                                       // rows with a measured time
  int dram_rows = 0;                                  // rows with measured DRAM bytes
  double median_time_error = 0, worst_time_error = 0; // |pred − meas| / meas
  double median_dram_error = 0, worst_dram_error = 0;
  double spearman_time = 0; // rank correlation of predicted and measured time
  std::string str() const;  // one line
};

Accuracy accuracy(const std::vector<MeasuredRow>& rows);

// Spearman's rank correlation (ties get their average rank). 0 for fewer than 2 values or a
// constant vector.
double spearman(const std::vector<double>& a, const std::vector<double>& b);

// Non-negative least squares, min ‖A x − b‖₂ subject to x ≥ 0 (Lawson and Hanson, 1974,
// "Solving Least Squares Problems", ch. 23): an active-set method that moves one variable at
// a time into the passive set and solves the unconstrained problem on it.
Eigen::VectorXd nnls(const Eigen::MatrixXd& a, const Eigen::VectorXd& b, int max_iterations = 0);

// The seven time components, in the order the multipliers use.
inline constexpr int kTimeComponents = 7;
const char* time_component_name(int k); // "dram", "l2", "compute", "atomic", "conflict", ...
std::array<double, kTimeComponents> time_components(const Prediction& p);

struct Calibration {
  Coefficients coefficients;                      // the fitted ones
  std::array<double, kTimeComponents> multiplier; // per component; 1 = unchanged
  std::array<bool, kTimeComponents> identified;   // false: no row exercises it (kept)
  Accuracy before, after;                         // of the time fit on the rows
  std::vector<std::string> notes;                 // what could not be fitted, and why
};

Calibration calibrate(const std::vector<MeasuredRow>& rows, const Coefficients& current,
                      const GpuSpec& gpu);

} // namespace brickdl::model
