#pragma once
// The instruction set the CPU kernels use, and the channel block of their layout.
//
//   cpuid ──► host ISA (AVX-512: 16 lanes, AVX2: 8) ──BRICKDL_CPU_ISA──► the kernels' ISA
//                                                                       │
//            libxsmm's JIT target, oneDNN's max ISA and the lanes of ◄──┘
//            the blocked layout (kernels/cpu/blocked.h) follow it
//
// The blocked layout holds one vector of `lanes` channels per pixel, so its lane count is the
// ISA's vector width in floats. BRICKDL_CPU_ISA=avx2 lowers an AVX-512 host to AVX2 (for a
// comparison, or to reproduce another machine's layout); it cannot raise the host's ISA.
#include <string>

namespace brickdl::kernels::cpu {

enum class Isa { kAvx2, kAvx512 };

struct IsaInfo {
  Isa isa = Isa::kAvx2;
  int lanes = 8;       // floats per vector: the blocked layout's channel block
  std::string name;    // "avx2" or "avx512"
  std::string host;    // the widest the host has ("avx512", "avx2")
  std::string libxsmm; // libxsmm's target architecture after it was set ("hsw", "skx", ...)
};

// The ISA of this process, decided once (thread-safe). Throws UserError when the host has no
// AVX2 + FMA (the kernels are built for it) or BRICKDL_CPU_ISA names an unknown or unavailable
// ISA.
const IsaInfo& isa();

// The lanes of the ISA of this process (isa().lanes).
int lanes();

// True when the host runs code built for `lanes` (8: AVX2 + FMA, 16: AVX-512 F/BW/DQ/VL).
bool host_supports_lanes(int lanes);

// "avx2" or "avx512": the ISA of a lane count (8 or 16).
const char* isa_name_of_lanes(int lanes);

} // namespace brickdl::kernels::cpu
