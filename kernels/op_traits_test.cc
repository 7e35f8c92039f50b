// Every OpDef's traits (kernels.h OpTraits), which the compiler's passes act on, checked
// against the op's own CPU kernel by walking the registry, so that a trait set on a
// new op is tested without naming it here:
//   - elementwise / layout_agnostic: the op on operands permuted alike (NCHW to NHWC,
//     and another permutation) gives its result permuted the same way, also with an
//     operand broadcast per channel ([1, C, 1, 1]);
//   - fused_opcode: FusedElementwise running that opcode over the op's data operands,
//     with its parameters as immediates, gives the op's result bit for bit;
//   - epilogue_activation: FusedConv with the op as `activation` gives Conv then the op
//     (oneDNN's post-ops, within their rounding), and ApplyConvActivation, the formula
//     of the non-oneDNN epilogues, gives the op's result bit for bit.

#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "kernels/conv_epilogue.h"
#include "kernels/float16.h"
#include "kernels/float_test_util.h"
#include "kernels/ops/fused/fused.h"
#include "kernels/internal.h"
#include "kernels/op_attrs.h"
#include "kernels/test_util.h"

namespace remex::kernels {
namespace op_traits_test {

using testing::HostTensor;
using testing::OpRunner;

using Perm = std::array<int64_t, 4>;

// Every versioned entry of every op: traits are checked per entry (Clip-11 and
// Softmax-1 are entries of their own).
std::vector<const OpDef*> AllEntries(const KernelRegistry& registry) {
  std::vector<const OpDef*> entries;
  for (const std::string& name : registry.OpNames()) {
    for (const OpDef* def : registry.OpVersions(name)) entries.push_back(def);
  }
  return entries;
}

// "<op>-<since_version>", as OpRunner resolves it to this entry.
std::string EntryName(const OpDef& def) { return def.name + "-" + std::to_string(def.since_version); }

// Values of parameters in these tests, away from the ONNX defaults: attributes take
// kAttrValues[k], inputs kInputValues[k], for the op's k-th parameter.
constexpr float kAttrValues[] = {0.15f, 0.4f};
constexpr float kInputValues[] = {-0.5f, 0.75f};

float ParamValue(const ScalarParam& p, size_t k) {
  return p.attribute.empty() ? kInputValues[k % 2] : kAttrValues[k % 2];
}

// A tensor of `dtype` with the values `v` (float types, or bool: v > 0).
HostTensor Tensor(DType dtype, const Shape& shape, const std::vector<double>& v) {
  if (dtype == DType::kBool) {
    HostTensor t = HostTensor::Zeros(DType::kBool, shape);
    for (size_t i = 0; i < v.size(); ++i) t.bytes[i] = v[i] > 0 ? 1 : 0;
    return t;
  }
  return testing::ConvertFloat(HostTensor::Of<double>(shape, v), dtype);
}

// n values, multiples of 1/64 in [-2, 2] (exact in every float dtype), some zero.
std::vector<double> RandomValues(std::mt19937& rng, int64_t n) {
  std::uniform_int_distribution<int> d(-128, 128);
  std::vector<double> v(static_cast<size_t>(n));
  for (double& x : v) x = d(rng) / 64.0;
  return v;
}

// One way of calling an op: its inputs' dtypes (kUndefined: a parameter input) and
// attributes.
struct Call {
  std::vector<DType> dtypes;
  Attributes attrs;
};

bool IsParamInput(const OpDef& def, size_t i) {
  for (const ScalarParam& p : def.traits.params) {
    if (p.attribute.empty() && p.input == static_cast<int>(i)) return true;
  }
  return false;
}

// Attributes setting the op's attribute parameters to kAttrValues.
Attributes ParamAttrs(const OpDef& def) {
  Attributes a;
  for (size_t k = 0; k < def.traits.params.size(); ++k) {
    const ScalarParam& p = def.traits.params[k];
    if (!p.attribute.empty()) a.Set(p.attribute, ParamValue(p, k));
  }
  return a;
}

// Input count of a call: every input of a fixed-arity op, 3 of a variadic one.
size_t InputCount(const OpDef& def) { return def.max_inputs < 0 ? 3 : static_cast<size_t>(def.max_inputs); }

// A call of `def` with data inputs of `data_dtype` that its shape function accepts:
// data inputs all `data_dtype`, all bool, or a bool condition first (Where); the
// attributes without or with a float32 `to` (Cast). nullopt when none is accepted.
std::optional<Call> FindCall(const OpDef& def, DType data_dtype) {
  const size_t n = InputCount(def);
  std::vector<std::vector<DType>> choices;
  for (int pattern = 0; pattern < 3; ++pattern) {
    std::vector<DType> d(n);
    for (size_t i = 0; i < n; ++i) {
      const DType first = pattern == 2 && i == 0 ? DType::kBool : data_dtype;
      d[i] = IsParamInput(def, i) ? DType::kUndefined : pattern == 1 ? DType::kBool : first;
    }
    choices.push_back(d);
  }
  Attributes with_to = ParamAttrs(def);
  with_to.Set("to", int64_t{1});
  Attributes with_fmod = ParamAttrs(def);  // Mod takes floats with fmod = 1 only.
  with_fmod.Set("fmod", int64_t{1});
  for (const Attributes& attrs : {ParamAttrs(def), with_to, with_fmod}) {
    for (const std::vector<DType>& d : choices) {
      std::vector<ShapeFnArg> args(n);
      for (size_t i = 0; i < n; ++i) {
        args[i].present = true;
        args[i].dtype = d[i] == DType::kUndefined ? data_dtype : d[i];
        args[i].shape = d[i] == DType::kUndefined ? Shape{} : Shape{2, 3};
      }
      if (InferShapes(def, attrs, args).ok()) return Call{d, attrs};
    }
  }
  return std::nullopt;
}

// The call's inputs: data inputs of `shapes[i]` with random values, parameter inputs
// one-element tensors of kInputValues in the data dtype.
std::vector<HostTensor> MakeInputs(const OpDef& def, const Call& call, DType data_dtype,
                                   const std::vector<Shape>& shapes, std::mt19937& rng) {
  std::vector<HostTensor> in;
  for (size_t i = 0; i < call.dtypes.size(); ++i) {
    if (call.dtypes[i] == DType::kUndefined) {
      for (size_t k = 0; k < def.traits.params.size(); ++k) {
        const ScalarParam& p = def.traits.params[k];
        if (p.attribute.empty() && p.input == static_cast<int>(i)) {
          in.push_back(Tensor(data_dtype, {}, {ParamValue(p, k)}));
        }
      }
      continue;
    }
    in.push_back(Tensor(call.dtypes[i], shapes[i], RandomValues(rng, *NumElements(shapes[i]))));
  }
  return in;
}

// `t` (4-D) with its axes permuted: output axis d is input axis perm[d].
HostTensor Permute(const HostTensor& t, const Perm& perm) {
  if (t.shape.size() != 4) return t;
  Shape out_shape(4);
  for (size_t d = 0; d < 4; ++d) out_shape[d] = t.shape[perm[d]];
  HostTensor out = HostTensor::Zeros(t.dtype, out_shape);
  const size_t es = DTypeSize(t.dtype);
  std::array<int64_t, 4> in_stride{};
  int64_t s = 1;
  for (size_t d = 4; d-- > 0;) {
    in_stride[d] = s;
    s *= t.shape[d];
  }
  int64_t o = 0;
  for (int64_t a = 0; a < out_shape[0]; ++a) {
    for (int64_t b = 0; b < out_shape[1]; ++b) {
      for (int64_t c = 0; c < out_shape[2]; ++c) {
        for (int64_t e = 0; e < out_shape[3]; ++e, ++o) {
          const int64_t i = a * in_stride[perm[0]] + b * in_stride[perm[1]] + c * in_stride[perm[2]] +
                            e * in_stride[perm[3]];
          std::memcpy(out.bytes.data() + o * es, t.bytes.data() + i * es, es);
        }
      }
    }
  }
  return out;
}

// Same dtype, shape and values: float values equal (NaN matching NaN), others byte for
// byte.
void ExpectSame(const HostTensor& got, const HostTensor& want, const std::string& what) {
  ASSERT_EQ(got.dtype, want.dtype) << what;
  ASSERT_EQ(got.shape, want.shape) << what;
  if (internal::IsFloatType(want.dtype)) {
    testing::ExpectAllClose(testing::FloatValues(got), testing::FloatValues(want), 0, 0, what);
  } else {
    EXPECT_EQ(got.bytes, want.bytes) << what;
  }
}

TEST(OpTraitsTest, TraitsAreConsistent) {
  OpRunner r;
  int fusable = 0;
  for (const OpDef* entry : AllEntries(r.registry())) {
    const OpDef& def = *entry;
    const std::string& name = def.name;
    const OpTraits& t = def.traits;
    SCOPED_TRACE(EntryName(def));
    if (t.layout_agnostic) {
      EXPECT_TRUE(t.elementwise) << "layout-agnostic ops are the elementwise ones";
    }
    if (t.fused_opcode) {
      ++fusable;
      EXPECT_TRUE(t.elementwise);
      EXPECT_EQ(FusedOpcodeName(static_cast<int64_t>(*t.fused_opcode)), name) << "opcodes are named as their ops";
    }
    if (t.epilogue_activation) {
      EXPECT_TRUE(t.fused_opcode) << "an epilogue activation is a fusable formula";
    }
    for (const ScalarParam& p : t.params) {
      EXPECT_NE(!p.attribute.empty(), p.input >= 0) << "a parameter is an attribute or an input";
      if (p.input >= 0) {
        EXPECT_TRUE(def.max_inputs < 0 || p.input < def.max_inputs);
      }
    }
  }
  EXPECT_GT(fusable, 0);
}

// The op on inputs permuted by `perm` against its result permuted by `perm`. With
// `per_channel`, the second data input (if any) has shape [1, C, 1, 1].
void ExpectCommutesWithPermutation(OpRunner& r, const OpDef& def, const Perm& perm, bool per_channel,
                                   std::mt19937& rng) {
  std::optional<Call> call = FindCall(def, DType::kFloat32);
  ASSERT_TRUE(call) << "no call of " << def.name << " found to test it";
  std::vector<Shape> shapes(call->dtypes.size(), Shape{2, 3, 4, 5});
  if (per_channel) {
    int data = 0;
    for (size_t i = 0; i < shapes.size(); ++i) {
      if (call->dtypes[i] != DType::kUndefined && data++ == 1) shapes[i] = {1, 3, 1, 1};
    }
  }
  std::vector<HostTensor> in = MakeInputs(def, *call, DType::kFloat32, shapes, rng);
  auto want = r.Run(EntryName(def), call->attrs, in);
  ASSERT_TRUE(want.ok()) << want.status().ToString();
  for (HostTensor& t : in) t = Permute(t, perm);
  auto got = r.Run(EntryName(def), call->attrs, in);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->size(), want->size());
  for (size_t k = 0; k < got->size(); ++k) {
    ExpectSame((*got)[k], Permute((*want)[k], perm), def.name + " output " + std::to_string(k));
  }
}

TEST(OpTraitsTest, ElementwiseOpsCommuteWithPermutations) {
  OpRunner r;
  std::mt19937 rng(7);
  int checked = 0;
  for (const OpDef* entry : AllEntries(r.registry())) {
    const OpDef& def = *entry;
    if (!def.traits.elementwise && !def.traits.layout_agnostic) continue;
    SCOPED_TRACE(EntryName(def));
    for (const Perm& perm : {Perm{0, 2, 3, 1}, Perm{3, 1, 0, 2}}) {
      for (bool per_channel : {false, true}) {
        ExpectCommutesWithPermutation(r, def, perm, per_channel, rng);
        if (HasFatalFailure()) return;
      }
    }
    ++checked;
  }
  EXPECT_GT(checked, 20);
}

TEST(OpTraitsTest, FusableOpsMatchFusedElementwise) {
  OpRunner r;
  std::mt19937 rng(11);
  int checked = 0;
  for (const OpDef* entry : AllEntries(r.registry())) {
    const OpDef& def = *entry;
    const std::string& name = def.name;
    if (!def.traits.fused_opcode) continue;
    const int64_t opcode = static_cast<int64_t>(*def.traits.fused_opcode);
    for (DType dtype : {DType::kFloat32, DType::kFloat64, DType::kFloat16}) {
      SCOPED_TRACE(name + " " + std::string(DTypeName(dtype)));
      std::optional<Call> call = FindCall(def, dtype);
      ASSERT_TRUE(call) << "no float call of " << name;
      // Data operands broadcast: [2, 3, 4], [3, 1], [4], ...
      const Shape kShapes[] = {{2, 3, 4}, {3, 1}, {4}};
      std::vector<Shape> shapes;
      int data = 0;
      for (DType d : call->dtypes) shapes.push_back(d == DType::kUndefined ? Shape{} : kShapes[data++ % 3]);
      std::vector<HostTensor> in = MakeInputs(def, *call, dtype, shapes, rng);
      auto want = r.Run(EntryName(def), call->attrs, in);
      ASSERT_TRUE(want.ok()) << want.status().ToString();

      // The program: data operands are inputs 0..n-1, parameters immediates n...
      std::vector<HostTensor> fused_in;
      for (size_t i = 0; i < call->dtypes.size(); ++i) {
        if (call->dtypes[i] != DType::kUndefined) fused_in.push_back(in[i]);
      }
      const int64_t nin = static_cast<int64_t>(fused_in.size());
      std::vector<float> immediates;
      for (size_t k = 0; k < def.traits.params.size(); ++k) {
        immediates.push_back(ParamValue(def.traits.params[k], k));
      }
      const int64_t nimm = static_cast<int64_t>(immediates.size());
      std::vector<int64_t> program;
      if (def.max_inputs < 0) {  // A left fold of the binary opcode.
        int64_t acc = 0;
        for (int64_t i = 1; i < nin; ++i) {
          program.insert(program.end(), {opcode, acc, i, -1});
          acc = nin + nimm + i - 1;
        }
      } else {
        std::vector<int64_t> ins = {opcode};
        for (int64_t i = 0; i < nin; ++i) ins.push_back(i);
        for (int64_t k = 0; k < nimm; ++k) ins.push_back(nin + k);
        ASSERT_EQ(static_cast<int>(ins.size()) - 1, FusedOperandCount(opcode)) << "operands of the opcode";
        ins.resize(kFusedWidth, -1);
        program = ins;
      }
      Attributes fa;
      fa.Set("program", program);
      if (!immediates.empty()) fa.Set("immediates", immediates);
      auto got = r.Run("FusedElementwise", fa, fused_in);
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      ExpectSame((*got)[0], (*want)[0], name);
      if (HasFatalFailure()) return;
    }
    ++checked;
  }
  EXPECT_GT(checked, 15);
}

TEST(OpTraitsTest, EpilogueActivationsMatchTheirOwnKernel) {
  OpRunner r;
  std::mt19937 rng(13);
  int checked = 0;
  for (const OpDef* entry : AllEntries(r.registry())) {
    const OpDef& def = *entry;
    const std::string& name = def.name;
    if (!def.traits.epilogue_activation) continue;
    SCOPED_TRACE(EntryName(def));
    HostTensor x = Tensor(DType::kFloat32, {1, 2, 5, 5}, RandomValues(rng, 50));
    HostTensor w = Tensor(DType::kFloat32, {3, 2, 1, 1}, RandomValues(rng, 6));
    auto conv = r.Run("Conv", {}, {x, w});
    ASSERT_TRUE(conv.ok()) << conv.status().ToString();
    const HostTensor& y = (*conv)[0];

    // Unfused: the op's own kernel on Conv's output.
    std::optional<Call> call = FindCall(def, DType::kFloat32);
    ASSERT_TRUE(call);
    std::vector<HostTensor> in = MakeInputs(def, *call, DType::kFloat32, std::vector<Shape>(3, y.shape), rng);
    in[0] = y;
    auto want = r.Run(EntryName(def), call->attrs, in);
    ASSERT_TRUE(want.ok()) << want.status().ToString();

    std::vector<float> params;
    for (size_t k = 0; k < def.traits.params.size(); ++k) params.push_back(ParamValue(def.traits.params[k], k));
    Attributes fa;
    fa.Set("activation", name);
    if (!params.empty()) fa.Set("activation_params", params);
    auto fused = r.Run("FusedConv", fa, {x, w});
    ASSERT_TRUE(fused.ok()) << fused.status().ToString();
    testing::ExpectAllClose(testing::FloatValues((*fused)[0]), testing::FloatValues((*want)[0]), 1e-6, 1e-6,
                            name + " as FusedConv's activation");

    // The reference formula of the epilogues, bit for bit.
    auto e = internal::ParseConvEpilogue("FusedConv", fa);
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    std::vector<float> ref;
    for (float v : y.Values<float>()) ref.push_back(ApplyConvActivation(e->activation, v, e->alpha, e->beta));
    ExpectSame(HostTensor::Of<float>(y.shape, ref), (*want)[0], name + " by ApplyConvActivation");
    ++checked;
  }
  EXPECT_GE(checked, 7);
}

}  // namespace op_traits_test
}  // namespace remex::kernels
