#include "kernels/cuda/nvrtc_compiler.h"

#include <nvrtc.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/hash.h"
#include "kernels/cuda/codegen.h"
#include "kernels/cuda/detail/cuda_call.cuh"
#include "kernels/cuda/statuses.h"

namespace brickdl::cuda {

namespace {

std::string hex(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

// Owns an nvrtcProgram.
class Program {
public:
  explicit Program(const std::string& source) {
    const auto& headers = template_headers();
    std::vector<const char*> sources, names;
    for (const auto& h : headers) {
      sources.push_back(h.source);
      names.push_back(h.name);
    }
    BRICKDL_NVRTC_CALL(nvrtcCreateProgram(&prog_, source.c_str(), "brickdl_generated.cu",
                                          static_cast<int>(sources.size()), sources.data(),
                                          names.data()));
  }
  ~Program() { nvrtcDestroyProgram(&prog_); }
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;
  nvrtcProgram get() const { return prog_; }

private:
  nvrtcProgram prog_ = nullptr;
};

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

// FNV-1a of the source, the template headers, the options and the NVRTC version.
std::string cache_key(const std::string& source, int arch, const std::vector<std::string>& options,
                      const std::string& nvrtc_version) {
  uint64_t h = fnv1a_field(kFnvOffsetBasis, source);
  for (const auto& t : template_headers())
    h = fnv1a_field(fnv1a_field(h, t.name), t.source);
  for (const auto& o : options)
    h = fnv1a_field(h, o);
  h = fnv1a_field(h, nvrtc_version);
  return hex(h) + "_sm" + std::to_string(arch);
}

// The cubin of `source` and NVRTC's log; throws CompileError when NVRTC rejects it.
std::shared_ptr<CompiledModule> run_nvrtc(const std::string& source, int arch,
                                          const std::vector<std::string>& options) {
  const auto t0 = std::chrono::steady_clock::now();
  Program prog(source);
  std::vector<const char*> argv;
  for (const auto& o : options)
    argv.push_back(o.c_str());
  const nvrtcResult rc =
      nvrtcCompileProgram(prog.get(), static_cast<int>(argv.size()), argv.data());
  size_t log_size = 0;
  BRICKDL_NVRTC_CALL(nvrtcGetProgramLogSize(prog.get(), &log_size));
  std::string log(log_size, '\0');
  if (log_size > 1)
    BRICKDL_NVRTC_CALL(nvrtcGetProgramLog(prog.get(), log.data()));
  while (!log.empty() && log.back() == '\0')
    log.pop_back();
  if (rc != NVRTC_SUCCESS)
    throw CompileError(std::string("NVRTC: ") + nvrtcGetErrorString(rc) + " (sm_" +
                           std::to_string(arch) + ")",
                       log);
  auto m = std::make_shared<CompiledModule>();
  m->arch = arch;
  m->log = std::move(log);
  m->advisories = ptxas_advisories(m->log);
  size_t cubin_size = 0;
  BRICKDL_NVRTC_CALL(nvrtcGetCUBINSize(prog.get(), &cubin_size));
  m->cubin.resize(cubin_size);
  BRICKDL_NVRTC_CALL(nvrtcGetCUBIN(prog.get(), m->cubin.data()));
  m->compile_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return m;
}

// Write-then-rename, so concurrent tuners never read a partial file. The temporary name holds
// the process id as well as the module's address: two processes compiling the same kernel into
// one cache (the device bundle's precompile lanes) must not write one temporary file.
void write_cubin(const std::string& dir, const std::filesystem::path& disk,
                 const CompiledModule& m) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  const auto tmp = disk.string() + ".tmp" + std::to_string(getpid()) + "." +
                   std::to_string(reinterpret_cast<uintptr_t>(&m));
  {
    std::ofstream out(tmp, std::ios::binary);
    out.write(m.cubin.data(), static_cast<std::streamsize>(m.cubin.size()));
  }
  std::filesystem::rename(tmp, disk, ec);
  if (ec)
    std::filesystem::remove(tmp, ec);
}

} // namespace

NvrtcCompiler::NvrtcCompiler(std::string disk_cache_dir) : dir_(std::move(disk_cache_dir)) {}

bool NvrtcCompiler::is_supported() {
  return true;
}

std::string NvrtcCompiler::version() {
  int major = 0, minor = 0;
  BRICKDL_NVRTC_CALL(nvrtcVersion(&major, &minor));
  return std::to_string(major) + "." + std::to_string(minor);
}

std::vector<int> NvrtcCompiler::supported_archs() {
  int n = 0;
  BRICKDL_NVRTC_CALL(nvrtcGetNumSupportedArchs(&n));
  std::vector<int> archs(static_cast<size_t>(n));
  if (n > 0)
    BRICKDL_NVRTC_CALL(nvrtcGetSupportedArchs(archs.data()));
  return archs;
}

std::shared_ptr<const CompiledModule>
NvrtcCompiler::compile(const std::string& source, int arch,
                       const std::vector<std::string>& extra_options) {
  // sm_90 compiles as sm_90a, whose wgmma the tensor-core kernels use there (codegen.h
  // wgmma_for): such a cubin runs on compute capability 9.0 only, the only 9.x there is.
  std::vector<std::string> options = {
      "--gpu-architecture=sm_" + std::to_string(arch) + (arch == 90 ? "a" : ""), "-default-device",
      "-std=c++17", "-lineinfo", "--ptxas-options=-v"};
  options.insert(options.end(), extra_options.begin(), extra_options.end());
  const std::string key = cache_key(source, arch, options, version());
  if (auto m = cached(key, arch))
    return m;
  auto m = run_nvrtc(source, arch, options);
  m->key = key;
  if (!dir_.empty())
    write_cubin(dir_, std::filesystem::path(dir_) / (key + ".cubin"), *m);
  std::lock_guard<std::mutex> lock(mu_);
  ++misses_;
  cache_[key] = m;
  return m;
}

std::shared_ptr<const CompiledModule> NvrtcCompiler::cached(const std::string& key, int arch) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = cache_.find(key); it != cache_.end()) {
      ++hits_;
      return it->second;
    }
  }
  const std::filesystem::path disk =
      dir_.empty() ? std::filesystem::path() : std::filesystem::path(dir_) / (key + ".cubin");
  if (dir_.empty() || !std::filesystem::exists(disk))
    return nullptr;
  auto m = std::make_shared<CompiledModule>();
  m->arch = arch;
  m->key = key;
  m->cubin = read_file(disk);
  m->from_cache = true;
  if (m->cubin.empty())
    return nullptr;
  std::lock_guard<std::mutex> lock(mu_);
  ++hits_;
  cache_[key] = m;
  return m;
}

int64_t NvrtcCompiler::hits() const {
  std::lock_guard<std::mutex> lock(mu_);
  return hits_;
}

int64_t NvrtcCompiler::misses() const {
  std::lock_guard<std::mutex> lock(mu_);
  return misses_;
}

} // namespace brickdl::cuda
