// brickdl-calibrate: measures in seconds of GPU time what the model otherwise guesses
// (core/gpu_spec.h) and writes it as a calibration file for the tuner (kernels/cuda/
// calibration_file.h; docs/kernels.md, Calibration):
//
//   DRAM read bandwidth     a read sweep over a buffer far larger than L2, best of a few runs
//   L2 read bandwidth       repeated sweeps over a quarter of L2, best of a few runs
//   launch gap              N empty kernels back to back: (t_N − t_1) / (N − 1)
//   tensor-peak fractions   a compute-bound conv (3x3, 256→256, 56x56) run by the generated
//                           kernels through CudaMeasurer, on wgmma and on mma.sync, in tf32
//                           and bf16: 2·MACs / median cold time / the spec's peak; CUPTI's
//                           tensor-pipe metrics of each run; cuDNN on the same conv as a
//                           reference (shown, never applied)
//
// --plan prints the convs it would run (the model's choice, its prediction) and needs no GPU;
// --precompile DIR compiles their kernels (of a full and of a --quick run) into an NVRTC cache
// for sm_90 (no GPU either), so a lent GPU's minutes go to measuring; a kernel that draws a
// ptxas performance advisory (C75xx) or a stack frame of 128+ bytes is named on stderr and makes
// the exit status 1.
//
// Exit status: 0 all measured; 1 some measurement failed (the file is still written, with its
// `failed` entries), or with --precompile a kernel was flagged by ptxas; 2 bad flags or an unknown
// spec; 3 internal error; 4 no usable GPU (one line saying why; nothing written).
#include <cmath>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "apps/run_tool.h"
#include "core/error.h"
#include "core/git_revision.h"
#include "core/gpu_spec.h"
#include "core/graph_builder.h"
#include "kernels/cuda/calibration.h"
#include "kernels/cuda/calibration_file.h"
#include "kernels/cuda/codegen.h"
#include "kernels/cuda/cuda_measurer.h"
#include "kernels/cuda/cupti_profiler.h"
#include "kernels/cuda/device_attributes.h"
#include "kernels/cuda/nvrtc_compiler.h"
#include "kernels/cuda/statuses.h"
#include "model/cost_model.h"
#include "search/search_space.h"

namespace {

using namespace brickdl;
using cuda::CalibrationFile;

constexpr int kNoGpu = 4;
constexpr double kTimeoutS = 20; // per measurement: a hung kernel costs this, not the session

struct Options {
  std::optional<std::string> spec;
  int device = 0;
  std::string out;
  bool quick = false;
  bool plan = false;
  std::string precompile;
};

// How much each part runs: the full calibration, or --quick (fewer runs, smaller buffers).
struct Effort {
  double conv_target_ms;   // the spec's guess for one run of the conv
  int conv_repetitions;    // cold runs per conv (median)
  bool cudnn_reference;    // the cuDNN conv as a reference
  int64_t dram_bytes;      // the DRAM sweep's buffer
  double l2_bytes_per_run; // bytes one L2 run reads
  int stream_runs;         // runs per bandwidth (best)
  int launch_kernels;      // N of the launch gap
  int launch_runs;         // runs of t_1 and t_N (median)
};

Effort effort(bool quick) {
  if (quick)
    return {0.5, 5, false, int64_t{1} << 30, 1e9, 3, 100, 3};
  return {1.0, 10, true, int64_t{2} << 30, 2e9, 5, 200, 5};
}

// ---- the conv of the tensor fractions ----------------------------------------------------

constexpr int64_t kConvChannels = 256, kConvImage = 56, kConvKernel = 3;
constexpr int64_t kMaxConvBatch = 128; // its host-side data: 128 images are 400 MB of fp32
const DType kPrecisions[] = {DType::kTF32, DType::kBF16};

Graph conv_graph(int64_t batch, DType t) {
  GraphBuilder b("calibration_conv",
                 TensorShape{batch, kConvChannels, 1, kConvImage, kConvImage, 2}, t);
  b.relu(
      b.conv2d(b.input(), kConvChannels, static_cast<int>(kConvKernel), 1, 1, 1, 1, true, "conv"));
  return fuse_for_inference(b.build());
}

// The smallest power of two from 8 (up to kMaxConvBatch) at which the spec's guess of the
// faster instruction kind puts one run at `target_ms` or more.
int64_t conv_batch(const GpuSpec& spec, DType t, double target_ms) {
  const double flops_per_image =
      2.0 * kConvImage * kConvImage * kConvChannels * kConvChannels * kConvKernel * kConvKernel;
  const double rate = cuda::tensor_peak_tflops(spec, t) * 1e12 *
                      std::max(spec.wgmma_fraction, spec.mma_sync_fraction);
  int64_t batch = 8;
  while (batch < kMaxConvBatch && batch * flops_per_image / rate * 1e3 < target_ms)
    batch *= 2;
  return batch;
}

struct ConvRun {
  std::string key; // wgmma_fraction.tf32, ...
  DType precision = DType::kTF32;
  bool wgmma = false;
  int64_t batch = 0;
  Graph graph;
  Candidate candidate;
  model::Prediction prediction;
  std::string problem; // why there is none ("" when there is)
};

cuda::CodegenOptions codegen_for(bool wgmma, const cuda::DeviceAttributes* dev) {
  cuda::CodegenOptions o;
  if (dev) {
    o.max_smem_bytes =
        static_cast<int>(std::min<int64_t>(o.max_smem_bytes, dev->smem_per_block_optin_bytes));
    o.max_cluster = std::min(o.max_cluster, cuda::max_cluster_for(dev->cc));
  }
  o.wgmma = wgmma;
  return o;
}

// Padded single-conv candidates of 256 threads (whole warpgroups: wgmma where allowed), bricks
// and blocks the tuner enumerates.
std::vector<Candidate> conv_candidates() {
  std::vector<Candidate> out;
  for (const auto& [h, w] : {std::pair{8, 8}, {8, 16}, {16, 8}, {14, 14}, {16, 16}, {28, 8}})
    for (int cb : {0, 64, 128})
      for (int nb : {1, 2, 4}) {
        Candidate c;
        c.group = {1, 1};
        c.strategy = Strategy::kPadded;
        c.brick = BrickShape{1, h, w, cb, nb, 1};
        c.threads = 256;
        out.push_back(c);
      }
  return out;
}

// The model's fastest candidate whose generated kernel runs the conv on the wanted instruction
// kind (the model's spec without wgmma for mma.sync, so its footprint and rate are mma.sync's).
void choose_candidate(ConvRun& r, const GpuSpec& spec, const cuda::DeviceAttributes* dev) {
  GpuSpec s = spec;
  if (!r.wgmma)
    s.wgmma_fraction = 0;
  const model::CostModel model(s);
  double best = -1;
  for (const Candidate& c : conv_candidates()) {
    const model::Prediction p = model.predict(r.graph, c);
    if (!p.feasible || (best >= 0 && p.time_ms >= best))
      continue;
    try {
      const cuda::PlanPaths paths =
          cuda::plan_paths(cuda::plan_kernels(r.graph, c, codegen_for(r.wgmma, dev)));
      if (paths.convs_mma != 1 || paths.convs_wgmma != (r.wgmma ? 1 : 0))
        continue;
    } catch (const cuda::Unsupported&) {
      continue;
    }
    best = p.time_ms;
    r.candidate = c;
    r.prediction = p;
  }
  if (best < 0)
    r.problem = "no padded 256-thread candidate of the conv runs on " +
                std::string(r.wgmma ? "wgmma" : "mma.sync") + " under the model";
}

std::vector<ConvRun> plan_convs(const GpuSpec& spec, const Effort& e,
                                const cuda::DeviceAttributes* dev) {
  std::vector<ConvRun> runs;
  const bool has_wgmma = dev ? cuda::wgmma_for(dev->cc) : spec.wgmma_fraction > 0;
  for (bool wgmma : {true, false}) {
    if (wgmma && !has_wgmma)
      continue; // no wgmma on this device: the spec's wgmma_fraction stays 0, nothing to measure
    for (DType t : kPrecisions) {
      ConvRun r;
      r.key = wgmma ? cuda::wgmma_fraction_key(t) : cuda::mma_sync_fraction_key(t);
      r.precision = t;
      r.wgmma = wgmma;
      r.batch = conv_batch(spec, t, e.conv_target_ms);
      r.graph = conv_graph(r.batch, t);
      choose_candidate(r, spec, dev);
      runs.push_back(std::move(r));
    }
  }
  return runs;
}

std::string conv_label(const ConvRun& r) {
  return fmt::format("conv {0}x{0} {1}->{1} {2}x{2} n={3} {4}", kConvKernel, kConvChannels,
                     kConvImage, r.batch, dtype_name(r.precision));
}

// Whether the model calls the conv compute-bound, with its three times.
std::string model_note(const model::Prediction& p) {
  const bool bound = p.t_compute_ms >= p.t_dram_ms && p.t_compute_ms >= p.t_l2_ms;
  return fmt::format("model: {} (compute {:.3f} ms, DRAM {:.3f} ms, L2 {:.3f} ms)",
                     bound ? "compute-bound" : "NOT compute-bound", p.t_compute_ms, p.t_dram_ms,
                     p.t_l2_ms);
}

// ---- measurements ------------------------------------------------------------------------

struct Session {
  const Options& o;
  const Effort& e;
  const GpuSpec& spec;
  const cuda::DeviceAttributes& dev;
  std::vector<std::string> metrics; // of calibration_metrics(), those the chip knows
  CalibrationFile file;
};

// One measurement, its failure recorded under `key` (a Failure's status and message).
template <class Body> void guarded(Session& s, const std::string& key, Body body) {
  try {
    body();
  } catch (const cuda::Failure& f) {
    cuda::record_failure(s.file, key,
                         std::string(measure_status_name(f.status())) + ": " + f.what());
  } catch (const std::exception& x) {
    cuda::record_failure(s.file, key, x.what());
  }
}

void measure_dram(Session& s) {
  guarded(s, cuda::kDramBandwidthKey, [&] {
    const int64_t bytes = std::min<int64_t>(s.e.dram_bytes, s.dev.global_mem_bytes / 4);
    const cuda::StreamTiming t =
        cuda::measure_dram_read(s.o.device, bytes, s.e.stream_runs, kTimeoutS);
    const double ms = cuda::best_ms(t.samples_ms);
    const double gbs = cuda::bandwidth_gbs(t.bytes_per_run, ms);
    cuda::record_value(
        s.file, cuda::kDramBandwidthKey, gbs, s.spec.dram_bandwidth_gbs,
        fmt::format("read sweep of {:.2f} GiB (16-byte ld.global.cg, {:.0f}x L2), best of {} "
                    "runs: {:.4f} ms = {:.1f} GB/s",
                    t.bytes_per_run / (1 << 30), t.bytes_per_run / s.dev.l2_bytes,
                    t.samples_ms.size(), ms, gbs));
  });
}

void measure_l2(Session& s) {
  guarded(s, cuda::kL2BandwidthKey, [&] {
    const int64_t bytes = s.dev.l2_bytes / 4;
    const int passes = std::max(1, static_cast<int>(std::lround(s.e.l2_bytes_per_run / bytes)));
    const cuda::StreamTiming t =
        cuda::measure_l2_read(s.o.device, bytes, passes, s.e.stream_runs, kTimeoutS);
    const double ms = cuda::best_ms(t.samples_ms);
    const double gbs = cuda::bandwidth_gbs(t.bytes_per_run, ms);
    cuda::record_value(s.file, cuda::kL2BandwidthKey, gbs, s.spec.l2_bandwidth_gbs,
                       fmt::format("{} read sweeps of {:.1f} MiB (a quarter of L2, ld.global.cg: "
                                   "L1 bypassed), best of {} runs: {:.4f} ms = {:.1f} GB/s",
                                   passes, bytes / 1048576.0, t.samples_ms.size(), ms, gbs));
  });
}

void measure_launch(Session& s) {
  guarded(s, cuda::kLaunchOverheadKey, [&] {
    const cuda::LaunchGapTiming t =
        cuda::measure_launch_gap(s.o.device, s.e.launch_kernels, s.e.launch_runs, kTimeoutS);
    const double first = cuda::median_ms(t.first_ms), all = cuda::median_ms(t.all_ms);
    const double us = cuda::launch_gap_us(first, all, t.kernels);
    std::string how = fmt::format(
        "{0} empty kernels queued behind a {1:.1f} ms gate, median of {2} runs: t_1 = {3:.4f} "
        "ms, t_{0} = {4:.4f} ms, gap = {5:.3f} us; the host queued them in {6:.2f} ms",
        t.kernels, t.gate_ms, t.all_ms.size(), first, all, us, t.enqueue_ms);
    if (t.enqueue_ms > t.gate_ms)
      how += " (longer than the gate: the GPU waited for the host, this is the host's rate)";
    cuda::record_value(s.file, cuda::kLaunchOverheadKey, us, s.spec.launch_overhead_us, how);
  });
}

std::string first_line(const std::string& s) {
  return s.substr(0, s.find('\n'));
}

void keep_metrics(Session& s, const std::string& key, const MeasureResult& r) {
  for (const std::string& m : s.metrics)
    if (const auto it = r.counters.find(m); it != r.counters.end() && std::isfinite(it->second))
      s.file.metrics[key + "/" + m] = it->second;
}

MeasureOptions conv_options(const Session& s) {
  MeasureOptions mo;
  mo.warmup = 2;
  mo.repetitions = s.e.conv_repetitions;
  mo.timeout_s = kTimeoutS;
  mo.collect_counters = !s.metrics.empty();
  return mo;
}

void measure_conv(Session& s, Measurer& m, const ConvRun& r) {
  if (!r.problem.empty()) {
    cuda::record_failure(s.file, r.key, r.problem);
    return;
  }
  guarded(s, r.key, [&] {
    const MeasureResult res = m.measure(r.graph, r.candidate, conv_options(s));
    if (res.status != MeasureStatus::kOk)
      throw std::runtime_error(std::string(measure_status_name(res.status)) + ": " +
                               first_line(res.error));
    const double peak = cuda::tensor_peak_tflops(s.spec, r.precision);
    const double flops = r.prediction.useful_flops;
    const double frac = cuda::fraction_of_peak(flops, res.median_ms, peak);
    cuda::record_value(
        s.file, r.key, frac, cuda::spec_value(s.spec, r.key),
        fmt::format("{}, generated {} kernel ({}), median of {} cold runs: {:.4f} ms = {:.1f} "
                    "TFLOP/s of {:.1f}; {}",
                    conv_label(r), r.wgmma ? "wgmma" : "mma.sync", r.candidate.config_str(),
                    res.samples_ms.size(), res.median_ms, cuda::tflops_per_s(flops, res.median_ms),
                    peak, model_note(r.prediction)));
    keep_metrics(s, r.key, res);
  });
}

// cuDNN on the conv of `r` (the layerwise baseline in the precision's math), as a reference.
void measure_cudnn(Session& s, Measurer& m, const ConvRun& r) {
  const std::string key = cuda::cudnn_fraction_key(r.precision);
  guarded(s, key, [&] {
    const MeasureResult res =
        m.measure(r.graph, search::layerwise_candidate(r.candidate.group), conv_options(s));
    if (res.status != MeasureStatus::kOk)
      throw std::runtime_error(std::string(measure_status_name(res.status)) + ": " +
                               first_line(res.error));
    if (!res.counters.count("cudnn_calls_per_run"))
      throw std::runtime_error("cuDNN did not run the conv (no cuDNN in this build, or it "
                               "refused the conv): the baseline was our own layerwise kernel");
    const double peak = cuda::tensor_peak_tflops(s.spec, r.precision);
    const double flops = 2.0 * r.graph.total_macs();
    const double frac = cuda::fraction_of_peak(flops, res.median_ms, peak);
    if (!(frac > 0))
      throw std::runtime_error("no positive time from cuDNN");
    s.file.reference[key] = {
        frac, fmt::format("{}, cuDNN (layerwise baseline, the precision's math), median of {} "
                          "cold runs: {:.4f} ms = {:.1f} TFLOP/s of {:.1f}",
                          conv_label(r), res.samples_ms.size(), res.median_ms,
                          cuda::tflops_per_s(flops, res.median_ms), peak)};
  });
}

void measure_convs(Session& s) {
  const std::vector<ConvRun> runs = plan_convs(s.spec, s.e, &s.dev);
  for (bool wgmma : {true, false}) {
    cuda::CudaMeasurerOptions mo;
    mo.device = s.o.device;
    mo.allow_wgmma = wgmma;
    mo.metrics = s.metrics;
    std::unique_ptr<Measurer> m;
    try {
      m = cuda::make_cuda_measurer(mo);
    } catch (const std::exception& x) {
      for (const ConvRun& r : runs)
        if (r.wgmma == wgmma)
          cuda::record_failure(s.file, r.key, std::string("no CUDA measurer: ") + x.what());
      continue;
    }
    for (const ConvRun& r : runs)
      if (r.wgmma == wgmma) {
        measure_conv(s, *m, r);
        if (!wgmma && s.e.cudnn_reference)
          measure_cudnn(s, *m, r);
      }
  }
}

// ---- the program -------------------------------------------------------------------------

const GpuSpec& named_spec(const std::string& name) {
  const GpuSpec* s = find_gpu_spec(name);
  if (!s) {
    std::string names;
    for (const std::string& n : gpu_spec_names())
      names += (names.empty() ? "" : ", ") + n;
    throw UserError("--spec: unknown GPU spec '" + name + "' (known: " + names + ")");
  }
  return *s;
}

const GpuSpec& chosen_spec(const Options& o, const cuda::DeviceAttributes* dev) {
  if (o.spec)
    return named_spec(*o.spec);
  if (const GpuSpec* s = dev ? cuda::spec_for_device(dev->name) : nullptr)
    return *s;
  if (dev)
    std::cerr << "brickdl-calibrate: no named spec matches '" << dev->name
              << "'; fractions are relative to H200's peaks\n";
  return named_spec("H200");
}

void check_output_path(const std::string& out) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::absolute(fs::path(out)).parent_path();
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw UserError("--out: no such directory '" + dir.string() + "'");
  if (fs::is_directory(fs::path(out), ec))
    throw UserError("--out: '" + out + "' is a directory");
}

void write_file(const std::string& out, const CalibrationFile& f) {
  std::ofstream os(out);
  os << cuda::calibration_json(f);
  os.close();
  if (!os)
    throw UserError("--out: cannot write '" + out + "'");
}

CalibrationFile file_header(const GpuSpec& spec, const cuda::DeviceAttributes& a) {
  CalibrationFile f;
  f.spec = spec.name;
  f.device = {a.name,
              fmt::format("{}.{}", a.cc / 10, a.cc % 10),
              a.sm_count,
              std::to_string(a.driver_version),
              std::to_string(a.runtime_version),
              a.pci_bus_id};
  f.measured_at = cuda::utc_timestamp(std::time(nullptr));
  f.brickdl = git_revision();
  return f;
}

// Of calibration_metrics(), those the device's chip knows (the rest listed in the file).
void choose_metrics(Session& s) {
  if (!cuda::CuptiProfiler::is_supported()) {
    std::cerr << "brickdl-calibrate: built without CUPTI: no tensor-pipe metrics\n";
    return;
  }
  try {
    const std::string chip = cuda::cupti_chip(s.o.device);
    s.file.unknown_metrics =
        cuda::CuptiProfiler::unknown_metrics(chip, cuda::calibration_metrics());
    for (const std::string& m : cuda::calibration_metrics())
      if (std::find(s.file.unknown_metrics.begin(), s.file.unknown_metrics.end(), m) ==
          s.file.unknown_metrics.end())
        s.metrics.push_back(m);
  } catch (const std::exception& x) {
    std::cerr << "brickdl-calibrate: no CUPTI metrics: " << x.what() << "\n";
  }
}

int print_plan(const Options& o) {
  const GpuSpec& spec = chosen_spec(o, nullptr);
  const Effort e = effort(o.quick);
  std::cout << "convs brickdl-calibrate times on " << spec.name << " (the model's choice):\n";
  for (const ConvRun& r : plan_convs(spec, e, nullptr)) {
    if (!r.problem.empty()) {
      std::cout << fmt::format("  {:<24} {}\n", r.key, r.problem);
      continue;
    }
    std::cout << fmt::format("  {:<24} {}, {}, predicted {:.3f} ms; {}\n", r.key, conv_label(r),
                             r.candidate.config_str(), r.prediction.time_ms,
                             model_note(r.prediction));
  }
  return 0;
}

int precompile(const Options& o) {
  const GpuSpec& spec = chosen_spec(o, nullptr);
  cuda::NvrtcCompiler compiler(o.precompile);
  if (!cuda::NvrtcCompiler::is_supported())
    throw UserError("--precompile: brickdl was built without NVRTC");
  int compiled = 0;
  std::vector<ConvRun> runs = plan_convs(spec, effort(false), nullptr);
  for (ConvRun& r : plan_convs(spec, effort(true), nullptr)) // --quick's batches may differ
    runs.push_back(std::move(r));
  int flagged = 0; // by ptxas: an advisory (C75xx) or a large stack frame
  for (const ConvRun& r : runs) {
    if (!r.problem.empty())
      continue;
    const auto module = compiler.compile(
        cuda::plan_kernels(r.graph, r.candidate, codegen_for(r.wgmma, nullptr)).source, 90);
    if (cuda::report_ptxas_flags(*module, "brickdl-calibrate", r.key, std::cerr) > 0)
      ++flagged;
    ++compiled;
  }
  std::cout << "brickdl-calibrate: " << compiled << " conv kernels (full and --quick) in "
            << o.precompile << " (" << compiler.hits() << " already there), " << flagged
            << " flagged by ptxas\n";
  return flagged ? 1 : 0;
}

int run(const Options& o) {
  if (o.spec)
    named_spec(*o.spec); // an unknown name is bad input whether or not there is a GPU
  if (o.plan)
    return print_plan(o);
  if (!o.precompile.empty())
    return precompile(o);
  if (o.out.empty())
    throw UserError("--out: required (the calibration file to write)");
  check_output_path(o.out);
  if (!cuda::cuda_device_available()) {
    std::cerr << "brickdl-calibrate: no GPU: " << cuda::cuda_unavailable_reason() << "\n";
    return kNoGpu;
  }
  if (o.device < 0 || o.device >= cuda::cuda_device_count())
    throw UserError("--device: no CUDA device " + std::to_string(o.device) + " (" +
                    std::to_string(cuda::cuda_device_count()) + " visible)");
  const cuda::DeviceAttributes dev = cuda::query_device_attributes(o.device);
  const GpuSpec& spec = chosen_spec(o, &dev);
  const Effort e = effort(o.quick);
  Session s{o, e, spec, dev, {}, file_header(spec, dev)};
  choose_metrics(s);
  measure_dram(s);
  measure_l2(s);
  measure_launch(s);
  measure_convs(s);
  write_file(o.out, s.file);
  std::cout << cuda::calibration_table(s.file) << "wrote " << o.out << "\n";
  return cuda::calibration_exit_status(s.file);
}

} // namespace

int main(int argc, char** argv) {
  CLI::App app{"brickdl-calibrate: measures on a GPU what the model guesses (the fractions of "
               "the tensor peak the generated kernels reach on wgmma and mma.sync, DRAM and L2 "
               "bandwidth, the launch gap) and writes them as a calibration file for the tuner. "
               "Exit 0 all measured, 1 some failed (file written), 2 bad flags, 4 no GPU."};
  Options o;
  app.add_option("--spec", o.spec,
                 "the named GPU spec the fractions are relative to (default: the one matching "
                 "the device's name, else H200)");
  app.add_option("--device", o.device, "CUDA device ordinal (default 0)");
  app.add_option("--out", o.out, "the calibration file to write (JSON)");
  app.add_flag("--quick", o.quick,
               "less GPU time: fewer runs, smaller buffers, no cuDNN reference");
  app.add_flag("--plan", o.plan, "print the convs it would time and exit (no GPU needed)");
  app.add_option("--precompile", o.precompile,
                 "compile the convs' kernels for sm_90 into this NVRTC cache and exit (no GPU; "
                 "exit 1 if ptxas flags one: an advisory, a 128+ byte stack)");
  return run_tool("brickdl-calibrate", app, argc, argv, [&] { return run(o); });
}
