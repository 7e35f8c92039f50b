#include "host_client/tooling/sr_model.h"

#include <onnx/onnx_pb.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <random>

#include "kernels/float16.h"

namespace remex::sr {
namespace {

constexpr int64_t kMaxExtent = 65536;
constexpr int64_t kFeatures = 64;
constexpr int kResidualBlocks = 2;

class Builder {
 public:
  explicit Builder(const SrModelOptions& o) : options_(o), rng_(o.seed) {
    model_.set_ir_version(8);
    model_.set_producer_name("remex gen-sr");
    auto* imp = model_.add_opset_import();
    imp->set_domain("");
    imp->set_version(13);
    graph_ = model_.mutable_graph();
    graph_->set_name("sr_x4");
  }

  int32_t ElemType() const {
    return options_.dtype == DType::kFloat16 ? onnx::TensorProto::FLOAT16 : onnx::TensorProto::FLOAT;
  }

  void Info(onnx::ValueInfoProto* v, const std::string& name, std::vector<int64_t> dims) {
    v->set_name(name);
    auto* tt = v->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(ElemType());
    for (int64_t d : dims) tt->mutable_shape()->add_dim()->set_dim_value(d);
  }

  // An initializer of the model's dtype.
  void Init(const std::string& name, const std::vector<int64_t>& dims, const std::vector<float>& values) {
    auto* t = graph_->add_initializer();
    t->set_name(name);
    t->set_data_type(ElemType());
    for (int64_t d : dims) t->add_dims(d);
    std::string raw;
    if (options_.dtype == DType::kFloat16) {
      raw.resize(values.size() * 2);
      for (size_t i = 0; i < values.size(); ++i) {
        uint16_t bits = kernels::FloatToHalf(values[i]).bits;
        std::memcpy(raw.data() + 2 * i, &bits, 2);
      }
    } else {
      raw.resize(values.size() * 4);
      std::memcpy(raw.data(), values.data(), raw.size());
    }
    t->set_raw_data(std::move(raw));
  }

  onnx::NodeProto* Node(const std::string& op, const std::string& name, std::vector<std::string> inputs,
                        const std::string& output) {
    auto* n = graph_->add_node();
    n->set_op_type(op);
    n->set_name(name);
    for (auto& i : inputs) n->add_input(i);
    n->add_output(output);
    return n;
  }

  // Conv 3x3 pad 1 with He-initialised weights (times `scale`) and a small bias; its
  // output is `out`, or "<name>.out".
  std::string Conv(const std::string& name, const std::string& x, int64_t cin, int64_t cout, float scale = 1.f,
                   std::string out = "") {
    if (out.empty()) out = name + ".out";
    std::normal_distribution<float> w_dist(0.f, std::sqrt(2.f / static_cast<float>(cin * 9)));
    std::uniform_real_distribution<float> b_dist(-0.01f, 0.01f);
    std::vector<float> w(static_cast<size_t>(cout * cin * 9)), b(static_cast<size_t>(cout));
    for (float& v : w) v = scale * w_dist(rng_);
    for (float& v : b) v = b_dist(rng_);
    Init(name + ".weight", {cout, cin, 3, 3}, w);
    Init(name + ".bias", {cout}, b);
    auto* n = Node("Conv", name, {x, name + ".weight", name + ".bias"}, out);
    Ints(n, "kernel_shape", {3, 3});
    Ints(n, "pads", {1, 1, 1, 1});
    Ints(n, "strides", {1, 1});
    return out;
  }

  static void Ints(onnx::NodeProto* n, const std::string& name, const std::vector<int64_t>& v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t x : v) a->add_ints(x);
  }

  void Int64Init(const std::string& name, const std::vector<int64_t>& values) {
    auto* t = graph_->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    t->add_dims(static_cast<int64_t>(values.size()));
    for (int64_t v : values) t->add_int64_data(v);
  }

  // DepthToSpace (blocksize 2, CRD) of x [1, c, h, w].
  std::string DepthToSpace(const std::string& name, const std::string& x, int64_t c, int64_t h, int64_t w) {
    if (options_.depth_to_space_as_reshape) {
      Int64Init(name + ".split", {1, c / 4, 2, 2, h, w});
      Int64Init(name + ".merge", {1, c / 4, 2 * h, 2 * w});
      Node("Reshape", name + ".reshape1", {x, name + ".split"}, name + ".split.out");
      auto* t = Node("Transpose", name + ".transpose", {name + ".split.out"}, name + ".transpose.out");
      Ints(t, "perm", {0, 1, 4, 2, 5, 3});
      Node("Reshape", name + ".reshape2", {name + ".transpose.out", name + ".merge"}, name + ".out");
      return name + ".out";
    }
    auto* n = Node("DepthToSpace", name, {x}, name + ".out");
    auto* b = n->add_attribute();
    b->set_name("blocksize");
    b->set_type(onnx::AttributeProto::INT);
    b->set_i(2);
    auto* m = n->add_attribute();
    m->set_name("mode");
    m->set_type(onnx::AttributeProto::STRING);
    m->set_s("CRD");
    return name + ".out";
  }

  onnx::ModelProto Build() {
    const int64_t h = options_.height, w = options_.width;
    Info(graph_->add_input(), "x", {1, 3, h, w});
    Info(graph_->add_output(), "y", {1, 3, 4 * h, 4 * w});
    const std::string head = Conv("head", "x", 3, kFeatures);
    std::string r = head;
    for (int blk = 0; blk < kResidualBlocks; ++blk) {
      const std::string p = "body" + std::to_string(blk);
      std::string t = Conv(p + ".conv1", r, kFeatures, kFeatures);
      auto* act = Node("LeakyRelu", p + ".act", {t}, p + ".act.out");
      auto* alpha = act->add_attribute();
      alpha->set_name("alpha");
      alpha->set_type(onnx::AttributeProto::FLOAT);
      alpha->set_f(0.1f);
      t = Conv(p + ".conv2", p + ".act.out", kFeatures, kFeatures, 0.1f);
      Node("Add", p + ".add", {t, r}, p + ".add.out");
      r = p + ".add.out";
    }
    const std::string body = Conv("body_end", r, kFeatures, kFeatures);
    Node("Add", "skip", {body, head}, "skip.out");
    std::string u = Conv("up1.conv", "skip.out", kFeatures, 2 * kFeatures);
    u = DepthToSpace("up1.shuffle", u, 2 * kFeatures, h, w);
    u = Conv("up2.conv", u, kFeatures / 2, kFeatures);
    u = DepthToSpace("up2.shuffle", u, kFeatures, 2 * h, 2 * w);
    Conv("tail", u, kFeatures / 4, 3, 1.f, "y");
    return model_;
  }

 private:
  SrModelOptions options_;
  std::mt19937_64 rng_;
  onnx::ModelProto model_;
  onnx::GraphProto* graph_ = nullptr;
};

}  // namespace

StatusOr<std::vector<std::byte>> BuildSrModel(const SrModelOptions& options) {
  if (options.height < 1 || options.height > kMaxExtent || options.width < 1 || options.width > kMaxExtent) {
    return InvalidArgument("gen-sr: height and width must be in [1, " + std::to_string(kMaxExtent) + "], got " +
                           std::to_string(options.height) + "x" + std::to_string(options.width));
  }
  if (options.dtype != DType::kFloat32 && options.dtype != DType::kFloat16) {
    return InvalidArgument("gen-sr: dtype must be float32 or float16, got " + std::string(DTypeName(options.dtype)));
  }
  std::string bytes = Builder(options).Build().SerializeAsString();
  std::vector<std::byte> out(bytes.size());
  std::memcpy(out.data(), bytes.data(), bytes.size());
  return out;
}

uint64_t SrModelFlops(const SrModelOptions& options) {
  const uint64_t px = static_cast<uint64_t>(options.height) * static_cast<uint64_t>(options.width);
  const uint64_t f = kFeatures;
  // head, 2 blocks x 2 convs, body_end, up1 at H x W; up2 at 2H x 2W; tail at 4H x 4W.
  const uint64_t macs = 9 * px * (3 * f + 2 * 2 * f * f + f * f + f * 2 * f) + 9 * 4 * px * (f / 2 * f) +
                        9 * 16 * px * (f / 4 * 3);
  return 2 * macs;
}

Status WriteSrModel(const SrModelOptions& options, const std::string& path) {
  REMEX_ASSIGN_OR_RETURN(std::vector<std::byte> bytes, BuildSrModel(options));
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) return DataLoss("gen-sr: cannot write '" + path + "'");
  return OkStatus();
}

}  // namespace remex::sr
