#include "kernels/cuda/cupti_profiler.h"

#include <cuda_runtime.h>
#include <cupti.h>
#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_range_profiler.h>
#include <cupti_target.h>

#include <cstdlib>
#include <mutex>

#include "kernels/cuda/detail/cuda_call.cuh"
#include "kernels/cuda/detail/driver_api.cuh"
#include "kernels/cuda/statuses.h"

namespace brickdl::cuda {

namespace {

// ---- host objects (no GPU needed) ---------------------------------------------------------

// A profiler host object for one chip, with metrics added.
class HostObject {
public:
  HostObject(const std::string& chip, const uint8_t* availability) {
    CUpti_Profiler_Host_Initialize_Params p{CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE};
    p.profilerType = CUPTI_PROFILER_TYPE_RANGE_PROFILER;
    p.pChipName = chip.c_str();
    p.pCounterAvailabilityImage = availability;
    BRICKDL_CUPTI_CALL(cuptiProfilerHostInitialize(&p));
    obj_ = p.pHostObject;
  }
  ~HostObject() {
    CUpti_Profiler_Host_Deinitialize_Params p{CUpti_Profiler_Host_Deinitialize_Params_STRUCT_SIZE};
    p.pHostObject = obj_;
    cuptiProfilerHostDeinitialize(&p);
  }
  HostObject(const HostObject&) = delete;
  HostObject& operator=(const HostObject&) = delete;

  // False when the chip does not know the metric (nothing is added then).
  bool try_add(const char* metric) {
    CUpti_Profiler_Host_ConfigAddMetrics_Params p{
        CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE};
    p.pHostObject = obj_;
    p.ppMetricNames = &metric;
    p.numMetrics = 1;
    return cuptiProfilerHostConfigAddMetrics(&p) == CUPTI_SUCCESS;
  }
  void add(const std::vector<const char*>& metrics) {
    CUpti_Profiler_Host_ConfigAddMetrics_Params p{
        CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE};
    p.pHostObject = obj_;
    p.ppMetricNames = const_cast<const char**>(metrics.data());
    p.numMetrics = metrics.size();
    BRICKDL_CUPTI_CALL(cuptiProfilerHostConfigAddMetrics(&p));
  }
  std::vector<uint8_t> config_image() {
    CUpti_Profiler_Host_GetConfigImageSize_Params s{
        CUpti_Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE};
    s.pHostObject = obj_;
    BRICKDL_CUPTI_CALL(cuptiProfilerHostGetConfigImageSize(&s));
    std::vector<uint8_t> image(s.configImageSize);
    CUpti_Profiler_Host_GetConfigImage_Params g{
        CUpti_Profiler_Host_GetConfigImage_Params_STRUCT_SIZE};
    g.pHostObject = obj_;
    g.configImageSize = image.size();
    g.pConfigImage = image.data();
    BRICKDL_CUPTI_CALL(cuptiProfilerHostGetConfigImage(&g));
    return image;
  }
  CUpti_Profiler_Host_Object* get() const { return obj_; }

private:
  CUpti_Profiler_Host_Object* obj_ = nullptr;
};

int passes_of(std::vector<uint8_t>& config) {
  CUpti_Profiler_Host_GetNumOfPasses_Params p{
      CUpti_Profiler_Host_GetNumOfPasses_Params_STRUCT_SIZE};
  p.configImageSize = config.size();
  p.pConfigImage = config.data();
  BRICKDL_CUPTI_CALL(cuptiProfilerHostGetNumOfPasses(&p));
  return static_cast<int>(p.numOfPasses);
}

std::vector<const char*> c_names(const std::vector<std::string>& metrics) {
  std::vector<const char*> v;
  for (const auto& m : metrics)
    v.push_back(m.c_str());
  return v;
}

// ---- activity buffers ---------------------------------------------------------------------

constexpr size_t kActivityBufferBytes = 8 << 20;
constexpr size_t kActivityAlign = 8;

std::mutex g_records_mu;
std::vector<KernelRecord>* g_records = nullptr; // where completed buffers go (one profiler)

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *size = kActivityBufferBytes;
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(kActivityAlign, kActivityBufferBytes));
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* record = nullptr;
  {
    std::lock_guard<std::mutex> lock(g_records_mu);
    while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
      if (record->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL &&
          record->kind != CUPTI_ACTIVITY_KIND_KERNEL)
        continue;
      const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
      if (g_records)
        g_records->push_back({k->name ? k->name : "", k->start, k->end});
    }
  }
  std::free(buffer);
}

// ---- range profiler passes ----------------------------------------------------------------

// Disables the range profiler when it goes out of scope.
struct RangeProfilerGuard {
  CUpti_RangeProfiler_Object* obj;
  ~RangeProfilerGuard() {
    CUpti_RangeProfiler_Disable_Params d{CUpti_RangeProfiler_Disable_Params_STRUCT_SIZE};
    d.pRangeProfilerObject = obj;
    cuptiRangeProfilerDisable(&d);
  }
};

CUpti_RangeProfiler_Object* enable_range_profiler() {
  CUcontext ctx = nullptr;
  BRICKDL_CU_CALL(detail::driver().ctx_get_current(&ctx));
  CUpti_RangeProfiler_Enable_Params en{CUpti_RangeProfiler_Enable_Params_STRUCT_SIZE};
  en.ctx = ctx;
  BRICKDL_CUPTI_CALL(cuptiRangeProfilerEnable(&en));
  return en.pRangeProfilerObject;
}

// An initialised counter data image for one range of `names`.
std::vector<uint8_t> counter_data_image(CUpti_RangeProfiler_Object* obj,
                                        const std::vector<const char*>& names) {
  CUpti_RangeProfiler_GetCounterDataSize_Params sz{
      CUpti_RangeProfiler_GetCounterDataSize_Params_STRUCT_SIZE};
  sz.pRangeProfilerObject = obj;
  sz.pMetricNames = const_cast<const char**>(names.data());
  sz.numMetrics = names.size();
  sz.maxNumOfRanges = 1;
  sz.maxNumRangeTreeNodes = 1;
  BRICKDL_CUPTI_CALL(cuptiRangeProfilerGetCounterDataSize(&sz));
  std::vector<uint8_t> counter_data(sz.counterDataSize);
  CUpti_RangeProfiler_CounterDataImage_Initialize_Params ci{
      CUpti_RangeProfiler_CounterDataImage_Initialize_Params_STRUCT_SIZE};
  ci.pRangeProfilerObject = obj;
  ci.counterDataSize = counter_data.size();
  ci.pCounterData = counter_data.data();
  BRICKDL_CUPTI_CALL(cuptiRangeProfilerCounterDataImageInitialize(&ci));
  return counter_data;
}

// One user range, user replay, one nesting level.
void set_config(CUpti_RangeProfiler_Object* obj, std::vector<uint8_t>& config,
                std::vector<uint8_t>& counter_data) {
  CUpti_RangeProfiler_SetConfig_Params sc{CUpti_RangeProfiler_SetConfig_Params_STRUCT_SIZE};
  sc.pRangeProfilerObject = obj;
  sc.configSize = config.size();
  sc.pConfig = config.data();
  sc.counterDataImageSize = counter_data.size();
  sc.pCounterDataImage = counter_data.data();
  sc.range = CUPTI_UserRange;
  sc.replayMode = CUPTI_UserReplay;
  sc.maxRangesPerPass = 1;
  sc.numNestingLevels = 1;
  sc.minNestingLevel = 1;
  sc.passIndex = 0;
  sc.targetNestingLevel = 1;
  BRICKDL_CUPTI_CALL(cuptiRangeProfilerSetConfig(&sc));
}

// One replay pass: prepare() outside the range, work() inside it. True when it was the last.
bool run_pass(CUpti_RangeProfiler_Object* obj, const std::function<void()>& prepare,
              const std::function<void()>& work) {
  prepare();
  BRICKDL_CUDA_CALL(cudaDeviceSynchronize());
  CUpti_RangeProfiler_Start_Params st{CUpti_RangeProfiler_Start_Params_STRUCT_SIZE};
  st.pRangeProfilerObject = obj;
  BRICKDL_CUPTI_CALL(cuptiRangeProfilerStart(&st));
  CUpti_RangeProfiler_PushRange_Params push{CUpti_RangeProfiler_PushRange_Params_STRUCT_SIZE};
  push.pRangeProfilerObject = obj;
  push.pRangeName = "brickdl";
  BRICKDL_CUPTI_CALL(cuptiRangeProfilerPushRange(&push));
  work();
  BRICKDL_CUDA_CALL(cudaDeviceSynchronize());
  CUpti_RangeProfiler_PopRange_Params pop{CUpti_RangeProfiler_PopRange_Params_STRUCT_SIZE};
  pop.pRangeProfilerObject = obj;
  BRICKDL_CUPTI_CALL(cuptiRangeProfilerPopRange(&pop));
  CUpti_RangeProfiler_Stop_Params stop{CUpti_RangeProfiler_Stop_Params_STRUCT_SIZE};
  stop.pRangeProfilerObject = obj;
  BRICKDL_CUPTI_CALL(cuptiRangeProfilerStop(&stop));
  return stop.isAllPassSubmitted != 0;
}

// The metrics' values in the decoded counter data of range 0.
std::vector<double> evaluate(HostObject& host, std::vector<uint8_t>& counter_data,
                             const std::vector<const char*>& names) {
  CUpti_RangeProfiler_GetCounterDataInfo_Params info{
      CUpti_RangeProfiler_GetCounterDataInfo_Params_STRUCT_SIZE};
  info.pCounterDataImage = counter_data.data();
  info.counterDataImageSize = counter_data.size();
  BRICKDL_CUPTI_CALL(cuptiRangeProfilerGetCounterDataInfo(&info));
  if (info.numTotalRanges < 1)
    throw CudaError("CUPTI range profiler recorded no range");
  std::vector<double> values(names.size(), 0.0);
  CUpti_Profiler_Host_EvaluateToGpuValues_Params ev{
      CUpti_Profiler_Host_EvaluateToGpuValues_Params_STRUCT_SIZE};
  ev.pHostObject = host.get();
  ev.pCounterDataImage = counter_data.data();
  ev.counterDataImageSize = counter_data.size();
  ev.rangeIndex = 0;
  ev.ppMetricNames = const_cast<const char**>(names.data());
  ev.numMetrics = names.size();
  ev.pMetricValues = values.data();
  BRICKDL_CUPTI_CALL(cuptiProfilerHostEvaluateToGpuValues(&ev));
  return values;
}

} // namespace

// ---- CuptiProfiler ------------------------------------------------------------------------

struct CuptiProfiler::Impl {
  int device = 0;
  std::string chip;
  std::vector<uint8_t> availability;
  std::vector<KernelRecord> records;
  bool activity_on = false;
};

bool CuptiProfiler::is_supported() {
  return true;
}

std::vector<std::string> CuptiProfiler::default_metrics() {
  return {
      "gpu__time_duration.sum",
      "dram__bytes_read.sum",
      "dram__bytes_write.sum",
      "lts__t_bytes.sum",
      "l1tex__t_bytes.sum",
      "sm__cycles_elapsed.avg",
      "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum",
      "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum",
      "smsp__sass_thread_inst_executed_op_fmul_pred_on.sum",
      "l1tex__t_requests_pipe_lsu_mem_global_op_atom.sum",
      "l1tex__t_set_accesses_pipe_lsu_mem_global_op_atom.sum",
      "lts__t_requests_op_atom.sum",
  };
}

std::vector<std::string> CuptiProfiler::unknown_metrics(const std::string& chip,
                                                        const std::vector<std::string>& metrics) {
  // One host object per name: after a failed add, CUPTI 13 refuses every later name on the
  // same object (known ones included), so one unknown metric would hide all that follow it.
  (void)HostObject(chip, nullptr); // an unknown chip throws here, whatever the list
  std::vector<std::string> unknown;
  for (const auto& m : metrics)
    if (!HostObject(chip, nullptr).try_add(m.c_str()))
      unknown.push_back(m);
  return unknown;
}

int CuptiProfiler::passes(const std::string& chip, const std::vector<std::string>& metrics) {
  HostObject host(chip, nullptr);
  host.add(c_names(metrics));
  auto config = host.config_image();
  return passes_of(config);
}

CuptiProfiler::CuptiProfiler(int device) : impl_(std::make_unique<Impl>()) {
  impl_->device = device;
  BRICKDL_CUDA_CALL(cudaSetDevice(device));
  BRICKDL_CUDA_CALL(cudaFree(nullptr)); // the primary context exists and is current
  CUpti_Profiler_Initialize_Params init{CUpti_Profiler_Initialize_Params_STRUCT_SIZE};
  BRICKDL_CUPTI_CALL(cuptiProfilerInitialize(&init));
  CUpti_Device_GetChipName_Params chip{CUpti_Device_GetChipName_Params_STRUCT_SIZE};
  chip.deviceIndex = static_cast<size_t>(device);
  BRICKDL_CUPTI_CALL(cuptiDeviceGetChipName(&chip));
  impl_->chip = chip.pChipName;
  CUcontext ctx = nullptr;
  BRICKDL_CU_CALL(detail::driver().ctx_get_current(&ctx));
  CUpti_Profiler_GetCounterAvailability_Params av{
      CUpti_Profiler_GetCounterAvailability_Params_STRUCT_SIZE};
  av.ctx = ctx;
  BRICKDL_CUPTI_CALL(cuptiProfilerGetCounterAvailability(&av));
  impl_->availability.resize(av.counterAvailabilityImageSize);
  av.pCounterAvailabilityImage = impl_->availability.data();
  BRICKDL_CUPTI_CALL(cuptiProfilerGetCounterAvailability(&av));
  BRICKDL_CUPTI_CALL(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed));
}

CuptiProfiler::~CuptiProfiler() {
  if (impl_->activity_on) {
    cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    cuptiActivityFlushAll(1);
    std::lock_guard<std::mutex> lock(g_records_mu);
    g_records = nullptr;
  }
}

const std::string& CuptiProfiler::chip() const {
  return impl_->chip;
}

void CuptiProfiler::begin_kernel_records() {
  {
    std::lock_guard<std::mutex> lock(g_records_mu);
    impl_->records.clear();
    g_records = &impl_->records;
  }
  BRICKDL_CUPTI_CALL(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
  impl_->activity_on = true;
}

std::vector<KernelRecord> CuptiProfiler::end_kernel_records() {
  BRICKDL_CUDA_CALL(cudaDeviceSynchronize());
  BRICKDL_CUPTI_CALL(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
  impl_->activity_on = false;
  BRICKDL_CUPTI_CALL(cuptiActivityFlushAll(1)); // forced: deliver incomplete buffers too
  std::lock_guard<std::mutex> lock(g_records_mu);
  g_records = nullptr;
  return std::move(impl_->records);
}

std::map<std::string, double> CuptiProfiler::collect(const std::vector<std::string>& metrics,
                                                     const std::function<void()>& prepare,
                                                     const std::function<void()>& work) {
  const std::vector<const char*> names = c_names(metrics);
  HostObject host(impl_->chip, impl_->availability.data());
  host.add(names);
  std::vector<uint8_t> config = host.config_image();

  CUpti_RangeProfiler_Object* obj = enable_range_profiler();
  const RangeProfilerGuard disable{obj};
  std::vector<uint8_t> counter_data = counter_data_image(obj, names);
  set_config(obj, config, counter_data);
  const int max_passes = passes_of(config) + 2; // a guard against a profiler that never ends
  for (int pass = 0; !run_pass(obj, prepare, work);) {
    if (++pass >= max_passes)
      throw CudaError("CUPTI range profiler: passes not complete after " +
                      std::to_string(max_passes) + " replays");
  }
  CUpti_RangeProfiler_DecodeData_Params dec{CUpti_RangeProfiler_DecodeData_Params_STRUCT_SIZE};
  dec.pRangeProfilerObject = obj;
  BRICKDL_CUPTI_CALL(cuptiRangeProfilerDecodeData(&dec));

  const std::vector<double> values = evaluate(host, counter_data, names);
  std::map<std::string, double> out;
  for (size_t i = 0; i < metrics.size(); ++i)
    out[metrics[i]] = values[i];
  return out;
}

} // namespace brickdl::cuda
