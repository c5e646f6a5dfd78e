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

// Per-lane values of one warp: Lanes<float, N> x; x(lane)[i] is value i of lane `lane`.
template <class T, int N> struct Lanes {
#if defined(BRICKDL_EMULATE)
  T v[32][N];
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

} // namespace dev
} // namespace brickdl
