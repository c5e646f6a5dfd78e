#include "kernels/cuda/cuda_measurer.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <iostream>
#include <map>
#include <set>
#include <thread>

#include "kernels/cuda/cuda_error.h"
#include "kernels/cuda/cudnn_layerwise.h"
#include "kernels/cuda/cupti_profiler.h"
#include "kernels/cuda/detail/cuda_call.cuh"
#include "kernels/cuda/detail/driver_api.cuh"
#include "kernels/merged_executor.h"
#include "kernels/weights.h"

namespace brickdl::cuda {

namespace {

using Clock = std::chrono::steady_clock;

// Owning device allocation.
class DeviceBuffer {
public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes) : bytes_(bytes) {
    if (bytes_ > 0)
      BRICKDL_CUDA_CALL(cudaMalloc(&p_, bytes_));
  }
  ~DeviceBuffer() {
    if (p_)
      cudaFree(p_);
  }
  DeviceBuffer(DeviceBuffer&& o) noexcept : p_(o.p_), bytes_(o.bytes_) { o.p_ = nullptr; }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    std::swap(p_, o.p_);
    std::swap(bytes_, o.bytes_);
    return *this;
  }
  template <class T> T* as() const { return static_cast<T*>(p_); }
  size_t bytes() const { return bytes_; }
  void upload(const void* src, size_t n) {
    BRICKDL_CUDA_CALL(cudaMemcpy(p_, src, n, cudaMemcpyHostToDevice));
  }

private:
  void* p_ = nullptr;
  size_t bytes_ = 0;
};

DeviceBuffer upload_floats(const std::vector<float>& v) {
  DeviceBuffer b(v.size() * sizeof(float));
  if (!v.empty())
    b.upload(v.data(), v.size() * sizeof(float));
  return b;
}

std::vector<float> download(const float* p, int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  BRICKDL_CUDA_CALL(cudaMemcpy(v.data(), p, v.size() * sizeof(float), cudaMemcpyDeviceToHost));
  return v;
}

// A module loaded from a cubin, with its kernels.
class Module {
public:
  Module(const std::string& cubin, const KernelPlan& plan) {
    const auto& d = detail::driver();
    BRICKDL_CU_CALL(d.module_load_data_ex(&mod_, cubin.data(), 0, nullptr, nullptr));
    for (const KernelLaunch& k : plan.launches) {
      CUfunction f = nullptr;
      BRICKDL_CU_CALL(d.module_get_function(&f, mod_, k.symbol.c_str()));
      if (k.smem_bytes > 48 * 1024)
        BRICKDL_CU_CALL(
            d.func_set_attribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, k.smem_bytes));
      fns_.push_back(f);
    }
  }
  ~Module() {
    if (mod_)
      detail::driver().module_unload(mod_);
  }
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;
  CUfunction fn(size_t i) const { return fns_.at(i); }
  int registers(size_t i) const {
    int r = 0;
    detail::driver().func_get_attribute(&r, CU_FUNC_ATTRIBUTE_NUM_REGS, fns_.at(i));
    return r;
  }

private:
  CUmodule mod_ = nullptr;
  std::vector<CUfunction> fns_;
};

// What one candidate runs on: inputs, parameters and outputs on the device.
struct GroupBuffers {
  std::vector<DeviceBuffer> inputs, weights, biases;
  std::vector<const float*> input_ptrs, weight_ptrs, bias_ptrs; // per input / group layer
  DeviceBuffer output;
  int64_t output_numel = 0;
};

// Uploads a group's inputs and parameters; allocates its output.
GroupBuffers upload_group(const Graph& g, const Group& group,
                          const std::vector<const kernels::Tensor*>& host_inputs,
                          const kernels::ModelWeights* host_weights) {
  GroupBuffers b;
  for (const kernels::Tensor* t : host_inputs) {
    b.inputs.push_back(upload_floats(t->values()));
    b.input_ptrs.push_back(b.inputs.back().as<float>());
  }
  for (int id = group.first; id <= group.last; ++id) {
    const kernels::LayerWeights& w = host_weights->at(id);
    b.weights.push_back(upload_floats(w.weight));
    b.biases.push_back(upload_floats(w.bias));
    b.weight_ptrs.push_back(w.weight.empty() ? nullptr : b.weights.back().as<float>());
    b.bias_ptrs.push_back(w.bias.empty() ? nullptr : b.biases.back().as<float>());
  }
  b.output_numel = g.layer(group.last).out.numel();
  b.output = DeviceBuffer(static_cast<size_t>(b.output_numel) * sizeof(float));
  return b;
}

// The generated kernels of a plan, ready to enqueue.
class GeneratedRun {
public:
  // `weights`: the group's parameters in PyTorch layout; each launch gets its conv weights
  // packed for its tile (pack_conv_weights).
  GeneratedRun(const Graph& g, const KernelPlan& plan, const std::string& cubin,
               const GroupBuffers& buf, const kernels::ModelWeights& weights, long long spin_limit)
      : plan_(plan), module_(cubin, plan) {
    const size_t L = plan.layer_ids.size();
    layer_out_.resize(L);
    std::vector<float*> out_ptr(L, nullptr);
    out_ptr[L - 1] = buf.output.as<float>();
    for (const KernelLaunch& k : plan.launches) {
      const size_t o = static_cast<size_t>(k.output);
      if (o + 1 < L) {
        layer_out_[o] = DeviceBuffer(static_cast<size_t>(g.layer(plan.layer_ids[o]).out.numel()) *
                                     sizeof(float));
        out_ptr[o] = layer_out_[o].as<float>();
      }
    }
    memo_ = DeviceBuffer(static_cast<size_t>(plan.memo_floats) * sizeof(float));
    flags_ = DeviceBuffer(static_cast<size_t>(plan.flag_count) * sizeof(int));
    if (plan.flag_count > 0)
      BRICKDL_CUDA_CALL(cudaMemset(flags_.as<int>(), 0, flags_.bytes()));
    stats_ = DeviceBuffer(dev::kNumStats * sizeof(unsigned long long));
    error_ = DeviceBuffer(sizeof(int));
    reset_stats();
    for (const KernelLaunch& k : plan.launches) {
      dev::KernelArgs a{};
      for (size_t s = 0; s < k.inputs.size(); ++s)
        a.ext[s] = k.inputs[s].external ? buf.input_ptrs.at(static_cast<size_t>(k.inputs[s].index))
                                        : out_ptr.at(static_cast<size_t>(k.inputs[s].index));
      for (size_t l = 0; l < k.layers.size(); ++l) {
        const size_t gl = static_cast<size_t>(k.layers[l]);
        if (k.desc.layers[l].op == dev::kOpConv) {
          const int id = plan.layer_ids[gl];
          packed_.push_back(
              upload_floats(pack_conv_weights(k.desc.layers[l], weights.at(id).weight)));
          a.weight[l] = packed_.back().as<float>();
        }
        a.bias[l] = buf.bias_ptrs.at(gl);
      }
      a.out = out_ptr.at(static_cast<size_t>(k.output));
      a.memo = memo_.as<float>();
      a.flags = flags_.as<int>();
      a.stats = stats_.as<unsigned long long>();
      a.error = error_.as<int>();
      a.spin_limit = spin_limit;
      args_.push_back(a);
    }
  }

  // One run of all launches; every run has its own epoch (memoized flags need no clearing).
  void enqueue(cudaStream_t stream) {
    const auto& d = detail::driver();
    ++epoch_;
    for (size_t i = 0; i < plan_.launches.size(); ++i) {
      const KernelLaunch& k = plan_.launches[i];
      args_[i].epoch = epoch_;
      void* params[] = {&args_[i]};
      BRICKDL_CU_CALL(d.launch_kernel(module_.fn(i), static_cast<unsigned>(k.blocks), 1, 1,
                                      static_cast<unsigned>(k.threads), 1, 1,
                                      static_cast<unsigned>(k.smem_bytes),
                                      reinterpret_cast<CUstream>(stream), params, nullptr));
    }
  }
  void reset_stats() {
    BRICKDL_CUDA_CALL(cudaMemset(stats_.as<void>(), 0, stats_.bytes()));
    BRICKDL_CUDA_CALL(cudaMemset(error_.as<void>(), 0, error_.bytes()));
  }
  std::vector<unsigned long long> stats() const {
    std::vector<unsigned long long> v(dev::kNumStats);
    BRICKDL_CUDA_CALL(
        cudaMemcpy(v.data(), stats_.as<void>(), stats_.bytes(), cudaMemcpyDeviceToHost));
    return v;
  }
  int error() const {
    int e = 0;
    BRICKDL_CUDA_CALL(cudaMemcpy(&e, error_.as<void>(), sizeof e, cudaMemcpyDeviceToHost));
    return e;
  }
  int registers(size_t i) const { return module_.registers(i); }

private:
  const KernelPlan& plan_;
  Module module_;
  std::vector<DeviceBuffer> layer_out_, packed_;
  DeviceBuffer memo_, flags_, stats_, error_;
  std::vector<dev::KernelArgs> args_;
  int epoch_ = 0;
};

struct Validation {
  bool ok = true;
  double max_rel_error = 0;
  std::string message;
};

// As the CPU backend: wrong when some |out − ref| > atol + rtol·|ref| (NaN fails);
// max_rel_error = max|out − ref| / max|ref|.
Validation compare(const std::vector<float>& out, const std::vector<float>& ref,
                   const MeasureOptions& o) {
  Validation v;
  double max_diff = 0, max_ref = 0;
  int64_t bad = 0, first_bad = -1;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double a = out[i], b = ref[i];
    const double diff = std::fabs(a - b);
    max_ref = std::max(max_ref, std::fabs(b));
    max_diff = std::isnan(diff) ? INFINITY : std::max(max_diff, diff);
    if (!(diff <= o.atol + o.rtol * std::fabs(b)) && bad++ == 0)
      first_bad = static_cast<int64_t>(i);
  }
  v.max_rel_error = max_ref > 0 ? max_diff / max_ref : max_diff;
  if (bad > 0) {
    v.ok = false;
    v.message = std::to_string(bad) + " of " + std::to_string(ref.size()) +
                " output elements differ from the reference beyond atol " + std::to_string(o.atol) +
                " + rtol " + std::to_string(o.rtol) + " (first at flat index " +
                std::to_string(first_bad) + ": " +
                std::to_string(out[static_cast<size_t>(first_bad)]) + " vs " +
                std::to_string(ref[static_cast<size_t>(first_bad)]) + "); max relative error " +
                std::to_string(v.max_rel_error);
  }
  return v;
}

std::string shorten(const std::string& s, size_t n = 4000) {
  return s.size() <= n ? s : s.substr(0, n) + "\n[... " + std::to_string(s.size() - n) + " more]";
}

double median(std::vector<double> v) {
  if (v.empty())
    return 0;
  std::sort(v.begin(), v.end());
  const size_t h = v.size() / 2;
  return v.size() % 2 ? v[h] : 0.5 * (v[h - 1] + v[h]);
}

struct TimedOut : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class CudaMeasurer final : public Measurer {
public:
  explicit CudaMeasurer(const CudaMeasurerOptions& o) : opt_(o), compiler_(o.cache_dir) {
    dev_ = query_device(o.device);
    opt_.codegen.max_smem_bytes =
        static_cast<int>(std::min<int64_t>(opt_.codegen.max_smem_bytes, dev_.smem_optin_bytes));
    open_device();
  }
  ~CudaMeasurer() override { close_device(); }

  std::string target() const override { return dev_.fingerprint(); }
  std::string backend() const override { return "cuda"; }

  MeasureResult measure(const Graph& graph, const Candidate& c,
                        const MeasureOptions& options) override {
    MeasureResult r;
    try {
      measure_impl(graph, c, options, r);
    } catch (const Unsupported& e) {
      r.status = MeasureStatus::kUnsupported;
      r.error = e.what();
    } catch (const CompileError& e) {
      r.status = MeasureStatus::kCompileError;
      r.error = std::string(e.what()) + "\n" + shorten(e.log());
    } catch (const TimedOut& e) {
      r.status = MeasureStatus::kTimeout;
      r.error = e.what();
      recover();
    } catch (const std::exception& e) {
      r.status = MeasureStatus::kLaunchError;
      r.error = e.what();
      recover();
    }
    if (r.status != MeasureStatus::kOk)
      r.samples_ms.clear();
    r.summarize();
    return r;
  }

private:
  struct DeviceState {
    cudaStream_t stream = nullptr;
    cudaEvent_t start = nullptr, stop = nullptr;
    DeviceBuffer flush;
    std::unique_ptr<CuptiProfiler> cupti;
  };

  void open_device() {
    BRICKDL_CUDA_CALL(cudaSetDevice(opt_.device));
    st_ = std::make_unique<DeviceState>();
    BRICKDL_CUDA_CALL(cudaStreamCreateWithFlags(&st_->stream, cudaStreamNonBlocking));
    BRICKDL_CUDA_CALL(cudaEventCreate(&st_->start));
    BRICKDL_CUDA_CALL(cudaEventCreate(&st_->stop));
    // Writing twice the L2 evicts whatever a previous repetition left there.
    st_->flush = DeviceBuffer(static_cast<size_t>(std::max<int64_t>(2 * dev_.l2_bytes, 1 << 20)));
    if (opt_.use_cupti && CuptiProfiler::is_supported()) {
      try {
        st_->cupti = std::make_unique<CuptiProfiler>(opt_.device);
      } catch (const std::exception& e) {
        warn_once("CUPTI unavailable, timing with CUDA events only: " + std::string(e.what()));
      }
    }
  }

  void close_device() {
    if (!st_)
      return;
    st_->cupti.reset();
    st_->flush = DeviceBuffer();
    if (st_->start)
      cudaEventDestroy(st_->start);
    if (st_->stop)
      cudaEventDestroy(st_->stop);
    if (st_->stream)
      cudaStreamDestroy(st_->stream);
    st_.reset();
  }

  // After a failed launch the context may be unusable (sticky errors): start it afresh.
  void recover() {
    try {
      st_.reset(); // buffers first (their frees may fail harmlessly on a dead context)
      cudaDeviceReset();
      open_device();
    } catch (const std::exception& e) {
      std::cerr << "brickdl: the CUDA device could not be recovered: " << e.what() << "\n";
      throw;
    }
  }

  void warn_once(const std::string& msg) {
    if (warned_.insert(msg).second)
      std::cerr << "brickdl: " << msg << "\n";
  }

  // Waits for the stream; throws TimedOut after `seconds` (the work keeps running).
  void wait(double seconds) {
    BRICKDL_CUDA_CALL(cudaEventRecord(st_->stop, st_->stream));
    const auto deadline = Clock::now() + std::chrono::duration<double>(seconds);
    for (;;) {
      const cudaError_t q = cudaEventQuery(st_->stop);
      if (q == cudaSuccess)
        return;
      if (q != cudaErrorNotReady)
        BRICKDL_CUDA_CALL(q);
      if (Clock::now() > deadline)
        throw TimedOut("the run did not finish within " + std::to_string(seconds) + " s");
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  void flush_l2() {
    BRICKDL_CUDA_CALL(
        cudaMemsetAsync(st_->flush.as<void>(), ++flushes_ & 0xff, st_->flush.bytes(), st_->stream));
  }

  // Warm-up and timed repetitions of `run`; kernel durations from CUPTI when available.
  std::vector<double> time_runs(const std::function<void()>& run, const MeasureOptions& o,
                                std::map<std::string, double>* counters,
                                const std::string& prefix) {
    for (int i = 0; i < o.warmup; ++i)
      run();
    wait(o.timeout_s);
    std::vector<double> samples;
    const bool records = st_->cupti != nullptr;
    if (records)
      st_->cupti->begin_kernel_records();
    const auto t0 = Clock::now();
    for (int i = 0; i < o.repetitions; ++i) {
      if (o.flush_l2)
        flush_l2();
      BRICKDL_CUDA_CALL(cudaEventRecord(st_->start, st_->stream));
      run();
      wait(o.timeout_s);
      float ms = 0;
      BRICKDL_CUDA_CALL(cudaEventElapsedTime(&ms, st_->start, st_->stop));
      samples.push_back(ms);
      if (std::chrono::duration<double>(Clock::now() - t0).count() > o.timeout_s)
        break;
    }
    if (records) {
      const auto recs = st_->cupti->end_kernel_records();
      double total = 0;
      for (const auto& k : recs)
        total += k.ms();
      if (!samples.empty()) {
        (*counters)[prefix + "kernel_time_ms"] = total / static_cast<double>(samples.size());
        (*counters)[prefix + "kernels_per_run"] =
            static_cast<double>(recs.size()) / static_cast<double>(samples.size());
      }
    }
    return samples;
  }

  void collect_counters(const std::function<void()>& run, const MeasureOptions& o,
                        std::map<std::string, double>* counters) {
    if (!o.collect_counters || !st_->cupti)
      return;
    std::vector<std::string> metrics =
        opt_.metrics.empty() ? CuptiProfiler::default_metrics() : opt_.metrics;
    const auto unknown = CuptiProfiler::unknown_metrics(st_->cupti->chip(), metrics);
    for (const auto& u : unknown) {
      warn_once("CUPTI: metric " + u + " is unknown on " + st_->cupti->chip() + "; skipped");
      metrics.erase(std::find(metrics.begin(), metrics.end(), u));
    }
    if (metrics.empty())
      return;
    try {
      const auto values = st_->cupti->collect(
          metrics,
          [&] {
            if (o.flush_l2)
              flush_l2();
          },
          [&] {
            run();
            wait(o.timeout_s);
          });
      for (const auto& [k, v] : values)
        (*counters)[k] = v;
    } catch (const CudaError& e) {
      // Profiling may be restricted to administrators; timing stays valid without counters.
      warn_once(std::string("CUPTI counters unavailable: ") + e.what());
    }
  }

  void measure_impl(const Graph& g, const Candidate& c, const MeasureOptions& o, MeasureResult& r) {
    BRICKDL_CUDA_CALL(cudaSetDevice(opt_.device));
    const bool layerwise = c.strategy == Strategy::kLayerwise;
    KernelPlan plan = plan_kernels(g, c, opt_.codegen);
    if (opt_.edit_plan)
      opt_.edit_plan(plan);
    // The same seeded data as the CPU backend: one stream per producer layer.
    std::vector<kernels::Tensor> host_inputs;
    for (int id : plan.input_ids)
      host_inputs.push_back(
          kernels::random_tensor(g.layer(id).out, o.seed, static_cast<uint64_t>(id)));
    std::vector<const kernels::Tensor*> in_ptrs;
    for (const auto& t : host_inputs)
      in_ptrs.push_back(&t);
    const kernels::ModelWeights host_weights =
        kernels::make_weights(g, o.seed, c.group.first, c.group.last);
    GroupBuffers buf = upload_group(g, c.group, in_ptrs, &host_weights);
    const bool cudnn = opt_.use_cudnn && CudnnLayerwise::is_supported();

    // Reference output, before anything is timed.
    std::vector<float> ref;
    if (cudnn) {
      try {
        CudnnLayerwise exact(g, c.group, CudnnLayerwise::Math::kStrictFp32,
                             CudnnLayerwise::Algorithms::kExact);
        exact.enqueue(buf.input_ptrs, buf.weight_ptrs, buf.bias_ptrs, buf.output.as<float>(),
                      st_->stream);
        wait(o.timeout_s);
        ref = download(buf.output.as<float>(), buf.output_numel);
        r.counters["reference.cudnn"] = 1;
      } catch (const Unsupported&) {
      }
    }
    if (ref.empty()) {
      Candidate lw = c;
      lw.strategy = Strategy::kLayerwise;
      const kernels::GroupResult cpu = kernels::execute_group(g, lw, in_ptrs, host_weights);
      if (!cpu.supported)
        throw Unsupported("no reference for this group: " + cpu.reason);
      ref = cpu.output.values();
      r.counters["reference.cudnn"] = 0;
    }
    // All-ones bytes are NaN: an output element a kernel fails to write fails validation.
    auto poison_output = [&] {
      BRICKDL_CUDA_CALL(
          cudaMemsetAsync(buf.output.as<void>(), 0xff, buf.output.bytes(), st_->stream));
    };

    // Our generated kernels (the candidate, or the own layer-by-layer variant).
    const long long spin_limit =
        static_cast<long long>(std::min(o.timeout_s, 5.0) * 1e3 * std::max(dev_.clock_khz, 1000));
    std::unique_ptr<GeneratedRun> gen;
    const auto module = compiler_.compile(plan.source, dev_.cc);
    gen = std::make_unique<GeneratedRun>(g, plan, module->cubin, buf, host_weights, spin_limit);
    for (size_t i = 0; i < plan.launches.size(); ++i)
      r.counters["registers." + std::to_string(i)] = gen->registers(i);
    poison_output();
    gen->reset_stats();
    gen->enqueue(st_->stream);
    wait(o.timeout_s);
    if (gen->error() != 0)
      throw TimedOut("a memoized wait for another block's brick exceeded its limit");
    const Validation gv = compare(download(buf.output.as<float>(), buf.output_numel), ref, o);
    if (c.strategy == Strategy::kMemoized) {
      const auto s = gen->stats();
      r.counters["memo_claims"] = static_cast<double>(s[dev::kStatClaims]);
      r.counters["memo_hits"] = static_cast<double>(s[dev::kStatHits]);
      r.counters["memo_conflicts"] = static_cast<double>(s[dev::kStatConflicts]);
      r.counters["memo_lookups"] =
          static_cast<double>(s[dev::kStatClaims] + s[dev::kStatHits] + s[dev::kStatConflicts]);
      r.counters["memo_wait_spins"] = static_cast<double>(s[dev::kStatWaits]);
      r.counters["bricks_computed"] = static_cast<double>(s[dev::kStatBricks]);
    }
    auto run_generated = [&] { gen->enqueue(st_->stream); };

    if (!layerwise) {
      r.max_rel_error = gv.max_rel_error;
      if (!gv.ok) {
        r.status = MeasureStatus::kWrongResult;
        r.error = gv.message;
        return;
      }
      r.samples_ms = time_runs(run_generated, o, &r.counters, "");
      collect_counters(run_generated, o, &r.counters);
      return;
    }

    // Layerwise: cuDNN strict FP32 is the baseline; TF32 and our own kernels are variants.
    r.counters["variant.own_layerwise_max_rel_error"] = gv.max_rel_error;
    std::vector<double> own;
    if (gv.ok) {
      std::map<std::string, double> ignored;
      own = time_runs(run_generated, o, &ignored, "");
      r.counters["variant.own_layerwise_ms"] = median(own);
    } else {
      r.counters["variant.own_layerwise_wrong"] = 1;
    }
    std::unique_ptr<CudnnLayerwise> strict;
    if (cudnn) {
      try {
        strict = std::make_unique<CudnnLayerwise>(g, c.group, CudnnLayerwise::Math::kStrictFp32);
        CudnnLayerwise tf32(g, c.group, CudnnLayerwise::Math::kTf32);
        auto run_tf32 = [&] {
          tf32.enqueue(buf.input_ptrs, buf.weight_ptrs, buf.bias_ptrs, buf.output.as<float>(),
                       st_->stream);
        };
        run_tf32();
        wait(o.timeout_s);
        r.counters["variant.cudnn_tf32_max_rel_error"] =
            compare(download(buf.output.as<float>(), buf.output_numel), ref, o).max_rel_error;
        std::map<std::string, double> ignored;
        r.counters["variant.cudnn_tf32_ms"] = median(time_runs(run_tf32, o, &ignored, ""));
      } catch (const Unsupported& e) {
        warn_once(std::string("cuDNN baseline unavailable for a group: ") + e.what());
        strict.reset();
      }
    }
    if (strict) {
      auto run_strict = [&] {
        strict->enqueue(buf.input_ptrs, buf.weight_ptrs, buf.bias_ptrs, buf.output.as<float>(),
                        st_->stream);
      };
      poison_output();
      run_strict();
      wait(o.timeout_s);
      const Validation sv = compare(download(buf.output.as<float>(), buf.output_numel), ref, o);
      r.max_rel_error = sv.max_rel_error;
      if (!sv.ok) {
        r.status = MeasureStatus::kWrongResult;
        r.error = "cuDNN strict FP32: " + sv.message;
        return;
      }
      r.counters["cudnn_calls_per_run"] = strict->calls_per_run();
      r.samples_ms = time_runs(run_strict, o, &r.counters, "");
      r.counters["variant.cudnn_fp32_ms"] = median(r.samples_ms);
      collect_counters(run_strict, o, &r.counters);
    } else {
      r.max_rel_error = gv.max_rel_error;
      if (!gv.ok) {
        r.status = MeasureStatus::kWrongResult;
        r.error = gv.message;
        return;
      }
      r.samples_ms = own;
      collect_counters(run_generated, o, &r.counters);
    }
  }

  CudaMeasurerOptions opt_;
  DeviceInfo dev_;
  NvrtcCompiler compiler_;
  std::unique_ptr<DeviceState> st_;
  unsigned flushes_ = 0;
  std::set<std::string> warned_;
};

} // namespace

std::string cuda_unavailable_reason() {
  int n = 0;
  const cudaError_t rc = cudaGetDeviceCount(&n);
  if (rc != cudaSuccess) {
    cudaGetLastError(); // clear it
    if (rc == cudaErrorInsufficientDriver)
      return "no NVIDIA GPU driver found (libcuda missing or older than CUDA " +
             std::to_string(CUDART_VERSION / 1000) + ")";
    if (rc == cudaErrorNoDevice)
      return "no CUDA device";
    return std::string("no usable CUDA device (") + cudaGetErrorString(rc) + ")";
  }
  if (n == 0)
    return "no CUDA device";
  return "";
}

bool cuda_device_available() {
  return cuda_unavailable_reason().empty();
}

DeviceInfo query_device(int ordinal) {
  const std::string why = cuda_unavailable_reason();
  if (!why.empty())
    throw CudaError(why);
  cudaDeviceProp p{};
  BRICKDL_CUDA_CALL(cudaGetDeviceProperties(&p, ordinal));
  DeviceInfo d;
  d.ordinal = ordinal;
  d.name = p.name;
  d.cc = p.major * 10 + p.minor;
  d.sm_count = p.multiProcessorCount;
  d.l2_bytes = p.l2CacheSize;
  d.smem_optin_bytes = static_cast<int64_t>(p.sharedMemPerBlockOptin);
  d.global_mem_bytes = static_cast<int64_t>(p.totalGlobalMem);
  BRICKDL_CUDA_CALL(cudaDeviceGetAttribute(&d.clock_khz, cudaDevAttrClockRate, ordinal));
  BRICKDL_CUDA_CALL(cudaDriverGetVersion(&d.driver_version));
  BRICKDL_CUDA_CALL(cudaRuntimeGetVersion(&d.runtime_version));
  d.cudnn_version = CudnnLayerwise::is_supported() ? CudnnLayerwise::version() : "none";
  return d;
}

std::unique_ptr<Measurer> make_cuda_measurer(const CudaMeasurerOptions& options) {
  return std::make_unique<CudaMeasurer>(options);
}

std::vector<float> run_on_device(const Graph& g, const Candidate& c, DeviceRunner runner,
                                 const std::vector<const kernels::Tensor*>& inputs,
                                 const kernels::ModelWeights& weights) {
  const DeviceInfo dev = query_device(0);
  BRICKDL_CUDA_CALL(cudaSetDevice(0));
  GroupBuffers buf = upload_group(g, c.group, inputs, &weights);
  if (runner == DeviceRunner::kGenerated) {
    CodegenOptions co;
    co.max_smem_bytes =
        static_cast<int>(std::min<int64_t>(co.max_smem_bytes, dev.smem_optin_bytes));
    const KernelPlan plan = plan_kernels(g, c, co);
    NvrtcCompiler compiler(default_cache_dir());
    GeneratedRun run(g, plan, compiler.compile(plan.source, dev.cc)->cubin, buf, weights,
                     static_cast<long long>(5e3) * dev.clock_khz);
    run.enqueue(nullptr);
    BRICKDL_CUDA_CALL(cudaDeviceSynchronize());
    if (run.error() != 0)
      throw CudaError("a memoized wait exceeded its limit");
  } else {
    CudnnLayerwise cudnn(g, c.group,
                         runner == DeviceRunner::kCudnnTf32 ? CudnnLayerwise::Math::kTf32
                                                            : CudnnLayerwise::Math::kStrictFp32);
    cudnn.enqueue(buf.input_ptrs, buf.weight_ptrs, buf.bias_ptrs, buf.output.as<float>(), nullptr);
    BRICKDL_CUDA_CALL(cudaDeviceSynchronize());
  }
  return download(buf.output.as<float>(), buf.output_numel);
}

} // namespace brickdl::cuda
