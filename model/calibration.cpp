#include "model/calibration.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include <fmt/format.h>

#include "core/error.h"
#include "model/detail/memory.h"

namespace brickdl::model {

namespace {

double median(std::vector<double> v) {
  if (v.empty())
    return 0;
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

std::vector<double> ranks(const std::vector<double>& v) {
  std::vector<size_t> order(v.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return v[a] < v[b]; });
  std::vector<double> r(v.size());
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    while (j + 1 < order.size() && v[order[j + 1]] == v[order[i]])
      ++j;
    const double avg = 0.5 * static_cast<double>(i + j) + 1.0; // ranks are 1-based
    for (size_t k = i; k <= j; ++k)
      r[order[k]] = avg;
    i = j + 1;
  }
  return r;
}

} // namespace

double spearman(const std::vector<double>& a, const std::vector<double>& b) {
  BRICKDL_CHECK(a.size() == b.size(),
                "spearman of vectors of sizes " << a.size() << " and " << b.size());
  if (a.size() < 2)
    return 0;
  const std::vector<double> ra = ranks(a), rb = ranks(b);
  const double n = static_cast<double>(a.size());
  const double ma = std::accumulate(ra.begin(), ra.end(), 0.0) / n;
  const double mb = std::accumulate(rb.begin(), rb.end(), 0.0) / n;
  double sab = 0, saa = 0, sbb = 0;
  for (size_t i = 0; i < ra.size(); ++i) {
    sab += (ra[i] - ma) * (rb[i] - mb);
    saa += (ra[i] - ma) * (ra[i] - ma);
    sbb += (rb[i] - mb) * (rb[i] - mb);
  }
  if (saa == 0 || sbb == 0)
    return 0;
  return sab / std::sqrt(saa * sbb);
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
  Eigen::VectorXd x = Eigen::VectorXd::Zero(n);
  std::vector<bool> passive(static_cast<size_t>(n), false);
  const double tol = 10 * std::numeric_limits<double>::epsilon() *
                     std::max<double>(1.0, a.cwiseAbs().colwise().sum().maxCoeff()) *
                     static_cast<double>(std::max(a.rows(), n));

  // Least squares on the passive columns; zero elsewhere.
  const auto solve_passive = [&]() {
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
  };

  Eigen::VectorXd w = a.transpose() * (b - a * x);
  std::vector<bool> excluded(static_cast<size_t>(n), false);
  int iterations = 0;
  while (iterations < max_iterations) {
    // The most promising variable still at its bound.
    Eigen::Index best = -1;
    for (Eigen::Index j = 0; j < n; ++j)
      if (!passive[static_cast<size_t>(j)] && !excluded[static_cast<size_t>(j)] && w(j) > tol &&
          (best < 0 || w(j) > w(best)))
        best = j;
    if (best < 0)
      break;
    passive[static_cast<size_t>(best)] = true;
    Eigen::VectorXd s = solve_passive();
    if (s(best) <= 0) {
      // Numerically dependent on the passive set: it cannot help; leave it at zero.
      passive[static_cast<size_t>(best)] = false;
      excluded[static_cast<size_t>(best)] = true;
      continue;
    }
    // Inner loop: step back towards x until the passive solution is feasible.
    while (iterations++ < max_iterations) {
      bool feasible = true;
      for (Eigen::Index j = 0; j < n; ++j)
        if (passive[static_cast<size_t>(j)] && s(j) <= 0)
          feasible = false;
      if (feasible)
        break;
      double alpha = 1;
      for (Eigen::Index j = 0; j < n; ++j)
        if (passive[static_cast<size_t>(j)] && s(j) <= 0)
          alpha = std::min(alpha, x(j) / (x(j) - s(j)));
      x += alpha * (s - x);
      for (Eigen::Index j = 0; j < n; ++j)
        if (passive[static_cast<size_t>(j)] && x(j) <= tol) {
          passive[static_cast<size_t>(j)] = false;
          x(j) = 0;
        }
      s = solve_passive();
    }
    x = s;
    w = a.transpose() * (b - a * x);
    std::fill(excluded.begin(), excluded.end(), false);
  }
  return x;
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

  std::vector<const MeasuredRow*> used;
  for (const MeasuredRow& r : rows)
    if (r.measured_ms > 0 && r.predicted.feasible)
      used.push_back(&r);
  if (used.empty()) {
    cal.notes.push_back("no feasible row with a measured time: coefficients unchanged");
    cal.after = cal.before;
    return cal;
  }

  // Relative least squares: row i divided by its measured time, target 1.
  Eigen::MatrixXd f(static_cast<Eigen::Index>(used.size()), kTimeComponents);
  for (size_t i = 0; i < used.size(); ++i) {
    const auto c = time_components(used[i]->predicted);
    for (int k = 0; k < kTimeComponents; ++k)
      f(static_cast<Eigen::Index>(i), k) = c[static_cast<size_t>(k)] / used[i]->measured_ms;
  }
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
  if (!cols.empty()) {
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

  const detail::ResolvedCoefficients r = detail::resolve(gpu, current);
  const auto& m = cal.multiplier;
  Coefficients& c = cal.coefficients;
  const auto efficiency = [&](int k, double old, double* out) {
    if (m[static_cast<size_t>(k)] > 0) {
      *out = old / m[static_cast<size_t>(k)];
    } else if (cal.identified[static_cast<size_t>(k)]) {
      cal.notes.push_back(std::string("the ") + time_component_name(k) +
                          " term fitted to zero (no measurable effect): efficiency kept");
    }
  };
  efficiency(0, current.dram_efficiency, &c.dram_efficiency);
  efficiency(1, current.l2_efficiency, &c.l2_efficiency);
  efficiency(2, current.compute_efficiency, &c.compute_efficiency);
  c.atomic_ns = r.atomic_ns * m[3];
  c.conflict_ns = r.conflict_ns * m[4];
  c.launch_us = r.launch_us * m[5];
  c.barrier_ns = r.barrier_ns * m[6];

  std::vector<MeasuredRow> fitted(rows.begin(), rows.end());
  for (MeasuredRow& row : fitted) {
    const auto comp = time_components(row.predicted);
    double t = 0;
    for (int k = 0; k < kTimeComponents; ++k)
      t += m[static_cast<size_t>(k)] * comp[static_cast<size_t>(k)];
    row.predicted.time_ms = t;
  }
  cal.after = accuracy(fitted);
  return cal;
}

} // namespace brickdl::model
