#include "kernels/cpu/isa.h"

#include <dnnl.hpp>
#include <libxsmm.h>

#include <cstdlib>
#include <string>

#include "core/error.h"

namespace brickdl::kernels::cpu {

namespace {

bool host_avx2() {
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}
bool host_avx512() {
  return host_avx2() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
}

IsaInfo decide() {
  IsaInfo info;
  if (!host_avx2())
    throw UserError("the CPU kernels need AVX2 and FMA, which this processor lacks");
  info.host = host_avx512() ? "avx512" : "avx2";
  std::string want = info.host;
  if (const char* env = std::getenv("BRICKDL_CPU_ISA"); env && *env) {
    want = env;
    if (want != "avx2" && want != "avx512")
      throw UserError("BRICKDL_CPU_ISA=" + want + ": valid values are avx2 and avx512");
    if (want == "avx512" && info.host != "avx512")
      throw UserError("BRICKDL_CPU_ISA=avx512, but this processor has no AVX-512 (it has " +
                      info.host + ")");
  }
  info.isa = want == "avx512" ? Isa::kAvx512 : Isa::kAvx2;
  info.lanes = want == "avx512" ? 16 : 8;
  info.name = want;
  libxsmm_init();
  if (info.isa == Isa::kAvx2) {
    libxsmm_set_target_arch("hsw");             // AVX2 code even on an AVX-512 host
    dnnl::set_max_cpu_isa(dnnl::cpu_isa::avx2); // before oneDNN's first primitive
  }
  info.libxsmm = libxsmm_get_target_arch();
  return info;
}

} // namespace

const IsaInfo& isa() {
  static const IsaInfo info = decide();
  return info;
}

int lanes() {
  return isa().lanes;
}

bool host_supports_lanes(int lanes) {
  return lanes == 8 ? host_avx2() : lanes == 16 && host_avx512();
}

const char* isa_name_of_lanes(int lanes) {
  return lanes == 16 ? "avx512" : "avx2";
}

} // namespace brickdl::kernels::cpu
