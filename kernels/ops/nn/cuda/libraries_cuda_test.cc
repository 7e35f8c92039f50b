// The library-backed CUDA kernels (Conv, FusedConv, ConvTranspose on cuDNN; MatMul,
// FusedMatMul, Gemm on cuBLASLt) against the CPU kernels on random shapes and attributes, in float32 and
// float16 (the CPU reference then runs in float32 on the float16-rounded inputs). GPU
// tests skip themselves without a GPU; the factories' attribute checks and the dtype
// checks, which run before any CUDA call, are tested everywhere.

#include <gtest/gtest.h>

#include <cmath>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_test_util.h"
#include "kernels/epilogue_test_util.h"

namespace remex::kernels {
namespace {

using testing::Attrs;
using testing::ConvertFloat;
using testing::CudaRunner;
using testing::FloatValues;
using testing::HostTensor;
using testing::OpRunner;

int Pick(std::mt19937& rng, int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); }

// float32 values in [-1, 1], multiples of 1/8 (exact in float16).
HostTensor RandomTensor(std::mt19937& rng, Shape shape) {
  std::vector<float> v(static_cast<size_t>(*NumElements(shape)));
  for (float& x : v) x = static_cast<float>(Pick(rng, -8, 8)) / 8.0f;
  return HostTensor::Of<float>(std::move(shape), v);
}

// Runs `op` on the CPU in float32 and on the GPU in `dtype` (inputs converted), and
// compares. float16 tolerances scale with `terms`, the products summed per output.
void CompareWithCpu(const std::string& op, const Attributes& attrs, const std::vector<HostTensor>& inputs32,
                    DType dtype, int64_t terms, const std::string& what) {
  OpRunner cpu;
  CudaRunner gpu;
  std::vector<HostTensor> in;
  for (const HostTensor& t : inputs32) in.push_back(t.dtype == DType::kUndefined ? t : ConvertFloat(t, dtype));
  auto want = cpu.Run(op, attrs, inputs32);
  ASSERT_TRUE(want.ok()) << what << ": " << want.status().ToString();
  const TensorInfo info{dtype, (*want)[0].shape};
  auto got = gpu.RunWithOutputs(op, attrs, in, {info});
  ASSERT_TRUE(got.ok()) << what << ": " << got.status().ToString();
  const double scale = std::sqrt(static_cast<double>(std::max<int64_t>(terms, 1)));
  const double tol = dtype == DType::kFloat16 ? 2e-3 * scale + 1e-3 : 1e-5 * scale + 1e-6;
  testing::ExpectAllClose(FloatValues((*got)[0]), FloatValues((*want)[0]), dtype == DType::kFloat16 ? 2e-3 : 1e-5,
                          tol, what);
}

std::string Join(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s + "]";
}

// ---------------------------------------------------------------------------
// Without a GPU.

TEST(LibraryCudaKernels, FactoriesCheckAttributes) {
  CudaRunner gpu;
  const KernelRegistry& r = gpu.registry();
  for (const char* op : {"MatMul", "FusedMatMul", "Gemm", "Conv", "FusedConv", "ConvTranspose"}) {
    ASSERT_NE(r.FindKernel(op, DeviceKind::kCuda), nullptr) << op;
  }
  EXPECT_EQ((*r.FindKernel("Gemm", DeviceKind::kCuda))(Attrs({{"transA", int64_t{2}}})).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ((*r.FindKernel("Conv", DeviceKind::kCuda))(Attrs({{"layout", std::string("NCWH")}})).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ((*r.FindKernel("ConvTranspose", DeviceKind::kCuda))(Attrs({{"group", int64_t{0}}})).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_TRUE((*r.FindKernel("Conv", DeviceKind::kCuda))(Attrs({{"layout", std::string("NHWC")}})).ok());
  // FusedConv's epilogue attributes (ParseConvEpilogue, as the CPU kernel).
  const KernelFactory& fused = *r.FindKernel("FusedConv", DeviceKind::kCuda);
  auto unknown = fused(Attrs({{"activation", std::string("Mish")}}));
  EXPECT_EQ(unknown.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(unknown.status().message().find("FusedConv"), std::string::npos) << unknown.status().ToString();
  EXPECT_EQ(fused(Attrs({{"activation", std::string("Clip")}, {"activation_params", std::vector<float>{1.0f}}}))
                .status()
                .code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(fused(Attrs({{"layout", std::string("NCWH")}})).status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(fused(Attrs({{"activation", std::string("HardSigmoid")},
                           {"activation_params", std::vector<float>{0.2f, 0.5f}},
                           {"layout", std::string("NHWC")}}))
                  .ok());
  // FusedMatMul's, likewise.
  const KernelFactory& fused_matmul = *r.FindKernel("FusedMatMul", DeviceKind::kCuda);
  auto mish = fused_matmul(Attrs({{"activation", std::string("Mish")}}));
  EXPECT_EQ(mish.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(mish.status().message().find("FusedMatMul"), std::string::npos) << mish.status().ToString();
  EXPECT_EQ(fused_matmul(Attrs({{"activation", std::string("Gelu")}, {"activation_params", std::vector<float>{1.0f}}}))
                .status()
                .code(),
            StatusCode::kInvalidArgument);
  EXPECT_TRUE(fused_matmul(Attrs({{"activation", std::string("Gelu")}})).ok());
  EXPECT_EQ(fused_matmul(Attrs({{"activation", std::string("Relu")}, {"activation_params", std::vector<float>{1.0f}}}))
                .status()
                .code(),
            StatusCode::kInvalidArgument);
  EXPECT_TRUE(fused_matmul(Attrs({{"activation", std::string("LeakyRelu")}, {"activation_params", std::vector<float>{0.1f}}}))
                  .ok());
}

TEST(LibraryCudaKernels, UnsupportedDtypesAreUnimplementedBeforeAnyCudaCall) {
  CudaRunner gpu;
  auto kernel = (*gpu.registry().FindKernel("MatMul", DeviceKind::kCuda))(Attributes{});
  ASSERT_TRUE(kernel.ok());
  int32_t dummy[6] = {};
  std::vector<TensorRef> in = {{dummy, DType::kInt32, {2, 3}}, {dummy, DType::kInt32, {3, 2}}};
  std::vector<TensorRef> out = {{dummy, DType::kInt32, {2, 2}}};
  Status s = (*kernel)->Compute(in, out);
  EXPECT_EQ(s.code(), StatusCode::kUnimplemented) << s.ToString();
  EXPECT_NE(s.message().find("MatMul on cuda"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("int32"), std::string::npos) << s.ToString();
}

// ---------------------------------------------------------------------------
// Conv.

struct ConvCase {
  Attributes attrs;
  std::vector<HostTensor> inputs;
  int64_t terms = 0;
  std::string what;
};

ConvCase RandomConv(std::mt19937& rng, bool transpose) {
  ConvCase c;
  const int nsp = Pick(rng, 1, transpose ? 2 : 3);
  const int64_t g = Pick(rng, 0, 3) == 0 ? Pick(rng, 2, 3) : 1;
  const int64_t n = Pick(rng, 1, 2);
  const int64_t cin = g * Pick(rng, 1, 3);
  const int64_t cout = g * Pick(rng, 1, 3);
  std::vector<int64_t> kernel, strides, dilations, pads(2 * nsp), spatial, out_pad;
  for (int i = 0; i < nsp; ++i) {
    kernel.push_back(Pick(rng, 1, 3));
    strides.push_back(Pick(rng, 1, 2));
    dilations.push_back(Pick(rng, 1, 2));
    spatial.push_back(Pick(rng, 5, nsp == 3 ? 7 : 11));
  }
  for (int i = 0; i < nsp; ++i) {
    const int64_t keff = (kernel[i] - 1) * dilations[i] + 1;
    pads[i] = Pick(rng, 0, static_cast<int>(keff - 1));
    pads[i + nsp] = Pick(rng, 0, static_cast<int>(keff - 1));
    out_pad.push_back(Pick(rng, 0, static_cast<int>(std::max(strides[i], dilations[i]) - 1)));
  }
  c.attrs.Set("group", g);
  c.attrs.Set("strides", strides);
  c.attrs.Set("dilations", dilations);
  c.attrs.Set("kernel_shape", kernel);
  const int pad_mode = Pick(rng, 0, 4);  // 0-1 explicit pads, 2 SAME_UPPER, 3 SAME_LOWER, 4 VALID.
  const char* kAuto[] = {"NOTSET", "NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"};
  if (pad_mode < 2) c.attrs.Set("pads", pads);
  if (pad_mode >= 2) c.attrs.Set("auto_pad", std::string(kAuto[pad_mode]));
  const bool channels_last = !transpose && Pick(rng, 0, 1) == 1;
  if (channels_last) c.attrs.Set("layout", std::string("NHWC"));
  if (transpose && Pick(rng, 0, 1) == 1) c.attrs.Set("output_padding", out_pad);
  Shape x = {n, cin};
  x.insert(x.end(), spatial.begin(), spatial.end());
  if (channels_last) {
    x = {n};
    x.insert(x.end(), spatial.begin(), spatial.end());
    x.push_back(cin);
  }
  Shape w = transpose ? Shape{cin, cout / g} : Shape{cout, cin / g};
  w.insert(w.end(), kernel.begin(), kernel.end());
  c.inputs = {RandomTensor(rng, x), RandomTensor(rng, w)};
  if (Pick(rng, 0, 1) == 1) c.inputs.push_back(RandomTensor(rng, {cout}));
  c.terms = cin / g;
  for (int64_t k : kernel) c.terms *= k;
  c.what = std::string(transpose ? "ConvTranspose" : "Conv") + " x " + ShapeToString(x) + " w " + ShapeToString(w) +
           " group " + std::to_string(g) + " strides " + Join(strides) + " dilations " + Join(dilations) +
           " pads " + (pad_mode < 2 ? Join(pads) : kAuto[pad_mode]) + (channels_last ? " NHWC" : "") +
           (c.attrs.Has("output_padding") ? " output_padding " + Join(out_pad) : "") +
           (c.inputs.size() > 2 ? " bias" : "");
  return c;
}

TEST(ConvCudaKernel, RandomConvolutionsMatchTheCpuKernel) {
  REMEX_SKIP_WITHOUT_GPU();
  std::mt19937 rng(11);
  for (int iter = 0; iter < 80; ++iter) {
    ConvCase c = RandomConv(rng, /*transpose=*/false);
    for (DType dtype : {DType::kFloat32, DType::kFloat16}) {
      CompareWithCpu("Conv", c.attrs, c.inputs, dtype, c.terms, c.what + " " + std::string(DTypeName(dtype)));
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
}

// The per-node tuning attributes (`remex tune`): out of range, refused when the kernel
// is created; in range, every value computes the CPU kernel's result, whether cuDNN
// (or the emulation, which runs two algorithms) supports that algorithm for the call
// or falls back to its heuristic's, and cuBLASLt's i-th result or, past those it
// returns, its first.
TEST(LibraryCudaKernels, TunableAttributesAreBoundedAndEveryValueComputes) {
  CudaRunner gpu;
  const KernelRegistry& r = gpu.registry();
  for (const char* op : {"Conv", "FusedConv"}) {
    const KernelFactory& f = *r.FindKernel(op, DeviceKind::kCuda);
    for (int64_t bad : {int64_t{-2}, kCudnnFwdAlgoCount}) {
      auto k = f(Attrs({{"cudnn_algo", bad}}));
      EXPECT_EQ(k.status().code(), StatusCode::kInvalidArgument) << op << " " << bad;
      EXPECT_NE(k.status().message().find("cudnn_algo must be in [-1, 7]"), std::string::npos) << k.status().ToString();
    }
    EXPECT_EQ(f(Attrs({{"cudnn_math", kCudnnMathTypeCount}})).status().code(), StatusCode::kInvalidArgument) << op;
    EXPECT_EQ(f(Attrs({{"cudnn_algo", std::string("fft")}})).status().code(), StatusCode::kInvalidArgument) << op;
    EXPECT_TRUE(f(Attrs({{"cudnn_algo", int64_t{6}}, {"cudnn_math", int64_t{3}}})).ok()) << op;
  }
  for (const char* op : {"MatMul", "FusedMatMul", "Gemm"}) {
    const KernelFactory& f = *r.FindKernel(op, DeviceKind::kCuda);
    auto k = f(Attrs({{"cublaslt_algo", kCublasLtAlgoCount}}));
    EXPECT_EQ(k.status().code(), StatusCode::kInvalidArgument) << op;
    EXPECT_NE(k.status().message().find("cublaslt_algo must be in [0, 7]"), std::string::npos) << k.status().ToString();
    EXPECT_TRUE(f(Attrs({{"cublaslt_algo", int64_t{7}}})).ok()) << op;
  }
  // The ranges are the OpDefs' (what the compiler checks node annotations against).
  for (const char* op : {"Conv", "FusedConv", "MatMul", "FusedMatMul", "Gemm"}) {
    ASSERT_NE(r.FindOp(op), nullptr) << op;
    EXPECT_FALSE(r.FindOp(op)->traits.tunable.empty()) << op;
  }

  REMEX_SKIP_WITHOUT_GPU();
  std::mt19937 rng(11);
  const std::vector<HostTensor> conv_in = {RandomTensor(rng, {1, 8, 9, 11}), RandomTensor(rng, {6, 8, 3, 3}),
                                           RandomTensor(rng, {6})};
  for (int64_t algo = -1; algo < kCudnnFwdAlgoCount; ++algo) {
    for (int64_t math : {int64_t{-1}, int64_t{3}}) {
      Attributes a = Attrs({{"pads", std::vector<int64_t>{1, 1, 1, 1}}, {"cudnn_algo", algo}, {"cudnn_math", math}});
      CompareWithCpu("Conv", a, conv_in, DType::kFloat32, 72,
                     "cudnn_algo " + std::to_string(algo) + " cudnn_math " + std::to_string(math));
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
  const std::vector<HostTensor> mm_in = {RandomTensor(rng, {5, 16}), RandomTensor(rng, {16, 7})};
  for (int64_t i = 0; i < kCublasLtAlgoCount; ++i) {
    CompareWithCpu("MatMul", Attrs({{"cublaslt_algo", i}}), mm_in, DType::kFloat32, 16,
                   "cublaslt_algo " + std::to_string(i));
    if (::testing::Test::HasFatalFailure()) return;
  }
}

TEST(ConvCudaKernel, PointwiseAndDepthwiseInBothLayouts) {
  REMEX_SKIP_WITHOUT_GPU();
  std::mt19937 rng(5);
  for (const char* layout : {"NCHW", "NHWC"}) {
    const bool nhwc = std::string(layout) == "NHWC";
    // Pointwise 1x1, 16 -> 24 channels, and depthwise 3x3 stride 2 over 16 channels.
    Attributes pw = Attrs({{"layout", std::string(layout)}});
    Attributes dw = Attrs({{"layout", std::string(layout)},
                           {"group", int64_t{16}},
                           {"strides", std::vector<int64_t>{2, 2}},
                           {"pads", std::vector<int64_t>{1, 1, 1, 1}}});
    const Shape x = nhwc ? Shape{2, 9, 13, 16} : Shape{2, 16, 9, 13};
    for (DType dtype : {DType::kFloat32, DType::kFloat16}) {
      CompareWithCpu("Conv", pw, {RandomTensor(rng, x), RandomTensor(rng, {24, 16, 1, 1}), RandomTensor(rng, {24})},
                     dtype, 16, std::string("pointwise ") + layout);
      CompareWithCpu("Conv", dw, {RandomTensor(rng, x), RandomTensor(rng, {16, 1, 3, 3})}, dtype, 9,
                     std::string("depthwise ") + layout);
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
}

// ---------------------------------------------------------------------------
// FusedConv: Y = activation(Conv(X, W, B) + Z).

using testing::AllEpilogueActivations;
using testing::EpilogueActivation;
using testing::WithEpilogue;

// FusedConv's inputs: X, W, then B and Z as asked (an absent B before Z; Z random, of
// the shape `conv_attrs`' Conv gives).
std::vector<HostTensor> FusedInputs(std::mt19937& rng, const Attributes& conv_attrs, HostTensor x, HostTensor w,
                                    bool with_b, bool with_z) {
  const int64_t m = w.shape[0];
  std::vector<HostTensor> in = {x, w};
  if (with_b || with_z) in.push_back(with_b ? RandomTensor(rng, {m}) : HostTensor());
  if (with_z) {
    auto y = OpRunner().Run("Conv", conv_attrs, {x, w});
    EXPECT_TRUE(y.ok()) << y.status().ToString();
    in.push_back(RandomTensor(rng, y.ok() ? (*y)[0].shape : Shape{}));
  }
  return in;
}

TEST(FusedConvCudaKernel, EveryActivationWithAndWithoutBAndZInBothLayouts) {
  REMEX_SKIP_WITHOUT_GPU();
  std::mt19937 rng(23);
  for (const char* layout : {"NCHW", "NHWC"}) {
    const bool nhwc = std::string(layout) == "NHWC";
    // Symmetric pads (cuDNN pads itself) and asymmetric ones (X copied into a padded buffer).
    for (const std::vector<int64_t>& pads : {std::vector<int64_t>{1, 1, 1, 1}, std::vector<int64_t>{0, 1, 2, 1}}) {
      const Attributes conv = Attrs({{"layout", std::string(layout)},
                                     {"pads", pads},
                                     {"strides", std::vector<int64_t>{1, 2}}});
      const Shape xs = nhwc ? Shape{2, 7, 9, 5} : Shape{2, 5, 7, 9};
      for (const EpilogueActivation& act : AllEpilogueActivations()) {
        for (int variant = 0; variant < 4; ++variant) {
          const bool with_b = variant & 1, with_z = variant & 2;
          Attributes attrs = conv;
          attrs = WithEpilogue(attrs, act);
          std::vector<HostTensor> in =
              FusedInputs(rng, conv, RandomTensor(rng, xs), RandomTensor(rng, {6, 5, 3, 3}), with_b, with_z);
          for (DType dtype : {DType::kFloat32, DType::kFloat16}) {
            const std::string what = std::string("FusedConv ") + layout + " pads " + Join(pads) + " activation '" +
                                     act.name + "'" + (with_b ? " B" : "") + (with_z ? " Z" : "") + " " +
                                     std::string(DTypeName(dtype));
            CompareWithCpu("FusedConv", attrs, in, dtype, 45, what);
            if (::testing::Test::HasFatalFailure()) return;
          }
        }
      }
    }
  }
}

TEST(FusedConvCudaKernel, RandomConvolutionsMatchTheCpuKernel) {
  REMEX_SKIP_WITHOUT_GPU();
  std::mt19937 rng(29);
  for (int iter = 0; iter < 48; ++iter) {
    ConvCase c = RandomConv(rng, /*transpose=*/false);
    const EpilogueActivation& act = AllEpilogueActivations()[iter % AllEpilogueActivations().size()];
    const bool with_z = Pick(rng, 0, 1) == 1;
    Attributes attrs = c.attrs;
    attrs = WithEpilogue(attrs, act);
    std::vector<HostTensor> in = FusedInputs(rng, c.attrs, c.inputs[0], c.inputs[1], c.inputs.size() > 2, with_z);
    if (c.inputs.size() > 2) in[2] = c.inputs[2];
    for (DType dtype : {DType::kFloat32, DType::kFloat16}) {
      CompareWithCpu("FusedConv", attrs, in, dtype, c.terms,
                     c.what + " activation '" + act.name + "'" + (with_z ? " Z " : " ") +
                         std::string(DTypeName(dtype)));
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
}

TEST(ConvTransposeCudaKernel, RandomTransposedConvolutionsMatchTheCpuKernel) {
  REMEX_SKIP_WITHOUT_GPU();
  std::mt19937 rng(12);
  for (int iter = 0; iter < 80; ++iter) {
    ConvCase c = RandomConv(rng, /*transpose=*/true);
    for (DType dtype : {DType::kFloat32, DType::kFloat16}) {
      CompareWithCpu("ConvTranspose", c.attrs, c.inputs, dtype, c.terms,
                     c.what + " " + std::string(DTypeName(dtype)));
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
}

TEST(ConvTransposeCudaKernel, OutputShapeAndNegativePads) {
  REMEX_SKIP_WITHOUT_GPU();
  std::mt19937 rng(13);
  const std::vector<HostTensor> in = {RandomTensor(rng, {1, 4, 5, 6}), RandomTensor(rng, {4, 3, 3, 3}),
                                      RandomTensor(rng, {3})};
  // output_shape larger than the reach (negative total padding), then smaller.
  for (std::vector<int64_t> shape : {std::vector<int64_t>{14, 15}, std::vector<int64_t>{9, 10}}) {
    Attributes a = Attrs({{"strides", std::vector<int64_t>{2, 2}}, {"output_shape", shape}});
    CompareWithCpu("ConvTranspose", a, in, DType::kFloat32, 12, "output_shape " + Join(shape));
  }
  // 2x2 stride-2 upsampling (the CPU's patch-scatter path).
  Attributes up = Attrs({{"strides", std::vector<int64_t>{2, 2}}});
  CompareWithCpu("ConvTranspose", up, {RandomTensor(rng, {2, 8, 7, 5}), RandomTensor(rng, {8, 4, 2, 2})},
                 DType::kFloat32, 8, "upsampling");
  CompareWithCpu("ConvTranspose", up, {RandomTensor(rng, {2, 8, 7, 5}), RandomTensor(rng, {8, 4, 2, 2})},
                 DType::kFloat16, 8, "upsampling float16");
}

// ---------------------------------------------------------------------------
// MatMul and Gemm.

TEST(MatMulCudaKernel, BroadcastBatchesAndVectorsMatchTheCpuKernel) {
  REMEX_SKIP_WITHOUT_GPU();
  std::mt19937 rng(21);
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{5, 7}, {7, 3}},
      {{7}, {7, 3}},                 // 1-D A.
      {{5, 7}, {7}},                 // 1-D B.
      {{7}, {7}},                    // Dot product.
      {{4, 5, 7}, {7, 3}},           // A's batch folds into M.
      {{5, 7}, {4, 7, 3}},           // B batched, A broadcast.
      {{2, 1, 5, 7}, {3, 7, 3}},     // Both broadcast: [2, 3] batch.
      {{2, 3, 5, 7}, {2, 3, 7, 3}},  // Full batches.
      {{2, 1, 3, 5, 7}, {1, 4, 1, 7, 3}},
      {{3, 1, 7}, {3, 7, 1}},
      {{6}, {2, 6, 4}},
      {{2, 33, 65}, {65, 17}},
      {{3, 0}, {0, 4}},  // K = 0: zeros.
  };
  for (const auto& [a, b] : cases) {
    const int64_t k = a.back();
    for (DType dtype : {DType::kFloat32, DType::kFloat16}) {
      CompareWithCpu("MatMul", Attributes{}, {RandomTensor(rng, a), RandomTensor(rng, b)}, dtype, k,
                     "MatMul " + ShapeToString(a) + " x " + ShapeToString(b) + " " + std::string(DTypeName(dtype)));
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
  // Random shapes.
  for (int iter = 0; iter < 40; ++iter) {
    const int64_t m = Pick(rng, 1, 40), k = Pick(rng, 1, 40), n = Pick(rng, 1, 40);
    Shape a = {m, k}, b = {k, n};
    const int ba = Pick(rng, 0, 2), bb = Pick(rng, 0, 2);
    const int64_t b1 = Pick(rng, 1, 3), b2 = Pick(rng, 1, 3);
    if (ba >= 1) a.insert(a.begin(), Pick(rng, 0, 1) ? b2 : 1);
    if (ba == 2) a.insert(a.begin(), Pick(rng, 0, 1) ? b1 : 1);
    if (bb >= 1) b.insert(b.begin(), Pick(rng, 0, 1) ? b2 : 1);
    if (bb == 2) b.insert(b.begin(), Pick(rng, 0, 1) ? b1 : 1);
    CompareWithCpu("MatMul", Attributes{}, {RandomTensor(rng, a), RandomTensor(rng, b)}, DType::kFloat32, k,
                   "MatMul " + ShapeToString(a) + " x " + ShapeToString(b));
    if (::testing::Test::HasFatalFailure()) return;
  }
}

TEST(GemmCudaKernel, TransposesAndEveryFormOfCMatchTheCpuKernel) {
  REMEX_SKIP_WITHOUT_GPU();
  std::mt19937 rng(22);
  const int64_t m = 13, k = 21, n = 9;
  const std::vector<Shape> c_shapes = {{}, {1}, {n}, {1, n}, {m, 1}, {m, n}, {1, 1}};
  for (int ta = 0; ta < 2; ++ta) {
    for (int tb = 0; tb < 2; ++tb) {
      const Shape a = ta ? Shape{k, m} : Shape{m, k};
      const Shape b = tb ? Shape{n, k} : Shape{k, n};
      for (float beta : {1.0f, 0.5f, 0.0f}) {
        for (int ci = -1; ci < static_cast<int>(c_shapes.size()); ++ci) {
          Attributes attrs = Attrs({{"transA", int64_t{ta}}, {"transB", int64_t{tb}}, {"alpha", 0.75f}, {"beta", beta}});
          std::vector<HostTensor> in = {RandomTensor(rng, a), RandomTensor(rng, b)};
          std::string what = "Gemm transA " + std::to_string(ta) + " transB " + std::to_string(tb) + " beta " +
                             std::to_string(beta) + " C ";
          if (ci >= 0) {
            in.push_back(RandomTensor(rng, c_shapes[ci]));
            what += ShapeToString(c_shapes[ci]);
          } else {
            what += "absent";
          }
          for (DType dtype : {DType::kFloat32, DType::kFloat16}) {
            CompareWithCpu("Gemm", attrs, in, dtype, k, what + " " + std::string(DTypeName(dtype)));
            if (::testing::Test::HasFatalFailure()) return;
          }
        }
      }
    }
  }
  // K = 0: Y = beta * C.
  CompareWithCpu("Gemm", Attrs({{"beta", 2.0f}}),
                 {RandomTensor(rng, {4, 0}), RandomTensor(rng, {0, 3}), RandomTensor(rng, {3})}, DType::kFloat32, 1,
                 "Gemm K = 0");
}

// FusedMatMul: Y = activation(MatMul(A, B) + bias), B 2-D. Every activation with and
// without the bias covers each path: cuBLASLt's BIAS, RELU_BIAS and RELU epilogues, and
// the default one followed by the epilogue kernel.
TEST(FusedMatMulCudaKernel, EveryActivationWithAndWithoutBiasMatchesTheCpuKernel) {
  REMEX_SKIP_WITHOUT_GPU();
  std::mt19937 rng(24);
  const std::vector<std::pair<Shape, int64_t>> cases = {
      {{5, 7}, 3},
      {{1, 1}, 1},
      {{4, 5, 7}, 3},         // A's batch folds into M.
      {{2, 3, 33, 65}, 17},   // Two batch dims, odd sizes.
      {{1, 40, 120}, 96},
      {{3, 0}, 4},            // K = 0: Y = activation(bias).
  };
  for (const auto& [a, n] : cases) {
    const int64_t k = a.back();
    for (const EpilogueActivation& act : AllEpilogueActivations()) {
      for (bool with_bias : {false, true}) {
        Attributes attrs;
        attrs = WithEpilogue(attrs, act);
        std::vector<HostTensor> in = {RandomTensor(rng, a), RandomTensor(rng, {k, n})};
        if (with_bias) in.push_back(RandomTensor(rng, {n}));
        for (DType dtype : {DType::kFloat32, DType::kFloat16}) {
          const std::string what = "FusedMatMul " + ShapeToString(a) + " x [" + std::to_string(k) + ", " +
                                   std::to_string(n) + "] activation '" + act.name + "'" +
                                   (with_bias ? " bias " : " ") + std::string(DTypeName(dtype));
          CompareWithCpu("FusedMatMul", attrs, in, dtype, k + 1, what);
          if (::testing::Test::HasFatalFailure()) return;
        }
      }
    }
  }
}

TEST(FusedMatMulCudaKernel, RandomShapesMatchTheCpuKernel) {
  REMEX_SKIP_WITHOUT_GPU();
  std::mt19937 rng(25);
  for (int iter = 0; iter < 40; ++iter) {
    const int64_t m = Pick(rng, 1, 40), k = Pick(rng, 1, 70), n = Pick(rng, 1, 40);
    Shape a = {m, k};
    for (int d = Pick(rng, 0, 2); d > 0; --d) a.insert(a.begin(), Pick(rng, 1, 3));
    const EpilogueActivation& act = AllEpilogueActivations()[iter % AllEpilogueActivations().size()];
    const bool with_bias = Pick(rng, 0, 1) == 1;
    Attributes attrs;
    attrs = WithEpilogue(attrs, act);
    std::vector<HostTensor> in = {RandomTensor(rng, a), RandomTensor(rng, {k, n})};
    if (with_bias) in.push_back(RandomTensor(rng, {n}));
    const DType dtype = iter % 2 ? DType::kFloat16 : DType::kFloat32;
    CompareWithCpu("FusedMatMul", attrs, in, dtype, k + 1,
                   "FusedMatMul " + ShapeToString(a) + " N " + std::to_string(n) + " activation '" + act.name + "'" +
                       (with_bias ? " bias " : " ") + std::string(DTypeName(dtype)));
    if (::testing::Test::HasFatalFailure()) return;
  }
}

}  // namespace
}  // namespace remex::kernels
