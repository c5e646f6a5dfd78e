#include "kernels/cpu/brgemm.h"

#include <libxsmm.h>

#include "core/error.h"
#include "kernels/cpu/isa.h"

namespace brickdl::kernels::cpu {

Brgemm::Brgemm(const BrgemmShape& s) : shape_(s) {
  BRICKDL_CHECK(s.m > 0 && s.n > 0 && s.k > 0 && s.lda >= s.m && s.ldb >= s.k && s.ldc >= s.m,
                "brgemm shape m" << s.m << " n" << s.n << " k" << s.k << " lda" << s.lda << " ldb"
                                 << s.ldb << " ldc" << s.ldc);
  (void)isa(); // libxsmm initialised, its target set
  const float alpha = 1.0f, beta = s.accumulate ? 1.0f : 0.0f;
  const libxsmm_blasint lda = s.lda, ldb = s.ldb, ldc = s.ldc;
  const libxsmm_smmfunction_reducebatch_addr f = libxsmm_smmdispatch_reducebatch_addr(
      s.m, s.n, s.k, &lda, &ldb, &ldc, &alpha, &beta, nullptr, nullptr);
  BRICKDL_CHECK(f != nullptr,
                "libxsmm has no batch-reduce kernel for m" << s.m << " n" << s.n << " k" << s.k);
  fn_ = reinterpret_cast<void*>(f);
}

void Brgemm::operator()(const float* const* a, const float* const* b, float* c,
                        int64_t count) const {
  const auto f = reinterpret_cast<libxsmm_smmfunction_reducebatch_addr>(fn_);
  const unsigned long long n = static_cast<unsigned long long>(count);
  f(const_cast<const float**>(a), const_cast<const float**>(b), c, &n);
}

} // namespace brickdl::kernels::cpu
