// ONNX sequences and optionals in the VM: the Seq/Opt opcodes, functions that take and
// give them (SetInputValues / InvokeValues), and the verifier's rules for them.
#include <gtest/gtest.h>

#include <cstring>

#include "vm/vm.h"

namespace remex::vm {
namespace sequence_test {

const kernels::KernelRegistry& Registry() {
  static const auto registry = kernels::CreateCpuRegistry();
  return **registry;
}

constexpr int64_t kF32 = static_cast<int64_t>(DType::kFloat32);

ValueDesc Desc(std::string name, ValueKind kind, DType dtype = DType::kFloat32) {
  ValueDesc d{std::move(name), dtype, {}, {}, kind, /*rank_known=*/false};
  if (kind == ValueKind::kTensor) d.rank_known = true;
  return d;
}

// main(s: sequence<float32>, x: float32 [2], p: int64 []) ->
//   (t = Insert(s, x, p) without its last element: sequence,
//    n = Length(t) as an optional tensor,
//    e = At(t, 0) as an optional tensor, or nothing when the sequence is empty)
ExecutableDef SequenceDef() {
  ExecutableDef def;
  def.producer = "sequence_test";
  FunctionDef fn;
  fn.name = "main";
  ValueDesc x{"x", DType::kFloat32, {2}, {}};
  ValueDesc p{"p", DType::kInt64, {}, {}};
  fn.inputs = {Desc("s", ValueKind::kSequence), x, p};
  fn.outputs = {Desc("t", ValueKind::kSequence), Desc("n", ValueKind::kOptionalTensor, DType::kInt64),
                Desc("e", ValueKind::kOptionalTensor)};
  fn.num_registers = 12;
  fn.code = {
      {Opcode::kSeqInsert, {3, 0, 1, 2}, {}},  // %3 = s with x inserted at p
      {Opcode::kSeqErase, {4, 3, -1}, {}},     // %4 = %3 without its last element
      {Opcode::kSeqLength, {5, 4}, {}},        // %5 = len(%4), host
      {Opcode::kCopyToDevice, {6, 5}, {}},
      {Opcode::kOptNone, {7}, {}},
      {Opcode::kLoadConst, {8, 0, 1}, {}},     // %8 = 0 (host), %9 = 0 < len(%4)
      {Opcode::kCopyToDevice, {9, 5}, {}},
      {Opcode::kIf, {9, 10}, {}},              // an empty %4 leaves %7 empty
      {Opcode::kSeqAt, {10, 4, 8}, {}},
      {Opcode::kMove, {7, 10}, {}},
      {Opcode::kRet, {}, {{4, 6, 7}}},
  };
  def.constants.push_back({DType::kInt64, {}, std::vector<std::byte>(8)});
  def.functions.push_back(std::move(fn));
  return def;
}

struct Machine {
  std::unique_ptr<Device> device = CreateCpuDevice();
  std::shared_ptr<Allocator> allocator = Allocator::Create(*device);
  std::unique_ptr<VirtualMachine> vm;

  TensorPtr Floats(const Shape& shape, std::vector<float> values) {
    auto t = AllocateTensor(*allocator, DType::kFloat32, shape);
    EXPECT_TRUE(t.ok());
    std::memcpy((*t)->data(), values.data(), values.size() * sizeof(float));
    return *t;
  }
  TensorPtr Int64(int64_t v) {
    auto t = AllocateTensor(*allocator, DType::kInt64, {});
    EXPECT_TRUE(t.ok());
    *static_cast<int64_t*>((*t)->data()) = v;
    return *t;
  }
};

std::vector<float> FloatsOf(const TensorPtr& t) {
  const float* p = static_cast<const float*>(t->data());
  return std::vector<float>(p, p + *NumElements(t->shape));
}

Machine Load(const ExecutableDef& def) {
  Machine m;
  auto exe = Executable::FromDef(def, Registry());
  EXPECT_TRUE(exe.ok()) << exe.status().ToString();
  auto vm = VirtualMachine::Create(*exe, m.allocator, Registry());
  EXPECT_TRUE(vm.ok()) << vm.status().ToString();
  m.vm = std::move(vm).value();
  return m;
}

TEST(SequenceTest, InsertEraseLengthAndAtOnASequenceInput) {
  Machine m = Load(SequenceDef());
  TensorPtr a = m.Floats({3}, {1, 2, 3});
  TensorPtr b = m.Floats({1}, {4});
  TensorPtr x = m.Floats({2}, {5, 6});
  // Insert x before position -1 of [a, b] -> [a, x, b]; erase the last -> [a, x].
  ASSERT_TRUE(m.vm->SetInputValues(0, {Value::OfSequence({a, b}), Value::OfTensor(x), Value::OfTensor(m.Int64(-1))}).ok());
  auto out = m.vm->InvokeValues(0);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_EQ(out->size(), 3u);
  const Value& t = (*out)[0];
  ASSERT_EQ(t.kind, Value::Kind::kSequence);
  ASSERT_EQ(t.elements.size(), 2u);
  EXPECT_EQ(FloatsOf(t.elements[0]), (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(FloatsOf(t.elements[1]), (std::vector<float>{5, 6}));
  // The elements are copies: the caller's inputs are never handed back as outputs.
  EXPECT_NE(t.elements[0]->data(), a->data());
  EXPECT_NE(t.elements[1]->data(), x->data());
  ASSERT_EQ((*out)[1].kind, Value::Kind::kTensor);
  EXPECT_EQ(*static_cast<const int64_t*>((*out)[1].tensor->data()), 2);
  ASSERT_EQ((*out)[2].kind, Value::Kind::kTensor);
  EXPECT_EQ(FloatsOf((*out)[2].tensor), (std::vector<float>{1, 2, 3}));
  // The input sequence itself is unchanged by the calls (a new list per call).
  out = m.vm->InvokeValues(0);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].elements.size(), 2u);

  // An empty sequence: insert at 0 then erase the last leaves it empty; e is nothing.
  ASSERT_TRUE(m.vm->SetInputValues(0, {Value::OfSequence({}), Value::OfTensor(x), Value::OfTensor(m.Int64(0))}).ok());
  out = m.vm->InvokeValues(0);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_TRUE((*out)[0].elements.empty());
  EXPECT_EQ(*static_cast<const int64_t*>((*out)[1].tensor->data()), 0);
  EXPECT_EQ((*out)[2].kind, Value::Kind::kNone);
}

TEST(SequenceTest, BadValuesAndPositionsAreClearErrors) {
  Machine m = Load(SequenceDef());
  TensorPtr a = m.Floats({3}, {1, 2, 3});
  TensorPtr x = m.Floats({2}, {5, 6});
  // A tensor where the function takes a sequence.
  Status st = m.vm->SetInputValues(0, {Value::OfTensor(a), Value::OfTensor(x), Value::OfTensor(m.Int64(0))});
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("input 's' is an ONNX sequence of float32, got a tensor"), std::string::npos) << st.ToString();
  // An element of another dtype, named by its index.
  st = m.vm->SetInputValues(0, {Value::OfSequence({a, m.Int64(1)}), Value::OfTensor(x), Value::OfTensor(m.Int64(0))});
  EXPECT_NE(st.message().find("element 1 of input 's' must be float32, got int64"), std::string::npos) << st.ToString();
  // SetInputs (tensors only) cannot bind a sequence input.
  st = m.vm->SetInputs(0, {a, x, m.Int64(0)});
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  // A position outside [-n, n] for an insert into a sequence of one element.
  ASSERT_TRUE(m.vm->SetInputValues(0, {Value::OfSequence({a}), Value::OfTensor(x), Value::OfTensor(m.Int64(2))}).ok());
  auto out = m.vm->InvokeValues(0);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kOutOfRange);
  EXPECT_NE(out.status().message().find("sequence position 2 is outside [-1, 1]"), std::string::npos)
      << out.status().ToString();
  // The VM stays usable.
  ASSERT_TRUE(m.vm->SetInputValues(0, {Value::OfSequence({a}), Value::OfTensor(x), Value::OfTensor(m.Int64(1))}).ok());
  EXPECT_TRUE(m.vm->InvokeValues(0).ok());
  // Tensor-only entry points name the sequence output.
  auto tensors = m.vm->Invoke(0);
  EXPECT_EQ(tensors.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(tensors.status().message().find("output 't' is an ONNX sequence"), std::string::npos);
  EXPECT_EQ(m.vm->SetOutput(0, 0, x).code(), StatusCode::kInvalidArgument);
}

TEST(SequenceTest, OptionalGetOfAnEmptyOptionalIsAnError) {
  ExecutableDef def;
  FunctionDef fn;
  fn.name = "main";
  fn.inputs = {Desc("o", ValueKind::kOptionalTensor)};
  fn.inputs[0].rank_known = true;
  fn.inputs[0].shape = {2};
  fn.outputs = {Desc("v", ValueKind::kOptionalTensor), Desc("has", ValueKind::kOptionalTensor, DType::kBool)};
  fn.num_registers = 4;
  fn.code = {
      {Opcode::kOptHas, {2, 0}, {}},
      {Opcode::kCopyToDevice, {3, 2}, {}},  // outputs are device tensors
      {Opcode::kOptGet, {1, 0}, {}},
      {Opcode::kRet, {}, {{1, 3}}},
  };
  def.functions.push_back(std::move(fn));
  Machine m = Load(def);
  TensorPtr x = m.Floats({2}, {7, 8});
  ASSERT_TRUE(m.vm->SetInputValues(0, {Value::OfTensor(x)}).ok());
  auto out = m.vm->InvokeValues(0);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(FloatsOf((*out)[0].tensor), (std::vector<float>{7, 8}));
  EXPECT_EQ(*static_cast<const uint8_t*>((*out)[1].tensor->data()), 1);
  ASSERT_TRUE(m.vm->SetInputValues(0, {Value::None()}).ok());
  out = m.vm->InvokeValues(0);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(out.status().message().find("OptionalGetElement of an optional that holds no value"), std::string::npos)
      << out.status().ToString();
}

// One function returning %r as output 0 of `kind`, after `code`.
Status VerifyReturn(ValueKind kind, std::vector<Instruction> code, int64_t r) {
  ExecutableDef def;
  FunctionDef fn;
  fn.name = "main";
  fn.inputs = {{"x", DType::kFloat32, {2}, {}}, {"c", DType::kBool, {}, {}}};
  fn.outputs = {Desc("y", kind)};
  fn.num_registers = 8;
  fn.code = std::move(code);
  fn.code.push_back({Opcode::kRet, {}, {{r}}});
  def.functions.push_back(std::move(fn));
  return Executable::FromDef(def, Registry()).status();
}

TEST(SequenceTest, TheVerifierChecksWhatRegistersHoldAsSequencesAndOptionals) {
  // A sequence of the input tensor, returned as a sequence: fine.
  EXPECT_TRUE(VerifyReturn(ValueKind::kSequence, {{Opcode::kSeqConstruct, {2}, {{0}}}}, 2).ok());
  // A tensor returned as a sequence.
  Status st = VerifyReturn(ValueKind::kSequence, {}, 0);
  EXPECT_NE(st.message().find("as output 0 (sequence), which does not hold a value of that kind"), std::string::npos)
      << st.ToString();
  // SeqAt of a tensor register.
  st = VerifyReturn(ValueKind::kOptionalTensor, {{Opcode::kSeqAt, {2, 0, 1}, {}}}, 2);
  EXPECT_NE(st.message().find("SeqAt of %0, which does not hold a sequence on every path"), std::string::npos)
      << st.ToString();
  // A host tensor put in a sequence (its elements live in device memory).
  st = VerifyReturn(ValueKind::kSequence, {{Opcode::kCopyToHost, {3, 0}, {}}, {Opcode::kSeqConstruct, {2}, {{3}}}}, 2);
  EXPECT_NE(st.message().find("SeqConstruct of %3, which is not a tensor in device memory"), std::string::npos)
      << st.ToString();
  // AllocOutput for a sequence output.
  st = VerifyReturn(ValueKind::kSequence, {{Opcode::kAllocOutput, {2, 0, kF32, -1}, {{2}}}}, 2);
  EXPECT_NE(st.message().find("AllocOutput for output 'y', which is a sequence"), std::string::npos) << st.ToString();
  // A sequence on one path of an If and an empty optional on the other: an optional
  // sequence, not a sequence, until OptGet checks it.
  std::vector<Instruction> maybe = {
      {Opcode::kOptNone, {2}, {}},
      {Opcode::kIf, {1, 3}, {}},
      {Opcode::kSeqConstruct, {2}, {{0}}},
  };
  EXPECT_TRUE(VerifyReturn(ValueKind::kOptionalSequence, maybe, 2).ok());
  st = VerifyReturn(ValueKind::kSequence, maybe, 2);
  EXPECT_NE(st.message().find("which does not hold a value of that kind on every path"), std::string::npos)
      << st.ToString();
  maybe.push_back({Opcode::kOptGet, {3, 2}, {}});
  EXPECT_TRUE(VerifyReturn(ValueKind::kSequence, maybe, 3).ok());
  // A sequence's element cannot be a kernel's output (it may be a caller's input).
  ExecutableDef def;
  def.kernels.push_back({"Relu", {}, 1, 1, "relu"});
  FunctionDef fn;
  fn.name = "main";
  fn.inputs = {Desc("s", ValueKind::kSequence), {"p", DType::kInt64, {}, {}}};
  fn.outputs = {Desc("s2", ValueKind::kSequence)};
  fn.num_registers = 4;
  fn.code = {
      {Opcode::kSeqAt, {2, 0, 1}, {}},
      {Opcode::kInvokeKernel, {0}, {{2}, {2}}},
      {Opcode::kRet, {}, {{0}}},
  };
  def.functions.push_back(std::move(fn));
  st = Executable::FromDef(def, Registry()).status();
  EXPECT_NE(st.message().find("kernel output %2 is not a tensor this function allocated"), std::string::npos)
      << st.ToString();
}

TEST(SequenceTest, KindsSurviveSerialisation) {
  auto bytes = SerializeExecutable(SequenceDef());
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  auto loaded = Executable::Load(*bytes, Registry());
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  const FunctionDef& fn = (*loaded)->def().functions[0];
  EXPECT_EQ(fn.inputs[0].kind, ValueKind::kSequence);
  EXPECT_FALSE(fn.inputs[0].rank_known);
  EXPECT_EQ(fn.inputs[1].kind, ValueKind::kTensor);
  EXPECT_TRUE(fn.inputs[1].rank_known);
  EXPECT_EQ(fn.outputs[1].kind, ValueKind::kOptionalTensor);
}

}  // namespace sequence_test
}  // namespace remex::vm
