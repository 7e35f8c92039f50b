// Random inputs of random dtypes, ranks and values for every op: shape functions and
// kernels must answer with a Status, never crash or read out of bounds (run under
// sanitizers to get the full value of this test).

#include <gtest/gtest.h>

#include <random>

#include "kernels/kernels.h"
#include "kernels/test_util.h"

namespace remex::kernels {
namespace robustness_test {

using testing::Attrs;
using testing::HostTensor;
using testing::OpRunner;

constexpr DType kDTypes[] = {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kInt8,
                             DType::kUint8,   DType::kInt32,   DType::kInt64,   DType::kBool};

HostTensor RandomTensor(std::mt19937& rng, bool index_like) {
  std::uniform_int_distribution<int> pick(0, 99);
  DType dt = kDTypes[pick(rng) % std::size(kDTypes)];
  if (index_like && pick(rng) < 70) dt = pick(rng) < 50 ? DType::kInt64 : DType::kInt32;
  const int rank = index_like ? (pick(rng) < 85 ? 1 : pick(rng) % 3) : pick(rng) % 6;
  Shape shape(rank);
  for (int64_t& d : shape) d = pick(rng) < 5 ? 0 : 1 + pick(rng) % 5;
  HostTensor t = HostTensor::Zeros(dt, shape);
  for (uint8_t& b : t.bytes) b = static_cast<uint8_t>(pick(rng));
  if (dt == DType::kBool) {
    for (uint8_t& b : t.bytes) b &= 1;
  }
  if (index_like && (dt == DType::kInt64 || dt == DType::kInt32)) {
    // Mix of small, negative and extreme values.
    const size_t n = t.bytes.size() / DTypeSize(dt);
    for (size_t i = 0; i < n; ++i) {
      int64_t v;
      const int r = pick(rng);
      if (r < 70) {
        v = pick(rng) % 9 - 4;
      } else if (r < 80) {
        v = INT64_MAX;
      } else if (r < 90) {
        v = INT64_MIN;
      } else {
        v = static_cast<int64_t>(rng()) << 32 | rng();
      }
      if (dt == DType::kInt64) {
        std::memcpy(t.bytes.data() + i * 8, &v, 8);
      } else {
        int32_t v32 = static_cast<int32_t>(v);
        std::memcpy(t.bytes.data() + i * 4, &v32, 4);
      }
    }
  }
  return t;
}

std::vector<Attributes> AttributeChoices(std::string_view op) {
  std::vector<Attributes> a = {Attributes{}};
  if (op == "Conv" || op == "FusedConv") {
    if (op == "FusedConv") {
      a.push_back(Attrs({{"activation", std::string("LeakyRelu")}, {"activation_params", std::vector<float>{0.2f}}}));
      a.push_back(Attrs({{"activation", std::string("HardSigmoid")}, {"activation_params", std::vector<float>{0.2f, 0.5f}},
                         {"layout", std::string("NHWC")}}));
    }
    a.push_back(Attrs({{"group", int64_t{2}}, {"pads", std::vector<int64_t>{1, 1, 1, 1}}}));
    a.push_back(
        Attrs({{"auto_pad", std::string("SAME_UPPER")}, {"strides", std::vector<int64_t>{2, 2}}}));
    a.push_back(
        Attrs({{"dilations", std::vector<int64_t>{2}}, {"strides", std::vector<int64_t>{3}}}));
  } else if (op == "FusedMatMul") {
    a.push_back(Attrs({{"activation", std::string("Tanh")}}));
    a.push_back(Attrs({{"activation", std::string("Clip")}, {"activation_params", std::vector<float>{-1.f, 1.f}}}));
  } else if (op == "MaxPool") {
    a.push_back(Attrs({{"kernel_shape", std::vector<int64_t>{2, 2}}}));
    a.push_back(Attrs({{"kernel_shape", std::vector<int64_t>{3}},
                       {"ceil_mode", int64_t{1}},
                       {"strides", std::vector<int64_t>{2}},
                       {"pads", std::vector<int64_t>{1, 2}}}));
    a.push_back(Attrs({{"kernel_shape", std::vector<int64_t>{2, 1, 2}},
                       {"auto_pad", std::string("SAME_LOWER")},
                       {"storage_order", int64_t{1}}}));
  } else if (op == "MaxUnpool") {
    a.push_back(Attrs({{"kernel_shape", std::vector<int64_t>{2, 2}}, {"strides", std::vector<int64_t>{2, 2}}}));
    a.push_back(Attrs({{"kernel_shape", std::vector<int64_t>{3}},
                       {"strides", std::vector<int64_t>{2}},
                       {"pads", std::vector<int64_t>{1, 0}}}));
  } else if (op == "RoiAlign") {
    a.push_back(Attrs({{"output_height", int64_t{2}}, {"sampling_ratio", int64_t{2}}, {"mode", std::string("max")}}));
  } else if (op == "GridSample") {
    a.push_back(Attrs({{"mode", std::string("bicubic")}, {"padding_mode", std::string("reflection")},
                       {"align_corners", int64_t{1}}}));
    a.push_back(Attrs({{"mode", std::string("nearest")}, {"padding_mode", std::string("border")}}));
  } else if (op == "TfIdfVectorizer") {
    // Unigrams -4, 0, 4; bigrams (0, 0), (-4, INT64_MAX).
    a.push_back(Attrs({{"mode", std::string("TFIDF")},
                       {"min_gram_length", int64_t{1}},
                       {"max_gram_length", int64_t{2}},
                       {"max_skip_count", int64_t{3}},
                       {"ngram_counts", std::vector<int64_t>{0, 3}},
                       {"ngram_indexes", std::vector<int64_t>{0, 1, 2, 3, 4}},
                       {"pool_int64s", std::vector<int64_t>{-4, 0, 4, 0, 0, -4, INT64_MAX}},
                       {"weights", std::vector<float>{1, 2, 3, 4, 5}}}));
  } else if (op == "NonMaxSuppression") {
    a.push_back(Attrs({{"center_point_box", int64_t{1}}}));
  } else if (op == "Concat" || op == "Softmax") {
    a.push_back(Attrs({{"axis", int64_t{0}}}));
    a.push_back(Attrs({{"axis", int64_t{-1}}}));
    a.push_back(Attrs({{"axis", int64_t{1}}}));
  } else if (op == "Cast") {
    for (int64_t to : {1, 2, 3, 6, 7, 9, 10, 11, 13, 16}) a.push_back(Attrs({{"to", to}}));
  } else if (op == "Reshape") {
    a.push_back(Attrs({{"allowzero", int64_t{1}}}));
  } else if (op == "FusedElementwise") {
    // Sigmoid(x0 + x1); HardSigmoid(x0 * slot 1, slot 1, slot 1) (slot 1: an input or the
    // immediate, depending on the input count); an operand past the slots of 1 input.
    a.push_back(Attrs({{"program", std::vector<int64_t>{0, 0, 1, -1, 17, 2, -1, -1}}}));
    a.push_back(Attrs({{"program", std::vector<int64_t>{2, 0, 1, -1, 33, 2, 1, 1}},
                       {"immediates", std::vector<float>{0.5f}}}));
    a.push_back(Attrs({{"program", std::vector<int64_t>{34, 0, 1, 2}}, {"immediates", std::vector<float>{-1.0f}}}));
  } else if (op == "Shape") {
    a.push_back(Attrs({{"start", int64_t{-2}}, {"end", int64_t{INT64_MAX}}}));
  } else if (op == "BitShift") {
    a.push_back(Attrs({{"direction", std::string("LEFT")}}));
    a.push_back(Attrs({{"direction", std::string("RIGHT")}}));
  } else if (op == "GatherND") {
    a.push_back(Attrs({{"batch_dims", int64_t{1}}}));
  } else if (op == "ScatterND") {
    a.push_back(Attrs({{"reduction", std::string("add")}}));
    a.push_back(Attrs({{"reduction", std::string("mul")}}));
  } else if (op == "Compress") {
    a.push_back(Attrs({{"axis", int64_t{0}}}));
    a.push_back(Attrs({{"axis", int64_t{-1}}}));
  }
  return a;
}

TEST(RobustnessTest, RandomInputsNeverCrash) {
  OpRunner r;
  std::mt19937 rng(1234);
  std::uniform_int_distribution<int> pick(0, 99);
  int ran = 0;
  // Every entry of every op (Softmax-1 and Softmax-13, ...).
  std::vector<const OpDef*> entries;
  for (const std::string& name : r.registry().OpNames()) {
    for (const OpDef* def : r.registry().OpVersions(name)) entries.push_back(def);
  }
  for (const OpDef* def : entries) {
    const std::string& op_name = def->name;
    const std::string op = op_name + "-" + std::to_string(def->since_version);
    const auto* factory = r.registry().FindKernel(op_name, def->since_version, DeviceKind::kCpu);
    ASSERT_NE(factory, nullptr) << op;
    const std::vector<Attributes> attr_choices = AttributeChoices(op_name);
    for (int iter = 0; iter < 1500; ++iter) {
      const Attributes& attrs = attr_choices[pick(rng) % attr_choices.size()];
      // Variadic ops: up to 4 inputs past their minimum (the optimizers take at least 5).
      const int max_in = def->max_inputs < 0 ? def->min_inputs + 4 : def->max_inputs;
      int n = def->min_inputs + pick(rng) % (max_in - def->min_inputs + 1);
      if (pick(rng) < 5) n = pick(rng) % 6;  // Sometimes a wrong count.
      std::vector<HostTensor> in;
      // Inputs tend to share one shape/dtype so that some combinations are valid.
      HostTensor first = RandomTensor(rng, false);
      for (int i = 0; i < n; ++i) {
        const bool index_like = def->DepOf(i) == ShapeDep::kData;
        if (i >= def->min_inputs && pick(rng) < 20) {
          in.push_back(HostTensor::Absent());
        } else if (!index_like && i > 0 && pick(rng) < 50) {
          in.push_back(first);
        } else if (i == 0) {
          in.push_back(first);
        } else {
          in.push_back(RandomTensor(rng, index_like));
        }
      }
      auto infos = r.Infer(op, attrs, in);
      auto kernel = (*factory)(attrs);
      if (!kernel.ok()) continue;
      if (infos.ok()) {
        // Outputs sized by random index values (Expand, Tile, Pad, Range, ...) may be
        // huge; the shape function has accepted them, which is what is under test.
        uint64_t bytes = 0;
        for (const auto& info : *infos) {
          auto n = NumElements(info.shape);
          bytes += n ? static_cast<uint64_t>(*n) * DTypeSize(info.dtype) : 0;
        }
        if (bytes > (64u << 20)) continue;
        ++ran;
        size_t n_out = infos->size();
        if (n_out > 1 && pick(rng) < 50) n_out = 1;
        auto out = OpRunner::RunKernel(**kernel, *infos, in, n_out);
        // Integer division by zero and out-of-range gather indices are the
        // data-dependent kernel errors.
        const bool data_error =
            !out.ok() && (out.status().message().find("division by zero") != std::string::npos ||
                          out.status().message().find("out of range") != std::string::npos);
        EXPECT_TRUE(out.ok() || data_error) << op << ": " << out.status().ToString();
      } else {
        // Whatever outputs we pass, the kernel must refuse these inputs.
        std::vector<TensorInfo> fake = {{DType::kFloat32, {1}}};
        auto out = OpRunner::RunKernel(**kernel, fake, in, std::nullopt);
        EXPECT_FALSE(out.ok()) << op;
      }
    }
  }
  EXPECT_GT(ran, 1000);
}

}  // namespace robustness_test
}  // namespace remex::kernels
