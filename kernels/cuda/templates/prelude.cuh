#pragma once
// The few primitives the kernel templates use, in two flavours:
//
//   NVRTC (default)         real CUDA: threadIdx, __syncthreads, atomics, __ldcg, clock64
//   BRICKDL_EMULATE defined plain host C++: one emulated thread block runs on one host thread;
//                           each phase between two barriers is a loop over the block's threads
//                           (BRICKDL_FOR_EACH_THREAD), atomics are std::atomic_ref, so several
//                           host threads running blocks exercise the memoized claim protocol.
//
// Rules the templates follow so both flavours mean the same thing:
//  - code between two BRICKDL_SYNC() is one phase, written inside BRICKDL_FOR_EACH_THREAD(t);
//    a phase only reads shared memory written in earlier phases;
//  - values that cross a barrier live in shared memory, never in a thread's locals;
//  - no `return` inside a thread loop (`continue` ends the thread's part of the phase).
//  - a thread block cluster (padded kernels with GroupDesc::cluster > 1) runs its CTAs as host
//    threads at once under emulation, each with its own shared memory; cluster_sync() is a
//    barrier of those threads, cluster_peer() maps an address of this CTA's shared memory to
//    the same place in another rank's (mapa on the device: distributed shared memory).
//  - warp-level code (tensor-core MMA, mma.cuh) runs inside BRICKDL_FOR_EACH_WARP(w): per-lane
//    work inside BRICKDL_FOR_EACH_LANE(l), per-lane values in Lanes<T, N> (one set per lane
//    under emulation, the thread's own registers on the device), and the warp-collective
//    mma_step between lane loops (all 32 lanes of the warp take part). Blocks are whole warps.
//  - warpgroup-level code (wgmma on sm_90a, mma.cuh) is the same one level up: inside
//    BRICKDL_FOR_EACH_WARPGROUP(g), per-thread work inside BRICKDL_FOR_EACH_WG_LANE(l) (l: the
//    thread's rank 0..127 in its warpgroup, warp l / 32), per-thread values in
//    Lanes<T, N, 128>, the warpgroup-collective wgmma_step and warpgroup_sync between lane
//    loops. Only blocks of whole warpgroups take that path.
#include "group_desc.h"

#if defined(BRICKDL_EMULATE)

// Under emulation every path is compiled (the descriptor chooses at run time).
#undef BRICKDL_CLUSTER
#define BRICKDL_CLUSTER 1

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <thread>

namespace brickdl {
namespace dev {
namespace emu {
// The emulated block: set by the emulator before it runs a block on this host thread.
inline thread_local int block_threads = 1;
inline thread_local float* block_smem = nullptr;
// The emulated cluster of this block: every rank's shared memory, and the barrier of its ranks.
inline thread_local float* const* cluster_smem = nullptr;
inline thread_local std::barrier<>* cluster_barrier = nullptr;
// GroupDesc::storage of the launch this block belongs to.
inline thread_local int storage = 0;
} // namespace emu
} // namespace dev
} // namespace brickdl

#define BRICKDL_DEVICE inline
#define BRICKDL_SHARED static thread_local
#define BRICKDL_FOR_EACH_THREAD(t) for (int t = 0; t < ::brickdl::dev::emu::block_threads; ++t)
#define BRICKDL_NUM_THREADS() (::brickdl::dev::emu::block_threads)
#define BRICKDL_FOR_EACH_WARP(w)                                                                   \
  for (int w = 0; w < (::brickdl::dev::emu::block_threads + 31) / 32; ++w)
#define BRICKDL_NUM_WARPS() ((::brickdl::dev::emu::block_threads + 31) / 32)
#define BRICKDL_FOR_EACH_LANE(l) for (int l = 0; l < 32; ++l)
#define BRICKDL_FOR_EACH_WARPGROUP(w)                                                              \
  for (int w = 0; w < ::brickdl::dev::emu::block_threads / 128; ++w)
#define BRICKDL_NUM_WARPGROUPS() (::brickdl::dev::emu::block_threads / 128)
#define BRICKDL_FOR_EACH_WG_LANE(l) for (int l = 0; l < 128; ++l)
#define BRICKDL_SYNC() ((void)0)
#define BRICKDL_RESTRICT
#define BRICKDL_UNROLL

namespace brickdl {
namespace dev {
inline float* block_smem() {
  return emu::block_smem;
}
inline float neg_inf() {
  return -std::numeric_limits<float>::infinity();
}
// A read-only global value (float, or a 16-bit storage value).
template <class T> inline T load_cached(const T* p) {
  return *p;
}
// Memoized data written by other blocks: through L2 on the device.
template <class T> inline T load_coherent(const T* p) {
  return std::atomic_ref<T>(*const_cast<T*>(p)).load(std::memory_order_relaxed);
}
template <class T> inline void store_coherent(T* p, T v) {
  std::atomic_ref<T>(*p).store(v, std::memory_order_relaxed);
}
inline int atomic_cas(int* p, int expected, int desired) {
  std::atomic_ref<int>(*p).compare_exchange_strong(expected, desired, std::memory_order_acq_rel);
  return expected; // the value seen, as atomicCAS returns it
}
inline void atomic_release_store(int* p, int v) {
  std::atomic_ref<int>(*p).store(v, std::memory_order_release);
}
inline int atomic_acquire_load(int* p) {
  return std::atomic_ref<int>(*p).load(std::memory_order_acquire);
}
inline void atomic_add(unsigned long long* p, unsigned long long v) {
  std::atomic_ref<unsigned long long>(*p).fetch_add(v, std::memory_order_relaxed);
}
inline void atomic_store_int(int* p, int v) {
  std::atomic_ref<int>(*p).store(v, std::memory_order_relaxed);
}
inline void fence() {
  std::atomic_thread_fence(std::memory_order_seq_cst);
}
inline long long clock_ticks() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
inline void spin_pause() {
  std::this_thread::yield();
}
// Asynchronous copies complete at once under emulation.
inline void cp_async_f32(float* dst, const float* src, bool valid) {
  *dst = valid ? *src : 0.f;
}
inline void cp_async_commit() {}
inline void cp_async_wait_all() {}
// Thread block clusters: every rank's threads reach the barrier before any goes on.
inline void cluster_sync() {
  emu::cluster_barrier->arrive_and_wait();
}
// p (in this block's shared memory) at the same offset in rank `rank`'s shared memory.
inline const float* cluster_peer(const float* p, int rank) {
  return emu::cluster_smem[rank] + (p - emu::block_smem);
}
// ---- global storage (GroupDesc::storage): the device's conversions, bit for bit -----------
inline int storage() {
  return emu::storage;
}

inline unsigned float_bits(float x) {
  unsigned u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}
inline float bits_float(unsigned u) {
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

// BF16: 7 mantissa bits, nearest, ties to even.
inline float round_bf16(float x) {
  if (std::isnan(x))
    return x;
  const unsigned u = float_bits(x);
  return bits_float((u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u);
}
// FP16: 10 mantissa bits, exponent >= -14 (subnormals below, in steps of 2^-24), nearest, ties
// to even, |x| >= 65520 to infinity.
inline float round_fp16(float x) {
  if (!std::isfinite(x))
    return x;
  const float ax = std::fabs(x);
  if (ax >= 65520.f)
    return std::copysign(std::numeric_limits<float>::infinity(), x);
  if (ax < 6.103515625e-05f) // 2^-14: subnormal half, a multiple of 2^-24
    return std::nearbyint(x * 16777216.f) / 16777216.f;
  const unsigned u = float_bits(x);
  return bits_float((u + 0xfffu + ((u >> 13) & 1u)) & 0xffffe000u);
}

// The bits of a value fp16 represents exactly (round_fp16's results), and back.
inline unsigned short half_bits(float x) {
  const unsigned u = float_bits(x);
  const auto sign = static_cast<unsigned short>((u >> 16) & 0x8000u);
  if (std::isnan(x))
    return static_cast<unsigned short>(sign | 0x7e00u);
  if (std::isinf(x))
    return static_cast<unsigned short>(sign | 0x7c00u);
  if (std::fabs(x) < 6.103515625e-05f) // subnormal: a multiple of 2^-24
    return static_cast<unsigned short>(sign | static_cast<unsigned>(std::fabs(x) * 16777216.f));
  const unsigned e = ((u >> 23) & 0xffu) - 127u + 15u;
  return static_cast<unsigned short>(sign | (e << 10) | ((u >> 13) & 0x3ffu));
}
inline float half_value(unsigned short h) {
  const unsigned sign = (h & 0x8000u) << 16;
  const unsigned e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0)
    return bits_float(sign | float_bits(static_cast<float>(m) / 16777216.f));
  if (e == 31)
    return bits_float(sign | 0x7f800000u | (m << 13));
  return bits_float(sign | ((e - 15u + 127u) << 23) | (m << 13));
}
// A float as the 16-bit storage type (nearest even; NaN stays NaN), and back (exact).
inline unsigned short to_storage(float v) {
  if (storage() == kStorageBf16)
    return static_cast<unsigned short>(std::isnan(v) ? (float_bits(v) >> 16) | 0x40u
                                                     : float_bits(round_bf16(v)) >> 16);
  return half_bits(round_fp16(v));
}
inline float from_storage(unsigned short u) {
  return storage() == kStorageBf16 ? bits_float(static_cast<unsigned>(u) << 16) : half_value(u);
}
// n (<= kMaxTileCo) consecutive read-only floats.
inline void load_tile(const float* p, int n, float* out) {
  for (int j = 0; j < n; ++j)
    out[j] = p[j];
}
// The same for n 16-bit storage values.
inline void load_tile(const unsigned short* p, int n, float* out) {
  for (int j = 0; j < n; ++j)
    out[j] = from_storage(p[j]);
}
} // namespace dev
} // namespace brickdl

#else // NVRTC

#if !defined(BRICKDL_CLUSTER)
#define BRICKDL_CLUSTER 0
#endif

#define BRICKDL_DEVICE __device__ __forceinline__
#define BRICKDL_SHARED __shared__
#define BRICKDL_FOR_EACH_THREAD(t)                                                                 \
  for (int t = static_cast<int>(threadIdx.x), t##_once_ = 1; t##_once_; t##_once_ = 0)
#define BRICKDL_NUM_THREADS() (static_cast<int>(blockDim.x))
#define BRICKDL_FOR_EACH_WARP(w)                                                                   \
  for (int w = static_cast<int>(threadIdx.x >> 5), w##_once_ = 1; w##_once_; w##_once_ = 0)
#define BRICKDL_NUM_WARPS() (static_cast<int>(blockDim.x >> 5))
#define BRICKDL_FOR_EACH_LANE(l)                                                                   \
  for (int l = static_cast<int>(threadIdx.x & 31), l##_once_ = 1; l##_once_; l##_once_ = 0)
#define BRICKDL_FOR_EACH_WARPGROUP(w)                                                              \
  for (int w = static_cast<int>(threadIdx.x >> 7), w##_once_ = 1; w##_once_; w##_once_ = 0)
#define BRICKDL_NUM_WARPGROUPS() (static_cast<int>(blockDim.x >> 7))
#define BRICKDL_FOR_EACH_WG_LANE(l)                                                                \
  for (int l = static_cast<int>(threadIdx.x & 127), l##_once_ = 1; l##_once_; l##_once_ = 0)
#define BRICKDL_SYNC() __syncthreads()
#define BRICKDL_RESTRICT __restrict__
#define BRICKDL_UNROLL _Pragma("unroll")

namespace brickdl {
namespace dev {
BRICKDL_DEVICE float* block_smem() {
  extern __shared__ float4 brickdl_dynamic_smem[];
  return reinterpret_cast<float*>(brickdl_dynamic_smem);
}
BRICKDL_DEVICE float neg_inf() {
  return __int_as_float(0xff800000);
}
// A read-only global value (float, or a 16-bit storage value).
template <class T> BRICKDL_DEVICE T load_cached(const T* p) {
  return __ldg(p);
}
// Memoized data written by other blocks of the launch: through L2, never L1.
template <class T> BRICKDL_DEVICE T load_coherent(const T* p) {
  return __ldcg(p);
}
template <class T> BRICKDL_DEVICE void store_coherent(T* p, T v) {
  __stcg(p, v);
}
// ---- global storage (GroupDesc::storage; codegen defines BRICKDL_STORAGE) ------------------
#if !defined(BRICKDL_STORAGE)
#define BRICKDL_STORAGE 0
#endif
BRICKDL_DEVICE int storage() {
  return BRICKDL_STORAGE;
}
// A float as the 16-bit storage type (nearest even), and back.
BRICKDL_DEVICE unsigned short to_storage(float v) {
  if (storage() == kStorageBf16) {
    unsigned u;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(u) : "f"(0.f), "f"(v));
    return static_cast<unsigned short>(u & 0xffffu);
  }
  unsigned short h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(v));
  return h;
}
BRICKDL_DEVICE float from_storage(unsigned short u) {
  if (storage() == kStorageBf16)
    return __uint_as_float(static_cast<unsigned>(u) << 16);
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(u));
  return f;
}
// A stored element as a float: fp32 as it is, 16-bit storage widened (exact).
BRICKDL_DEVICE float widen(float v) {
  return v;
}
BRICKDL_DEVICE float widen(unsigned short u) {
  return from_storage(u);
}
// Elements 4q .. 4q + 3 of p in one vector load: 16 bytes of fp32, 8 of 16-bit storage.
BRICKDL_DEVICE void load4(const float* p, int q, float* out) {
  const float4 v = __ldg(reinterpret_cast<const float4*>(p) + q);
  out[0] = v.x;
  out[1] = v.y;
  out[2] = v.z;
  out[3] = v.w;
}
BRICKDL_DEVICE void load4(const unsigned short* p, int q, float* out) {
  const uint2 v = __ldg(reinterpret_cast<const uint2*>(p) + q);
  out[0] = from_storage(static_cast<unsigned short>(v.x & 0xffffu));
  out[1] = from_storage(static_cast<unsigned short>(v.x >> 16));
  out[2] = from_storage(static_cast<unsigned short>(v.y & 0xffffu));
  out[3] = from_storage(static_cast<unsigned short>(v.y >> 16));
}
// n (<= kMaxTileCo) consecutive read-only stored values (fp32 or 16-bit storage); vector loads
// when n is a multiple of 4 (the packed weight tiles are then 16 / 8-byte aligned).
template <class T> BRICKDL_DEVICE void load_tile(const T* p, int n, float* out) {
  if ((n & 3) == 0) {
    BRICKDL_UNROLL
    for (int q = 0; q < kMaxTileCo / 4; ++q) {
      if (4 * q >= n)
        break;
      load4(p, q, out + 4 * q);
    }
  } else {
    BRICKDL_UNROLL
    for (int j = 0; j < kMaxTileCo; ++j) {
      if (j >= n)
        break;
      out[j] = widen(__ldg(p + j));
    }
  }
}
BRICKDL_DEVICE int atomic_cas(int* p, int expected, int desired) {
  return atomicCAS(p, expected, desired);
}
// Release: the caller has fenced after the data writes; the flag store must not be cached.
BRICKDL_DEVICE void atomic_release_store(int* p, int v) {
  __threadfence();
  atomicExch(p, v);
}
BRICKDL_DEVICE int atomic_acquire_load(int* p) {
  const int v = *static_cast<volatile int*>(p);
  __threadfence();
  return v;
}
BRICKDL_DEVICE void atomic_add(unsigned long long* p, unsigned long long v) {
  atomicAdd(p, v);
}
BRICKDL_DEVICE void atomic_store_int(int* p, int v) {
  atomicExch(p, v);
}
BRICKDL_DEVICE void fence() {
  __threadfence();
}
BRICKDL_DEVICE long long clock_ticks() {
  return clock64();
}
BRICKDL_DEVICE void spin_pause() {
  __nanosleep(64);
}
// One float global -> shared memory with cp.async (sm_80+; through L1, so for data no block of
// this launch writes), zero-filled without reading `src` when !valid. It lands after
// cp_async_wait_all() in the issuing thread; other threads see it after a barrier.
BRICKDL_DEVICE void cp_async_f32(float* dst, const float* src, bool valid) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(s), "l"(src),
               "r"(valid ? 4 : 0)
               : "memory");
}
BRICKDL_DEVICE void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
BRICKDL_DEVICE void cp_async_wait_all() {
  asm volatile("cp.async.wait_all;\n" ::: "memory");
}
// Thread block clusters (sm_90; codegen defines BRICKDL_CLUSTER 1 only for cluster kernels):
// a barrier of every thread of every CTA of the cluster, which also orders their shared-memory
// writes before the other ranks' reads; and p (a generic address in this CTA's shared memory)
// at the same offset in rank `rank`'s shared memory (distributed shared memory; plain loads).
#if BRICKDL_CLUSTER
BRICKDL_DEVICE void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n\t"
               "barrier.cluster.wait.acquire.aligned;\n" ::
                   : "memory");
}
BRICKDL_DEVICE const float* cluster_peer(const float* p, int rank) {
  unsigned long long q;
  asm("mapa.u64 %0, %1, %2;" : "=l"(q) : "l"(p), "r"(rank));
  return reinterpret_cast<const float*>(q);
}
#endif
} // namespace dev
} // namespace brickdl

#endif

namespace brickdl {
namespace dev {
// A global tensor's pointer as what it holds with 16-bit storage (KernelArgs types them float*).
BRICKDL_DEVICE const unsigned short* as_storage(const float* p) {
  return reinterpret_cast<const unsigned short*>(p);
}
BRICKDL_DEVICE unsigned short* as_storage(float* p) {
  return reinterpret_cast<unsigned short*>(p);
}
// base + i elements of the global storage type (for pointers into global tensors only).
BRICKDL_DEVICE const float* goffset(const float* base, long long i) {
  return storage() == kStorageF32 ? base + i : reinterpret_cast<const float*>(as_storage(base) + i);
}
BRICKDL_DEVICE float* goffset(float* base, long long i) {
  return storage() == kStorageF32 ? base + i : reinterpret_cast<float*>(as_storage(base) + i);
}
// Element i of a global tensor (read-only in this launch), and a store to it, rounded to the
// storage type.
BRICKDL_DEVICE float gload(const float* base, long long i) {
  return storage() == kStorageF32 ? load_cached(base + i)
                                  : from_storage(load_cached(as_storage(base) + i));
}
BRICKDL_DEVICE void gstore(float* base, long long i, float v) {
  if (storage() == kStorageF32)
    base[i] = v;
  else
    as_storage(base)[i] = to_storage(v);
}
// The same for memoized bricks, which other blocks write and read while this one runs.
BRICKDL_DEVICE float gload_coherent(const float* base, long long i) {
  return storage() == kStorageF32 ? load_coherent(base + i)
                                  : from_storage(load_coherent(as_storage(base) + i));
}
BRICKDL_DEVICE void gstore_coherent(float* base, long long i, float v) {
  if (storage() == kStorageF32)
    store_coherent(base + i, v);
  else
    store_coherent(as_storage(base) + i, to_storage(v));
}
// n (<= kMaxTileCo) consecutive packed conv weights from element i (load_tile's vector loads).
BRICKDL_DEVICE void load_weights(const float* w, long long i, int n, float* out) {
  if (storage() == kStorageF32)
    load_tile(w + i, n, out);
  else
    load_tile(as_storage(w) + i, n, out);
}
BRICKDL_DEVICE int imin(int a, int b) {
  return a < b ? a : b;
}
BRICKDL_DEVICE int imax(int a, int b) {
  return a > b ? a : b;
}
// Floor division for possibly negative numerators (region origins before clipping).
BRICKDL_DEVICE int floor_div(int a, int b) {
  return a >= 0 ? a / b : -((-a + b - 1) / b);
}
// NaN in, NaN out, as the reference (kernels/detail/op_math.h): v != v only for a NaN.
BRICKDL_DEVICE bool is_nan(float v) {
  return v != v;
}
// e^v: the host's std::exp under emulation, CUDA's expf (full precision, no fast math) on the
// device; both within 2 ulp of e^v, so sigmoid / silu agree with the reference to a few ulp.
BRICKDL_DEVICE float exp_f(float v) {
#if defined(BRICKDL_EMULATE)
  return std::exp(v);
#else
  return expf(v);
#endif
}
// The elementwise functions of kernels/detail/op_math.h, in the same operations and order.
BRICKDL_DEVICE float sigmoid_f(float v) {
  return 1.f / (1.f + exp_f(-v));
}
// erf(v): std::erf under emulation, CUDA's erff on the device (full precision, within 2 ulp).
BRICKDL_DEVICE float erf_f(float v) {
#if defined(BRICKDL_EMULATE)
  return std::erf(v);
#else
  return erff(v);
#endif
}
BRICKDL_DEVICE float hard_sigmoid_f(float v) {
  if (is_nan(v))
    return v;
  const float t = v * (1.f / 6.f) + 0.5f;
  const float m = t < 0.f ? 0.f : t; // std::max(t, 0)
  return 1.f < m ? 1.f : m;          // std::min(m, 1)
}
BRICKDL_DEVICE float gelu_f(float v) {
  return 0.5f * v * (1.f + erf_f(v * 0.70710678118654752f));
}
BRICKDL_DEVICE float clip_f(float v, float lo, float hi) {
  if (is_nan(v))
    return v;
  const float m = v < lo ? lo : v; // std::max(v, lo)
  return hi < m ? hi : m;          // std::min(m, hi)
}
// The epilogues (BRICKDL_ACTS, bit a for Act a) and elementwise functions (BRICKDL_EWS, bit e
// for Ew e) a kernel source compiles: codegen defines the ones its plan uses (codegen.h
// PlanPaths), so that no other function's code is inlined into every conv's epilogue (an
// erf / exp path there cost a memoized tf32 wgmma kernel its registers: 128 with a 1104-byte
// stack and serialized wgmma, NVRTC 13.0, sm_90a); under emulation every one is there.
#if !defined(BRICKDL_ACTS)
#define BRICKDL_ACTS 0x7fffffff
#endif
#if !defined(BRICKDL_EWS)
#define BRICKDL_EWS 0x7fffffff
#endif

// A layer's epilogue (op_math.h activate): relu and leaky relu, or one of the elementwise
// functions, with the leaky slope or the clip range.
BRICKDL_DEVICE float activate(float v, int act, float slope, float lo, float hi) {
  const bool keep = v > 0.f || is_nan(v);
  switch (act) {
  case kActRelu: return keep ? v : 0.f;
  case kActLeaky: return keep ? v : v * slope;
#if BRICKDL_ACTS & (1 << 3) // kActClip
  case kActClip: return clip_f(v, lo, hi);
#endif
#if BRICKDL_ACTS & (1 << 4) // kActSigmoid
  case kActSigmoid: return sigmoid_f(v);
#endif
#if BRICKDL_ACTS & (1 << 5) // kActSilu
  case kActSilu: return v * sigmoid_f(v);
#endif
#if BRICKDL_ACTS & (1 << 6) // kActHardSwish
  case kActHardSwish: return v * hard_sigmoid_f(v);
#endif
#if BRICKDL_ACTS & (1 << 7) // kActHardSigmoid
  case kActHardSigmoid: return hard_sigmoid_f(v);
#endif
#if BRICKDL_ACTS & (1 << 8) // kActGelu
  case kActGelu: return gelu_f(v);
#endif
  default: return v;
  }
}
// A max pool's step: NaN as soon as either is NaN (op_math.h max_step).
BRICKDL_DEVICE float max_step(float m, float v) {
  return v > m || is_nan(v) ? v : m;
}
} // namespace dev
} // namespace brickdl
