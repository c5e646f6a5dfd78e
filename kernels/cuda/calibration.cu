// The micro-measurements of brickdl-calibrate (calibration.h): streaming reads for the DRAM
// and L2 bandwidths, empty kernels for the launch gap. The kernels end by construction
// (bounded loops, a gate bounded by the global timer); the session's time-out guards a device
// that stalls.
#include "kernels/cuda/calibration.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>

#include "kernels/cuda/cupti_profiler.h"
#include "kernels/cuda/detail/cuda_call.cuh"
#include "kernels/cuda/detail/device_buffers.cuh"
#include "kernels/cuda/device_session.cuh"

// Every thread sums 16-byte vectors, grid-stride, four loads in flight per iteration; the
// buffer is zeroed, so `sink` is never written, but the compiler cannot know that and keeps
// every load (a sum, unlike an OR, is not idempotent: a second pass cannot be folded away).
// ld.global.cg caches in L2 only, so a repeated pass over an L2-resident buffer hits L2, never
// L1.
extern "C" __global__ void brickdl_calibrate_read(const int4* __restrict__ v, size_t n, int passes,
                                                  int* sink) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  const size_t first = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  int sum = 0;
  for (int p = 0; p < passes; ++p) {
    size_t i = first;
    for (; i + 3 * stride < n; i += 4 * stride) {
      const int4 a = __ldcg(v + i), b = __ldcg(v + i + stride);
      const int4 c = __ldcg(v + i + 2 * stride), d = __ldcg(v + i + 3 * stride);
      sum += a.x + a.y + a.z + a.w + b.x + b.y + b.z + b.w;
      sum += c.x + c.y + c.z + c.w + d.x + d.y + d.z + d.w;
    }
    for (; i < n; i += stride) {
      const int4 a = __ldcg(v + i);
      sum += a.x + a.y + a.z + a.w;
    }
  }
  if (sum != 0)
    *sink = sum;
}

extern "C" __global__ void brickdl_calibrate_empty() {}

// Holds the stream for `ns` nanoseconds of the global timer.
extern "C" __global__ void brickdl_calibrate_gate(unsigned long long ns) {
  unsigned long long t0 = 0, t = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (t - t0 < ns);
}

namespace brickdl::cuda {

namespace {

constexpr int kThreads = 256;

int attribute(cudaDeviceAttr what, int device) {
  int v = 0;
  BRICKDL_CUDA_CALL(cudaDeviceGetAttribute(&v, what, device));
  return v;
}

// A session without CUPTI (events only) and the grid that fills the device: as many threads
// as the SMs hold, so that enough loads are in flight to saturate the memory.
struct Bench {
  explicit Bench(int device)
      : session(device, attribute(cudaDevAttrL2CacheSize, device), false),
        blocks(static_cast<unsigned>(
            attribute(cudaDevAttrMultiProcessorCount, device) *
            std::max(1, attribute(cudaDevAttrMaxThreadsPerMultiProcessor, device) / kThreads))) {}
  DeviceSession session;
  unsigned blocks;
};

StreamTiming time_reads(int device, int64_t buffer_bytes, int passes, int runs, double timeout_s) {
  if (buffer_bytes < 16 || passes < 1 || runs < 1)
    throw CudaError("calibration: a read sweep needs at least 16 bytes, one pass and one run");
  Bench bench(device);
  detail::DeviceBuffer buf(static_cast<size_t>(buffer_bytes) / 16 * 16);
  detail::DeviceBuffer sink(sizeof(int));
  BRICKDL_CUDA_CALL(cudaMemset(buf.as<void>(), 0, buf.bytes()));
  BRICKDL_CUDA_CALL(cudaDeviceSynchronize());
  cudaStream_t s = bench.session.stream();
  const size_t n = buf.bytes() / sizeof(int4);
  const auto sweep = [&](int p) {
    brickdl_calibrate_read<<<bench.blocks, kThreads, 0, s>>>(buf.as<int4>(), n, p, sink.as<int>());
    BRICKDL_CUDA_CALL(cudaGetLastError());
  };
  sweep(1); // warm-up: the code loaded, and an L2-sized buffer resident
  bench.session.wait(timeout_s);
  StreamTiming t;
  t.bytes_per_run = static_cast<double>(buf.bytes()) * passes;
  for (int r = 0; r < runs; ++r) {
    bench.session.record_start();
    sweep(passes);
    bench.session.wait(timeout_s);
    t.samples_ms.push_back(bench.session.elapsed_ms());
  }
  return t;
}

} // namespace

StreamTiming measure_dram_read(int device, int64_t buffer_bytes, int runs, double timeout_s) {
  return time_reads(device, buffer_bytes, 1, runs, timeout_s);
}

StreamTiming measure_l2_read(int device, int64_t buffer_bytes, int passes, int runs,
                             double timeout_s) {
  return time_reads(device, buffer_bytes, passes, runs, timeout_s);
}

LaunchGapTiming measure_launch_gap(int device, int kernels, int runs, double timeout_s) {
  if (kernels < 2 || runs < 1)
    throw CudaError("calibration: the launch gap needs at least two kernels and one run");
  using Clock = std::chrono::steady_clock;
  Bench bench(device);
  cudaStream_t s = bench.session.stream();
  LaunchGapTiming t;
  t.kernels = kernels;
  // 20 us of gate per launch: far more than a launch call takes on the host (a few us), so the
  // whole queue is in place before the first empty kernel runs.
  t.gate_ms = std::max(2.0, 0.02 * kernels);
  const auto gate_ns = static_cast<unsigned long long>(t.gate_ms * 1e6);
  const auto timed = [&](int n) {
    brickdl_calibrate_gate<<<1, 1, 0, s>>>(gate_ns);
    BRICKDL_CUDA_CALL(cudaGetLastError());
    bench.session.record_start();
    const auto t0 = Clock::now();
    for (int k = 0; k < n; ++k)
      brickdl_calibrate_empty<<<1, 32, 0, s>>>();
    BRICKDL_CUDA_CALL(cudaGetLastError());
    t.enqueue_ms = std::max(t.enqueue_ms,
                            std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    bench.session.wait(timeout_s);
    return static_cast<double>(bench.session.elapsed_ms());
  };
  timed(kernels); // warm-up: the module loaded, the launch path warm
  t.enqueue_ms = 0;
  for (int r = 0; r < runs; ++r) {
    t.first_ms.push_back(timed(1));
    t.all_ms.push_back(timed(kernels));
  }
  return t;
}

std::string cupti_chip(int device) {
  if (!CuptiProfiler::is_supported())
    throw CudaError("brickdl was built without CUPTI (BRICKDL_ENABLE_CUPTI)");
  return CuptiProfiler(device).chip();
}

} // namespace brickdl::cuda
