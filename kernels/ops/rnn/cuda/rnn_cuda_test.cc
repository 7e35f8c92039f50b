// Differential tests of the CUDA LSTM, GRU and RNN kernels (kernels/ops/rnn/cuda/rnn.cc)
// against the CPU kernels (kernels/ops/rnn/rnn.cc) on random small odd sizes: every
// direction, layout 0 and 1, with and without B, sequence_lens (int32 and int64,
// shorter than seq_length), initial_h, initial_c and P, one to three outputs, default
// and other activations with alpha / beta, clip, linear_before_reset, input_forget,
// float32 and float16. The sums run in another order on the GPU, so float outputs
// match within tolerances (below), not bit for bit.
//
// Tests that run kernels skip themselves when no CUDA GPU is visible; registration,
// the attribute refusals and the checks made before any CUDA call run everywhere.

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/cuda_test_util.h"
#include "kernels/float16.h"
#include "kernels/float_test_util.h"
#include "kernels/kernels.h"
#include "kernels/test_util.h"

namespace remex::kernels {
namespace {

using testing::Attrs;
using testing::CreateCudaKernel;
using testing::CudaRegistry;
using testing::HostTensor;
using testing::UnreadDevicePointer;

HostTensor RandomFloats(DType dtype, Shape shape, std::mt19937& rng, float scale) {
  HostTensor t = HostTensor::Zeros(dtype, std::move(shape));
  std::uniform_real_distribution<float> dist(-scale, scale);
  const size_t es = DTypeSize(dtype);
  for (size_t i = 0; i * es < t.bytes.size(); ++i) {
    const float v = dist(rng);
    if (dtype == DType::kFloat32) {
      std::memcpy(t.bytes.data() + i * es, &v, 4);
    } else {
      const Half h = FloatToHalf(v);
      std::memcpy(t.bytes.data() + i * es, &h.bits, 2);
    }
  }
  return t;
}

int64_t Uniform(std::mt19937& rng, int64_t lo, int64_t hi) {
  return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
}

// One node: op, attributes and which optional inputs / outputs it uses.
struct RnnCase {
  std::string op;
  DType dtype = DType::kFloat32;
  int64_t seq = 3, batch = 2, input = 3, hidden = 3;
  std::string direction = "forward";
  int64_t layout = 0;
  bool b = false, lens = false, lens64 = false, init_h = false, init_c = false, p = false;
  size_t outputs = 1;
  std::vector<std::string> acts;  // Empty: the defaults.
  std::vector<float> alphas, betas;
  float clip = 0;  // 0: no clip attribute.
  int64_t linear_before_reset = -1, input_forget = -1;  // -1: attribute absent.

  int gates() const { return op == "LSTM" ? 4 : op == "GRU" ? 3 : 1; }
  int64_t dirs() const { return direction == "bidirectional" ? 2 : 1; }
  std::string Describe() const {
    std::string s = op + " " + std::string(DTypeName(dtype)) + " seq=" + std::to_string(seq) +
                    " batch=" + std::to_string(batch) + " input=" + std::to_string(input) +
                    " hidden=" + std::to_string(hidden) + " " + direction + " layout=" + std::to_string(layout) +
                    " B=" + std::to_string(b) + " lens=" + std::to_string(lens) + (lens64 ? "(i64)" : "") +
                    " h0=" + std::to_string(init_h) + " c0=" + std::to_string(init_c) + " P=" + std::to_string(p) +
                    " outputs=" + std::to_string(outputs) + " clip=" + std::to_string(clip) +
                    " lbr=" + std::to_string(linear_before_reset) + " input_forget=" + std::to_string(input_forget) +
                    " acts=";
    for (const std::string& a : acts) s += a + ",";
    return s;
  }

  Attributes MakeAttrs() const {
    Attributes a;
    a.Set("hidden_size", hidden);
    a.Set("direction", direction);
    if (layout != 0) a.Set("layout", layout);
    if (!acts.empty()) a.Set("activations", acts);
    if (!alphas.empty()) a.Set("activation_alpha", alphas);
    if (!betas.empty()) a.Set("activation_beta", betas);
    if (clip > 0) a.Set("clip", clip);
    if (linear_before_reset >= 0) a.Set("linear_before_reset", linear_before_reset);
    if (input_forget >= 0) a.Set("input_forget", input_forget);
    return a;
  }

  std::vector<HostTensor> MakeInputs(std::mt19937& rng) const {
    const int64_t d = dirs(), gh = gates() * hidden;
    std::vector<HostTensor> in;
    in.push_back(RandomFloats(dtype, layout == 0 ? Shape{seq, batch, input} : Shape{batch, seq, input}, rng, 1.0f));
    in.push_back(RandomFloats(dtype, {d, gh, input}, rng, 0.6f));
    in.push_back(RandomFloats(dtype, {d, gh, hidden}, rng, 0.6f));
    in.push_back(b ? RandomFloats(dtype, {d, 2 * gh}, rng, 0.5f) : HostTensor::Absent());
    if (lens) {
      std::vector<int64_t> v(static_cast<size_t>(batch));
      for (int64_t& x : v) x = Uniform(rng, 0, seq);
      if (batch > 0) v[0] = std::max<int64_t>(seq - 1, 0);  // At least one shorter sequence.
      if (lens64) {
        in.push_back(HostTensor::Of<int64_t>({batch}, v));
      } else {
        in.push_back(HostTensor::Of<int32_t>({batch}, std::vector<int32_t>(v.begin(), v.end())));
      }
    } else {
      in.push_back(HostTensor::Absent());
    }
    const Shape state = layout == 0 ? Shape{d, batch, hidden} : Shape{batch, d, hidden};
    in.push_back(init_h ? RandomFloats(dtype, state, rng, 0.8f) : HostTensor::Absent());
    if (op == "LSTM") {
      in.push_back(init_c ? RandomFloats(dtype, state, rng, 0.8f) : HostTensor::Absent());
      in.push_back(p ? RandomFloats(dtype, {d, 3 * hidden}, rng, 0.5f) : HostTensor::Absent());
    }
    while (!in.empty() && in.back().dtype == DType::kUndefined) in.pop_back();
    return in;
  }
};

// Activation lists other than the defaults (one direction's), with their alphas and
// betas where they take them.
struct ActSet {
  std::vector<std::string> names;
  std::vector<float> alphas, betas;
};

std::vector<ActSet> ActSets(const std::string& op) {
  if (op == "RNN") {
    return {{{"Relu"}, {}, {}},
            {{"LeakyRelu"}, {0.2f}, {}},
            {{"ScaledTanh"}, {0.8f}, {1.3f}},
            {{"Softsign"}, {}, {}},
            {{"Elu"}, {0.7f}, {}},
            {{"Softplus"}, {}, {}},
            {{"Affine"}, {0.5f}, {0.1f}},
            {{"ThresholdedRelu"}, {0.1f}, {}},
            {{"HardSigmoid"}, {}, {}},
            {{"sigmoid"}, {}, {}}};
  }
  if (op == "GRU") {
    return {{{"HardSigmoid", "Softsign"}, {0.3f}, {0.45f}},
            {{"Sigmoid", "Relu"}, {}, {}},
            {{"sigmoid", "ScaledTanh"}, {0.9f}, {1.1f}},
            {{"Sigmoid", "LeakyRelu"}, {0.05f}, {}}};
  }
  return {{{"HardSigmoid", "Tanh", "Softsign"}, {}, {}},
          {{"Sigmoid", "Elu", "LeakyRelu"}, {0.9f, 0.1f}, {}},
          {{"Sigmoid", "ScaledTanh", "Affine"}, {0.7f, 0.8f}, {1.2f, 0.05f}},
          {{"sigmoid", "Softplus", "tanh"}, {}, {}}};
}

RnnCase RandomCase(const std::string& op, DType dtype, std::mt19937& rng) {
  RnnCase c;
  c.op = op;
  c.dtype = dtype;
  c.seq = Uniform(rng, 1, 7);
  c.batch = Uniform(rng, 1, 5);
  c.input = Uniform(rng, 1, 9);
  c.hidden = Uniform(rng, 1, 9);
  static const char* kDirections[] = {"forward", "reverse", "bidirectional"};
  c.direction = kDirections[Uniform(rng, 0, 2)];
  c.layout = Uniform(rng, 0, 1);
  c.b = Uniform(rng, 0, 1);
  c.lens = Uniform(rng, 0, 1);
  c.lens64 = Uniform(rng, 0, 1);
  c.init_h = Uniform(rng, 0, 1);
  if (op == "LSTM") {
    c.init_c = Uniform(rng, 0, 1);
    c.p = Uniform(rng, 0, 1);
    c.input_forget = Uniform(rng, -1, 1);
  }
  if (op == "GRU") c.linear_before_reset = Uniform(rng, -1, 1);
  c.outputs = static_cast<size_t>(Uniform(rng, 1, op == "LSTM" ? 3 : 2));
  if (Uniform(rng, 0, 2) == 0) c.clip = 0.5f + static_cast<float>(Uniform(rng, 0, 10)) * 0.1f;
  if (Uniform(rng, 0, 1) == 1) {
    const std::vector<ActSet> sets = ActSets(op);
    const ActSet& first = sets[static_cast<size_t>(Uniform(rng, 0, static_cast<int64_t>(sets.size()) - 1))];
    c.acts = first.names;
    c.alphas = first.alphas;
    c.betas = first.betas;
    // A bidirectional node may list the reverse direction's own activations.
    if (c.dirs() == 2 && Uniform(rng, 0, 1) == 1) {
      const ActSet& second = sets[static_cast<size_t>(Uniform(rng, 0, static_cast<int64_t>(sets.size()) - 1))];
      c.acts.insert(c.acts.end(), second.names.begin(), second.names.end());
      c.alphas.insert(c.alphas.end(), second.alphas.begin(), second.alphas.end());
      c.betas.insert(c.betas.end(), second.betas.begin(), second.betas.end());
    }
  }
  return c;
}

// |cuda - cpu| <= atol + rtol * |cpu|.
struct Tolerance {
  double atol, rtol;
};
Tolerance ToleranceFor(DType dtype) {
  // float32: the sums run in another order. float16: the same float32 results may
  // round to neighbouring halves.
  return dtype == DType::kFloat32 ? Tolerance{2e-5, 2e-4} : Tolerance{1e-3, 2e-3};
}

class RnnCudaTest : public testing::CudaStreamTest {
 protected:
  // Runs the case on the CPU and the GPU and compares every output.
  void Check(const RnnCase& c) {
    SCOPED_TRACE(c.Describe());
    std::vector<HostTensor> inputs = c.MakeInputs(rng_);
    auto out = testing::RunOnCpuAndCuda(*registry_, c.op, c.MakeAttrs(), inputs, c.outputs, stream_, 0xff);
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    const Tolerance tol = ToleranceFor(c.dtype);
    for (size_t k = 0; k < out->cpu.size(); ++k) {
      testing::ExpectAllClose(testing::FloatValues(out->cuda[k]), testing::FloatValues(out->cpu[k]), tol.rtol, tol.atol,
                              c.op + " output " + std::to_string(k) + " " + ShapeToString(out->cpu[k].shape));
      if (HasFatalFailure()) return;
    }
  }

  void CheckRandom(const std::string& op, int count) {
    for (DType dtype : {DType::kFloat32, DType::kFloat16}) {
      for (int i = 0; i < count; ++i) Check(RandomCase(op, dtype, rng_));
    }
  }

  std::mt19937 rng_{20240917};
};

// ---------------------------------------------------------------------------
// Without a GPU.

TEST(RnnCudaRegistration, RegistersEveryOp) {
  auto registry = CudaRegistry({});
  ASSERT_TRUE(registry);
  for (const char* op : {"LSTM", "GRU", "RNN"}) EXPECT_TRUE(registry->FindKernel(op, DeviceKind::kCuda)) << op;
}

TEST(RnnCudaRegistration, RejectsBadAttributesAtCreationAsTheCpuDoes) {
  auto registry = CudaRegistry({});
  ASSERT_TRUE(registry);
  using Strings = std::vector<std::string>;
  struct Case {
    const char* op;
    Attributes attrs;
    bool ok;
  };
  const Case cases[] = {
      {"RNN", Attrs({{"direction", std::string("sideways")}}), false},
      {"GRU", Attrs({{"layout", int64_t{2}}}), false},
      {"LSTM", Attrs({{"clip", 0.0f}}), false},
      {"LSTM", Attrs({{"clip", -1.0f}}), false},
      {"RNN", Attrs({{"hidden_size", int64_t{0}}}), false},
      {"RNN", Attrs({{"activations", Strings{"Gelu"}}}), false},
      {"GRU", Attrs({{"activations", Strings{"Sigmoid"}}}), false},
      {"LSTM", Attrs({{"direction", std::string("bidirectional")}, {"activations", Strings{"Sigmoid", "Tanh"}}}),
       false},
      {"LSTM", Attrs({{"output_sequence", int64_t{1}}}), false},
      {"GRU", Attrs({{"linear_before_reset", std::string("yes")}}), false},
      {"RNN", {}, true},
      {"GRU", Attrs({{"linear_before_reset", int64_t{1}}, {"layout", int64_t{1}}}), true},
      {"LSTM", Attrs({{"direction", std::string("bidirectional")},
                      {"activations", Strings{"Sigmoid", "Tanh", "Tanh"}},
                      {"input_forget", int64_t{1}},
                      {"clip", 2.0f}}),
       true},
      {"RNN", Attrs({{"activations", Strings{"LeakyRelu"}}, {"activation_alpha", std::vector<float>{0.3f}}}), true},
  };
  for (const Case& c : cases) {
    const Status cuda = (*registry->FindKernel(c.op, DeviceKind::kCuda))(c.attrs).status();
    const Status cpu = (*registry->FindKernel(c.op, DeviceKind::kCpu))(c.attrs).status();
    EXPECT_EQ(cuda.ok(), c.ok) << c.op << ": " << cuda.ToString();
    EXPECT_EQ(cuda.code(), cpu.code()) << c.op << ": cuda " << cuda.ToString() << ", cpu " << cpu.ToString();
    EXPECT_EQ(cuda.message(), cpu.message()) << c.op;
  }
}

TEST(RnnCudaRegistration, RejectsBadCallsBeforeLaunch) {
  auto registry = CudaRegistry({});
  ASSERT_TRUE(registry);
  auto create = [&](const char* op, const Attributes& attrs) { return CreateCudaKernel(*registry, op, attrs); };
  void* fake = UnreadDevicePointer();  // the checks fail before anything reads it

  // float64 is taken by the CPU kernel only.
  auto rnn = create("RNN", {});
  std::vector<TensorRef> ins = {{fake, DType::kFloat64, {2, 3, 4}}, {fake, DType::kFloat64, {1, 5, 4}},
                                {fake, DType::kFloat64, {1, 5, 5}}};
  std::vector<TensorRef> outs = {{fake, DType::kFloat64, {2, 1, 3, 5}}};
  Status st = rnn->Compute(ins, outs);
  EXPECT_EQ(st.code(), StatusCode::kUnimplemented) << st.ToString();
  EXPECT_NE(st.message().find("RNN on cuda"), std::string::npos) << st.ToString();

  // A W that does not match X, and hidden_size that does not match W.
  auto gru = create("GRU", Attrs({{"hidden_size", int64_t{4}}}));
  ins = {{fake, DType::kFloat32, {2, 3, 4}}, {fake, DType::kFloat32, {1, 15, 3}}, {fake, DType::kFloat32, {1, 15, 5}}};
  outs = {{fake, DType::kFloat32, {2, 1, 3, 5}}};
  EXPECT_EQ(gru->Compute(ins, outs).code(), StatusCode::kInvalidArgument);
  ins = {{fake, DType::kFloat32, {2, 3, 4}}, {fake, DType::kFloat32, {1, 15, 4}}, {fake, DType::kFloat32, {1, 15, 5}}};
  EXPECT_EQ(gru->Compute(ins, outs).code(), StatusCode::kInvalidArgument);

  // sequence_lens of a float dtype; a wrong Y shape.
  auto lstm = create("LSTM", {});
  ins = {{fake, DType::kFloat16, {2, 3, 4}}, {fake, DType::kFloat16, {1, 8, 4}},
         {fake, DType::kFloat16, {1, 8, 2}}, {},
         {fake, DType::kFloat32, {3}}};
  outs = {{fake, DType::kFloat16, {2, 1, 3, 2}}};
  EXPECT_EQ(lstm->Compute(ins, outs).code(), StatusCode::kInvalidArgument);
  ins.resize(3);
  outs = {{fake, DType::kFloat16, {2, 1, 3, 3}}};
  EXPECT_EQ(lstm->Compute(ins, outs).code(), StatusCode::kInvalidArgument);
}

TEST(RnnCudaRegistration, EmptyOutputsNeedNoLaunch) {
  auto registry = CudaRegistry({});
  ASSERT_TRUE(registry);
  auto k = (*registry->FindKernel("LSTM", DeviceKind::kCuda))({});
  ASSERT_TRUE(k.ok()) << k.status().ToString();
  void* fake = UnreadDevicePointer();
  // batch 0: every output is empty.
  std::vector<TensorRef> ins = {{nullptr, DType::kFloat32, {3, 0, 4}}, {fake, DType::kFloat32, {1, 8, 4}},
                                {fake, DType::kFloat32, {1, 8, 2}}};
  std::vector<TensorRef> outs = {{nullptr, DType::kFloat32, {3, 1, 0, 2}}, {nullptr, DType::kFloat32, {1, 0, 2}},
                                 {nullptr, DType::kFloat32, {1, 0, 2}}};
  const Status st = (*k)->Compute(ins, outs);
  EXPECT_TRUE(st.ok()) << st.ToString();
}

// ---------------------------------------------------------------------------
// On a GPU.

TEST_F(RnnCudaTest, RnnMatchesCpu) { CheckRandom("RNN", 40); }
TEST_F(RnnCudaTest, GruMatchesCpu) { CheckRandom("GRU", 40); }
TEST_F(RnnCudaTest, LstmMatchesCpu) { CheckRandom("LSTM", 40); }

// Every optional input and output, each direction and layout, for each op.
TEST_F(RnnCudaTest, EveryOptionalInputEveryDirectionAndLayout) {
  for (const char* op : {"RNN", "GRU", "LSTM"}) {
    for (const char* direction : {"forward", "reverse", "bidirectional"}) {
      for (int64_t layout : {0, 1}) {
        RnnCase c;
        c.op = op;
        c.seq = 5;
        c.batch = 3;
        c.input = 7;
        c.hidden = 5;
        c.direction = direction;
        c.layout = layout;
        c.b = c.lens = c.init_h = true;
        c.init_c = c.p = std::string(op) == "LSTM";
        c.outputs = std::string(op) == "LSTM" ? 3 : 2;
        Check(c);
        c.b = c.lens = c.init_h = c.init_c = c.p = false;
        Check(c);
      }
    }
  }
}

// GRU's linear_before_reset and LSTM's input_forget with clip, both directions.
TEST_F(RnnCudaTest, LinearBeforeResetInputForgetAndClip) {
  for (DType dtype : {DType::kFloat32, DType::kFloat16}) {
    for (int64_t flag : {0, 1}) {
      RnnCase gru;
      gru.op = "GRU";
      gru.dtype = dtype;
      gru.seq = 6;
      gru.batch = 3;
      gru.input = 5;
      gru.hidden = 7;
      gru.direction = "bidirectional";
      gru.b = gru.init_h = gru.lens = true;
      gru.outputs = 2;
      gru.linear_before_reset = flag;
      gru.clip = 0.7f;
      Check(gru);
      RnnCase lstm = gru;
      lstm.op = "LSTM";
      lstm.linear_before_reset = -1;
      lstm.input_forget = flag;
      lstm.init_c = lstm.p = true;
      lstm.outputs = 3;
      Check(lstm);
    }
  }
}

// sequence_lens of 0 for an entry, seq_length 1, hidden and input sizes of 1.
TEST_F(RnnCudaTest, EdgeSizes) {
  for (const char* op : {"RNN", "GRU", "LSTM"}) {
    RnnCase c;
    c.op = op;
    c.seq = 1;
    c.batch = 1;
    c.input = 1;
    c.hidden = 1;
    c.direction = "bidirectional";
    c.outputs = std::string(op) == "LSTM" ? 3 : 2;
    Check(c);
    c.seq = 4;
    c.batch = 5;
    c.lens = true;
    c.lens64 = true;
    c.init_h = true;
    Check(c);
  }
}

}  // namespace
}  // namespace remex::kernels
