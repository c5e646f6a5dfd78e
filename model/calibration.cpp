#include "model/calibration.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include <fmt/format.h>

#include "core/detail/statistics.h"
#include "core/error.h"
#include "model/detail/memory.h"

namespace brickdl::model {

namespace {

using brickdl::detail::median;

// Least squares on the passive columns of a; zero elsewhere.
Eigen::VectorXd solve_passive(const Eigen::MatrixXd& a, const Eigen::VectorXd& b,
                              const std::vector<bool>& passive) {
  const Eigen::Index n = a.cols();
  std::vector<Eigen::Index> cols;
  for (Eigen::Index j = 0; j < n; ++j)
    if (passive[static_cast<size_t>(j)])
      cols.push_back(j);
  Eigen::MatrixXd ap(a.rows(), static_cast<Eigen::Index>(cols.size()));
  for (size_t k = 0; k < cols.size(); ++k)
    ap.col(static_cast<Eigen::Index>(k)) = a.col(cols[k]);
  const Eigen::VectorXd sp = ap.colPivHouseholderQr().solve(b);
  Eigen::VectorXd s = Eigen::VectorXd::Zero(n);
  for (size_t k = 0; k < cols.size(); ++k)
    s(cols[k]) = sp(static_cast<Eigen::Index>(k));
  return s;
}

// Below this, a gradient or a variable counts as zero: 10 ε · max(1, largest column sum of
// |A|) · max(rows, columns).
double nnls_tolerance(const Eigen::MatrixXd& a) {
  return 10 * std::numeric_limits<double>::epsilon() *
         std::max<double>(1.0, a.cwiseAbs().colwise().sum().maxCoeff()) *
         static_cast<double>(std::max(a.rows(), a.cols()));
}

// The NNLS iterate: x, its passive set (free variables), and the variables excluded until x
// next moves.
struct ActiveSet {
  Eigen::VectorXd x;
  std::vector<bool> passive, excluded;
};

// The most promising variable still at its bound: the largest gradient w above tol; -1 when
// none is.
Eigen::Index most_promising(const Eigen::VectorXd& w, const ActiveSet& set, double tol) {
  Eigen::Index best = -1;
  for (Eigen::Index j = 0; j < w.size(); ++j)
    if (!set.passive[static_cast<size_t>(j)] && !set.excluded[static_cast<size_t>(j)] &&
        w(j) > tol && (best < 0 || w(j) > w(best)))
      best = j;
  return best;
}

// Inner loop: steps x back towards the passive solution s until s is feasible (every passive
// variable positive), moving the variables that reach zero back to their bound; counts its
// steps in `iterations`. Returns the last passive solution.
Eigen::VectorXd step_to_feasible(const Eigen::MatrixXd& a, const Eigen::VectorXd& b, double tol,
                                 int max_iterations, int& iterations, ActiveSet& set,
                                 Eigen::VectorXd s) {
  const Eigen::Index n = a.cols();
  Eigen::VectorXd& x = set.x;
  while (iterations++ < max_iterations) {
    bool feasible = true;
    for (Eigen::Index j = 0; j < n; ++j)
      if (set.passive[static_cast<size_t>(j)] && s(j) <= 0)
        feasible = false;
    if (feasible)
      break;
    double alpha = 1;
    for (Eigen::Index j = 0; j < n; ++j)
      if (set.passive[static_cast<size_t>(j)] && s(j) <= 0)
        alpha = std::min(alpha, x(j) / (x(j) - s(j)));
    x += alpha * (s - x);
    for (Eigen::Index j = 0; j < n; ++j)
      if (set.passive[static_cast<size_t>(j)] && x(j) <= tol) {
        set.passive[static_cast<size_t>(j)] = false;
        x(j) = 0;
      }
    s = solve_passive(a, b, set.passive);
  }
  return s;
}

// The rows the fit uses: feasible, with a measured time.
std::vector<const MeasuredRow*> fitted_rows(const std::vector<MeasuredRow>& rows) {
  std::vector<const MeasuredRow*> used;
  for (const MeasuredRow& r : rows)
    if (r.measured_ms > 0 && r.predicted.feasible)
      used.push_back(&r);
  return used;
}

// Relative least squares: row i holds the time components of row i divided by its measured
// time (the target is 1).
Eigen::MatrixXd relative_components(const std::vector<const MeasuredRow*>& used) {
  Eigen::MatrixXd f(static_cast<Eigen::Index>(used.size()), kTimeComponents);
  for (size_t i = 0; i < used.size(); ++i) {
    const auto c = time_components(used[i]->predicted);
    for (int k = 0; k < kTimeComponents; ++k)
      f(static_cast<Eigen::Index>(i), k) = c[static_cast<size_t>(k)] / used[i]->measured_ms;
  }
  return f;
}

// The components some row exercises (marked in cal.identified); a note for each other one.
std::vector<int> identified_columns(const Eigen::MatrixXd& f, Calibration& cal) {
  std::vector<int> cols;
  for (int k = 0; k < kTimeComponents; ++k) {
    if (f.col(k).norm() > 0) {
      cols.push_back(k);
      cal.identified[static_cast<size_t>(k)] = true;
    } else {
      cal.notes.push_back(std::string("no row has a ") + time_component_name(k) +
                          " component: kept as is");
    }
  }
  return cols;
}

// NNLS of the columns `cols` of f against 1: their multipliers (cal.multiplier).
void fit_multipliers(const Eigen::MatrixXd& f, const std::vector<int>& cols, Calibration& cal) {
  // Unit-norm columns for conditioning; the scale is undone after the solve.
  Eigen::MatrixXd a(f.rows(), static_cast<Eigen::Index>(cols.size()));
  Eigen::VectorXd scale(static_cast<Eigen::Index>(cols.size()));
  for (size_t k = 0; k < cols.size(); ++k) {
    scale(static_cast<Eigen::Index>(k)) = f.col(cols[k]).norm();
    a.col(static_cast<Eigen::Index>(k)) = f.col(cols[k]) / scale(static_cast<Eigen::Index>(k));
  }
  const Eigen::VectorXd x = nnls(a, Eigen::VectorXd::Ones(f.rows()));
  for (size_t k = 0; k < cols.size(); ++k)
    cal.multiplier[static_cast<size_t>(cols[k])] =
        x(static_cast<Eigen::Index>(k)) / scale(static_cast<Eigen::Index>(k));
}

// Efficiency of component k: the old one divided by its multiplier; kept (with a note when
// the component was identified) when the multiplier is zero.
void fold_efficiency(Calibration& cal, int k, double old, double& out) {
  const double m = cal.multiplier[static_cast<size_t>(k)];
  if (m > 0) {
    out = old / m;
  } else if (cal.identified[static_cast<size_t>(k)]) {
    cal.notes.push_back(std::string("the ") + time_component_name(k) +
                        " term fitted to zero (no measurable effect): efficiency kept");
  }
}

// The fitted coefficients: efficiencies divided by their multipliers, costs multiplied.
void fold_multipliers(const GpuSpec& gpu, const Coefficients& current, Calibration& cal) {
  const detail::ResolvedCoefficients r = detail::resolve(gpu, current);
  const auto& m = cal.multiplier;
  Coefficients& c = cal.coefficients;
  fold_efficiency(cal, 0, current.dram_efficiency, c.dram_efficiency);
  fold_efficiency(cal, 1, current.l2_efficiency, c.l2_efficiency);
  fold_efficiency(cal, 2, current.compute_efficiency, c.compute_efficiency);
  c.atomic_ns = r.atomic_ns * m[3];
  c.conflict_ns = r.conflict_ns * m[4];
  c.launch_us = r.launch_us * m[5];
  c.barrier_ns = r.barrier_ns * m[6];
}

// The rows with their predicted time recomputed from the multiplied components.
std::vector<MeasuredRow> refit(const std::vector<MeasuredRow>& rows,
                               const std::array<double, kTimeComponents>& m) {
  std::vector<MeasuredRow> fitted(rows.begin(), rows.end());
  for (MeasuredRow& row : fitted) {
    const auto comp = time_components(row.predicted);
    double t = 0;
    for (int k = 0; k < kTimeComponents; ++k)
      t += m[static_cast<size_t>(k)] * comp[static_cast<size_t>(k)];
    row.predicted.time_ms = t;
  }
  return fitted;
}

} // namespace

double spearman(const std::vector<double>& a, const std::vector<double>& b) {
  return brickdl::detail::spearman(a, b).value_or(0);
}

Accuracy accuracy(const std::vector<MeasuredRow>& rows) {
  Accuracy acc;
  std::vector<double> terr, derr, pred, meas;
  for (const MeasuredRow& r : rows) {
    if (r.measured_ms > 0) {
      terr.push_back(std::fabs(r.predicted.time_ms - r.measured_ms) / r.measured_ms);
      pred.push_back(r.predicted.time_ms);
      meas.push_back(r.measured_ms);
    }
    if (r.measured_dram_bytes > 0)
      derr.push_back(std::fabs(r.predicted.dram_bytes - r.measured_dram_bytes) /
                     r.measured_dram_bytes);
  }
  acc.rows = static_cast<int>(terr.size());
  acc.dram_rows = static_cast<int>(derr.size());
  acc.median_time_error = median(terr);
  acc.worst_time_error = terr.empty() ? 0 : *std::max_element(terr.begin(), terr.end());
  acc.median_dram_error = median(derr);
  acc.worst_dram_error = derr.empty() ? 0 : *std::max_element(derr.begin(), derr.end());
  acc.spearman_time = spearman(pred, meas);
  return acc;
}

std::string Accuracy::str() const {
  std::string s = fmt::format("time (n={}): median error {:.1f} %, worst {:.1f} %, Spearman {:.3f}",
                              rows, 100 * median_time_error, 100 * worst_time_error, spearman_time);
  if (dram_rows > 0)
    s += fmt::format("; DRAM bytes (n={}): median error {:.1f} %, worst {:.1f} %", dram_rows,
                     100 * median_dram_error, 100 * worst_dram_error);
  return s;
}

Eigen::VectorXd nnls(const Eigen::MatrixXd& a, const Eigen::VectorXd& b, int max_iterations) {
  BRICKDL_CHECK(a.rows() == b.size(), "nnls: A has " << a.rows() << " rows, b " << b.size());
  const Eigen::Index n = a.cols();
  if (max_iterations <= 0)
    max_iterations = static_cast<int>(3 * n + 10);
  ActiveSet set{Eigen::VectorXd::Zero(n), std::vector<bool>(static_cast<size_t>(n), false),
                std::vector<bool>(static_cast<size_t>(n), false)};
  const double tol = nnls_tolerance(a);
  Eigen::VectorXd w = a.transpose() * (b - a * set.x);
  int iterations = 0;
  while (iterations < max_iterations) {
    const Eigen::Index best = most_promising(w, set, tol);
    if (best < 0)
      break;
    set.passive[static_cast<size_t>(best)] = true;
    Eigen::VectorXd s = solve_passive(a, b, set.passive);
    if (s(best) <= 0) {
      // Numerically dependent on the passive set: it cannot help; leave it at zero.
      set.passive[static_cast<size_t>(best)] = false;
      set.excluded[static_cast<size_t>(best)] = true;
      continue;
    }
    set.x = step_to_feasible(a, b, tol, max_iterations, iterations, set, std::move(s));
    w = a.transpose() * (b - a * set.x);
    std::fill(set.excluded.begin(), set.excluded.end(), false);
  }
  return set.x;
}

const char* time_component_name(int k) {
  static const char* names[kTimeComponents] = {"dram",     "l2",     "compute", "atomic",
                                               "conflict", "launch", "sync"};
  return (k >= 0 && k < kTimeComponents) ? names[k] : "?";
}

std::array<double, kTimeComponents> time_components(const Prediction& p) {
  return {p.bound_dram_ms,        p.bound_l2_ms, p.bound_compute_ms, p.t_atomic_compulsory_ms,
          p.t_atomic_conflict_ms, p.t_launch_ms, p.t_sync_ms};
}

Calibration calibrate(const std::vector<MeasuredRow>& rows, const Coefficients& current,
                      const GpuSpec& gpu) {
  Calibration cal;
  cal.coefficients = current;
  cal.multiplier.fill(1.0);
  cal.identified.fill(false);
  cal.before = accuracy(rows);

  const std::vector<const MeasuredRow*> used = fitted_rows(rows);
  if (used.empty()) {
    cal.notes.push_back("no feasible row with a measured time: coefficients unchanged");
    cal.after = cal.before;
    return cal;
  }
  const Eigen::MatrixXd f = relative_components(used);
  const std::vector<int> cols = identified_columns(f, cal);
  if (!cols.empty())
    fit_multipliers(f, cols, cal);
  fold_multipliers(gpu, current, cal);
  cal.after = accuracy(refit(rows, cal.multiplier));
  return cal;
}

} // namespace brickdl::model
