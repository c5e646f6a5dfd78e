// brickdl-run: executes a model (layer by layer, or a plan of merged groups) on the CPU with
// seeded random or given inputs and weights, and writes inputs, weights and outputs as NumPy
// .npy files so that anyone can check brickdl against PyTorch or NumPy.
//
//   brickdl-run --model resnet50 --batch 2 --seed 7 --out run/
//   brickdl-run --model micro_graphsize --input-size 48,48,48 --plan plan.json --out run/
//   brickdl-run --model model.onnx --out run/          (an ONNX model with its own weights)
//   brickdl-run --model experiments/minimal.yaml --out run/   (an experiment's model)
//   brickdl-run --model resnet50 --export-onnx resnet50.onnx  (the graph and its weights)
//   brickdl-run --model resnet50 --plan out/resnet50/plan.json --check   (check only)
//   brickdl-run --model neck.onnx --input p3=p3.npy --input p4=p4.npy --out run/
//                                    (a model of several runtime inputs: one --input each, by
//                                    name, or in the model's order without names)
//
// A plan of brickdl-tune (its plan.json) names the batch, precision and workloads it was made
// for. Without --batch the run takes the plan's batch (else, for an ONNX file of dynamic
// batch, the --input arrays'); a plan that does not fit the run (another
// batch, precision, model, input size or channel count) is refused (exit 2) unless
// --allow-plan-mismatch, which runs it with a warning. Progress of the plan run and of the
// reference (--check) goes to stderr (--quiet: none); the closing line on stdout says what
// each time measures.
//
// Without --input every input is seeded random (uniform [-1, 1)); with it, every input must be
// given. A name or a file that fits no input is refused, naming the model's inputs and their
// shapes.
//
// Output folder:
//   input.npy                the graph input, (N, C, H, W) or (N, C, D, H, W), float32;
//                            input.<name>.npy each, for a model of several inputs
//   output.npy               the graph's output; output.<name>.npy each, for a model of several
//                            outputs (in the model's order; manifest.json "outputs")
//   weights/<layer>.weight.npy, weights/<layer>.bias.npy
//                            parameters of the FUSED graph as executed: a batch-norm that
//                            follows a conv / linear is folded into it (see kernels/weights.h);
//                            a standalone batch-norm is written as weight = scale, bias = shift
//                            (y = x·scale + shift). Conv weights are (Cout, Cin/groups, kh, kw)
//                            or (Cout, Cin/groups, kd, kh, kw), linear (out, in).
//   manifest.json            the fused layers (op, inputs, shape, attributes, parameter files),
//                            options, plan, counters (plan totals; "bricks_computed.<i>" is
//                            layer i of the fused graph), each plan group with its own
//                            counters ("plan_groups"), times ("times_ms": load = model,
//                            weights, input and plan; plan = the plan's execution; reference
//                            (--check); write = the files; total = the whole command so far),
//                            what the plan was made for, and with --check the error against
//                            the layer-by-layer reference.
//
// Exit status: 0 done, 1 --check failed (an element outside the tolerance, or a NaN or an
// infinity on one side only), 2 bad input, 3 internal error.
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <numeric>
#include <sstream>

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "apps/run_tool.h"
#include "core/error.h"
#include "core/experiment.h"
#include "core/graph.h"
#include "core/measurer.h"
#include "core/onnx.h"
#include "core/zoo.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/onednn.h"
#include "kernels/npy.h"
#include "kernels/plan_executor.h"
#include "kernels/plan_io.h"
#include "kernels/reference.h"
#include "kernels/validation.h"
#include "kernels/weights.h"

namespace {

namespace fs = std::filesystem;
using namespace brickdl;
using namespace brickdl::kernels;

// --check found the output and the reference apart (run_tool's 2 and 3 are bad input and bugs).
constexpr int kExitCheckFailed = 1;

struct Options {
  std::string model;
  int batch = 0; // 0: the model's (an ONNX file's own, an experiment's, or 1 for the zoo)
  std::vector<int64_t> input_size;
  int64_t input_channels = 0;
  uint64_t seed = 1;
  std::vector<std::string> input_specs; // --input: NAME=FILE.npy or FILE.npy, once per input
  std::string plan_file;
  std::string out_dir;
  int threads = 0;
  int repeat = 0;                   // timed runs of the plan (0: one run, reported as before)
  int warmup = 0;                   // untimed runs before them
  std::string layerwise = "onednn"; // the engine of the layers the plan runs layerwise
  bool versus_layerwise = false;    // also time every layer layerwise, interleaved with the plan
  bool check = false;
  std::string export_onnx;
  bool quiet = false;               // no progress on stderr
  bool allow_plan_mismatch = false; // run a plan made for another batch, model, ...
};

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// The progress of one long step (the plan run, the reference run) on stderr, by layers done:
// one updating line on a terminal, else a line at each further tenth of the layers; nothing
// with --quiet.
//   brickdl-run: reference 35/73 layers, 0:12 elapsed
class StepProgress {
public:
  StepProgress(std::string label, int layers, bool quiet)
      : label_(std::move(label)), layers_(layers), quiet_(quiet || layers <= 0),
        terminal_(isatty(STDERR_FILENO) == 1) {}
  StepProgress(const StepProgress&) = delete;
  StepProgress& operator=(const StepProgress&) = delete;
  ~StepProgress() { finish(); }

  // Every layer up to `last_done` has run.
  void update(int last_done) {
    if (quiet_)
      return;
    if (terminal_) {
      const Clock::time_point now = Clock::now();
      if (drawn_ && last_done < layers_ && now - last_ < std::chrono::milliseconds(100))
        return;
      last_ = now;
      std::cerr << '\r' << line(last_done) << "\x1b[K" << std::flush; // ESC[K: clear the rest
      drawn_ = true;
    } else if (last_done * 10 / layers_ > tenths_) {
      tenths_ = last_done * 10 / layers_;
      std::cerr << line(last_done) << std::endl;
    }
  }
  // Ends the updating line, if one was drawn.
  void finish() {
    if (drawn_)
      std::cerr << std::endl;
    drawn_ = false;
  }

private:
  std::string line(int done) const {
    const int s = static_cast<int>(ms_since(start_) / 1000);
    return fmt::format("brickdl-run: {} {}/{} layers, {}:{:02} elapsed", label_, done, layers_,
                       s / 60, s % 60);
  }

  std::string label_;
  int layers_;
  bool quiet_;
  bool terminal_;
  Clock::time_point start_ = Clock::now();
  Clock::time_point last_{};
  bool drawn_ = false;
  int tenths_ = 0;
};

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() > suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool is_experiment_path(const std::string& model) {
  return ends_with(model, ".yaml") || ends_with(model, ".yml");
}

// Layer names become file names: keep them readable, but never let them leave the folder.
std::string file_stem(const std::string& name) {
  std::string s = name;
  for (char& ch : s)
    if (ch == '/' || ch == '\\' || ch == ':' || ch == ' ')
      ch = '_';
  if (s.empty() || s[0] == '.')
    s = "_" + s;
  return s;
}

std::vector<int64_t> param_shape(const Graph& g, const Layer& l, bool weight) {
  if (weight)
    return weight_dims(g, l);
  const bool per_channel = l.op == OpKind::kBatchNorm || l.op == OpKind::kLayerNorm;
  return {per_channel ? l.out.c : l.out_channels};
}

nlohmann::json shape_json(const TensorShape& s) {
  return npy_shape(s);
}

// One --input: NAME=FILE.npy, or FILE.npy alone (then it feeds the inputs in the model's order).
struct GivenInput {
  std::string spec; // as given
  std::string name; // empty: positional
  std::string file;
  NpyArray array;
};

// Every --input, its array read (before the model is built: an ONNX model's dynamic dims are
// taken from them).
// One --input's name and file (no array read). A file whose own name holds '=' is a file; else
// NAME=FILE.
GivenInput parse_input_spec(const std::string& spec) {
  GivenInput g{spec, "", spec, {}};
  const size_t eq = spec.find('=');
  if (eq != std::string::npos && !fs::is_regular_file(spec)) {
    g.name = spec.substr(0, eq);
    g.file = spec.substr(eq + 1);
    if (g.name.empty())
      throw UserError("--input " + spec + ": expected NAME=FILE.npy or FILE.npy");
  }
  return g;
}

std::vector<GivenInput> read_given_inputs(const Options& o) {
  std::vector<GivenInput> given;
  for (const std::string& spec : o.input_specs) {
    GivenInput g = parse_input_spec(spec);
    if (!fs::is_regular_file(g.file))
      throw UserError("--input " + spec + ": " + g.file + " is not a file");
    g.array = read_npy(g.file);
    given.push_back(std::move(g));
  }
  return given;
}

// The batch of the --input arrays (their first axis; arrays of rank 1 have none), 0 without
// any. Two that differ are refused, naming both.
int64_t given_batch(const std::vector<GivenInput>& given) {
  const GivenInput* first = nullptr;
  for (const GivenInput& g : given) {
    if (g.array.shape.size() < 2)
      continue;
    if (first == nullptr) {
      first = &g;
    } else if (g.array.shape[0] != first->array.shape[0]) {
      throw UserError(fmt::format("--input {} has batch {} but --input {} has batch {}; every "
                                  "input must have the same batch (the first axis)",
                                  first->spec, first->array.shape[0], g.spec, g.array.shape[0]));
    }
  }
  return first == nullptr ? 0 : first->array.shape[0];
}

// An ONNX file's graph. Without --batch, a dynamic batch (a dim_param) is taken from the
// --input arrays; a fixed one stays the file's (an array of another batch is then refused with
// the input's shape).
Graph onnx_graph(const Options& o, const std::vector<GivenInput>& given) {
  if (o.input_channels > 0)
    throw UserError("--input-channels cannot change an ONNX model's weights");
  OnnxImportOptions io;
  io.batch = o.batch;
  io.input_size = o.input_size;
  if (o.batch == 0)
    io.dynamic_batch = static_cast<int>( // beyond an int: the importer's limits refuse it
        std::min<int64_t>(given_batch(given), std::numeric_limits<int>::max()));
  return import_onnx(o.model, io).graph;
}

// The unfused graph of --model: an ONNX file, an experiment file's model or a zoo model.
Graph model_graph(const Options& o, const std::vector<GivenInput>& given) {
  if (is_onnx_path(o.model))
    return onnx_graph(o, given);
  if (is_experiment_path(o.model)) {
    if (o.batch > 0 || !o.input_size.empty() || o.input_channels > 0)
      throw UserError("--batch, --input-size and --input-channels do not apply to an experiment "
                      "file (" +
                      o.model + "): it sets them itself");
    return load_experiment(o.model).graph;
  }
  ZooOptions zo;
  zo.batch = o.batch > 0 ? o.batch : 1;
  zo.input_size = o.input_size;
  zo.input_channels = o.input_channels;
  return build_zoo_model(o.model, zo);
}

// "x 1x3x8x8, y 1x5x4x4" (names alone when no shapes are known yet).
std::string inputs_text(const std::vector<std::string>& names,
                        const std::vector<TensorShape>& shapes = {}) {
  std::vector<std::string> parts;
  for (size_t k = 0; k < names.size(); ++k)
    parts.push_back("'" + names[k] + "'" + (k < shapes.size() ? " " + shapes[k].str() : ""));
  return join_names(parts);
}

// Some inputs given and others not: a forgotten input is refused rather than run on random
// values (no --input at all runs every input on seeded random values).
void refuse_missing(const std::vector<std::string>& names, const std::vector<GivenInput>& given,
                    const std::vector<int>& source, const std::string& valid) {
  if (given.empty())
    return;
  std::vector<std::string> missing;
  for (size_t k = 0; k < names.size(); ++k)
    if (source[k] < 0)
      missing.push_back("'" + names[k] + "'");
  if (!missing.empty())
    throw UserError("--input " + given[0].spec + ": no --input for " + join_names(missing) + valid +
                    "; give every input (or none, for seeded random ones)");
}

// Which --input feeds each runtime input `names[k]`: an index into `given`, or -1 (seeded
// random, only when no --input is given). Named ones by name; positional ones fill the inputs no
// name took, in order, and must be exactly as many (one positional file for a one-input model).
// UserError otherwise, naming the model's inputs.
std::vector<int> match_inputs(const std::vector<std::string>& names,
                              const std::vector<GivenInput>& given,
                              const std::vector<TensorShape>& shapes = {}) {
  std::vector<int> source(names.size(), -1);
  const std::string valid = "; the model's inputs: " + inputs_text(names, shapes);
  std::vector<int> positional;
  for (size_t i = 0; i < given.size(); ++i) {
    if (given[i].name.empty()) {
      positional.push_back(static_cast<int>(i));
      continue;
    }
    const auto it = std::find(names.begin(), names.end(), given[i].name);
    if (it == names.end())
      throw UserError("--input " + given[i].spec + ": the model has no input '" + given[i].name +
                      "'" + valid);
    int& s = source[static_cast<size_t>(it - names.begin())];
    if (s >= 0)
      throw UserError("--input " + given[i].spec + ": input '" + given[i].name +
                      "' is already given by --input " + given[static_cast<size_t>(s)].spec);
    s = static_cast<int>(i);
  }
  if (positional.empty()) {
    refuse_missing(names, given, source, valid);
    return source;
  }
  std::vector<size_t> open;
  for (size_t k = 0; k < names.size(); ++k)
    if (source[k] < 0)
      open.push_back(k);
  if (positional.size() != open.size())
    throw UserError(fmt::format(
        "--input {}: {} file(s) without a name for {} input(s) not named{}; give "
        "--input NAME=FILE.npy, or one file per input in the model's order",
        given[static_cast<size_t>(positional[0])].spec, positional.size(), open.size(), valid));
  for (size_t j = 0; j < open.size(); ++j)
    source[open[j]] = positional[j];
  return source;
}

// The graph's runtime inputs: the given arrays (shapes checked), the others seeded random
// (input k from stream k of the seed).
std::vector<Tensor> input_tensors(const Graph& g, std::vector<GivenInput>& given, uint64_t seed) {
  std::vector<std::string> names;
  std::vector<TensorShape> shapes;
  for (int id : g.inputs()) {
    names.push_back(g.layer(id).name);
    shapes.push_back(g.layer(id).out);
  }
  const std::vector<int> source = match_inputs(names, given, shapes);
  std::vector<Tensor> inputs;
  for (int id : g.inputs()) {
    const auto k = static_cast<size_t>(id);
    if (source[k] < 0) {
      inputs.push_back(random_tensor(shapes[k], seed, k));
      continue;
    }
    GivenInput& in = given[static_cast<size_t>(source[k])];
    // One input: the messages name the file alone, as they always did.
    inputs.push_back(npy_to_tensor(std::move(in.array), shapes[k], in.file,
                                   g.num_inputs() > 1 ? "input '" + names[k] + "'" : ""));
  }
  return inputs;
}

// The file each input (or output) is written to: "<kind>.npy" for one, "<kind>.<name>.npy"
// each for several (names made file-safe and, where two collide, numbered).
std::vector<std::string> array_files(const std::string& kind,
                                     const std::vector<std::string>& names) {
  if (names.size() == 1)
    return {kind + ".npy"};
  std::vector<std::string> files;
  for (size_t k = 0; k < names.size(); ++k) {
    std::string f = kind + "." + file_stem(names[k]) + ".npy";
    if (std::find(files.begin(), files.end(), f) != files.end())
      f = kind + "." + file_stem(names[k]) + "." + std::to_string(k) + ".npy";
    files.push_back(f);
  }
  return files;
}

std::vector<std::string> input_names(const Graph& g) {
  std::vector<std::string> names;
  for (int id : g.inputs())
    names.push_back(g.layer(id).name);
  return names;
}

std::vector<std::string> output_names(const Graph& g) {
  std::vector<std::string> names;
  for (const GraphOutput& o : g.output_refs())
    names.push_back(o.name);
  return names;
}

// What a run executes: the fused graph, its input, the plan and the parameters; what the plan
// says it was made for, and how that differs from this run (allowed by --allow-plan-mismatch).
struct Loaded {
  Graph graph;
  std::vector<Tensor> inputs; // graph.inputs() order
  std::vector<Candidate> plan;
  ModelWeights weights;
  PlanOrigin origin;
  std::vector<std::string> mismatches;
};

// A plan made for another run than this one is refused, or with --allow-plan-mismatch run with a
// warning on stderr.
void check_plan_fits(const Options& o, const Loaded& in) {
  if (in.mismatches.empty())
    return;
  std::string what = o.plan_file + " does not fit this run: " + join_names(in.mismatches, "; ");
  if (o.allow_plan_mismatch) {
    std::cerr << "brickdl-run: warning: " << what << "; running it anyway (--allow-plan-mismatch)"
              << std::endl;
    return;
  }
  // What would fit: --batch dropped when it alone made the batch differ, else the run the plan
  // names.
  const bool batch_flag = o.batch > 0 && in.origin.batch > 0 && o.batch != in.origin.batch;
  if (batch_flag)
    what += ". Drop --batch to run at the plan's batch";
  if (in.mismatches.size() > (batch_flag ? 1u : 0u))
    what += std::string(batch_flag ? ", run" : ". Run") +
            " the model, batch, input size and precision it was made for" +
            (in.origin.model.empty() ? std::string() : " (model '" + in.origin.model + "')");
  throw UserError(what + ", or add --allow-plan-mismatch to run it anyway");
}

// load_plan_json; a plan that names layers this graph lacks says what it was made for.
std::vector<Candidate> load_plan_for(const Options& o, const Graph& g, const PlanOrigin& origin) {
  try {
    return load_plan_json(o.plan_file, g);
  } catch (const UserError& e) {
    if (origin.model.empty() || origin.batch == 0)
      throw;
    throw UserError(fmt::format("{} (the plan was made for model '{}', batch {}, {}; this run is "
                                "{}, batch {}, {})",
                                e.what(), origin.model, origin.batch, origin.precision, g.name(),
                                g.batch(), dtype_name(g.dtype())));
  }
}

Loaded load(const Options& o, Graph fused, PlanOrigin origin, std::vector<GivenInput>& given) {
  Loaded in{std::move(fused), {}, {}, {}, std::move(origin), {}};
  in.inputs = input_tensors(in.graph, given, o.seed);
  if (!o.plan_file.empty()) {
    in.plan = load_plan_for(o, in.graph, in.origin);
    // Before validate_plan: a plan for another input size may fail there, for this reason.
    in.mismatches = plan_mismatches(in.origin, in.graph, in.plan);
    check_plan_fits(o, in);
  }
  validate_plan(in.graph, in.plan);
  in.weights = model_weights(in.graph, o.seed);
  return in;
}

// Where the time of a run went, in milliseconds (negative: the step did not run).
struct Times {
  Clock::time_point start = Clock::now();
  double load = 0; // the model, its weights, the input and the plan
  double plan = 0; // execute_plan: the plan's groups and the layers between them
  double reference = -1;
  double write = -1;
};

nlohmann::json times_json(const Times& t) {
  nlohmann::json j = {{"load", t.load}, {"plan", t.plan}, {"total", ms_since(t.start)}};
  if (t.reference >= 0)
    j["reference"] = t.reference;
  if (t.write >= 0)
    j["write"] = t.write;
  return j;
}

PlanResult execute(const Loaded& in, const Options& o, Times& times) {
  StepProgress progress(in.plan.empty() ? "layer by layer" : "plan", in.graph.size() - 1, o.quiet);
  PlanOptions po;
  po.exec.threads = o.threads;
  parse_layerwise_engine(o.layerwise, &po.layerwise);
  po.warmup = o.warmup;
  po.repetitions = std::max(o.repeat, 1);
  const Clock::time_point t0 = Clock::now();
  PlanResult result = execute_plan(in.graph, in.plan, in.inputs, in.weights, po,
                                   [&](int last_done) { progress.update(last_done); });
  times.plan = ms_since(t0);
  return result;
}

// --versus-layerwise: the plan and the same model with every layer layerwise (the same engine,
// inputs, weights and threads), made ready once each in this process and run in turn, the
// order swapped every round, after o.warmup untimed runs each. A ratio per round (layerwise ÷
// plan) cancels what changes between rounds; a comparison across processes also sees what
// differs between processes (thread placement, memory), which on a small machine can be larger
// than the plan's gain.
struct Versus {
  std::vector<double> plan_ms, layerwise_ms, speedup;
};

Versus versus_layerwise(const Loaded& in, const Options& o) {
  PlanOptions po;
  po.exec.threads = o.threads;
  parse_layerwise_engine(o.layerwise, &po.layerwise);
  PreparedPlan plan(in.graph, in.plan, in.weights, po);
  PreparedPlan layerwise(in.graph, {}, in.weights, po);
  auto once = [&](PreparedPlan& p, int warmup) {
    return p.run(in.inputs, warmup, 1).end_to_end_ms.at(0);
  };
  Versus v;
  for (int i = 0; i < o.repeat; ++i) {
    const int warmup = i == 0 ? o.warmup : 0;
    double a = 0, b = 0;
    if (i % 2 == 0) {
      a = once(plan, warmup);
      b = once(layerwise, warmup);
    } else {
      b = once(layerwise, warmup);
      a = once(plan, warmup);
    }
    v.plan_ms.push_back(a);
    v.layerwise_ms.push_back(b);
    v.speedup.push_back(b / a);
  }
  return v;
}

// "median 12.345 ms (min 12.010, max 13.200, n 10)"; a ratio's without a unit (`unit` "").
std::string spread(const std::vector<double>& samples, const char* unit = " ms") {
  MeasureResult m;
  m.samples_ms = samples;
  m.summarize();
  return fmt::format("median {:.3f}{} (min {:.3f}, max {:.3f}, n {})", m.median_ms, unit, m.min_ms,
                     m.max_ms, samples.size());
}

nlohmann::json samples_json(const std::vector<double>& samples) {
  MeasureResult m;
  m.samples_ms = samples;
  m.summarize();
  return {{"median", m.median_ms}, {"min", m.min_ms}, {"max", m.max_ms},
          {"p25", m.p25_ms},       {"p75", m.p75_ms}, {"samples", samples}};
}

// --versus-layerwise's result: on stdout, and in the manifest's timing.versus_layerwise.
void report_versus(const Versus& v, nlohmann::json& manifest) {
  std::cout << "versus layerwise (interleaved in this process, " << v.speedup.size()
            << " rounds):\n  plan: " << spread(v.plan_ms)
            << "\n  layerwise: " << spread(v.layerwise_ms)
            << "\n  speedup (layerwise / plan, per round): " << spread(v.speedup, "") << "\n";
  MeasureResult r;
  r.samples_ms = v.speedup;
  r.summarize();
  manifest["timing"]["versus_layerwise"] = {
      {"plan_ms", samples_json(v.plan_ms)},
      {"layerwise_ms", samples_json(v.layerwise_ms)},
      {"speedup",
       {{"median", r.median_ms}, {"min", r.min_ms}, {"max", r.max_ms}, {"rounds", v.speedup}}}};
}

// The manifest's "timing": how the plan ran and its times per segment and end to end.
nlohmann::json timing_json(const Graph& g, const PlanResult& r, const Options& o) {
  nlohmann::json segs = nlohmann::json::array();
  for (const SegmentTiming& s : r.segments)
    segs.push_back({{"first", s.first},
                    {"last", s.last},
                    {"layers", g.layer(s.first).name + " .. " + g.layer(s.last).name},
                    {"engine", s.engine},
                    {"steps", s.steps},
                    {"ms", samples_json(s.samples_ms)}});
  return {{"threads", r.threads},
          {"lanes", r.lanes},
          {"isa", cpu::isa().name},
          {"libxsmm_target", cpu::isa().libxsmm},
          {"onednn", cpu::onednn_version()},
          {"layerwise_engine", o.layerwise},
          {"warmup", o.warmup},
          {"segments", segs},
          {"fallbacks", r.fallbacks},
          {"convert_in_ms", samples_json(r.convert_in_ms)},
          {"convert_out_ms", samples_json(r.convert_out_ms)},
          {"end_to_end_ms", samples_json(r.end_to_end_ms)}};
}

// With --repeat: the time of each segment and end to end, as medians with their spread.
void print_timing(const Graph& g, const PlanResult& r, const Options& o) {
  std::cout << fmt::format("brickdl-run: {} thread(s), {} ({} lanes), layerwise layers on {}, "
                           "{} warm-up run(s), {} timed run(s)\n",
                           r.threads, cpu::isa().name, r.lanes, o.layerwise, o.warmup,
                           r.end_to_end_ms.size());
  for (const SegmentTiming& s : r.segments)
    std::cout << fmt::format("  {:<48} {:<20} {}\n",
                             g.layer(s.first).name + " .. " + g.layer(s.last).name, s.engine,
                             spread(s.samples_ms));
  std::cout << "  convert in (to the blocked layout): " << spread(r.convert_in_ms) << "\n";
  std::cout << "  convert out (to NCHW): " << spread(r.convert_out_ms) << "\n";
  std::cout << "  end to end: " << spread(r.end_to_end_ms) << "\n";
  for (const std::string& f : r.fallbacks)
    std::cout << "  fallback: " << f << "\n";
}

// Each plan entry (plan order) with its layers and its own counters ("bricks_computed.<i>":
// layer first + i).
nlohmann::json plan_groups_json(const Graph& g, const std::vector<Candidate>& plan,
                                const PlanResult& result) {
  nlohmann::json groups = nlohmann::json::array();
  for (size_t k = 0; k < plan.size(); ++k) {
    const Group& grp = plan[k].group;
    groups.push_back({{"first", grp.first},
                      {"last", grp.last},
                      {"layers", g.layer(grp.first).name + " .. " + g.layer(grp.last).name},
                      {"strategy", strategy_name(plan[k].strategy)},
                      {"counters", result.group_counters[k].to_map()}});
  }
  return groups;
}

// The manifest's "inputs": each runtime input's name, file, shape and source (a --input file,
// or random).
nlohmann::json inputs_json(const Options& o, const Loaded& in) {
  const Graph& g = in.graph;
  const std::vector<std::string> names = input_names(g);
  const std::vector<std::string> files = array_files("input", names);
  std::vector<GivenInput> specs; // the names and files of the --input options, for the sources
  for (const std::string& s : o.input_specs)
    specs.push_back(parse_input_spec(s));
  const std::vector<int> source = match_inputs(names, specs);
  nlohmann::json j = nlohmann::json::array();
  for (size_t k = 0; k < names.size(); ++k)
    j.push_back({{"name", names[k]},
                 {"file", files[k]},
                 {"shape", shape_json(g.layer(static_cast<int>(k)).out)},
                 {"source", source[k] < 0 ? "random uniform [-1, 1)"
                                          : specs[static_cast<size_t>(source[k])].file}});
  return j;
}

// The manifest's "outputs": each graph output's name, layer (of the fused graph), file and shape,
// in the model's order.
nlohmann::json outputs_json(const Graph& g) {
  const std::vector<std::string> files = array_files("output", output_names(g));
  nlohmann::json j = nlohmann::json::array();
  for (size_t k = 0; k < g.output_refs().size(); ++k) {
    const GraphOutput& out = g.output_refs()[k];
    j.push_back({{"name", out.name},
                 {"layer", g.layer(out.layer).name},
                 {"file", files[k]},
                 {"shape", shape_json(g.layer(out.layer).out)}});
  }
  return j;
}

nlohmann::json run_manifest(const Options& o, const Loaded& in, const PlanResult& result) {
  const Graph& graph = in.graph;
  nlohmann::json manifest;
  manifest["model"] = o.model;
  manifest["graph"] = graph.name();
  manifest["seed"] = o.seed;
  manifest["batch"] = graph.batch();
  manifest["weights_source"] = graph.params() ? "the model file" : "random, from the seed";
  manifest["inputs"] = inputs_json(o, in);
  manifest["outputs"] = outputs_json(graph);
  // One input / one output: also under the keys of one (as before several were possible).
  if (graph.num_inputs() == 1)
    manifest["input"] = manifest["inputs"][0];
  if (graph.outputs().size() == 1)
    manifest["output"] = manifest["outputs"][0];
  manifest["plan"] = plan_to_json(in.plan);
  manifest["plan_groups"] = plan_groups_json(graph, in.plan, result);
  if (in.origin.batch > 0 || !in.origin.precision.empty() || !in.origin.model.empty())
    manifest["plan_made_for"] = {
        {"model", in.origin.model}, {"batch", in.origin.batch}, {"precision", in.origin.precision}};
  if (!in.mismatches.empty())
    manifest["plan_mismatches"] = in.mismatches; // run with --allow-plan-mismatch
  manifest["counters"] = result.counters.to_map();
  manifest["timing"] = timing_json(graph, result, o);
  manifest["weights_note"] =
      "fused graph as executed: batch-norm folded into the preceding conv/linear; standalone "
      "batch-norm as weight=scale, bias=shift (y = x*scale + shift)";
  return manifest;
}

// --check: the output against the layer-by-layer reference (kernels/validation.h), into the
// manifest and one line on stdout. Returns the exit status: 0 when every element agrees with
// the reference under compare()'s rules, else 1 with one line on stderr. The rules: a finite
// reference wants a finite output within the tolerance; a NaN in the reference wants a NaN
// (the reference is the ground truth: NaN where PyTorch gives NaN); an infinity the same
// infinity. So a NaN or an infinity on one side only is a mismatch, never dropped.
int check(const Loaded& in, const std::vector<Tensor>& outputs, const Options& o, Times& times,
          nlohmann::json& manifest) {
  std::vector<Tensor> refs;
  {
    StepProgress progress("reference", in.graph.size() - 1, o.quiet);
    const Clock::time_point t0 = Clock::now();
    refs = run_graph_outputs(in.graph, in.inputs, in.weights, Accumulation::kF32,
                             [&](int last_done) { progress.update(last_done); });
    times.reference = ms_since(t0);
  }
  // The whole graph as one reduction chain, computed in fp32 whatever its precision
  // (kernels/validation.h: fp32_group_tolerance).
  const Graph& g = in.graph;
  const Tolerance tol = fp32_group_tolerance(g, Group{0, g.size() - 1});
  const std::vector<std::string> names = output_names(g);
  const bool several = names.size() > 1;
  nlohmann::json per_output = nlohmann::json::array();
  int status = 0;
  for (size_t k = 0; k < names.size(); ++k) {
    const Comparison c = compare(outputs[k].values(), refs[k].values(), tol);
    nlohmann::json j = {{"max_abs_error", c.max_abs_error},
                        {"max_rel_error", c.max_rel_error},
                        {"elements_beyond_tolerance", c.bad},
                        {"undefined_elements", c.undefined},
                        {"passed", c.ok()},
                        {"atol", tol.atol},
                        {"rtol", tol.rtol},
                        {"norm_rtol", tol.norm_rtol}};
    // Several outputs: one line and one entry each, named.
    const std::string label = several ? "output '" + names[k] + "': " : "";
    std::cout << label << check_summary(c, tol) << "\n";
    if (several) {
      j["name"] = names[k];
      per_output.push_back(j);
    } else {
      manifest["check"] = j;
    }
    if (!c.ok()) {
      std::cerr << "brickdl-run: the check failed: " << label << c.message << "\n";
      status = kExitCheckFailed;
    }
  }
  if (several)
    manifest["check"] = {{"passed", status == 0}, {"outputs", per_output}};
  return status;
}

// The manifest entry of one layer, with its parameters written as .npy files.
nlohmann::json layer_json(const Options& o, const Graph& graph, const Layer& l,
                          const LayerWeights& w) {
  nlohmann::json j = {{"id", l.id},
                      {"name", l.name},
                      {"op", op_name(l.op)},
                      {"inputs", l.inputs},
                      {"shape", shape_json(l.out)}};
  if (l.activation != Activation::kNone)
    j["activation"] = activation_name(l.activation);
  if (l.activation == Activation::kLeakyRelu)
    j["leaky_slope"] = l.leaky_slope;
  if (l.activation == Activation::kClip) {
    j["clip_min"] = l.clip_min;
    j["clip_max"] = l.clip_max;
  }
  if (!l.fused_from.empty())
    j["fused_from"] = l.fused_from;
  if (!traits(l.op).attributes.empty())
    j["attributes"] = attribute_json(l); // under the YAML keys (core/op_traits.h)
  const std::string stem = file_stem(l.name);
  if (!w.weight.empty()) {
    const std::string f = "weights/" + stem + ".weight.npy";
    write_npy((fs::path(o.out_dir) / f).string(), param_shape(graph, l, true), w.weight);
    j["weight"] = f;
  }
  if (!w.bias.empty()) {
    const std::string f = "weights/" + stem + ".bias.npy";
    write_npy((fs::path(o.out_dir) / f).string(), param_shape(graph, l, false), w.bias);
    j["bias"] = f;
  }
  return j;
}

// The inputs, the outputs (manifest "inputs" / "outputs" files) and weights/: returns the
// manifest's "layers".
nlohmann::json write_arrays(const Options& o, const Loaded& in,
                            const std::vector<Tensor>& outputs) {
  fs::create_directories(fs::path(o.out_dir) / "weights");
  const std::vector<std::string> in_files = array_files("input", input_names(in.graph));
  for (size_t k = 0; k < in.inputs.size(); ++k)
    write_npy((fs::path(o.out_dir) / in_files[k]).string(), in.inputs[k]);
  const std::vector<std::string> out_files = array_files("output", output_names(in.graph));
  for (size_t k = 0; k < outputs.size(); ++k)
    write_npy((fs::path(o.out_dir) / out_files[k]).string(), outputs[k]);
  nlohmann::json layers = nlohmann::json::array();
  for (const Layer& l : in.graph.layers())
    layers.push_back(layer_json(o, in.graph, l, in.weights.at(l.id)));
  return layers;
}

void write_manifest(const Options& o, const nlohmann::json& manifest) {
  std::ofstream mf(fs::path(o.out_dir) / "manifest.json");
  if (!mf)
    throw UserError(o.out_dir + ": cannot write manifest.json");
  mf << manifest.dump(2) << "\n";
}

// The closing line: what ran, at which batch, and what each time measures.
//   brickdl-run: resnet50, batch 8 (the plan's), 73 fused layers, 52 plan groups: plan executed
//   in 2598.9 ms; reference in 24012.3 ms; total 29.1 s; wrote run/
std::string summary(const Options& o, const Loaded& in, const Times& t, const PlanResult& r,
                    bool plan_batch) {
  std::string s =
      fmt::format("brickdl-run: {}, batch {}{}, {} fused layers, {} plan groups: ", in.graph.name(),
                  in.graph.batch(), plan_batch ? " (the plan's)" : "",
                  in.graph.size() - in.graph.num_inputs(), in.plan.size());
  s += in.plan.empty() ? "executed layer by layer" : "plan executed";
  MeasureResult e2e;
  e2e.samples_ms = r.end_to_end_ms;
  e2e.summarize();
  s += fmt::format(" in {:.1f} ms", e2e.median_ms);
  if (r.end_to_end_ms.size() > 1)
    s += fmt::format(" (median of {} runs)", r.end_to_end_ms.size());
  s += fmt::format(" on {} thread(s), layerwise layers on {}", r.threads, o.layerwise);
  s += fmt::format(
      "; set-up {:.1f} ms",
      std::max(0.0, t.plan - std::accumulate(r.end_to_end_ms.begin(), r.end_to_end_ms.end(), 0.0)));
  if (t.reference >= 0)
    s += fmt::format("; reference in {:.1f} ms", t.reference);
  s += fmt::format("; total {:.1f} s; ", ms_since(t.start) / 1000);
  return s + (o.out_dir.empty() ? "wrote nothing (no --out)" : "wrote " + o.out_dir);
}

int run(Options o, Times& times) {
  // Without --batch, a zoo model or an ONNX file runs at the plan's batch (an experiment file
  // sets its own).
  PlanOrigin origin = o.plan_file.empty() ? PlanOrigin{} : load_plan_origin(o.plan_file);
  const bool plan_batch = o.batch == 0 && origin.batch > 0 && !is_experiment_path(o.model);
  if (plan_batch)
    o.batch = origin.batch;
  std::vector<GivenInput> given = read_given_inputs(o);
  const Graph unfused = model_graph(o, given);
  Graph fused = fuse_for_inference(unfused);
  if (!o.export_onnx.empty()) {
    export_onnx(unfused, unfused_params(fused, o.seed), o.export_onnx);
    std::cout << "brickdl-run: wrote " << unfused.name() << " ("
              << unfused.size() - unfused.num_inputs() << " layers, " << unfused.total_params()
              << " parameters) to " << o.export_onnx << "\n";
    if (o.out_dir.empty() && !o.check)
      return 0;
  }
  const Loaded in = load(o, std::move(fused), std::move(origin), given);
  times.load = ms_since(times.start);
  const PlanResult result = execute(in, o, times);
  if (o.repeat > 0)
    print_timing(in.graph, result, o);
  nlohmann::json manifest = run_manifest(o, in, result);
  if (o.versus_layerwise)
    report_versus(versus_layerwise(in, o), manifest);
  const int status = o.check ? check(in, result.outputs, o, times, manifest) : 0;
  if (!o.out_dir.empty()) {
    const Clock::time_point t0 = Clock::now();
    manifest["layers"] = write_arrays(o, in, result.outputs);
    times.write = ms_since(t0);
    manifest["times_ms"] = times_json(times);
    write_manifest(o, manifest);
  }
  std::cout << summary(o, in, times, result, plan_batch) << std::endl;
  return status;
}

// The command line's options, into `o`.
void add_options(CLI::App& app, Options& o) {
  app.add_option("--model", o.model,
                 "zoo model name (" + join_names(zoo_names()) +
                     "), an ONNX file (.onnx, run with its own weights) or an experiment file "
                     "(.yaml, its model)")
      ->required();
  app.add_option(
         "--batch", o.batch,
         "batch size (default: the --plan's, else the ONNX file's, or for a dynamic batch the "
         "--input arrays', else 1)")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--input-size", o.input_size, "input extents: H,W or D,H,W")->delimiter(',');
  app.add_option("--input-channels", o.input_channels, "input channels (default: the model's)");
  app.add_option("--seed", o.seed, "seed of the random input and weights");
  app.add_option("--input", o.input_specs,
                 "input tensor (.npy, float32/float64, the model's shape), once per runtime input: "
                 "NAME=FILE.npy, or FILE.npy for the inputs in the model's order (without --input, "
                 "every input is seeded random)")
      ->allow_extra_args(false);
  app.add_option("--plan", o.plan_file,
                 "plan JSON: [{first, last, strategy, brick: [d,h,w], cb, nb}, ...] or "
                 "brickdl-tune's plan.json; layers outside its groups run layer by layer. A "
                 "plan.json made for another batch, precision, model or input size than the "
                 "run is refused (exit 2); without --batch the run takes the plan's batch")
      ->check(CLI::ExistingFile);
  app.add_flag("--allow-plan-mismatch", o.allow_plan_mismatch,
               "run a --plan made for another batch, precision, model or input size anyway, "
               "with a warning (it checks the plan's groups, not the run it was tuned for)");
  app.add_option("--threads", o.threads, "worker threads (0 = all cores)")
      ->check(CLI::Range(0, 4096));
  app.add_option("--repeat", o.repeat,
                 "time N runs of the plan after the warm-up ones and print each segment's time "
                 "and the end-to-end time as medians with their spread (manifest.json: timing)")
      ->check(CLI::Range(1, 100000));
  app.add_option("--warmup", o.warmup, "untimed runs before the timed ones (default 0)")
      ->check(CLI::Range(0, 100000));
  app.add_option("--layerwise", o.layerwise,
                 "the engine of the layers the plan runs layerwise (its layerwise groups and the "
                 "layers outside its groups): onednn (default: oneDNN with its post-op fusions "
                 "and its 1x1 + depthwise fusion) or bricks (the brick kernels layer by layer)")
      ->check(CLI::IsMember({"onednn", "bricks"}));
  app.add_flag("--versus-layerwise", o.versus_layerwise,
               "with --plan and --repeat N: then run the plan and every layer layerwise (the "
               "same engine, inputs, weights and threads) in turn in this process, N rounds, and "
               "print both times and their ratio per round (manifest.json: "
               "timing.versus_layerwise)");
  app.add_flag("--check", o.check,
               "also run the layer-by-layer reference and report the error (exit 1 when the "
               "output differs)");
  app.add_flag("--quiet", o.quiet,
               "no progress on stderr (default: the plan run and the reference, per layer)");
  app.add_option("--out", o.out_dir, "output folder (required unless checking or exporting)");
  app.add_option("--export-onnx", o.export_onnx,
                 "write the model (unfused, with the weights a run uses) as an ONNX file");
}

} // namespace

int main(int argc, char** argv) {
  CLI::App app{"brickdl-run: execute a model or a plan on the CPU and write inputs, weights and "
               "outputs as .npy files"};
  Options o;
  add_options(app, o);
  app.footer(
      "Weights are those of the fused graph as executed: batch-norm folded into the preceding "
      "conv/linear, standalone batch-norm as scale/shift. See manifest.json in the output.\n"
      "The last line on stdout says what each time measures: 'plan executed in' the plan run "
      "alone (NCHW in to NCHW out; the median with --repeat), 'set-up' packing the weights, "
      "oneDNN's primitives and the warm-up runs, 'reference in' the layer-by-layer reference "
      "(--check), 'total' the whole "
      "command (model, weights and files included).");
  return run_tool("brickdl-run", app, argc, argv, [&] {
    Times times;
    if (o.versus_layerwise && (o.plan_file.empty() || o.repeat == 0))
      throw UserError("--versus-layerwise compares a plan with layerwise: it needs --plan FILE "
                      "and --repeat N (the rounds)");
    if (o.out_dir.empty() && o.export_onnx.empty() && !o.check)
      throw UserError("--out is required (or --check to only check the output, or --export-onnx "
                      "FILE to only export the model)");
    return run(o, times);
  });
}
