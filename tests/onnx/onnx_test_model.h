#pragma once
// A small ONNX model written with the protobuf API for the importer's tests: one float input
// "x" of the given dims, one graph output "y", nodes and int64 / float initializers; import()
// writes it to a temporary file and imports it (or returns the UserError's message).
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>
#include <unistd.h>

#include "core/error.h"
#include "core/onnx.h"

namespace brickdl::onnx_test {

class Model {
public:
  explicit Model(const std::vector<int64_t>& in, int64_t opset = 17) {
    m_.set_ir_version(8);
    auto* o = m_.add_opset_import();
    o->set_domain("");
    o->set_version(opset);
    auto* x = m_.mutable_graph()->add_input();
    x->set_name("x");
    auto* t = x->mutable_type()->mutable_tensor_type();
    t->set_elem_type(onnx::TensorProto::FLOAT);
    for (int64_t d : in)
      t->mutable_shape()->add_dim()->set_dim_value(d);
    m_.mutable_graph()->add_output()->set_name("y");
  }
  onnx::NodeProto* node(const std::string& op, const std::vector<std::string>& in,
                        const std::vector<std::string>& out) {
    auto* n = m_.mutable_graph()->add_node();
    n->set_op_type(op);
    n->set_name(out[0]);
    for (const auto& i : in)
      n->add_input(i);
    for (const auto& o : out)
      n->add_output(o);
    return n;
  }
  std::string ints(const std::string& name, const std::vector<int64_t>& v) {
    auto* t = m_.mutable_graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    t->add_dims(static_cast<int64_t>(v.size()));
    for (int64_t x : v)
      t->add_int64_data(x);
    return name;
  }
  std::string floats(const std::string& name, const std::vector<int64_t>& dims,
                     const std::vector<float>& v) {
    auto* t = m_.mutable_graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    for (int64_t d : dims)
      t->add_dims(d);
    for (float x : v)
      t->add_float_data(x);
    return name;
  }
  static void attr(onnx::NodeProto* n, const std::string& name, const std::vector<int64_t>& v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t x : v)
      a->add_ints(x);
  }
  static void attr(onnx::NodeProto* n, const std::string& name, int64_t v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
  }
  onnx::ModelProto& proto() { return m_; }
  // Written to a temporary file and imported (or the UserError's message, in `error`).
  OnnxModel import(std::string* error = nullptr) const {
    namespace fs = std::filesystem;
    const fs::path p = fs::temp_directory_path() /
                       ("brickdl_onnx_test_model_" + std::to_string(::getpid()) + ".onnx");
    {
      std::ofstream f(p, std::ios::binary);
      m_.SerializeToOstream(&f);
    }
    OnnxModel out;
    try {
      out = import_onnx(p.string());
    } catch (const UserError& e) {
      if (!error)
        throw;
      *error = e.what();
    }
    fs::remove(p);
    return out;
  }

private:
  onnx::ModelProto m_;
};

} // namespace brickdl::onnx_test
