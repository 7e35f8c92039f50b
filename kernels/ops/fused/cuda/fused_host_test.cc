// FusedElementwise's generated CUDA C source, run on the host against the CPU kernel
// (kernels/ops/fused/fused.cc). Needs no GPU and no CUDA library.
//
// The exact text GenerateFusedKernelSource returns is compiled with the host C++
// compiler Remex was built with (REMEX_HOST_CXX; -O1 -std=c++17 -shared -fPIC) after
// kernels/ops/fused/cuda/fused_host_shim.h, which turns the CUDA constructs into plain C++ and the
// grid-stride loop into one thread over every element; the source's float16
// conversions take their host branch (float16.h's, round to nearest even). Several
// sources go into one shared object, each in its own namespace with an extern "C"
// entry that runs the kernel over a FusedParams filled by PlanFusedBroadcast. The
// output is compared with the CPU kernel's on the same inputs, bitwise in float32,
// float16 and float64 (NaN matches any NaN):
//   - The two sides call the same functors (kernels/scalar_ops.h, which the source
//     embeds) with the same functions: the C library's tanhf, logf, powf, ...
//     (the shared object runs in this process, against the same libm), and for float
//     exp and erf the CPU kernel's own (scalar::math::FastExp and FastErf, which the
//     shim's expf and erff call; the GPU uses CUDA's expf and erff, which only the GPU
//     tests can compare, within their tolerances).
//   - float16 is computed in float on both sides and rounded to nearest even once, on
//     store, by float16.h on both sides (on the GPU by cvt.rn, also nearest even).
// What this checks is the generated source's semantics: operand wiring, each opcode's
// expression (NaN rules of Min and Max, Clip with crossed bounds, Pow's shortcuts),
// immediates' bit patterns, the broadcast offsets from the plan, float16 loads/stores.

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kernels/ops/fused/cuda/fused_codegen.h"
#include "kernels/float16.h"
#include "kernels/float_test_util.h"
#include "kernels/ops/fused/fused.h"
#include "kernels/ops/fused/fused_test_util.h"
#include "kernels/internal.h"
#include "kernels/scalar_ops.h"
#include "kernels/test_util.h"
#include "tests/built_path.h"

#ifndef REMEX_HOST_CXX
#error "REMEX_HOST_CXX (the host C++ compiler's path) must be defined"
#endif
#ifndef REMEX_HOST_INCLUDE_DIR_BUILT
#error "REMEX_HOST_INCLUDE_DIR_BUILT (the directory holding kernels/, relative to this program's) must be defined"
#endif
// The directory holding kernels/ (the source tree), as a std::string.
#define REMEX_HOST_INCLUDE_DIR ::remex::testing::BuiltPath(REMEX_HOST_INCLUDE_DIR_BUILT)

namespace remex::kernels {
namespace fused_host_test {

using cuda::FusedParams;
using testing::HostTensor;

constexpr int64_t Op(FusedOpcode op) { return static_cast<int64_t>(op); }

struct TypeCase {
  DType dtype;
};
constexpr TypeCase kTypes[] = {{DType::kFloat32}, {DType::kFloat16}, {DType::kFloat64}};

// One FusedElementwise node to check in one dtype.
struct Case {
  std::string name;
  std::vector<int64_t> program;
  std::vector<float> immediates;
  std::vector<HostTensor> inputs;  // float64 values, converted to `dtype`.
  DType dtype = DType::kFloat32;
  std::string source;  // Generated for `dtype`.
};

// Generated sources compiled into one shared object with the host compiler, loaded.
class HostKernels {
 public:
  using Entry = void (*)(const void* params);

  HostKernels() = default;
  HostKernels(const HostKernels&) = delete;
  HostKernels& operator=(const HostKernels&) = delete;
  ~HostKernels() {
    if (handle_) dlclose(handle_);
    std::error_code ec;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
  }

  // Adds a source; its entry is entry(index), in the order of the calls.
  void Add(const std::string& source) {
    const std::string k = std::to_string(count_++);
    tu_ += "\n// Kernel " + k + ".\n#define remex_fused_elementwise remex_fused_elementwise_" + k +
           "\nnamespace remex_host {\nnamespace k" + k + " {\n" + source + "}  // namespace k" + k +
           "\n}  // namespace remex_host\n#undef remex_fused_elementwise\n";
    // The source's RemexFusedParams must lay out as FusedParams.
    const std::string type = "remex_host::k" + k + "::RemexFusedParams";
    tu_ += "static_assert(sizeof(" + type + ") == " + std::to_string(sizeof(FusedParams)) + ");\n";
    tu_ += "static_assert(offsetof(" + type + ", strides) == " + std::to_string(offsetof(FusedParams, strides)) +
           ");\n";
    tu_ += "static_assert(offsetof(" + type + ", inputs) == " + std::to_string(offsetof(FusedParams, inputs)) +
           ");\n";
    tu_ += "static_assert(offsetof(" + type + ", output) == " + std::to_string(offsetof(FusedParams, output)) +
           ");\n";
    tu_ += "extern \"C\" void remex_host_run_" + k + "(const void* params) {\n  " + type +
           " p;\n  std::memcpy(&p, params, sizeof p);\n  remex_host::k" + k + "::remex_fused_elementwise_" + k +
           "(p);\n}\n";
  }

  // Writes, compiles and loads the shared object (a fatal failure with the compiler's
  // output otherwise) and sets the shim's float exp to the CPU kernel's.
  void Build() {
    const std::string cxx = REMEX_HOST_CXX;
    ASSERT_EQ(access(cxx.c_str(), X_OK), 0)
        << "the host C++ compiler " << cxx
        << " (CMAKE_CXX_COMPILER when Remex was configured) is missing or not executable: this test compiles "
           "FusedElementwise's generated CUDA source with it to run the kernel on the CPU";
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/remex_fused_host_XXXXXX";
    ASSERT_NE(mkdtemp(pattern.data()), nullptr) << "mkdtemp " << pattern << ": " << std::strerror(errno);
    dir_ = pattern;
    const std::filesystem::path cc = dir_ / "kernels.cc";
    const std::filesystem::path so = dir_ / "kernels.so";
    {
      FILE* f = std::fopen(cc.c_str(), "w");
      ASSERT_NE(f, nullptr) << cc;
      const std::string text = "#include \"kernels/ops/fused/cuda/fused_host_shim.h\"\n" + tu_;
      ASSERT_EQ(std::fwrite(text.data(), 1, text.size(), f), text.size());
      ASSERT_EQ(std::fclose(f), 0);
    }
    const std::string command = "'" + cxx + "' -O1 -std=c++17 -shared -fPIC -I'" + REMEX_HOST_INCLUDE_DIR +
                                "' -o '" + so.string() + "' '" + cc.string() + "' 2>&1";
    FILE* pipe = popen(command.c_str(), "r");
    ASSERT_NE(pipe, nullptr) << command;
    std::string output;
    char buf[4096];
    for (size_t n; (n = std::fread(buf, 1, sizeof buf, pipe)) > 0;) output.append(buf, n);
    const int status = pclose(pipe);
    ASSERT_EQ(status, 0) << command << "\n" << output;
    handle_ = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(handle_, nullptr) << dlerror();
    auto set_exp = reinterpret_cast<void (*)(float (*)(float))>(dlsym(handle_, "remex_host_set_float_exp"));
    ASSERT_NE(set_exp, nullptr) << dlerror();
    set_exp(&scalar::math::FastExp);
    auto set_erf = reinterpret_cast<void (*)(float (*)(float))>(dlsym(handle_, "remex_host_set_float_erf"));
    ASSERT_NE(set_erf, nullptr) << dlerror();
    set_erf(&scalar::math::FastErf);
    for (size_t k = 0; k < count_; ++k) {
      const std::string name = "remex_host_run_" + std::to_string(k);
      auto entry = reinterpret_cast<Entry>(dlsym(handle_, name.c_str()));
      ASSERT_NE(entry, nullptr) << name << ": " << dlerror();
      entries_.push_back(entry);
    }
  }

  Entry entry(size_t k) const { return entries_.at(k); }

 private:
  std::string tu_;
  size_t count_ = 0;
  std::filesystem::path dir_;
  void* handle_ = nullptr;
  std::vector<Entry> entries_;
};

// Generates each case's source (in its dtype).
void Generate(std::vector<Case>& cases) {
  for (Case& c : cases) {
    auto source = cuda::GenerateFusedKernelSource(c.program, c.immediates,
                                                  static_cast<int64_t>(c.inputs.size()), c.dtype);
    ASSERT_TRUE(source.ok()) << c.name << ": " << source.status().ToString();
    c.source = *source;
  }
}

// Bits of element i of `t` (2, 4 or 8 bytes).
uint64_t Bits(const HostTensor& t, size_t i) {
  const size_t size = DTypeSize(t.dtype);
  uint64_t b = 0;
  std::memcpy(&b, t.bytes.data() + i * size, size);
  return b;
}

// Runs case `c` with `entry` and with the CPU kernel; expects bitwise equal outputs
// (NaN matches any NaN).
void ExpectMatchesCpu(const Case& c, HostKernels::Entry entry) {
  std::vector<HostTensor> in;
  for (const HostTensor& t : c.inputs) in.push_back(testing::ConvertFloat(t, c.dtype));
  Attributes attrs;
  attrs.Set("program", c.program);
  attrs.Set("immediates", c.immediates);
  testing::OpRunner cpu;
  auto want = cpu.Run("FusedElementwise", attrs, in);
  ASSERT_TRUE(want.ok()) << c.name << ": " << want.status().ToString();
  const HostTensor& expected = (*want)[0];

  HostTensor got = HostTensor::Zeros(c.dtype, expected.shape);
  std::fill(got.bytes.begin(), got.bytes.end(), uint8_t{0xa5});  // Unwritten elements show.
  std::vector<Shape> shapes;
  for (const HostTensor& t : in) shapes.push_back(t.shape);
  FusedParams params;
  const Status planned = cuda::PlanFusedBroadcast(shapes, expected.shape, params);
  ASSERT_TRUE(planned.ok()) << c.name << ": " << planned.ToString();
  params.n = *NumElements(expected.shape);
  for (size_t k = 0; k < in.size(); ++k) params.inputs[k] = in[k].bytes.data();
  params.output = got.bytes.data();
  entry(&params);

  const std::vector<double> g = testing::FloatValues(got);
  const std::vector<double> e = testing::FloatValues(expected);
  ASSERT_EQ(g.size(), e.size());
  for (size_t i = 0; i < g.size(); ++i) {
    if (Bits(got, i) == Bits(expected, i) || (std::isnan(g[i]) && std::isnan(e[i]))) continue;
    char detail[160];
    std::snprintf(detail, sizeof detail, "host run %.17g (bits 0x%llx), CPU kernel %.17g (bits 0x%llx)", g[i],
                  static_cast<unsigned long long>(Bits(got, i)), e[i],
                  static_cast<unsigned long long>(Bits(expected, i)));
    FAIL() << c.name << " in " << DTypeName(c.dtype) << ", output " << ShapeToString(expected.shape)
           << ": element " << i << " differs: " << detail << "\nsource:\n"
           << c.source;
  }
}

// Generates, compiles (one shared object) and checks every case.
void ExpectAllMatchCpu(std::vector<Case>& cases) {
  Generate(cases);
  if (::testing::Test::HasFatalFailure()) return;
  HostKernels kernels;
  for (const Case& c : cases) kernels.Add(c.source);
  kernels.Build();
  if (::testing::Test::HasFatalFailure()) return;
  for (size_t k = 0; k < cases.size(); ++k) {
    ExpectMatchesCpu(cases[k], kernels.entry(k));
    if (::testing::Test::HasFatalFailure()) return;
  }
}

// Random programs (every opcode, immediates, Pow's immediate exponents) over random
// broadcasting inputs, 1 to 4 of them or, every fourth program, 1 to 32.
std::vector<Case> RandomCases(DType dtype) {
  std::mt19937 rng(20240611);
  std::vector<Case> cases;
  for (int iter = 0; cases.size() < 48; ++iter) {
    testing::BroadcastInputs b = testing::RandomBroadcastInputs(rng, iter % 4 == 3 ? kFusedMaxInputs : 4);
    if (*NumElements(b.out) > 100000) continue;  // Keep the single host thread quick.
    const int nin = static_cast<int>(b.inputs.size());
    testing::RandomFusedProgram p = testing::MakeRandomFusedProgram(rng, nin);
    cases.push_back({"random program " + std::to_string(iter) + " (" + std::to_string(nin) + " inputs)",
                     std::move(p.program), std::move(p.immediates), std::move(b.inputs), dtype, ""});
  }
  return cases;
}

TEST(FusedHostRun, RandomProgramsMatchTheCpuKernelInFloat32) {
  std::vector<Case> cases = RandomCases(DType::kFloat32);
  ExpectAllMatchCpu(cases);
}

TEST(FusedHostRun, RandomProgramsMatchTheCpuKernelInFloat16) {
  std::vector<Case> cases = RandomCases(DType::kFloat16);
  ExpectAllMatchCpu(cases);
}

TEST(FusedHostRun, RandomProgramsMatchTheCpuKernelInFloat64) {
  std::vector<Case> cases = RandomCases(DType::kFloat64);
  ExpectAllMatchCpu(cases);
}

// Values where the opcodes' edge cases lie: NaN, infinities, signed zeros, values that
// overflow float16 or square to infinity in float, subnormals, Pow's exponents.
std::vector<double> SpecialValues() {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  return {nan, inf, -inf, 0.0, -0.0, 1.0, -1.0, 2.0, 0.5, -0.5, 1.5, 3.0, -2.5, 0.1, 7.25, -3.0,
          65504.0, 70000.0, 1e-7, -1e-30, 3e38, 1e-40, 6e-8, 88.5, -103.0, 1e200};
}

// Every opcode over every special value: unary ones over x0 = SpecialValues(), binary
// ones over every pair (x0 [n] against x1 [n, 1], so Pow's exponent is an input, not
// an immediate), the parametrised ones with plain, crossed (Clip lo > hi) and special
// immediates.
std::vector<Case> SpecialCases(DType dtype) {
  const std::vector<double> v = SpecialValues();
  const int64_t n = static_cast<int64_t>(v.size());
  const HostTensor row = HostTensor::Of<double>({n}, v);
  const HostTensor column = HostTensor::Of<double>({n, 1}, v);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  // Slots with two inputs: 2..9 immediates, results from 10.
  const std::vector<float> imm = {0.1f, 2.0f, 1.0f, -1.5f, nan, inf, -0.0f, 1e-40f};
  std::vector<Case> cases;
  auto add = [&](const std::string& name, std::vector<int64_t> program) {
    cases.push_back({name, std::move(program), imm, {row, column}, dtype, ""});
  };
  for (FusedOpcode op : testing::kRandomProgramOpcodes) {
    const std::string name(FusedOpcodeName(Op(op)));
    switch (FusedOperandCount(Op(op))) {
      case 1:
        add(name + "(x0)", {Op(op), 0, -1, -1});
        break;
      case 2:
        if (op == FusedOpcode::kLeakyRelu || op == FusedOpcode::kSwish) {
          for (int64_t alpha : {2, 5, 6, 7}) {
            add(name + "(x0, immediate " + std::to_string(alpha - 2) + ")", {Op(op), 0, alpha, -1});
          }
          break;
        }
        add(name + "(x0, x1)", {Op(op), 0, 1, -1});
        add(name + "(x1, x0)", {Op(op), 1, 0, -1});
        for (int64_t b : {2, 3, 4, 5, 6, 7, 8, 9}) {  // Pow: immediate exponents 2 and 1 take shortcuts.
          add(name + "(x0, immediate " + std::to_string(b - 2) + ")", {Op(op), 0, b, -1});
        }
        break;
      case 3:
        for (auto [lo, hi] : {std::pair<int64_t, int64_t>{5, 2}, {3, 4}, {4, 3}, {2, 6}, {7, 8}, {6, 7}}) {
          add(name + "(x0, immediates " + std::to_string(lo - 2) + ", " + std::to_string(hi - 2) + ")",
              {Op(op), 0, lo, hi});
        }
        break;
    }
  }
  // Min and Max chained, so that NaN reaches them as a result, not only as an input.
  add("Max(Min(x0, x1), Log(x1))", {Op(FusedOpcode::kMin), 0, 1, -1, Op(FusedOpcode::kLog), 1, -1, -1,
                                    Op(FusedOpcode::kMax), 10, 11, -1});
  return cases;
}

// The source embeds kernels/scalar_ops.h as it is now (the build regenerates the string
// when the header changes): every line of the header but its #pragma once and its
// #includes is in the generated source, in order.
TEST(FusedHostRun, SourceEmbedsTheScalarOpsHeader) {
  std::ifstream header(REMEX_HOST_INCLUDE_DIR + "/kernels/scalar_ops.h");
  ASSERT_TRUE(header.good());
  auto source =
      cuda::GenerateFusedKernelSource({Op(FusedOpcode::kHardSwish), 0, -1, -1}, {}, 1, DType::kFloat32);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  size_t at = 0;
  int lines = 0;
  for (std::string line; std::getline(header, line);) {
    if (line.rfind("#pragma once", 0) == 0 || line.rfind("#include", 0) == 0) continue;
    const size_t found = source->find(line + "\n", at);
    ASSERT_NE(found, std::string::npos) << "header line missing from the source: " << line;
    at = found + line.size();
    ++lines;
  }
  EXPECT_GT(lines, 100);
  EXPECT_EQ(source->find("#include"), std::string::npos) << "the source must be self-contained";
}

TEST(FusedHostRun, EveryOpcodeAtSpecialValuesMatchesTheCpuKernel) {
  for (const TypeCase& t : kTypes) {
    SCOPED_TRACE(DTypeName(t.dtype));
    std::vector<Case> cases = SpecialCases(t.dtype);
    ExpectAllMatchCpu(cases);
    if (HasFatalFailure()) return;
  }
}

// 32 inputs, each broadcasting differently to [3, 7, 17] (and one [1, 1, 1] output),
// every one read: ((x0 + x1) * x2 - x3) / ... cycling Add, Mul, Sub, Max, Div.
TEST(FusedHostRun, ThirtyTwoBroadcastingInputsMatchTheCpuKernel) {
  const std::vector<Shape> shapes = {{3, 7, 17}, {7, 17}, {17}, {3, 1, 17}, {3, 7, 1}, {1}, {}, {7, 1}, {3, 1, 1}};
  const FusedOpcode ops[] = {FusedOpcode::kAdd, FusedOpcode::kMul, FusedOpcode::kSub, FusedOpcode::kMax,
                             FusedOpcode::kDiv};
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> value(-128, 128);
  std::vector<int64_t> program = {Op(FusedOpcode::kAdd), 0, 1, -1};
  for (int64_t k = 2; k < kFusedMaxInputs; ++k) {
    program.insert(program.end(), {Op(ops[k % 5]), kFusedMaxInputs + k - 2, k, -1});
  }
  std::vector<Case> cases;
  for (bool one_element : {false, true}) {
    std::vector<HostTensor> inputs;
    for (int64_t k = 0; k < kFusedMaxInputs; ++k) {
      Shape s = shapes[static_cast<size_t>(k) % shapes.size()];
      if (one_element) s.assign(s.size(), 1);
      std::vector<double> x(static_cast<size_t>(*NumElements(s)));
      for (double& e : x) e = value(rng) / 64.0;
      inputs.push_back(HostTensor::Of<double>(s, x));
    }
    for (const TypeCase& t : kTypes) {
      cases.push_back({std::string(one_element ? "one element, " : "") + "32 inputs", program, {}, inputs, t.dtype,
                       ""});
    }
  }
  ExpectAllMatchCpu(cases);
}

}  // namespace fused_host_test
}  // namespace remex::kernels
