// FusedElementwise on CUDA. Without a GPU: the code generator's source for many
// programs compiles with NVRTC to PTX for compute_90 (nvrtcCompileProgram needs no
// GPU) and contains what each opcode needs; the broadcast plan; the PTX cache. With a
// GPU (skipped otherwise): the NVRTC kernel against the CPU kernel on random programs
// over random broadcasting shapes, in float32, float16 and float64. The kernel
// factory's checks of the signature attributes (`num_inputs`, `dtype`) run without a
// GPU; the compilation they trigger at kernel creation needs one. The source's
// semantics without a GPU: fused_host_test.cc runs it on the host against the CPU kernel.

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_test_util.h"
#include "kernels/ops/fused/cuda/fused_codegen.h"
#include "kernels/ops/fused/cuda/fused_nvrtc.h"
#include "kernels/ops/fused/fused.h"
#include "kernels/ops/fused/fused_test_util.h"

namespace remex::kernels {
namespace {

using cuda::CompileFusedKernelToPtx;
using cuda::FusedParams;
using cuda::GenerateFusedKernelSource;
using testing::HostTensor;

constexpr int64_t Op(FusedOpcode op) { return static_cast<int64_t>(op); }

constexpr DType kTypes[] = {DType::kFloat32, DType::kFloat16, DType::kFloat64};

std::string TypeName(DType t) { return std::string(DTypeName(t)); }

#if !defined(REMEX_CUDA_EMULATION)  // NVRTC (fused_nvrtc.cc) is in CUDA builds only.
// Generates and compiles for compute_90; checks the PTX has the kernel's entry.
void ExpectCompiles(const std::vector<int64_t>& program, const std::vector<float>& immediates, int64_t nin,
                    DType type) {
  auto source = GenerateFusedKernelSource(program, immediates, nin, type);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  auto ptx = CompileFusedKernelToPtx(*source, 90);
  ASSERT_TRUE(ptx.ok()) << ptx.status().ToString() << "\nsource:\n" << *source;
  EXPECT_NE(ptx->find(".entry remex_fused_elementwise"), std::string::npos) << *ptx;
  EXPECT_NE(ptx->find(".target sm_90"), std::string::npos);
}
#endif

// Every opcode once: inputs 0..2, immediates 3..5 (0.25, 2, -1.5), results from 6.
std::vector<int64_t> EveryOpcode() {
  const FusedOpcode unary[] = {FusedOpcode::kRelu, FusedOpcode::kSigmoid,    FusedOpcode::kTanh,
                               FusedOpcode::kExp,  FusedOpcode::kLog,        FusedOpcode::kSqrt,
                               FusedOpcode::kNeg,  FusedOpcode::kAbs,        FusedOpcode::kReciprocal,
                               FusedOpcode::kErf,  FusedOpcode::kHardSwish};
  const FusedOpcode binary[] = {FusedOpcode::kAdd, FusedOpcode::kSub, FusedOpcode::kMul, FusedOpcode::kDiv,
                                FusedOpcode::kPow, FusedOpcode::kMin, FusedOpcode::kMax};
  std::vector<int64_t> p;
  int64_t last = 0;
  int64_t slot = 6;
  auto emit = [&](std::initializer_list<int64_t> ins) {
    p.insert(p.end(), ins);
    last = slot++;
  };
  for (FusedOpcode op : binary) emit({Op(op), last, 1, -1});
  emit({Op(FusedOpcode::kPow), last, 4, -1});  // Immediate exponent 2.
  emit({Op(FusedOpcode::kPow), last, 5, -1});  // Immediate exponent -1.5.
  for (FusedOpcode op : unary) emit({Op(op), last, -1, -1});
  emit({Op(FusedOpcode::kLeakyRelu), last, 3, -1});
  emit({Op(FusedOpcode::kHardSigmoid), last, 3, 2});
  emit({Op(FusedOpcode::kClip), last, 5, 4});
  return p;
}

using RandomProgram = testing::RandomFusedProgram;
using testing::MakeRandomFusedProgram;

#if !defined(REMEX_CUDA_EMULATION)  // NVRTC runs on a CUDA toolkit only.
TEST(FusedCudaCodegen, EveryOpcodeCompilesWithNvrtcInEveryDtype) {
  for (DType type : kTypes) {
    SCOPED_TRACE(TypeName(type));
    ExpectCompiles(EveryOpcode(), {0.25f, 2.0f, -1.5f}, 3, type);
  }
}

TEST(FusedCudaCodegen, NvrtcTakesTheFloat16ConversionsOfTheDevice) {
  // The source's float16 helpers have a device branch (PTX cvt) and a host branch
  // (for fused_host_test); NVRTC must compile the first.
  auto source = GenerateFusedKernelSource({Op(FusedOpcode::kTanh), 0, -1, -1}, {}, 1, DType::kFloat16);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  auto ptx = CompileFusedKernelToPtx(*source, 90);
  ASSERT_TRUE(ptx.ok()) << ptx.status().ToString();
  EXPECT_NE(ptx->find("cvt.rn.f16.f32"), std::string::npos) << *ptx;
  EXPECT_NE(ptx->find("cvt.f32.f16"), std::string::npos) << *ptx;
  EXPECT_EQ(ptx->find("remex_host_"), std::string::npos) << *ptx;
}

TEST(FusedCudaCodegen, ThirtyTwoInputsCompile) {
  // x0 + x1 + ... + x31.
  std::vector<int64_t> p = {Op(FusedOpcode::kAdd), 0, 1, -1};
  for (int64_t k = 2; k < kFusedMaxInputs; ++k) {
    p.insert(p.end(), {Op(FusedOpcode::kAdd), kFusedMaxInputs + k - 2, k, -1});
  }
  ExpectCompiles(p, {}, kFusedMaxInputs, DType::kFloat16);
  auto source = GenerateFusedKernelSource(p, {}, kFusedMaxInputs, DType::kFloat32);
  ASSERT_TRUE(source.ok());
  EXPECT_NE(source->find("p.strides[31][d]"), std::string::npos);
}

TEST(FusedCudaCodegen, SourceSpellsOutEachOpcodesSemantics) {
  auto f32 = GenerateFusedKernelSource(EveryOpcode(), {0.25f, 2.0f, -1.5f}, 3, DType::kFloat32);
  ASSERT_TRUE(f32.ok()) << f32.status().ToString();
  const std::string& s = *f32;
  EXPECT_NE(s.find("extern \"C\" __global__ void remex_fused_elementwise(const RemexFusedParams p)"),
            std::string::npos);
  EXPECT_NE(s.find("i += step"), std::string::npos) << "grid-stride loop";
  // Immediates as exact bit patterns.
  EXPECT_NE(s.find("0x3e800000"), std::string::npos) << "0.25";
  EXPECT_NE(s.find("0xbfc00000"), std::string::npos) << "-1.5";
  // Each instruction calls the functor of kernels/scalar_ops.h named as its opcode, with
  // the instruction's operands in order; the header's text comes first.
  EXPECT_NE(s.find("#define REMEX_SCALAR_OPS_EMBEDDED 1"), std::string::npos);
  EXPECT_NE(s.find("namespace remex::kernels::scalar {"), std::string::npos);
  EXPECT_NE(s.find("const R s6 = remex_scalar::Add()(s0, s1);"), std::string::npos) << s;
  EXPECT_NE(s.find("const R s10 = remex_scalar::Pow()(s9, s1);"), std::string::npos) << s;
  EXPECT_NE(s.find("const R s11 = remex_scalar::Min()(s10, s1);"), std::string::npos) << s;
  EXPECT_NE(s.find("const R s12 = remex_scalar::Max()(s11, s1);"), std::string::npos) << s;
  EXPECT_NE(s.find("const R s14 = remex_scalar::Pow()(s13, s5);"), std::string::npos) << s;
  EXPECT_NE(s.find("const R s16 = remex_scalar::Sigmoid()(s15);"), std::string::npos) << s;
  EXPECT_NE(s.find("const R s25 = remex_scalar::HardSwish()(s24);"), std::string::npos) << s;
  EXPECT_NE(s.find("const R s26 = remex_scalar::LeakyRelu()(s25, s3);"), std::string::npos) << s;
  EXPECT_NE(s.find("const R s27 = remex_scalar::HardSigmoid()(s26, s3, s2);"), std::string::npos) << s;
  EXPECT_NE(s.find("const R s28 = remex_scalar::Clip()(s27, s5, s4);"), std::string::npos) << s;
  EXPECT_EQ(s.find("#include"), std::string::npos) << "the source must be self-contained";

  auto f16 = GenerateFusedKernelSource(EveryOpcode(), {0.25f, 2.0f, -1.5f}, 3, DType::kFloat16);
  ASSERT_TRUE(f16.ok());
  EXPECT_NE(f16->find("typedef float R;"), std::string::npos) << "float16 computes in float";
  EXPECT_NE(f16->find("cvt.rn.f16.f32"), std::string::npos) << "rounded to nearest even on store";
  EXPECT_NE(f16->find("const remex_half* x2"), std::string::npos);

  auto f64 = GenerateFusedKernelSource(EveryOpcode(), {0.25f, 2.0f, -1.5f}, 3, DType::kFloat64);
  ASSERT_TRUE(f64.ok());
  EXPECT_NE(f64->find("typedef double R;"), std::string::npos);
  EXPECT_NE(f64->find("const R s24 = remex_scalar::Erf()(s23);"), std::string::npos) << *f64;
}

TEST(FusedCudaCodegen, RejectsMalformedPrograms) {
  struct Case {
    std::vector<int64_t> program;
    int64_t nin;
    std::string message;
  };
  const Case cases[] = {
      {{}, 1, "empty"},
      {{Op(FusedOpcode::kAdd), 0, 1}, 2, "multiple of 4"},
      {{99, 0, 1, -1}, 2, "unknown opcode 99"},
      {{Op(FusedOpcode::kAdd), 0, 2, -1}, 2, "operand 1 is slot 2"},
      {{Op(FusedOpcode::kRelu), 0, 1, -1}, 2, "must be -1"},
      {{Op(FusedOpcode::kRelu), 0, -1, -1}, 0, "0 inputs"},
      {{Op(FusedOpcode::kRelu), 0, -1, -1}, kFusedMaxInputs + 1, "inputs"},
  };
  for (const Case& c : cases) {
    auto s = GenerateFusedKernelSource(c.program, {}, c.nin, DType::kFloat32);
    ASSERT_FALSE(s.ok()) << c.message;
    EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(s.status().message().find(c.message), std::string::npos) << s.status().message();
    EXPECT_NE(s.status().message().find("FusedElementwise"), std::string::npos);
  }
  EXPECT_EQ(cuda::CheckFusedDType(DType::kInt32).code(), StatusCode::kUnimplemented);
}

TEST(FusedCudaCodegen, RandomProgramsCompileWithNvrtc) {
  std::mt19937 rng(7);
  for (int iter = 0; iter < 12; ++iter) {
    const int nin = 1 + static_cast<int>(rng() % 4);
    RandomProgram p = MakeRandomFusedProgram(rng, nin);
    const DType type = kTypes[iter % 3];
    SCOPED_TRACE("program " + std::to_string(iter) + " in " + TypeName(type));
    ExpectCompiles(p.program, p.immediates, nin, type);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

TEST(FusedCudaNvrtc, TargetsTheNewestArchitectureNotAboveTheGpus) {
  auto a90 = cuda::FusedTargetArch(90);
  ASSERT_TRUE(a90.ok()) << a90.status().ToString();
  EXPECT_EQ(*a90, 90);
  auto a91 = cuda::FusedTargetArch(91);
  ASSERT_TRUE(a91.ok());
  EXPECT_EQ(*a91, 90);
  EXPECT_EQ(cuda::FusedTargetArch(10).status().code(), StatusCode::kUnimplemented);
}

TEST(FusedCudaNvrtc, CompileErrorsCarryNvrtcsLog) {
  auto ptx = CompileFusedKernelToPtx("extern \"C\" __global__ void k() { undeclared_thing(); }\n", 90);
  ASSERT_FALSE(ptx.ok());
  EXPECT_EQ(ptx.status().code(), StatusCode::kInternal);
  EXPECT_NE(ptx.status().message().find("undeclared_thing"), std::string::npos) << ptx.status().message();
}

TEST(FusedCudaNvrtc, CacheCompilesEachSourceOncePerArchitecture) {
  auto source = GenerateFusedKernelSource({Op(FusedOpcode::kTanh), 0, -1, -1}, {}, 1, DType::kFloat32);
  ASSERT_TRUE(source.ok());
  auto first = cuda::CachedFusedKernelPtx(*source, 90);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  auto again = cuda::CachedFusedKernelPtx(*source, 90);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(first->get(), again->get());
  auto other = cuda::CachedFusedKernelPtx(*source, 80);
  ASSERT_TRUE(other.ok());
  EXPECT_NE(first->get(), other->get());
  EXPECT_NE((*other)->find(".target sm_80"), std::string::npos);
}

// ---------------------------------------------------------------------------
// Broadcast plan.

#endif

TEST(FusedCudaBroadcastPlan, MergesDimsThatEveryInputBroadcastsAlike) {
  FusedParams p;
  // [2,3,4] with [3,1] and [4]: no two neighbours alike.
  std::vector<Shape> in = {{2, 3, 4}, {3, 1}, {4}};
  ASSERT_TRUE(cuda::PlanFusedBroadcast(in, {2, 3, 4}, p).ok());
  ASSERT_EQ(p.rank, 3);
  EXPECT_EQ(std::vector<int64_t>(p.dims, p.dims + 3), (std::vector<int64_t>{2, 3, 4}));
  EXPECT_EQ(std::vector<int64_t>(p.strides[0], p.strides[0] + 3), (std::vector<int64_t>{12, 4, 1}));
  EXPECT_EQ(std::vector<int64_t>(p.strides[1], p.strides[1] + 3), (std::vector<int64_t>{0, 1, 0}));
  EXPECT_EQ(std::vector<int64_t>(p.strides[2], p.strides[2] + 3), (std::vector<int64_t>{0, 0, 1}));

  // Equal shapes and a scalar: one dim.
  in = {{5, 6}, {5, 6}, {}};
  ASSERT_TRUE(cuda::PlanFusedBroadcast(in, {5, 6}, p).ok());
  ASSERT_EQ(p.rank, 1);
  EXPECT_EQ(p.dims[0], 30);
  EXPECT_EQ(p.strides[0][0], 1);
  EXPECT_EQ(p.strides[1][0], 1);
  EXPECT_EQ(p.strides[2][0], 0);

  // Size-1 output dims drop; [7, 1, 5, 6] and [5, 6]: the last two merge.
  in = {{7, 1, 5, 6}, {5, 6}};
  ASSERT_TRUE(cuda::PlanFusedBroadcast(in, {7, 1, 5, 6}, p).ok());
  ASSERT_EQ(p.rank, 2);
  EXPECT_EQ(p.dims[0], 7);
  EXPECT_EQ(p.dims[1], 30);
  EXPECT_EQ(p.strides[1][0], 0);
  EXPECT_EQ(p.strides[1][1], 1);

  // One element.
  in = {{1, 1}, {1}};
  ASSERT_TRUE(cuda::PlanFusedBroadcast(in, {1, 1}, p).ok());
  EXPECT_EQ(p.rank, 1);
  EXPECT_EQ(p.dims[0], 1);
}

TEST(FusedCudaBroadcastPlan, RejectsShapesThatDoNotBroadcast) {
  FusedParams p;
  std::vector<Shape> in = {{3}, {4}};
  EXPECT_EQ(cuda::PlanFusedBroadcast(in, {4}, p).code(), StatusCode::kInvalidArgument);
  in = {{2, 1, 2, 1, 2, 1, 2, 1, 2}, {1, 2, 1, 2, 1, 2, 1, 2, 1}};
  EXPECT_EQ(cuda::PlanFusedBroadcast(in, {2, 2, 2, 2, 2, 2, 2, 2, 2}, p).code(), StatusCode::kUnimplemented);
}

// ---------------------------------------------------------------------------
// On a GPU: the NVRTC kernel against the CPU kernel.

Attributes ProgramAttrs(const RandomProgram& p) {
  Attributes a;
  a.Set("program", p.program);
  a.Set("immediates", p.immediates);
  return a;
}

TEST(FusedCudaKernel, RandomProgramsMatchTheCpuKernel) {
  REMEX_SKIP_WITHOUT_GPU();
  testing::OpRunner cpu;
  testing::CudaRunner gpu;
  std::mt19937 rng(20240611);
  for (int iter = 0; iter < 60; ++iter) {
    const testing::BroadcastInputs b = testing::RandomBroadcastInputs(rng);
    const Shape& out = b.out;
    const std::vector<HostTensor>& inputs = b.inputs;
    const int nin = static_cast<int>(inputs.size());
    RandomProgram p = MakeRandomFusedProgram(rng, nin);
    const Attributes attrs = ProgramAttrs(p);
    for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kFloat64}) {
      std::vector<HostTensor> in;
      for (const HostTensor& t : inputs) in.push_back(testing::ConvertFloat(t, dtype));
      auto want = cpu.Run("FusedElementwise", attrs, in);
      ASSERT_TRUE(want.ok()) << want.status().ToString();
      auto got = gpu.Run("FusedElementwise", attrs, in);
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      const std::string what = "program " + std::to_string(iter) + " in " + std::string(DTypeName(dtype)) +
                               ", output " + ShapeToString(out);
      ASSERT_EQ((*got)[0].shape, (*want)[0].shape) << what;
      // The GPU's exp, tanh, erf, log, pow differ from the CPU's by a few ulp.
      const double tol = dtype == DType::kFloat64 ? 1e-12 : dtype == DType::kFloat32 ? 2e-5 : 2e-3;
      testing::ExpectAllClose(testing::FloatValues((*got)[0]), testing::FloatValues((*want)[0]), tol, tol, what);
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
}

TEST(FusedCudaKernel, NaNRulesOfMinMaxAndClipBounds) {
  REMEX_SKIP_WITHOUT_GPU();
  testing::CudaRunner gpu;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Attributes a;
  // Max(x0, x1) and Min(x0, x1), each its own program, then Clip(x0, 2, 1).
  const std::vector<HostTensor> xs = {HostTensor::Of<float>({3}, {nan, 1.0f, 3.0f}),
                                      HostTensor::Of<float>({3}, {0.0f, nan, 2.0f})};
  a.Set("program", std::vector<int64_t>{Op(FusedOpcode::kMax), 0, 1, -1});
  auto max = gpu.Run("FusedElementwise", a, xs);
  ASSERT_TRUE(max.ok()) << max.status().ToString();
  auto mv = (*max)[0].Values<float>();
  EXPECT_TRUE(std::isnan(mv[0]));
  EXPECT_TRUE(std::isnan(mv[1]));
  EXPECT_EQ(mv[2], 3.0f);
  a.Set("program", std::vector<int64_t>{Op(FusedOpcode::kMin), 0, 1, -1});
  auto min = gpu.Run("FusedElementwise", a, xs);
  ASSERT_TRUE(min.ok()) << min.status().ToString();
  auto nv = (*min)[0].Values<float>();
  EXPECT_TRUE(std::isnan(nv[0]));
  EXPECT_TRUE(std::isnan(nv[1]));
  EXPECT_EQ(nv[2], 2.0f);
  Attributes clip;
  clip.Set("program", std::vector<int64_t>{Op(FusedOpcode::kClip), 0, 1, 2});
  clip.Set("immediates", std::vector<float>{2.0f, 1.0f});
  auto c = gpu.Run("FusedElementwise", clip, {HostTensor::Of<float>({3}, {-5.0f, 1.5f, 5.0f})});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ((*c)[0].Values<float>(), (std::vector<float>{1.0f, 1.0f, 1.0f}));
}

TEST(FusedCudaKernel, FactoryRefusesMalformedPrograms) {
  // Runs without a GPU: the factory checks the program before any CUDA call.
  testing::CudaRunner gpu;
  const KernelFactory* factory = gpu.registry().FindKernel("FusedElementwise", DeviceKind::kCuda);
  ASSERT_NE(factory, nullptr);
  Attributes bad;
  bad.Set("program", std::vector<int64_t>{99, 0, 1, -1});
  EXPECT_EQ((*factory)(bad).status().code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE((*factory)(Attributes{}).ok());
  Attributes good;
  good.Set("program", std::vector<int64_t>{Op(FusedOpcode::kAdd), 0, 1, -1});
  EXPECT_TRUE((*factory)(good).ok());
}

TEST(FusedCudaKernel, FactoryChecksTheSignatureBeforeAnyCudaCall) {
  // Runs without a GPU: every failure below comes before the first CUDA call.
  testing::CudaRunner gpu;
  const KernelFactory* factory = gpu.registry().FindKernel("FusedElementwise", DeviceKind::kCuda);
  ASSERT_NE(factory, nullptr);
  auto with = [](int64_t num_inputs, AttrValue dtype) {
    Attributes a;
    a.Set("program", std::vector<int64_t>{Op(FusedOpcode::kAdd), 0, 1, -1});
    a.Set("num_inputs", num_inputs);
    a.Set("dtype", std::move(dtype));
    return a;
  };
  EXPECT_EQ((*factory)(with(0, std::string("float32"))).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ((*factory)(with(kFusedMaxInputs + 1, std::string("float32"))).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ((*factory)(with(2, std::string("nonsense"))).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ((*factory)(with(2, int64_t{1})).status().code(), StatusCode::kInvalidArgument);
  auto ints = (*factory)(with(2, std::string("int32")));
  EXPECT_EQ(ints.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(ints.status().message().find("FusedElementwise"), std::string::npos) << ints.status().message();
  // Add reads slots 0 and 1: with one input and no immediate, slot 1 is its own result.
  auto one = (*factory)(with(1, std::string("float32")));
  EXPECT_EQ(one.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(one.status().message().find("FusedElementwise"), std::string::npos) << one.status().message();
  // Half a signature is none: the kernel compiles at its first Compute.
  Attributes no_dtype;
  no_dtype.Set("program", std::vector<int64_t>{Op(FusedOpcode::kAdd), 0, 1, -1});
  no_dtype.Set("num_inputs", int64_t{2});
  EXPECT_TRUE((*factory)(no_dtype).ok());
}

#if !defined(REMEX_CUDA_EMULATION)  // These count NVRTC compilations.
TEST(FusedCudaKernel, SignatureNeedsTheGpuWhenTheKernelIsCreated) {
  if (testing::CudaGpuCount() > 0) GTEST_SKIP() << "a CUDA GPU is visible: the no-GPU path is not reachable";
  testing::CudaRunner gpu;
  const KernelFactory* factory = gpu.registry().FindKernel("FusedElementwise", DeviceKind::kCuda);
  ASSERT_NE(factory, nullptr);
  Attributes a;
  a.Set("program", std::vector<int64_t>{Op(FusedOpcode::kAdd), 0, 1, -1});
  a.Set("num_inputs", int64_t{2});
  a.Set("dtype", std::string("float32"));
  // The compilation (and its GPU query) happens in the factory, so creation fails here.
  auto kernel = (*factory)(a);
  ASSERT_FALSE(kernel.ok());
  EXPECT_NE(kernel.status().message().find("FusedElementwise on cuda"), std::string::npos)
      << kernel.status().message();
}

TEST(FusedCudaKernel, SignatureCompilesWhenTheKernelIsCreated) {
  REMEX_SKIP_WITHOUT_GPU();
  testing::OpRunner cpu;
  testing::CudaRunner gpu;
  const KernelFactory* factory = gpu.registry().FindKernel("FusedElementwise", DeviceKind::kCuda);
  ASSERT_NE(factory, nullptr);
  // (x0 * 0.828125 + x1) -> Tanh, an immediate no other test uses: a source not yet cached.
  Attributes a;
  a.Set("program", std::vector<int64_t>{Op(FusedOpcode::kMul), 0, 2, -1, Op(FusedOpcode::kAdd), 3, 1, -1,
                                        Op(FusedOpcode::kTanh), 4, -1, -1});
  a.Set("immediates", std::vector<float>{0.828125f});
  a.Set("num_inputs", int64_t{2});
  for (DType dtype : {DType::kFloat32, DType::kFloat16}) {
    a.Set("dtype", std::string(DTypeName(dtype)));
    const size_t before = cuda::FusedPtxCacheEntries();
    auto kernel = (*factory)(a);
    ASSERT_TRUE(kernel.ok()) << kernel.status().ToString();
    EXPECT_EQ(cuda::FusedPtxCacheEntries(), before + 1) << "compiled when created, " << DTypeName(dtype);
    // Another kernel of the same node: no new compilation, and the CPU's results.
    std::vector<HostTensor> in = {
        testing::ConvertFloat(HostTensor::Of<float>({2, 3}, {-2.0f, -1.0f, 0.0f, 0.5f, 1.0f, 3.0f}), dtype),
        testing::ConvertFloat(HostTensor::Of<float>({3}, {0.25f, -0.5f, 1.0f}), dtype)};
    auto want = cpu.Run("FusedElementwise", a, in);
    ASSERT_TRUE(want.ok()) << want.status().ToString();
    auto got = gpu.Run("FusedElementwise", a, in);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(cuda::FusedPtxCacheEntries(), before + 1);
    const double tol = dtype == DType::kFloat32 ? 2e-5 : 2e-3;
    testing::ExpectAllClose(testing::FloatValues((*got)[0]), testing::FloatValues((*want)[0]), tol, tol,
                            std::string(DTypeName(dtype)));
  }
}

#endif

}  // namespace
}  // namespace remex::kernels
