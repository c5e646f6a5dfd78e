#pragma once
// libxsmm's batch-reduce GEMM, the one inner kernel of every conv and linear layer of the CPU
// kernels (JIT'd for the ISA of kernels/cpu/isa.h):
//
//   C (m × n)  =  beta · C  +  Σ_i  A_i (m × k) · B_i (k × n)       column-major, fp32
//
// with the sum over a batch of (A_i, B_i) pointer pairs kept in registers (libxsmm's
// reducebatch_addr kernels). In the conv kernels m is output channels, n output pixels, k input
// channels of one block, and the batch runs over taps and input-channel blocks.
#include <cstdint>
#include <vector>

namespace brickdl::kernels::cpu {

struct BrgemmShape {
  int m = 0, n = 0, k = 0;
  int lda = 0, ldb = 0, ldc = 0;
  bool accumulate = false; // beta = 1 (else 0: C is overwritten)
  bool operator==(const BrgemmShape& o) const = default;
};

// A JIT'd kernel for one shape. Dispatch is thread-safe (libxsmm caches kernels by shape);
// construct once per shape outside hot loops.
class Brgemm {
public:
  Brgemm() = default;
  explicit Brgemm(const BrgemmShape& shape);
  const BrgemmShape& shape() const { return shape_; }
  // C (+)= Σ A[i]·B[i] over i < count (count > 0).
  void operator()(const float* const* a, const float* const* b, float* c, int64_t count) const;

private:
  BrgemmShape shape_;
  void* fn_ = nullptr;
};

// The batch of one call: pointer pairs, reused across calls (no allocation once grown).
struct BrgemmBatch {
  std::vector<const float*> a, b;
  void clear() {
    a.clear();
    b.clear();
  }
  void add(const float* pa, const float* pb) {
    a.push_back(pa);
    b.push_back(pb);
  }
  int64_t size() const { return static_cast<int64_t>(a.size()); }
};

} // namespace brickdl::kernels::cpu
