#pragma once
// The warp-level tensor-core step: D = A·B + C for one m16 × n8 tile, A 16 × K, B K × 8, with
// the inputs rounded to the precision's format and fp32 accumulation:
//
//   kMathTf32   m16n8k8    inputs rounded to TF32 (cvt.rna: nearest, ties away from zero)
//   kMathBf16   m16n8k16   inputs rounded to BF16 (nearest, ties to even)
//   kMathFp16   m16n8k16   inputs rounded to FP16 (nearest, ties to even; overflow -> inf)
//
// Fragments are per lane, in the PTX ISA's layout for mma.sync.aligned.m16n8k{8,16}.row.col
// (lane = 4·g + t, g = lane / 4, t = lane % 4; W = 1 value per 32-bit word for TF32, 2 for
// the 16-bit formats, the lower k in the lower half):
//
//   A  word r (0..3), value e:  row g + 8·(r % 2),  k = (t + 4·(r / 2))·W + e
//   B  word r (0..1), value e:  k = (t + 4·r)·W + e, column g
//   C  value r (0..3):          row g + 8·(r / 2),  column 2·t + r % 2
//
// A fragment holds 4·W floats per lane (rounded when the step runs), B 2·W, C 4. On the
// device the step is one mma.sync; under emulation it rebuilds the matrices from the 32 lanes
// and multiplies them on the host. The products of two rounded inputs are exact in fp32
// (at most 11 + 11 significant bits), so host and device differ only in the order of the
// fp32 additions inside one step (a device test checks the mapping against this host code).
#include "prelude.cuh"

namespace brickdl {
namespace dev {

// Per-lane values of one warp (L = 32) or one warpgroup (L = 128): Lanes<float, N> x;
// x(lane)[i] is value i of lane `lane`.
template <class T, int N, int L = 32> struct Lanes {
#if defined(BRICKDL_EMULATE)
  T v[L][N];
  T* operator()(int lane) {
    return v[lane];
  }
  const T* operator()(int lane) const {
    return v[lane];
  }
#else
  T v[N];
  BRICKDL_DEVICE T* operator()(int) {
    return v;
  }
  BRICKDL_DEVICE const T* operator()(int) const {
    return v;
  }
#endif
};

// Shape of one step per precision: k per step, floats per lane of A and B.
template <int MATH> struct MmaShape {
  static constexpr int k = MATH == kMathTf32 ? 8 : 16;
  static constexpr int w = MATH == kMathTf32 ? 1 : 2; // values per 32-bit word
  static constexpr int a = 4 * w;
  static constexpr int b = 2 * w;
};

#if defined(BRICKDL_EMULATE)

// float_bits, bits_float, round_bf16 and round_fp16: prelude.cuh.

// TF32 as cvt.rna.tf32.f32: 10 mantissa bits, nearest, ties away from zero.
inline float round_tf32(float x) {
  if (!std::isfinite(x))
    return x;
  return bits_float((float_bits(x) + 0x1000u) & 0xffffe000u);
}

template <int MATH> inline float round_input(float x) {
  return MATH == kMathTf32 ? round_tf32(x) : MATH == kMathBf16 ? round_bf16(x) : round_fp16(x);
}

// acc(lane)[co .. co+3] += A·B, A from a(lane)[ao ..], B from b(lane)[bo ..] (layout above).
template <int MATH, class Acc, class FA, class FB>
inline void mma_step(Acc& acc, int co, const FA& a, int ao, const FB& b, int bo) {
  using S = MmaShape<MATH>;
  float A[16][S::k];
  float B[S::k][8];
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane >> 2, t = lane & 3;
    for (int r = 0; r < 4; ++r)
      for (int e = 0; e < S::w; ++e)
        A[g + 8 * (r % 2)][(t + 4 * (r / 2)) * S::w + e] =
            round_input<MATH>(a(lane)[ao + r * S::w + e]);
    for (int r = 0; r < 2; ++r)
      for (int e = 0; e < S::w; ++e)
        B[(t + 4 * r) * S::w + e][g] = round_input<MATH>(b(lane)[bo + r * S::w + e]);
  }
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane >> 2, t = lane & 3;
    for (int r = 0; r < 4; ++r) {
      const int row = g + 8 * (r / 2), col = 2 * t + r % 2;
      float d = acc(lane)[co + r];
      for (int k = 0; k < S::k; ++k)
        d = std::fma(A[row][k], B[k][col], d);
      acc(lane)[co + r] = d;
    }
  }
}

#else // NVRTC

BRICKDL_DEVICE unsigned to_tf32(float x) {
  unsigned u;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(u) : "f"(x));
  return u;
}
// Two values as one 32-bit word of the 16-bit format, `lo` in the lower half.
template <int MATH> BRICKDL_DEVICE unsigned pack2(float lo, float hi) {
  unsigned u;
  if (MATH == kMathBf16) {
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(u) : "f"(hi), "f"(lo));
  } else {
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(u) : "f"(hi), "f"(lo));
  }
  return u;
}

template <int MATH, class Acc, class FA, class FB>
BRICKDL_DEVICE void mma_step(Acc& acc, int co, const FA& a, int ao, const FB& b, int bo) {
  float* c = acc(0) + co;
  const float* x = a(0) + ao;
  const float* y = b(0) + bo;
  if constexpr (MATH == kMathTf32) {
    asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, "
        "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(to_tf32(x[0])), "r"(to_tf32(x[1])), "r"(to_tf32(x[2])), "r"(to_tf32(x[3])),
          "r"(to_tf32(y[0])), "r"(to_tf32(y[1])));
  } else if constexpr (MATH == kMathBf16) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
        "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(pack2<MATH>(x[0], x[1])), "r"(pack2<MATH>(x[2], x[3])), "r"(pack2<MATH>(x[4], x[5])),
          "r"(pack2<MATH>(x[6], x[7])), "r"(pack2<MATH>(y[0], y[1])), "r"(pack2<MATH>(y[2], y[3])));
  } else {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, "
        "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(pack2<MATH>(x[0], x[1])), "r"(pack2<MATH>(x[2], x[3])), "r"(pack2<MATH>(x[4], x[5])),
          "r"(pack2<MATH>(x[6], x[7])), "r"(pack2<MATH>(y[0], y[1])), "r"(pack2<MATH>(y[2], y[3])));
  }
}

#endif

// ---- warpgroup MMA: wgmma.mma_async (sm_90a) ------------------------------------------------
// One step of a warpgroup (4 warps, 128 threads): D = A·B + D for A 64 × k, B k × N, N = 8·NT
// (NT <= kMaxMmaN), k as in MmaShape, fp32 accumulation. A comes from registers in the layout
// above per warp, warp w of the warpgroup holding rows 16·w .. 16·w + 15; D likewise (value
// 4·j + r of a thread: row 16·w + g + 8·(r / 2), column 8·j + 2·t + r % 2), so a warp's part of
// D is its mma.sync C fragments of NT n8 tiles. B is read from shared memory through a matrix
// descriptor (PTX ISA, "Matrix Descriptor Format"): no swizzle, K-major, in core matrices of
// 8 rows (n) × 16 bytes (k) stored as 128 contiguous bytes; core matrices adjacent in k are
// kWgmmaLbo bytes apart (leading dimension), adjacent in n kWgmmaSbo (stride dimension), so a
// tile of N × k is 16·N·2 bytes = 64·NT floats (wgmma_b_offset). The stager rounds B to the
// precision's format (TF32 values as fp32 bit patterns, whose low 13 bits the hardware
// truncates, already zero). A host twin reads B back through the same descriptor; a device test
// checks both against each other.
//
// A reaches wgmma_step already converted: wgmma_pack_a turns a thread's gathered floats into
// the 32-bit words the tensor cores read (cvt.rna.tf32; cvt.rn.{bf16,f16}x2) BEFORE
// wgmma_fence. The PTX ISA leaves undefined a wgmma whose register operands were written
// between the fence and it; ptxas repairs that by inserting a warpgroup arrive of its own and
// serializing the wgmmas (warning C7520), so between the fence and the last wgmma no register
// a wgmma reads is written.
constexpr int kWgmmaLbo = 128; // bytes between core matrices adjacent in k
constexpr int kWgmmaSbo = 256; // bytes between core matrices adjacent in n
// kWgmmaTileFloats (group_desc.h): one B tile of up to kMaxMmaN n8 tiles.

// Byte offset of B element (n, k) in a tile; `esize` bytes per element (4 TF32, 2 BF16 / FP16).
BRICKDL_DEVICE int wgmma_b_offset(int n, int k, int esize) {
  const int kb = k * esize;
  return (n & 7) * 16 + (n >> 3) * kWgmmaSbo + (kb >> 4) * kWgmmaLbo + (kb & 15);
}
// The matrix descriptor of a B tile at shared-memory address `addr` (16-byte aligned).
BRICKDL_DEVICE unsigned long long wgmma_desc(unsigned addr) {
  return static_cast<unsigned long long>((addr & 0x3ffffu) >> 4) |
         static_cast<unsigned long long>(kWgmmaLbo >> 4) << 16 |
         static_cast<unsigned long long>(kWgmmaSbo >> 4) << 32;
}

#if defined(BRICKDL_EMULATE)

// A shared-memory address as the descriptor holds it: bytes from the block's shared memory.
inline unsigned smem_address(const void* p) {
  return static_cast<unsigned>(static_cast<const unsigned char*>(p) -
                               reinterpret_cast<const unsigned char*>(emu::block_smem));
}
// B element `v` stored at `tile` + `byte` in the format the tensor cores read.
template <int MATH> inline void wgmma_store_b(float* tile, int byte, float v) {
  unsigned char* p = reinterpret_cast<unsigned char*>(tile) + byte;
  if (MATH == kMathTf32) {
    const float r = round_tf32(v);
    std::memcpy(p, &r, sizeof r);
  } else {
    const unsigned short h = MATH == kMathBf16
                                 ? static_cast<unsigned short>(float_bits(round_bf16(v)) >> 16)
                                 : half_bits(round_fp16(v));
    std::memcpy(p, &h, sizeof h);
  }
}
// What the tensor cores read at shared-memory address `addr` (TF32: the low 13 bits dropped).
template <int MATH> inline float wgmma_load_b(unsigned addr) {
  const unsigned char* p = reinterpret_cast<const unsigned char*>(emu::block_smem) + addr;
  if (MATH == kMathTf32) {
    unsigned u;
    std::memcpy(&u, p, sizeof u);
    return bits_float(u & 0xffffe000u);
  }
  unsigned short h;
  std::memcpy(&h, p, sizeof h);
  return MATH == kMathBf16 ? bits_float(static_cast<unsigned>(h) << 16) : half_value(h);
}
// One A word as the tensor cores read it from x[0 .. w): TF32 the rounded fp32 bit pattern,
// BF16 / FP16 two rounded 16-bit values, x[0] in the lower half (as cvt.rn.{bf16,f16}x2 packs
// them); a NaN becomes the canonical NaN, as cvt makes it.
template <int MATH> inline unsigned a_word(const float* x) {
  if (MATH == kMathTf32)
    return std::isnan(x[0]) ? 0x7fffffffu : float_bits(round_tf32(x[0]));
  const auto half = [](float v) -> unsigned {
    if (MATH == kMathFp16)
      return half_bits(round_fp16(v));
    return std::isnan(v) ? 0x7fffu : float_bits(round_bf16(v)) >> 16;
  };
  return half(x[0]) | half(x[1]) << 16;
}
// Value e (0: the lower half) of A word `u`: what a_word rounded, exactly (TF32: the low 13 bits
// dropped, as the hardware reads a TF32 register).
template <int MATH> inline float a_value(unsigned u, int e) {
  if (MATH == kMathTf32)
    return bits_float(u & 0xffffe000u);
  const unsigned h = e ? u >> 16 : u & 0xffffu;
  return MATH == kMathBf16 ? bits_float(h << 16) : half_value(static_cast<unsigned short>(h));
}
[[noreturn]] inline void unplanned_path() {
  std::fprintf(stderr, "brickdl: a kernel path its plan did not compile was taken\n");
  std::abort();
}
inline void wgmma_fence() {}
inline void wgmma_commit_and_wait() {}
template <class Acc> inline void wgmma_fence_operands(Acc&, int) {}
inline void fence_proxy_async() {}
inline void warpgroup_sync(int) {}

// acc(l)[co .. co + 4·NT) += A·B, A from the words a(l)[ao .. ao + 4) of the warpgroup's 128
// threads (wgmma_pack_a), B through `desc` (layout above).
template <int MATH, int NT, class Acc, class RA>
inline void wgmma_step(Acc& acc, int co, const RA& a, int ao, unsigned long long desc) {
  using S = MmaShape<MATH>;
  constexpr int esize = MATH == kMathTf32 ? 4 : 2;
  const unsigned start = static_cast<unsigned>(desc & 0x3fffu) << 4;
  const unsigned lbo = static_cast<unsigned>((desc >> 16) & 0x3fffu) << 4;
  const unsigned sbo = static_cast<unsigned>((desc >> 32) & 0x3fffu) << 4;
  float A[64][S::k];
  float B[S::k][8 * NT];
  for (int l = 0; l < 128; ++l) {
    const int w = l >> 5, g = (l & 31) >> 2, t = l & 3;
    for (int r = 0; r < 4; ++r)
      for (int e = 0; e < S::w; ++e)
        A[16 * w + g + 8 * (r % 2)][(t + 4 * (r / 2)) * S::w + e] = a_value<MATH>(a(l)[ao + r], e);
  }
  for (int n = 0; n < 8 * NT; ++n)
    for (int k = 0; k < S::k; ++k) {
      const unsigned kb = static_cast<unsigned>(k * esize);
      B[k][n] =
          wgmma_load_b<MATH>(start + static_cast<unsigned>(n & 7) * 16 +
                             static_cast<unsigned>(n >> 3) * sbo + (kb >> 4) * lbo + (kb & 15));
    }
  for (int l = 0; l < 128; ++l) {
    const int w = l >> 5, g = (l & 31) >> 2, t = l & 3;
    for (int i = 0; i < 4 * NT; ++i) {
      const int row = 16 * w + g + 8 * ((i >> 1) & 1), col = 8 * (i >> 2) + 2 * t + (i & 1);
      float d = acc(l)[co + i];
      for (int k = 0; k < S::k; ++k)
        d = std::fma(A[row][k], B[k][col], d);
      acc(l)[co + i] = d;
    }
  }
}

#else // NVRTC

BRICKDL_DEVICE unsigned smem_address(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
template <int MATH> BRICKDL_DEVICE void wgmma_store_b(float* tile, int byte, float v) {
  char* p = reinterpret_cast<char*>(tile) + byte;
  if (MATH == kMathTf32) {
    *reinterpret_cast<unsigned*>(p) = to_tf32(v);
  } else {
    *reinterpret_cast<unsigned short*>(p) = static_cast<unsigned short>(pack2<MATH>(v, 0.f));
  }
}
// One A word from x[0 .. w) (emulated twin above).
template <int MATH> BRICKDL_DEVICE unsigned a_word(const float* x) {
  return MATH == kMathTf32 ? to_tf32(x[0]) : pack2<MATH>(x[0], x[1]);
}
// A path codegen's defines left out was taken: the launch fails instead of computing nothing.
BRICKDL_DEVICE void unplanned_path() {
  asm volatile("trap;");
}
// Orders this warpgroup's register writes before its next wgmma.
BRICKDL_DEVICE void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}
BRICKDL_DEVICE void wgmma_commit_and_wait() {
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
  asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
}
// After the wait: the compiler reads the accumulators only from here on (an empty asm that
// claims to rewrite each; the wgmma asm told it they were written at the issue).
template <class Acc> BRICKDL_DEVICE void wgmma_fence_operands(Acc& acc, int n) {
  float* c = acc(0);
  BRICKDL_UNROLL
  for (int i = 0; i < 4 * kMaxMmaM * kMaxMmaN; ++i)
    if (i < n)
      asm volatile("" : "+f"(c[i])::"memory");
}
// Makes this thread's shared-memory stores visible to the tensor cores' (async proxy) reads.
BRICKDL_DEVICE void fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}
// The barrier of warpgroup `wg`'s 128 threads (named barrier wg + 1; 0 is __syncthreads).
BRICKDL_DEVICE void warpgroup_sync(int wg) {
  asm volatile("bar.sync %0, 128;" ::"r"(wg + 1) : "memory");
}

// The step for one MATH and N: d, then the four A words, then the descriptor; scale-d 1 (add),
// no negation, B not transposed (16-bit formats only).
#define BRICKDL_WGMMA_ASM(N, D, A, B, ...)                                                         \
  if constexpr (MATH == kMathTf32) {                                                               \
    asm volatile("wgmma.mma_async.sync.aligned.m64n" N "k8.f32.tf32.tf32 " D ", " A ", " B         \
                 ", 1, 1, 1;"                                                                      \
                 : __VA_ARGS__                                                                     \
                 : "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3]), "l"(desc));                         \
  } else if constexpr (MATH == kMathBf16) {                                                        \
    asm volatile("wgmma.mma_async.sync.aligned.m64n" N "k16.f32.bf16.bf16 " D ", " A ", " B        \
                 ", 1, 1, 1, 0;"                                                                   \
                 : __VA_ARGS__                                                                     \
                 : "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3]), "l"(desc));                         \
  } else {                                                                                         \
    asm volatile("wgmma.mma_async.sync.aligned.m64n" N "k16.f32.f16.f16 " D ", " A ", " B          \
                 ", 1, 1, 1, 0;"                                                                   \
                 : __VA_ARGS__                                                                     \
                 : "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3]), "l"(desc));                         \
  }

// Reads A words a(0)[ao .. ao + 4) converted before the fence (wgmma_pack_a): no instruction
// between wgmma_fence and here writes a register this wgmma reads.
template <int MATH, int NT, class Acc, class RA>
BRICKDL_DEVICE void wgmma_step(Acc& acc, int co, const RA& a, int ao, unsigned long long desc) {
  float* c = acc(0) + co;
  const unsigned* r = a(0) + ao;
  if constexpr (NT == 1) {
    BRICKDL_WGMMA_ASM("8", "{%0, %1, %2, %3}", "{%4, %5, %6, %7}", "%8", "+f"(c[0]), "+f"(c[1]),
                      "+f"(c[2]), "+f"(c[3]))
  } else if constexpr (NT == 2) {
    BRICKDL_WGMMA_ASM("16", "{%0, %1, %2, %3, %4, %5, %6, %7}", "{%8, %9, %10, %11}", "%12",
                      "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3]), "+f"(c[4]), "+f"(c[5]),
                      "+f"(c[6]), "+f"(c[7]))
  } else {
    static_assert(NT == 4, "wgmma_step: NT is 1, 2 or 4 (kMaxMmaN)");
    BRICKDL_WGMMA_ASM("32",
                      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}",
                      "{%16, %17, %18, %19}", "%20", "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3]),
                      "+f"(c[4]), "+f"(c[5]), "+f"(c[6]), "+f"(c[7]), "+f"(c[8]), "+f"(c[9]),
                      "+f"(c[10]), "+f"(c[11]), "+f"(c[12]), "+f"(c[13]), "+f"(c[14]), "+f"(c[15]))
  }
}
#undef BRICKDL_WGMMA_ASM

#endif

// A thread's A fragments of its MT m tiles (floats fa[mt · S::a ..], mma_gather_a) as the words
// wgmma_step reads: word 4 · mt + i from values (4 · mt + i) · w ... Call it before wgmma_fence.
template <int MATH> BRICKDL_DEVICE void wgmma_pack_a(unsigned* ra, const float* fa, int MT) {
  using S = MmaShape<MATH>;
  BRICKDL_UNROLL
  for (int mt = 0; mt < kMaxMmaM; ++mt) {
    if (mt >= MT)
      break;
    BRICKDL_UNROLL
    for (int i = 0; i < 4; ++i)
      ra[4 * mt + i] = a_word<MATH>(fa + mt * S::a + i * S::w);
  }
}

} // namespace dev
} // namespace brickdl
