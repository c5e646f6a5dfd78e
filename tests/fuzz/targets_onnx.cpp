// The ONNX target: brickdl-tune MODEL.onnx --describe / --backend none and brickdl-run of it.
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include <nlohmann/json.hpp>
#include <onnx/onnx_pb.h>

#include "core/describe.h"
#include "core/onnx.h"
#include "core/yaml_graph.h"
#include "kernels/plan_executor.h"
#include "kernels/weights.h"
#include "model/report.h"
#include "tests/fuzz/mutate.h"
#include "tests/fuzz/targets.h"

namespace brickdl::fuzz {
namespace {

namespace fs = std::filesystem;

int64_t extreme_int(std::mt19937_64& rng) {
  const int64_t v[] = {0,
                       -1,
                       1,
                       2,
                       3,
                       7,
                       64,
                       2147483647,
                       2147483648,
                       4294967296,
                       int64_t{1} << 40,
                       int64_t{1} << 62,
                       std::numeric_limits<int64_t>::max(),
                       std::numeric_limits<int64_t>::min(),
                       -2};
  return v[rng() % std::size(v)];
}

const std::vector<std::string>& op_types() {
  static const std::vector<std::string> v = {"Conv",
                                             "ConvTranspose",
                                             "BatchNormalization",
                                             "Relu",
                                             "LeakyRelu",
                                             "Clip",
                                             "Sigmoid",
                                             "Add",
                                             "Mul",
                                             "Concat",
                                             "MaxPool",
                                             "AveragePool",
                                             "GlobalAveragePool",
                                             "Resize",
                                             "Gemm",
                                             "MatMul",
                                             "Flatten",
                                             "Reshape",
                                             "Identity",
                                             "Dropout",
                                             "Pad",
                                             "Softmax",
                                             "Loop"};
  return v;
}

void mutate_attribute(onnx::AttributeProto& a, std::mt19937_64& rng) {
  switch (rng() % 6) {
  case 0:
    for (int k = 0; k < a.ints_size(); ++k)
      if (rng() % 2)
        a.set_ints(k, extreme_int(rng));
    break;
  case 1: a.set_i(extreme_int(rng)); break;
  case 2: {
    const float fs[] = {std::numeric_limits<float>::quiet_NaN(),
                        std::numeric_limits<float>::infinity(), -1.0f, 0.0f, 1e30f};
    a.set_f(fs[rng() % std::size(fs)]);
    break;
  }
  case 3: a.set_type(static_cast<onnx::AttributeProto::AttributeType>(rng() % 14)); break;
  case 4: a.add_ints(extreme_int(rng)); break;
  default:
    a.clear_ints();
    a.set_s(rng() % 2 ? "SAME_UPPER" : "nonsense");
    break;
  }
}

void mutate_tensor(onnx::TensorProto& t, std::mt19937_64& rng) {
  switch (rng() % 5) {
  case 0:
    if (t.dims_size() > 0)
      t.set_dims(static_cast<int>(rng() % static_cast<uint64_t>(t.dims_size())), extreme_int(rng));
    break;
  case 1: t.set_data_type(static_cast<int32_t>(rng() % 17)); break;
  case 2:
    if (t.has_raw_data())
      t.mutable_raw_data()->resize(t.raw_data().size() / (1 + rng() % 3));
    else
      t.clear_float_data();
    break;
  case 3: t.add_dims(extreme_int(rng)); break;
  default: t.clear_dims(); break;
  }
}

void mutate_value_info(onnx::ValueInfoProto& v, std::mt19937_64& rng) {
  auto* shape = v.mutable_type()->mutable_tensor_type()->mutable_shape();
  if (shape->dim_size() == 0 || rng() % 5 == 0) {
    shape->add_dim()->set_dim_value(extreme_int(rng));
    return;
  }
  auto* d = shape->mutable_dim(static_cast<int>(rng() % static_cast<uint64_t>(shape->dim_size())));
  if (rng() % 3 == 0)
    d->set_dim_param("N");
  else
    d->set_dim_value(extreme_int(rng));
}

// Long on purpose: one switch over the structure-aware mutations of a model.
void mutate_model(onnx::ModelProto& m, std::mt19937_64& rng) {
  onnx::GraphProto* g = m.mutable_graph();
  const auto any = [&rng](int n) { return static_cast<int>(rng() % static_cast<uint64_t>(n)); };
  switch (rng() % 10) {
  case 0:
    if (g->node_size() > 0)
      g->mutable_node(any(g->node_size()))->set_op_type(op_types()[rng() % op_types().size()]);
    break;
  case 1:
    if (g->node_size() > 0) {
      g->mutable_node()->SwapElements(any(g->node_size()), g->node_size() - 1);
      g->mutable_node()->RemoveLast();
    }
    break;
  case 2:
  case 3:
    if (g->node_size() > 0) {
      onnx::NodeProto* n = g->mutable_node(any(g->node_size()));
      if (n->attribute_size() > 0)
        mutate_attribute(*n->mutable_attribute(any(n->attribute_size())), rng);
    }
    break;
  case 4:
    if (g->node_size() > 0) { // rewire an input
      onnx::NodeProto* n = g->mutable_node(any(g->node_size()));
      const onnx::NodeProto& other = g->node(any(g->node_size()));
      const std::string name = other.output_size() > 0 ? other.output(0) : "missing";
      if (n->input_size() > 0 && rng() % 2)
        n->set_input(any(n->input_size()), name);
      else
        n->add_input(name);
    }
    break;
  case 5:
    if (g->initializer_size() > 0)
      mutate_tensor(*g->mutable_initializer(any(g->initializer_size())), rng);
    break;
  case 6:
    if (g->input_size() > 0)
      mutate_value_info(*g->mutable_input(any(g->input_size())), rng);
    break;
  case 7:
    if (m.opset_import_size() > 0)
      m.mutable_opset_import(0)->set_version(extreme_int(rng));
    break;
  case 8:
    if (g->initializer_size() > 0) {
      g->mutable_initializer()->SwapElements(any(g->initializer_size()), g->initializer_size() - 1);
      g->mutable_initializer()->RemoveLast();
    }
    break;
  default:
    if (g->output_size() > 0 && g->node_size() > 0)
      g->mutable_output(0)->set_name(g->node(any(g->node_size())).output(0));
    break;
  }
}

} // namespace

std::vector<FuzzInput> onnx_seeds() {
  std::vector<FuzzInput> seeds;
  const fs::path graphs = fs::path(BRICKDL_SOURCE_DIR) / "tests/fuzz/seeds/yaml_graph";
  for (const char* name : {"residual_2d", "chain_3d", "branches_2d"}) {
    const Graph g = load_yaml_graph((graphs / (std::string(name) + ".yaml")).string());
    const std::string path = scratch_dir() + "/seed-" + name + ".onnx";
    export_onnx(g, kernels::unfused_params(fuse_for_inference(g), 1), path);
    seeds.push_back({read_file(path), std::string("export of yaml_graph/") + name});
  }
  // A few of ONNX's node tests (Debian's libonnx-testdata) with one runtime input, when there.
  const fs::path node = "/usr/share/libonnx-testdata/data/node";
  for (const char* test :
       {"test_maxpool_2d_pads", "test_averagepool_3d_default", "test_globalaveragepool",
        "test_resize_upsample_scales_nearest", "test_leakyrelu", "test_flatten_axis1"})
    if (fs::exists(node / test / "model.onnx"))
      seeds.push_back({read_file(node / test / "model.onnx"), std::string("onnx ") + test});
  return seeds;
}

std::string mutate_onnx(const std::string& in, std::mt19937_64& rng) {
  onnx::ModelProto m;
  if (rng() % 5 < 2 || !m.ParseFromString(in))
    return mutate_bytes(in, rng);
  mutate_model(m, rng);
  std::string out;
  m.SerializeToString(&out);
  return out;
}

void onnx_body(const FuzzInput& in) {
  const std::string path = write_case_file(in.bytes, ".onnx");
  // brickdl-tune MODEL.onnx --describe: the experiment the tool makes of it.
  const std::string yaml =
      "name: fuzz_onnx\nmodel: " + nlohmann::json(path).dump() + "\ntarget: H200\n";
  const ExperimentConfig exp = parse_experiment(yaml, "the command line");
  std::ostringstream os;
  describe_experiment(exp, os);
  const Graph fused = fuse_for_inference(exp.graph);
  model::describe_model(fused, exp.gpu, os);
  if (!small_enough_to_run(fused))
    return;
  tune_model_only(exp, path + ".db"); // --backend none
  // brickdl-run --model MODEL.onnx: layer by layer with the file's weights.
  const OnnxModel model = import_onnx(path);
  const Graph run = fuse_for_inference(model.graph);
  if (small_enough_to_run(run))
    kernels::execute_plan(run, {}, kernels::random_tensor(run.input_shape(), 1),
                          kernels::model_weights(run, 1), kernels::ExecOptions{1});
}

} // namespace brickdl::fuzz
