#include "search/measurers.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>

#include "core/error.h"
#include "kernels/cpu_measurer.h"
#include "kernels/cuda/cuda_measurer.h"
#include "search/plan_validation.h"

namespace brickdl::search {

std::unique_ptr<Measurer> make_cuda_measurer(const MeasurementConfig& config,
                                             std::string* why_not) {
  if (!cuda::cuda_device_available()) {
    if (why_not)
      *why_not = cuda::cuda_unavailable_reason();
    return nullptr;
  }
  cuda::CudaMeasurerOptions options;
  options.metrics = config.counters; // empty: the profiler's defaults
  options.device = config.device;
  options.recover_in_process = config.recover_in_process;
  try {
    return cuda::make_cuda_measurer(options);
  } catch (const std::exception& e) {
    if (why_not)
      *why_not = e.what();
    return nullptr;
  }
}

namespace {

std::unique_ptr<Measurer> make_none(const MeasurementConfig&, const Logger&) {
  return nullptr;
}

std::unique_ptr<Measurer> make_cpu(const MeasurementConfig& config, const Logger&) {
  return std::make_unique<kernels::CpuMeasurer>(config.cpu_threads);
}

std::unique_ptr<Measurer> make_cuda(const MeasurementConfig& config, const Logger&) {
  std::string why_not;
  if (auto m = make_cuda_measurer(config, &why_not))
    return m;
  throw UserError("backend 'cuda' is not available: " + why_not +
                  "; use backend 'cpu', 'auto' (cuda when available, else cpu) or 'none'");
}

std::unique_ptr<Measurer> make_auto(const MeasurementConfig& config, const Logger& log) {
  std::string why_not;
  if (auto m = make_cuda_measurer(config, &why_not))
    return m;
  log.warn("no usable GPU (" + why_not + "): falling back to the CPU backend");
  return make_cpu(config, log);
}

struct Backend {
  const char* name;
  std::unique_ptr<Measurer> (*make)(const MeasurementConfig&, const Logger&);
  std::vector<DType> precisions; // what it computes; empty: what it resolves to
};

// The registry: the only list of backend names (YAML, command line, errors) and of the
// precisions each computes (measurers.h).
const Backend kBackends[] = {
    {"none", make_none, {DType::kF32, DType::kTF32, DType::kBF16, DType::kF16}},
    {"cpu", make_cpu, {DType::kF32}},
    {"cuda", make_cuda, {DType::kF32, DType::kTF32, DType::kBF16, DType::kF16}},
    {"auto", make_auto, {}},
};

const Backend& registered(const std::string& name) {
  for (const Backend& b : kBackends)
    if (name == b.name)
      return b;
  throw UserError("unknown backend '" + name + "'" + did_you_mean(name, backend_names()) +
                  "; valid: " + join_names(backend_names()));
}

bool computes(const Backend& b, DType t) {
  return std::find(b.precisions.begin(), b.precisions.end(), t) != b.precisions.end();
}

// "fp32 only", "fp32 and tf32", "fp32, tf32, bf16 and fp16".
std::string precision_list(const Backend& b) {
  std::vector<std::string> names;
  for (DType t : b.precisions)
    names.emplace_back(dtype_name(t));
  if (names.size() == 1)
    return names[0] + " only";
  const std::string last = names.back();
  names.pop_back();
  return join_names(names) + " and " + last;
}

// "runs with backend 'cuda' or model-only with 'none'": the measuring backends that compute
// `t`, then the model.
std::string who_runs(DType t) {
  std::vector<std::string> measuring;
  for (const Backend& b : kBackends)
    if (b.name != std::string("none") && computes(b, t))
      measuring.push_back(std::string("'") + b.name + "'");
  std::string s = std::string("precision '") + dtype_name(t) + "' runs ";
  if (!measuring.empty())
    s += "with backend " + join_names(measuring, " or ") + " or ";
  return s + "model-only with backend 'none' (--backend none)";
}

} // namespace

std::string resolve_backend(const std::string& backend, std::string* why_not) {
  if (backend != "auto")
    return backend;
  const std::string why = cuda::cuda_unavailable_reason();
  if (why_not)
    *why_not = why;
  return why.empty() ? "cuda" : "cpu";
}

std::vector<DType> backend_precisions(const std::string& backend) {
  const Backend& b = registered(resolve_backend(backend));
  return b.precisions;
}

void check_backend_precision(const std::string& backend, DType precision,
                             const SourceLocation& where) {
  const Backend& named = registered(backend);
  if (computes(named, precision))
    return;
  if (named.precisions.empty() && computes(registered("cpu"), precision) &&
      computes(registered("cuda"), precision))
    return; // "auto": either way
  std::string why_not;
  const Backend& b = registered(resolve_backend(backend, &why_not));
  if (computes(b, precision))
    return;
  std::string what = std::string("backend '") + b.name + "'";
  if (&b != &named)
    what = "backend '" + backend + "' falls back to '" + b.name +
           "' here (no usable GPU: " + why_not + "), which";
  throw UserError(where, what + " computes " + precision_list(b) + "; " + who_runs(precision));
}

std::vector<std::string> backend_names() {
  std::vector<std::string> v;
  for (const Backend& b : kBackends)
    v.emplace_back(b.name);
  return v;
}

namespace {

// A measurer whose target carries the site's tag (BRICKDL_TARGET_TAG).
class TaggedMeasurer final : public ForwardingMeasurer {
public:
  TaggedMeasurer(std::unique_ptr<Measurer> inner, std::string tag)
      : ForwardingMeasurer(std::move(inner)), tag_(std::move(tag)) {}
  std::string target() const override { return inner().target() + "#" + tag_; }

private:
  std::string tag_;
};

// open(2) that is retried when a signal interrupts it; -1 on an error.
int open_retrying(const std::string& path, int flags) {
  int fd = -1;
  do
    fd = ::open(path.c_str(), flags | O_CLOEXEC);
  while (fd < 0 && errno == EINTR);
  return fd;
}

// One turn of the test hook BRICKDL_TEST_MEASURE_FIFO (measurers.h): "measuring <pid>" into the
// FIFO once the test reads it, then waits until the test opens the FIFO for writing and closes
// it. Throws InternalError when the FIFO cannot be opened: a test that set the variable wants
// the measurement held, not run unobserved.
void wait_on_test_fifo(const std::string& path) {
  const int out = open_retrying(path, O_WRONLY);
  if (out < 0)
    throw InternalError(kTestMeasureFifoVar + std::string(": cannot open ") + path);
  const std::string line = "measuring " + std::to_string(::getpid()) + "\n";
  const ssize_t written = ::write(out, line.data(), line.size()); // < PIPE_BUF: in one piece
  ::close(out);
  const int in = open_retrying(path, O_RDONLY);
  if (written != static_cast<ssize_t>(line.size()) || in < 0)
    throw InternalError(kTestMeasureFifoVar + std::string(": the test left ") + path);
  char byte;
  for (ssize_t n = 1; n > 0 || (n < 0 && errno == EINTR);)
    n = ::read(in, &byte, 1); // until end of file: the test has closed its end
  ::close(in);
}

// A measurer that waits on the test before each measurement (BRICKDL_TEST_MEASURE_FIFO).
class TestFifoMeasurer final : public ForwardingMeasurer {
public:
  TestFifoMeasurer(std::unique_ptr<Measurer> inner, std::string fifo)
      : ForwardingMeasurer(std::move(inner)), fifo_(std::move(fifo)) {}
  MeasureResult measure(const Graph& graph, const Candidate& candidate,
                        const MeasureOptions& options) override {
    wait_on_test_fifo(fifo_);
    return ForwardingMeasurer::measure(graph, candidate, options);
  }

private:
  std::string fifo_;
};

} // namespace

// The CPU measurer of a validate-only run: its own target, so that its single cold runs are
// never resumed as CPU timings by a measuring run, and the validation options whatever the
// caller passes.
class ValidatingMeasurer final : public ForwardingMeasurer {
public:
  explicit ValidatingMeasurer(std::unique_ptr<Measurer> inner)
      : ForwardingMeasurer(std::move(inner)) {}
  std::string target() const override { return inner().target() + kValidationTargetSuffix; }
  MeasureResult measure(const Graph& graph, const Candidate& candidate,
                        const MeasureOptions& options) override {
    return ForwardingMeasurer::measure(graph, candidate, validation_options(options));
  }
};

std::unique_ptr<Measurer> with_target_tag(std::unique_ptr<Measurer> m, std::string tag) {
  return std::make_unique<TaggedMeasurer>(std::move(m), std::move(tag));
}

std::string target_tag() {
  const char* tag = std::getenv("BRICKDL_TARGET_TAG");
  return tag ? tag : "";
}

std::unique_ptr<Measurer> make_measurer(const std::string& backend, const MeasurementConfig& config,
                                        const Logger& log) {
  std::unique_ptr<Measurer> m = registered(backend).make(config, log);
  if (std::string tag = target_tag(); m && !tag.empty())
    m = with_target_tag(std::move(m), std::move(tag));
  if (const char* fifo = std::getenv(kTestMeasureFifoVar); m && fifo && *fifo)
    m = std::make_unique<TestFifoMeasurer>(std::move(m), fifo);
  return m;
}

MeasuringSetup make_measuring(const ExperimentConfig& exp, const Logger& log) {
  const MeasurementConfig& m = exp.measurement;
  std::string why_not;
  if (m.backend != "auto" || resolve_backend("auto", &why_not) == "cuda")
    return MeasuringSetup{make_measurer(m.backend, m, log), false};
  log.warn("no usable GPU (" + why_not + "): planning for " + exp.gpu.name +
           " from the model; the CPU validates the plan's merged groups against the reference "
           "(CPU times never re-plan a GPU target)");
  std::unique_ptr<Measurer> cpu = make_measurer("cpu", m, log);
  return MeasuringSetup{std::make_unique<ValidatingMeasurer>(std::move(cpu)), true};
}

} // namespace brickdl::search
