// Conformance runner over ONNX's own backend node test cases (onnx-node/test_*), each a
// model.onnx with test_data_set_N/{input,output}_K.pb. Every case is compiled with the
// input shapes of its data, run on the CPU VM and compared with ONNX's expected outputs
// (ONNX's tolerances: rtol 1e-3, atol 1e-7 for floating point, NaN equal to NaN as
// numpy.testing.assert_allclose compares; exact otherwise; bfloat16 within one unit in
// the last place, see below).
//
// A case is skipped, with the reason, when the compiler reports UNIMPLEMENTED (an op
// Remex does not run yet, a data type it does not hold). Inputs and outputs that are
// ONNX sequences or optionals are read from their SequenceProto / OptionalProto files
// and compared element by element.
// Every case made only of the walking skeleton's ops must pass.
//
// Data: $REMEX_CONFORMANCE_DIR, else ../shared/conformance or .cache/conformance beside
// the source tree (scripts/conformance-dir.sh generates it when missing).
// $REMEX_CONFORMANCE_REPORT names a Markdown file to write the per-op table and every
// failure and skip to (docs/conformance.md is made this way by scripts/conformance-report.sh).
#include <gtest/gtest.h>

#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "host_client/tooling/compare.h"
#include "host_client/compiler/compiler.h"
#include "host_client/compiler/onnx_import.h"
#include "tests/process_util.h"
#include "vm/vm.h"

namespace remex {
namespace {

namespace fs = std::filesystem;

// The ops of the walking skeleton: every case built only from these must pass.
const std::set<std::string> kRequiredOps = {
    "Conv", "BatchNormalization", "Add", "Mul", "Div", "Clip", "Relu", "HardSigmoid", "GlobalAveragePool",
    "MaxPool", "Shape", "Cast", "Slice", "Concat", "Reshape", "MatMul", "Softmax", "Constant"};

// The operator list of dynamic-shape models (with control flow): at least 90 % of the
// cases built only from these and the skeleton's ops must pass.
const std::set<std::string> kCoverageOps = {
    "Resize", "ConvTranspose", "Sigmoid", "Tanh", "LeakyRelu", "PRelu", "HardSwish", "Exp", "Log", "Erf",
    "Sqrt", "Pow", "Sub", "Neg", "Abs", "Reciprocal", "Min", "Max", "Equal", "Less", "Greater", "Not", "And",
    "Or", "Where", "Transpose", "Squeeze", "Unsqueeze", "Flatten", "Expand", "Tile", "Gather", "Split", "Pad",
    "Range", "ConstantOfShape", "Size", "Identity", "Dropout", "ReduceMean", "ReduceSum", "ReduceMax",
    "ReduceMin", "ReduceProd", "ArgMax", "TopK", "AveragePool", "LRN", "Gemm", "InstanceNormalization",
    "LayerNormalization", "DepthToSpace", "SpaceToDepth", "LSTM", "GRU", "If", "Loop"};
constexpr double kCoverageTarget = 0.90;
// Every node case: no failure at all, and at least this share passing (the level Remex
// has reached, so that it only goes up; the skips are listed with their reasons in
// docs/conformance.md).
constexpr double kTotalFloor = 0.975;

bool InCoverage(const std::set<std::string>& ops) {
  return std::all_of(ops.begin(), ops.end(),
                     [](const std::string& op) { return kRequiredOps.count(op) || kCoverageOps.count(op); });
}

enum class Outcome { kPassed, kFailed, kSkipped };

struct CaseResult {
  std::string name;
  std::set<std::string> ops;
  Outcome outcome = Outcome::kSkipped;
  std::string reason;
};

std::vector<std::byte> ReadBytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::byte> bytes(raw.size());
  if (!raw.empty()) std::memcpy(bytes.data(), raw.data(), raw.size());
  return bytes;
}

std::string FindDataDir() {
  std::vector<std::string> candidates = {testing::Env("REMEX_CONFORMANCE_DIR"),
                                         std::string(REMEX_SOURCE_DIR) + "/../shared/conformance",
                                         std::string(REMEX_SOURCE_DIR) + "/.cache/conformance"};
  for (const auto& c : candidates) {
    if (!c.empty() && fs::is_directory(c + "/onnx-node")) return c;
  }
  return "";
}

const kernels::KernelRegistry& Registry() {
  static const auto registry = kernels::CreateCpuRegistry();
  return **registry;
}

CaseResult RunCase(const fs::path& dir) {
  CaseResult r;
  r.name = dir.filename().string();
  auto model_bytes = ReadBytes(dir / "model.onnx");
  onnx::ModelProto model;
  if (!model.ParseFromArray(model_bytes.data(), static_cast<int>(model_bytes.size()))) {
    r.outcome = Outcome::kFailed;
    r.reason = "model.onnx does not parse";
    return r;
  }
  for (const auto& n : model.graph().node()) r.ops.insert(n.op_type());
  // Cases whose expected outputs contradict their own model, found by reading them.
  static const std::map<std::string, std::string> kInconsistent = {
      {"test_adam_multiple",
       "inconsistent case: the expected outputs were computed with epsilon 1e-2, which the model's Adam node "
       "does not set (ONNX's default is 1e-6); OptimizerTest reproduces them with epsilon 1e-2"},
  };
  if (auto it = kInconsistent.find(dir.filename().string()); it != kInconsistent.end()) {
    r.reason = it->second;
    return r;  // skipped
  }
  auto skip = [&](const Status& st) {
    r.outcome = st.code() == StatusCode::kUnimplemented ? Outcome::kSkipped : Outcome::kFailed;
    r.reason = st.ToString();
    return r;
  };

  // A graph input's or output's kind (tensor, sequence, optional) and element dtype.
  auto kind_of = [](const onnx::TypeProto& type) -> std::pair<vm::ValueKind, int> {
    const onnx::TypeProto* t = &type;
    bool optional = false, sequence = false;
    if (t->has_optional_type()) optional = true, t = &t->optional_type().elem_type();
    if (t->has_sequence_type()) sequence = true, t = &t->sequence_type().elem_type();
    vm::ValueKind kind = sequence ? (optional ? vm::ValueKind::kOptionalSequence : vm::ValueKind::kSequence)
                                  : (optional ? vm::ValueKind::kOptionalTensor : vm::ValueKind::kTensor);
    return {kind, t->tensor_type().elem_type()};
  };
  fs::path data = dir / "test_data_set_0";
  // Graph inputs in order, minus initializers.
  std::set<std::string> initializers;
  for (const auto& init : model.graph().initializer()) initializers.insert(init.name());
  std::vector<const onnx::ValueInfoProto*> graph_inputs;
  for (const auto& in : model.graph().input()) {
    if (!initializers.count(in.name())) graph_inputs.push_back(&in);
  }
  // NumPy has no bfloat16: ONNX's test data holds bfloat16 values as uint16 tensors of
  // their bits where the model declares bfloat16.
  auto bfloat16_bits = [](compiler::ValueData& v, int declared) {
    for (auto& t : v.elements) {
      if (declared == onnx::TensorProto::BFLOAT16 && t.dtype == DType::kUint16) t.dtype = DType::kBFloat16;
    }
  };
  std::map<std::string, Shape> shapes;
  std::vector<compiler::ValueData> inputs;
  for (size_t i = 0; i < graph_inputs.size(); ++i) {
    const onnx::ValueInfoProto& declared = *graph_inputs[i];
    const auto [kind, elem_type] = kind_of(declared.type());
    fs::path file = data / ("input_" + std::to_string(i) + ".pb");
    if (!fs::exists(file)) return skip(Unimplemented("input " + std::to_string(i) + " has no data"));
    auto v = compiler::ValueFromProtoBytes(ReadBytes(file), kind);
    if (!v.ok()) return skip(v.status().WithContext("input " + declared.name()));
    bfloat16_bits(*v, elem_type);
    if (kind == vm::ValueKind::kTensor) {
      const vm::ConstantDef& t = v->elements[0];
      // A case whose data contradicts the model's declared static shape is
      // inconsistent: skipped, named (Remex checks inputs against the declared shape, as
      // ONNX Runtime does).
      if (declared.type().tensor_type().has_shape()) {
        const auto& dims = declared.type().tensor_type().shape().dim();
        bool fits = dims.size() == static_cast<int>(t.shape.size());
        for (int d = 0; fits && d < dims.size(); ++d) {
          fits = !dims[d].has_dim_value() || dims[d].dim_value() == t.shape[d];
        }
        if (!fits) {
          Shape want;
          for (const auto& dim : dims) want.push_back(dim.has_dim_value() ? dim.dim_value() : -1);
          r.reason = "inconsistent case: the data of input '" + declared.name() + "' has shape " +
                     ShapeToString(t.shape) + ", the model declares " + ShapeToString(want);
          return r;  // skipped
        }
      }
      shapes[declared.name()] = t.shape;
    }
    inputs.push_back(std::move(v).value());
  }
  std::vector<compiler::ValueData> expected;
  for (int i = 0; i < model.graph().output_size(); ++i) {
    const auto [kind, elem_type] = kind_of(model.graph().output(i).type());
    fs::path file = data / ("output_" + std::to_string(i) + ".pb");
    if (!fs::exists(file)) return skip(Unimplemented("output " + std::to_string(i) + " has no data"));
    auto v = compiler::ValueFromProtoBytes(ReadBytes(file), kind);
    if (!v.ok()) return skip(v.status().WithContext("output " + std::to_string(i)));
    bfloat16_bits(*v, elem_type);
    expected.push_back(std::move(v).value());
  }

  auto graph = compiler::ImportOnnxBytes(model_bytes, Registry(), shapes);
  if (!graph.ok()) return skip(graph.status());
  auto def = compiler::CompileGraph(std::move(graph).value(), Registry(), {});
  if (!def.ok()) return skip(def.status());
  auto exe = vm::Executable::FromDef(std::move(def).value(), Registry());
  if (!exe.ok()) return skip(exe.status());
  auto device = vm::CreateCpuDevice();
  auto allocator = vm::Allocator::Create(*device);
  auto machine = vm::VirtualMachine::Create(*exe, allocator, Registry());
  if (!machine.ok()) return skip(machine.status());
  auto upload = [&](const vm::ConstantDef& c) -> StatusOr<vm::TensorPtr> {
    REMEX_ASSIGN_OR_RETURN(vm::TensorPtr t, vm::AllocateTensor(*allocator, c.dtype, c.shape));
    if (!c.data.empty()) std::memcpy(t->data(), c.data.data(), c.data.size());
    return t;
  };
  std::vector<vm::Value> values;
  for (const auto& in : inputs) {
    if (in.none) {
      values.push_back(vm::Value::None());
      continue;
    }
    std::vector<vm::TensorPtr> tensors;
    for (const auto& c : in.elements) {
      auto t = upload(c);
      if (!t.ok()) return skip(t.status());
      tensors.push_back(*t);
    }
    values.push_back(vm::IsSequenceKind(in.kind) ? vm::Value::OfSequence(std::move(tensors))
                                                 : vm::Value::OfTensor(tensors[0]));
  }
  Status st = (*machine)->SetInputValues(0, std::move(values));
  if (!st.ok()) return skip(st);
  auto outputs = (*machine)->InvokeValues(0);
  if (!outputs.ok()) return skip(outputs.status());
  if (outputs->size() != expected.size()) {
    r.outcome = Outcome::kFailed;
    r.reason = "produced " + std::to_string(outputs->size()) + " outputs, expected " + std::to_string(expected.size());
    return r;
  }
  for (size_t i = 0; i < expected.size(); ++i) {
    const vm::Value& got = (*outputs)[i];
    const compiler::ValueData& want = expected[i];
    const bool got_none = got.kind == vm::Value::Kind::kNone;
    std::vector<vm::TensorPtr> tensors = got.kind == vm::Value::Kind::kSequence ? got.elements
                                         : got_none                            ? std::vector<vm::TensorPtr>{}
                                                                               : std::vector<vm::TensorPtr>{got.tensor};
    if (got_none != want.none || tensors.size() != want.elements.size()) {
      r.outcome = Outcome::kFailed;
      r.reason = "output " + std::to_string(i) + ": " +
                 (got_none ? std::string("an empty optional") : std::to_string(tensors.size()) + " tensors") +
                 ", expected " + (want.none ? std::string("an empty optional") : std::to_string(want.elements.size()) + " tensors");
      return r;
    }
    for (size_t k = 0; k < tensors.size(); ++k) {
      const vm::ConstantDef& ex = want.elements[k];
      npy::Array e{ex.dtype, ex.shape, ex.data};
      // A view the VM grew in place (ConcatAppend), read densely.
      auto dense = vm::DenseTensor(*allocator, tensors[k]);
      if (!dense.ok()) return skip(dense.status());
      const vm::TensorPtr& t = *dense;
      npy::Array a{t->dtype, t->shape, {}};
      a.data.resize(t->nbytes());
      if (!a.data.empty()) std::memcpy(a.data.data(), t->data(), a.data.size());
      bool floating = e.dtype == DType::kFloat32 || e.dtype == DType::kFloat64 || e.dtype == DType::kFloat16;
      // bfloat16: within one unit in the last place (2^-7 relative). ONNX 1.12's expected
      // values truncate float32 to bfloat16; Remex rounds to nearest even, as ONNX
      // Runtime, PyTorch and CUDA do.
      const bool bfloat16 = e.dtype == DType::kBFloat16;
      auto c = compare::CompareArrays(e, a, bfloat16 ? 1.0 / 128 : floating ? 1e-3 : 0.0, floating ? 1e-7 : 0.0,
                                       /*equal_nan=*/true);
      if (!c.ok) {
        r.outcome = Outcome::kFailed;
        char buf[128];
        std::snprintf(buf, sizeof buf, " (max abs error %.3g, first at %lld)", c.max_abs_error,
                      static_cast<long long>(c.first_mismatch));
        r.reason = "output " + std::to_string(i) + (tensors.size() > 1 || vm::IsSequenceKind(want.kind)
                                                       ? " element " + std::to_string(k) : std::string()) +
                   ": " + c.reason + buf;
        return r;
      }
    }
  }
  r.outcome = Outcome::kPassed;
  return r;
}

std::string OutcomeName(Outcome o) {
  return o == Outcome::kPassed ? "passed" : o == Outcome::kFailed ? "failed" : "skipped";
}

void WriteReport(const std::string& path, const std::vector<CaseResult>& results) {
  struct Counts { int passed = 0, failed = 0, skipped = 0; };
  std::map<std::string, Counts> per_op;
  Counts total;
  for (const auto& r : results) {
    auto bump = [&](Counts& c) {
      (r.outcome == Outcome::kPassed ? c.passed : r.outcome == Outcome::kFailed ? c.failed : c.skipped)++;
    };
    bump(total);
    std::set<std::string> ops = r.ops;
    if (ops.size() > 1) ops.erase("Constant");
    for (const auto& op : ops) bump(per_op[op]);
  }
  std::ofstream out(path);
  out << "# ONNX conformance\n\n"
      << "Generated by `scripts/conformance-report.sh` (the conformance runner, "
      << "`tests/conformance_test.cc`) over ONNX 1.12's backend node cases on the CPU device. "
      << "Tolerances are ONNX's: rtol 1e-3, atol 1e-7 for floating point (NaN matches NaN, as "
      << "ONNX's assert_allclose compares), exact otherwise; bfloat16 within one unit in the last place "
      << "(ONNX 1.12's expected bfloat16 values truncate float32, Remex rounds to nearest even as ONNX Runtime "
      << "does). "
      << "A case counts under every op its graph uses.\n\n"
      << "Total: " << results.size() << " cases, " << total.passed << " passed, " << total.failed << " failed, "
      << total.skipped << " skipped.\n\n"
      << "## Operator list coverage\n\n";
  int in_list = 0, in_list_passed = 0;
  for (const auto& r : results) {
    if (!InCoverage(r.ops)) continue;
    ++in_list;
    in_list_passed += r.outcome == Outcome::kPassed;
  }
  out << "Cases built only from the skeleton's ops and the dynamic-shape operator list (" << kCoverageOps.size()
      << " ops, If and Loop included): " << in_list << "; passed " << in_list_passed << " ("
      << (in_list ? 100.0 * in_list_passed / in_list : 0.0) << " %). The runner requires at least "
      << kCoverageTarget * 100 << " % of these, " << kTotalFloor * 100 << " % of all node cases and no "
      << "failure.\n\n"
      << "## By op\n\n| op | passed | failed | skipped |\n|---|---:|---:|---:|\n";
  for (const auto& [op, c] : per_op) {
    bool required = kRequiredOps.count(op);
    out << "| " << op << (required ? " (skeleton)" : "") << " | " << c.passed << " | " << c.failed << " | "
        << c.skipped << " |\n";
  }
  // Every op of ONNX's default domain defined by opset 17, from libonnx's schema
  // registry, with the opsets Remex implements it for (its registry entries; CUDA
  // kernels: the op table, kernels/ops/ops.def, marks the CPU-only ones kCpuOnly).
  std::set<std::string> domain_ops;
  for (const onnx::OpSchema& schema : onnx::OpSchemaRegistry::get_all_schemas_with_history()) {
    if (!schema.domain().empty() && schema.domain() != "ai.onnx") continue;
    if (schema.since_version() > 17) continue;
    domain_ops.insert(schema.Name());
  }
  int implemented = 0, imported = 0;
  for (const auto& op : domain_ops) {
    implemented += !Registry().SupportedVersions(op).empty();
    imported += Registry().SupportedVersions(op).empty() && !compiler::ImportedWithoutEntry(op).empty();
  }
  out << "\n## Every op of the default domain (opsets 1-17)\n\n"
      << implemented << " of " << domain_ops.size() << " ops have Remex entries, and the importer reads "
      << imported << " more itself (the opset column says how). Entries are CPU kernels; the CUDA kernels "
      << "cover them except the rows of `kernels/ops/ops.def` marked `kCpuOnly`. "
      << "The opsets are the registry's; "
      << "the importer also rewrites some older forms into them (host_client/compiler/README.md, Import). "
      << "Node cases: passed / all cases that use the op.\n\n"
      << "| op | Remex opsets | node cases |\n|---|---|---:|\n";
  for (const auto& op : domain_ops) {
    const std::string versions = Registry().SupportedVersions(op);
    auto it = per_op.find(op);
    std::string cases = "-";
    if (it != per_op.end()) {
      const Counts& c = it->second;
      cases = std::to_string(c.passed) + " / " + std::to_string(c.passed + c.failed + c.skipped);
    }
    std::string how = versions;
    if (how.empty()) how = compiler::ImportedWithoutEntry(op).empty() ? "not implemented"
                                                                       : "importer: " + std::string(compiler::ImportedWithoutEntry(op));
    out << "| " << op << " | " << how << " | " << cases << " |\n";
  }
  // The training domain's ops, the one other domain Remex has entries of.
  std::set<std::string> training_ops;
  for (const onnx::OpSchema& schema : onnx::OpSchemaRegistry::get_all_schemas_with_history()) {
    if (schema.domain() == "ai.onnx.preview.training") training_ops.insert(schema.Name());
  }
  out << "\n## Every op of ai.onnx.preview.training\n\n| op | Remex opsets | node cases |\n|---|---|---:|\n";
  for (const auto& op : training_ops) {
    const kernels::OpDef* def = Registry().FindOp(op);
    const bool ours = def && def->domain == "ai.onnx.preview.training";
    auto it = per_op.find(op);
    std::string cases = "-";
    if (it != per_op.end()) {
      const Counts& c = it->second;
      cases = std::to_string(c.passed) + " / " + std::to_string(c.passed + c.failed + c.skipped);
    }
    out << "| " << op << " | " << (ours ? Registry().SupportedVersions(op) : std::string("not implemented")) << " | "
        << cases << " |\n";
  }
  out << "\n## Failures\n\n";
  int failures = 0;
  for (const auto& r : results) {
    if (r.outcome != Outcome::kFailed) continue;
    out << "- `" << r.name << "`: " << r.reason << "\n";
    ++failures;
  }
  if (!failures) out << "None.\n";
  out << "\n## Skipped cases and why\n\n";
  for (const auto& r : results) {
    if (r.outcome != Outcome::kSkipped) continue;
    std::string reason = r.reason;
    std::replace(reason.begin(), reason.end(), '\n', ' ');
    out << "- `" << r.name << "`: " << reason << "\n";
  }
}

TEST(ConformanceTest, OnnxNodeCases) {
  std::string root = FindDataDir();
  if (root.empty()) {
    if (testing::Env("REMEX_REQUIRE_MODELS") == "1") FAIL() << "no conformance data";
    GTEST_SKIP() << "no ONNX conformance data: run scripts/test.sh (or scripts/gen-conformance.sh)";
  }
  std::vector<fs::path> cases;
  for (const auto& entry : fs::directory_iterator(root + "/onnx-node")) {
    if (entry.is_directory()) cases.push_back(entry.path());
  }
  std::sort(cases.begin(), cases.end());
  ASSERT_GT(cases.size(), 100u);
  std::vector<CaseResult> results;
  int passed = 0, failed = 0, skipped = 0;
  for (const auto& dir : cases) {
    CaseResult r = RunCase(dir);
    (r.outcome == Outcome::kPassed ? passed : r.outcome == Outcome::kFailed ? failed : skipped)++;
    bool required = std::all_of(r.ops.begin(), r.ops.end(), [](const std::string& op) { return kRequiredOps.count(op); });
    if (r.outcome == Outcome::kFailed) {
      ADD_FAILURE() << r.name << (required ? " (skeleton ops)" : "") << " failed: " << r.reason;
    }
    if (required && r.outcome == Outcome::kSkipped) {
      std::printf("[conformance] %s skipped: %s\n", r.name.c_str(), r.reason.c_str());
    }
    results.push_back(std::move(r));
  }
  std::printf("[conformance] %zu cases: %d passed, %d failed, %d skipped\n", results.size(), passed, failed, skipped);
  EXPECT_GE(passed, kTotalFloor * static_cast<double>(results.size()))
      << passed << " of " << results.size() << " node cases pass, under " << kTotalFloor * 100 << " %";
  int in_list = 0, in_list_passed = 0;
  for (const auto& r : results) {
    if (!InCoverage(r.ops)) continue;
    ++in_list;
    in_list_passed += r.outcome == Outcome::kPassed;
    if (r.outcome != Outcome::kPassed) std::printf("[conformance] operator list: %s %s: %s\n", r.name.c_str(),
                                                   OutcomeName(r.outcome).c_str(), r.reason.c_str());
  }
  std::printf("[conformance] operator list: %d of %d cases pass\n", in_list_passed, in_list);
  EXPECT_GE(in_list_passed, kCoverageTarget * in_list)
      << in_list_passed << " of " << in_list << " operator-list cases pass, under " << kCoverageTarget * 100 << " %";
  std::string report = testing::Env("REMEX_CONFORMANCE_REPORT");
  if (!report.empty()) WriteReport(report, results);
}

}  // namespace
}  // namespace remex
