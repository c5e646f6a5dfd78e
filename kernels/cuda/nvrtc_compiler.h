#pragma once
// Run-time compilation of generated kernels with NVRTC (no GPU needed to compile).
//
//   KernelPlan::source ──compile(source, arch)──► CompiledModule (cubin for sm_<arch>, log)
//                              │
//                              ├─ memory cache ─┐ key: FNV-1a of (source, template headers,
//                              └─ disk cache  ──┘      options, arch, NVRTC version)
//
// Options: --gpu-architecture=sm_XX (a cubin, loaded with cuModuleLoadData), -default-device,
// -std=c++17, -lineinfo, ptxas -v (registers and spills in the log). The templates are handed
// to NVRTC as named headers (codegen.h template_headers()), so no include path is needed.
// Thread-safe.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <ostream>
#include <string>
#include <vector>

namespace brickdl::cuda {

// The lines of a ptxas log that carry a performance advisory, "(C75dd)" (C7515, C7520: wgmma
// serialized, ...), in log order. ptxas prints them as "info", not as warnings, and compiles
// on, so a kernel that lost its overlap still loads and runs: the only trace is this line.
inline std::vector<std::string> ptxas_advisories(const std::string& log) {
  std::vector<std::string> lines;
  size_t begin = 0;
  while (begin < log.size()) {
    size_t end = log.find('\n', begin);
    if (end == std::string::npos)
      end = log.size();
    for (size_t i = log.find("(C75", begin); i != std::string::npos && i + 7 <= end;
         i = log.find("(C75", i + 1)) {
      const auto digit = [&](size_t k) { return log[k] >= '0' && log[k] <= '9'; };
      if (digit(i + 4) && digit(i + 5) && log[i + 6] == ')') {
        lines.push_back(log.substr(begin, end - begin));
        break;
      }
    }
    begin = end + 1;
  }
  return lines;
}

// The largest stack frame in bytes of any function of a ptxas -v log ("N bytes stack frame");
// 0 when it names none. A frame of kLargeStackFrameBytes or more means registers spilled to
// local memory or an array the compiler could not keep in registers: the Nvrtc tests and the
// tools that compile the device bundle's kernels ahead refuse it, as they refuse advisories.
constexpr int kLargeStackFrameBytes = 128;
inline int ptxas_max_stack_frame(const std::string& log) {
  static const std::string kTag = " bytes stack frame";
  int largest = 0;
  for (size_t i = log.find(kTag); i != std::string::npos; i = log.find(kTag, i + 1)) {
    size_t b = i;
    while (b > 0 && log[b - 1] >= '0' && log[b - 1] <= '9')
      --b;
    if (b < i)
      largest = std::max(largest, std::stoi(log.substr(b, i - b)));
  }
  return largest;
}

struct CompiledModule {
  int arch = 0;      // 80 for sm_80, ...
  std::string cubin; // binary image
  std::string log;   // NVRTC + ptxas output
  // ptxas_advisories(log) of this compile; empty when the module came from the disk cache
  // (which keeps cubins only: the compile that wrote it saw them).
  std::vector<std::string> advisories;
  std::string key;       // cache key (hex)
  double compile_ms = 0; // 0 when it came from a cache
  bool from_cache = false;
};

// Writes each ptxas advisory of `m` to `out`, one line each ("TOOL: WHAT: ptxas advisory:
// LINE"), and a line for a stack frame of kLargeStackFrameBytes or more ("TOOL: WHAT: ptxas: a
// N-byte stack frame"); returns how many lines it wrote. A module from a cache has none to
// report: the compile that wrote it saw them. The tools that compile ahead for the device bundle
// fail on any, so no precompiled kernel carries one (a serialized wgmma or a spilling kernel
// loads and runs, only slower).
inline int report_ptxas_flags(const CompiledModule& m, const std::string& tool,
                              const std::string& what, std::ostream& out) {
  for (const std::string& line : m.advisories)
    out << tool << ": " << what << ": ptxas advisory: " << line << "\n";
  const int stack = ptxas_max_stack_frame(m.log);
  if (stack >= kLargeStackFrameBytes)
    out << tool << ": " << what << ": ptxas: a " << stack << "-byte stack frame\n";
  return static_cast<int>(m.advisories.size()) + (stack >= kLargeStackFrameBytes ? 1 : 0);
}

class NvrtcCompiler {
public:
  // disk_cache_dir: "" keeps the cache in memory only; else cubins are kept there as
  // <key>.cubin (created when missing).
  explicit NvrtcCompiler(std::string disk_cache_dir = "");

  // False when brickdl was built without CUDA.
  static bool is_supported();
  static std::string version(); // "13.0"
  // Architectures NVRTC can target (e.g. 75, 80, 86, 89, 90, 100, 120).
  static std::vector<int> supported_archs();

  // Throws CompileError (with the log) when NVRTC rejects the source; CudaError when NVRTC
  // itself fails.
  std::shared_ptr<const CompiledModule> compile(const std::string& source, int arch,
                                                const std::vector<std::string>& extra_options = {});

  int64_t hits() const;
  int64_t misses() const;
  const std::string& disk_cache_dir() const { return dir_; }

private:
  // From the memory cache, else from the disk cache (then kept in memory); null if neither.
  std::shared_ptr<const CompiledModule> cached(const std::string& key, int arch);

  std::string dir_;
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<const CompiledModule>> cache_;
  int64_t hits_ = 0, misses_ = 0;
};

// $BRICKDL_CACHE_DIR, else $XDG_CACHE_HOME/brickdl, else $HOME/.cache/brickdl ("" if none).
inline std::string default_cache_dir() {
  if (const char* d = std::getenv("BRICKDL_CACHE_DIR"); d && *d)
    return d;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x)
    return std::string(x) + "/brickdl";
  if (const char* home = std::getenv("HOME"); home && *home)
    return std::string(home) + "/.cache/brickdl";
  return "";
}

} // namespace brickdl::cuda
