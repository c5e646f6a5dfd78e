// The importer's refusals of bad files: each is one UserError naming the file and, where one
// is at fault, the node (or initializer, or input); never a crash. The models are built here
// with ONNX's protobuf classes and written to a temporary file.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>
#include <unistd.h>

#include "core/error.h"
#include "core/onnx.h"
#include "kernels/reference.h"
#include "kernels/weights.h"

namespace brickdl {
namespace {

namespace fs = std::filesystem;

// A file in a fresh temporary folder, removed with it.
class TempFile {
public:
  explicit TempFile(const std::string& name) {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("brickdl_onnx_errors_" + std::string(info->name()) + "_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    path_ = (dir_ / name).string();
  }
  ~TempFile() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  const std::string& path() const { return path_; }
  void write(const std::string& bytes) const {
    std::ofstream f(path_, std::ios::binary);
    f << bytes;
  }

private:
  fs::path dir_;
  std::string path_;
};

void set_dims(onnx::ValueInfoProto* v, const std::vector<int64_t>& dims,
              const std::string& dynamic_batch = "") {
  auto* t = v->mutable_type()->mutable_tensor_type();
  t->set_elem_type(onnx::TensorProto::FLOAT);
  auto* shape = t->mutable_shape();
  for (size_t i = 0; i < dims.size(); ++i) {
    auto* d = shape->add_dim();
    if (i == 0 && !dynamic_batch.empty())
      d->set_dim_param(dynamic_batch);
    else
      d->set_dim_value(dims[i]);
  }
}

// input x [1, 3, 8, 8], output y, the given opset; nodes added by the test.
onnx::ModelProto base_model(int64_t opset = 13) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  auto* o = m.add_opset_import();
  o->set_domain("");
  o->set_version(opset);
  auto* g = m.mutable_graph();
  g->set_name("g");
  auto* x = g->add_input();
  x->set_name("x");
  set_dims(x, {1, 3, 8, 8});
  g->add_output()->set_name("y");
  return m;
}

onnx::NodeProto* add_node(onnx::ModelProto& m, const std::string& name, const std::string& op,
                          const std::vector<std::string>& inputs,
                          const std::vector<std::string>& outputs) {
  auto* n = m.mutable_graph()->add_node();
  n->set_name(name);
  n->set_op_type(op);
  for (const auto& i : inputs)
    n->add_input(i);
  for (const auto& o : outputs)
    n->add_output(o);
  return n;
}

void add_initializer(onnx::ModelProto& m, const std::string& name, const std::vector<int64_t>& dims,
                     size_t values) {
  auto* t = m.mutable_graph()->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : dims)
    t->add_dims(d);
  for (size_t i = 0; i < values; ++i)
    t->add_float_data(0.5f + static_cast<float>(i));
}

void set_ints(onnx::NodeProto* n, const std::string& name, const std::vector<int64_t>& v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v)
    a->add_ints(x);
}

void set_int(onnx::NodeProto* n, const std::string& name, int64_t v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}

std::string serialize(const onnx::ModelProto& m) {
  std::string bytes;
  EXPECT_TRUE(m.SerializeToString(&bytes));
  return bytes;
}

// The message of the UserError that importing `bytes` throws ("" and a test failure when it
// throws nothing or something else).
std::string import_error(const TempFile& f, const std::string& bytes,
                         const OnnxImportOptions& options = {}) {
  f.write(bytes);
  try {
    import_onnx(f.path(), options);
  } catch (const UserError& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.rfind(f.path() + ": ", 0), 0u) << "does not start with the file: " << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << "more than one line: " << msg;
    return msg;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not a UserError: " << e.what();
    return "";
  }
  ADD_FAILURE() << "imported without an error";
  return "";
}

TEST(OnnxImport, AValidModelImports) {
  TempFile f("ok.onnx");
  onnx::ModelProto m = base_model();
  add_node(m, "r", "Relu", {"x"}, {"y"});
  f.write(serialize(m));
  const OnnxModel out = import_onnx(f.path());
  EXPECT_EQ(out.graph.size(), 2);
  EXPECT_EQ(out.output_dims, (std::vector<int64_t>{1, 3, 8, 8}));
}

TEST(OnnxImportErrors, NotAnOnnxFile) {
  TempFile f("text.onnx");
  const std::string msg = import_error(f, "this is not a protobuf, just some text\n");
  EXPECT_NE(msg.find("not an ONNX model"), std::string::npos) << msg;
}

// Input dims over the limits of core/limits.h: refused at the file and input, not wrapped.
TEST(OnnxImportErrors, InputSizesOverTheLimits) {
  TempFile f("huge.onnx");
  for (const auto& [dims, limit] :
       {std::pair{std::vector<int64_t>{1, 3, int64_t{1} << 40, 8}, "spatial extents"},
        std::pair{std::vector<int64_t>{1, int64_t{1} << 30, 8, 8}, "channels of a tensor"},
        std::pair{std::vector<int64_t>{int64_t{1} << 62, 3, 8, 8}, "images in a batch"}}) {
    onnx::ModelProto m = base_model();
    m.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->clear_shape();
    set_dims(m.mutable_graph()->mutable_input(0), dims);
    add_node(m, "r", "Relu", {"x"}, {"y"});
    const std::string msg = import_error(f, serialize(m));
    EXPECT_NE(msg.find("input 'x'"), std::string::npos) << msg;
    EXPECT_NE(msg.find(std::string(limit) + " are limited to"), std::string::npos) << msg;
  }
}

TEST(OnnxImportErrors, TruncatedFile) {
  TempFile f("cut.onnx");
  onnx::ModelProto m = base_model();
  add_node(m, "conv1", "Conv", {"x", "w"}, {"y"});
  add_initializer(m, "w", {4, 3, 3, 3}, 108);
  const std::string bytes = serialize(m);
  const std::string msg = import_error(f, bytes.substr(0, bytes.size() / 2));
  EXPECT_NE(msg.find("not an ONNX model"), std::string::npos) << msg;
}

TEST(OnnxImportErrors, EmptyFileAndMissingFile) {
  TempFile f("empty.onnx");
  EXPECT_NE(import_error(f, "").find("not an ONNX model"), std::string::npos);
  EXPECT_THROW(import_onnx(f.path() + ".absent"), UserError);
}

TEST(OnnxImportErrors, UnknownOpset) {
  TempFile f("opset.onnx");
  onnx::ModelProto m = base_model(99);
  add_node(m, "r", "Relu", {"x"}, {"y"});
  const std::string msg = import_error(f, serialize(m));
  EXPECT_NE(msg.find("opset 99 is not supported"), std::string::npos) << msg;
}

TEST(OnnxImportErrors, NoDefaultOpset) {
  TempFile f("noopset.onnx");
  onnx::ModelProto m = base_model();
  m.clear_opset_import();
  add_node(m, "r", "Relu", {"x"}, {"y"});
  const std::string msg = import_error(f, serialize(m));
  EXPECT_NE(msg.find("no default-domain opset"), std::string::npos) << msg;
}

TEST(OnnxImportErrors, UnsupportedOpNamesTheNodeAndTheOp) {
  TempFile f("op.onnx");
  onnx::ModelProto m = base_model();
  add_node(m, "relu1", "Relu", {"x"}, {"t"});
  add_node(m, "softmax1", "Softmax", {"t"}, {"y"});
  const std::string msg = import_error(f, serialize(m));
  EXPECT_NE(msg.find("node 'softmax1' (Softmax)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("op 'Softmax' is not supported"), std::string::npos) << msg;
}

TEST(OnnxImportErrors, UnsupportedAttributeNamesTheNode) {
  TempFile f("attr.onnx");
  onnx::ModelProto m = base_model();
  auto* n = add_node(m, "pool1", "MaxPool", {"x"}, {"y"});
  auto* k = n->add_attribute();
  k->set_name("kernel_shape");
  k->set_type(onnx::AttributeProto::INTS);
  k->add_ints(2);
  k->add_ints(2);
  auto* odd = n->add_attribute();
  odd->set_name("frobnicate");
  odd->set_type(onnx::AttributeProto::INT);
  odd->set_i(1);
  const std::string msg = import_error(f, serialize(m));
  EXPECT_NE(msg.find("node 'pool1' (MaxPool)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'frobnicate'"), std::string::npos) << msg;
}

TEST(OnnxImportErrors, DynamicBatchWithNoSizeGiven) {
  TempFile f("dyn.onnx");
  onnx::ModelProto m = base_model();
  onnx::ValueInfoProto* x = m.mutable_graph()->mutable_input(0);
  x->mutable_type()->mutable_tensor_type()->clear_shape();
  set_dims(x, {0, 3, 8, 8}, "N");
  add_node(m, "r", "Relu", {"x"}, {"y"});
  const std::string msg = import_error(f, serialize(m));
  EXPECT_NE(msg.find("input 'x' has a dynamic batch 'N'"), std::string::npos) << msg;
  // Given, it imports.
  OnnxImportOptions options;
  options.batch = 2;
  EXPECT_EQ(import_onnx(f.path(), options).output_dims, (std::vector<int64_t>{2, 3, 8, 8}));
}

TEST(OnnxImportErrors, InitializerWithTheWrongNumberOfValues) {
  TempFile f("init.onnx");
  onnx::ModelProto m = base_model();
  add_node(m, "conv1", "Conv", {"x", "w"}, {"y"});
  add_initializer(m, "w", {4, 3, 3, 3}, 100);
  const std::string msg = import_error(f, serialize(m));
  EXPECT_NE(msg.find("initializer 'w'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("100 values"), std::string::npos) << msg;
}

TEST(OnnxImportErrors, InitializerThatDoesNotFitTheNode) {
  TempFile f("fit.onnx");
  onnx::ModelProto m = base_model();
  add_node(m, "conv1", "Conv", {"x", "w"}, {"y"});
  add_initializer(m, "w", {4, 5, 3, 3}, 180); // 5 input channels; x has 3
  const std::string msg = import_error(f, serialize(m));
  EXPECT_NE(msg.find("node 'conv1' (Conv)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("weight 'w'"), std::string::npos) << msg;
}

TEST(OnnxImportErrors, GraphWithACycle) {
  TempFile f("cycle.onnx");
  onnx::ModelProto m = base_model();
  add_node(m, "add1", "Add", {"x", "t2"}, {"t1"});
  add_node(m, "relu1", "Relu", {"t1"}, {"t2"});
  add_node(m, "relu2", "Relu", {"t2"}, {"y"});
  const std::string msg = import_error(f, serialize(m));
  EXPECT_NE(msg.find("cycle"), std::string::npos) << msg;
  // A node on the cycle (relu2 only reads from it).
  EXPECT_TRUE(msg.find("node 'add1' (Add)") != std::string::npos ||
              msg.find("node 'relu1' (Relu)") != std::string::npos)
      << msg;
}

TEST(OnnxImportErrors, InputProducedByNothing) {
  TempFile f("dangling.onnx");
  onnx::ModelProto m = base_model();
  add_node(m, "add1", "Add", {"x", "nowhere"}, {"y"});
  const std::string msg = import_error(f, serialize(m));
  EXPECT_NE(msg.find("node 'add1' (Add)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'nowhere'"), std::string::npos) << msg;
}

TEST(OnnxImportErrors, TensorFileThatIsNotATensor) {
  TempFile f("t.pb");
  f.write(std::string("\xff\xff\xff\xff garbage", 12));
  try {
    read_onnx_tensor(f.path());
    ADD_FAILURE() << "read garbage as a tensor";
  } catch (const UserError& e) {
    EXPECT_EQ(std::string(e.what()).rfind(f.path(), 0), 0u) << e.what();
  }
}

// Semantics where ONNX and brickdl differ and no node test reaches: each refused, naming the
// node and what differs.

TEST(OnnxImportErrors, CeilModeWindowStartingInTheEndPadding) {
  // 5 wide, pads 1, window 2, stride 2: ONNX keeps a 4th window starting at 6 (in the end
  // padding); PyTorch drops it.
  TempFile f("ceil.onnx");
  onnx::ModelProto m = base_model();
  onnx::ValueInfoProto* x = m.mutable_graph()->mutable_input(0);
  x->mutable_type()->mutable_tensor_type()->clear_shape();
  set_dims(x, {1, 1, 5, 5});
  auto* n = add_node(m, "pool1", "MaxPool", {"x"}, {"y"});
  set_ints(n, "kernel_shape", {2, 2});
  set_ints(n, "strides", {2, 2});
  set_ints(n, "pads", {1, 1, 1, 1});
  set_int(n, "ceil_mode", 1);
  const std::string msg = import_error(f, serialize(m));
  EXPECT_NE(msg.find("node 'pool1' (MaxPool)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("ceil_mode"), std::string::npos) << msg;
}

TEST(OnnxImportErrors, MaxPoolIndicesThatAreRead) {
  TempFile f("indices.onnx");
  onnx::ModelProto m = base_model();
  auto* n = add_node(m, "pool1", "MaxPool", {"x"}, {"p", "idx"});
  set_ints(n, "kernel_shape", {2, 2});
  add_node(m, "relu1", "Relu", {"idx"}, {"r"});
  add_node(m, "add1", "Add", {"p", "r"}, {"y"});
  const std::string msg = import_error(f, serialize(m));
  EXPECT_NE(msg.find("node 'pool1' (MaxPool)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("output 1 ('idx') is read"), std::string::npos) << msg;
  // Unread, the indices do not matter.
  m.mutable_graph()->mutable_node()->RemoveLast();
  m.mutable_graph()->mutable_node()->RemoveLast();
  m.mutable_graph()->mutable_node(0)->set_output(0, "y");
  f.write(serialize(m));
  EXPECT_EQ(import_onnx(f.path()).output_dims, (std::vector<int64_t>{1, 3, 7, 7}));
}

TEST(OnnxImportErrors, GemmBiasPerBatchRow) {
  // x [3, 2] · B [2, 3] + C [3, 1]: C is one value per batch row, not per output, though it
  // has as many values as there are outputs.
  TempFile f("gemm.onnx");
  onnx::ModelProto m = base_model();
  onnx::ValueInfoProto* x = m.mutable_graph()->mutable_input(0);
  x->mutable_type()->mutable_tensor_type()->clear_shape();
  set_dims(x, {3, 2});
  add_node(m, "fc", "Gemm", {"x", "B", "C"}, {"y"});
  add_initializer(m, "B", {2, 3}, 6);
  add_initializer(m, "C", {3, 1}, 3);
  const std::string msg = import_error(f, serialize(m));
  EXPECT_NE(msg.find("node 'fc' (Gemm)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("bias of dims [3, 1]"), std::string::npos) << msg;
}

TEST(OnnxImportErrors, ConvTransposeOutputShapeBeforeTheStart) {
  // 8 wide, kernel 3, stride 1: the full output is 10; output_shape 12 pads −1 at each end.
  TempFile f("convt.onnx");
  onnx::ModelProto m = base_model();
  auto* n = add_node(m, "up", "ConvTranspose", {"x", "w"}, {"y"});
  add_initializer(m, "w", {3, 1, 3, 3}, 27);
  set_ints(n, "output_shape", {12, 12});
  const std::string msg = import_error(f, serialize(m));
  EXPECT_NE(msg.find("node 'up' (ConvTranspose)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("before its start"), std::string::npos) << msg;
}

TEST(OnnxImportErrors, ReshapeWithAllowzeroToAnEmptyDim) {
  TempFile f("reshape.onnx");
  onnx::ModelProto m = base_model();
  auto* n = add_node(m, "r", "Reshape", {"x", "shape"}, {"y"});
  set_int(n, "allowzero", 1);
  auto* t = m.mutable_graph()->add_initializer();
  t->set_name("shape");
  t->set_data_type(onnx::TensorProto::INT64);
  t->add_dims(2);
  t->add_int64_data(0);
  t->add_int64_data(-1);
  const std::string msg = import_error(f, serialize(m));
  EXPECT_NE(msg.find("node 'r' (Reshape)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("empty"), std::string::npos) << msg;
  // Without allowzero, 0 copies the batch: a flatten.
  n->clear_attribute();
  f.write(serialize(m));
  EXPECT_EQ(import_onnx(f.path()).output_dims, (std::vector<int64_t>{1, 3 * 8 * 8}));
}

TEST(OnnxImport, MatMulThenAddIsOneLinearLayerWithABias) {
  // y = x · B + C with x [1, 2], B = [[0.5, 1.5, 2.5], [3.5, 4.5, 5.5]], C [1, 3] = [0.5, 1.5,
  // 2.5]: y = [0.5·x0 + 3.5·x1 + 0.5, ...].
  TempFile f("mm.onnx");
  onnx::ModelProto m = base_model();
  onnx::ValueInfoProto* x = m.mutable_graph()->mutable_input(0);
  x->mutable_type()->mutable_tensor_type()->clear_shape();
  set_dims(x, {1, 2});
  add_node(m, "mm", "MatMul", {"x", "B"}, {"t"});
  add_node(m, "bias", "Add", {"t", "C"}, {"y"});
  add_initializer(m, "B", {2, 3}, 6);
  add_initializer(m, "C", {1, 3}, 3);
  f.write(serialize(m));
  const OnnxModel out = import_onnx(f.path());
  ASSERT_EQ(out.graph.size(), 2);
  EXPECT_EQ(out.graph.layer(1).op, OpKind::kLinear);
  kernels::Tensor in(out.graph.input_shape());
  in.values() = {1.0f, 2.0f};
  const kernels::Tensor y = kernels::run_graph(out.graph, in, kernels::model_weights(out.graph, 0));
  EXPECT_EQ(y.values(),
            (std::vector<float>{0.5f + 7.0f + 0.5f, 1.5f + 9.0f + 1.5f, 2.5f + 11.0f + 2.5f}));
}

} // namespace
} // namespace brickdl
