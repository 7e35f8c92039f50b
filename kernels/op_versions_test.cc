// The registry's version ranges: per op, its entries tile the opsets from the first
// version supported to the newest, and a lookup at each boundary finds the right one.
// (That each since_version is a real ONNX definition is checked against ONNX's schema
// registry in host_client/compiler/op_versions_onnx_test.cc.)

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/test_util.h"

namespace remex::kernels {
namespace op_versions_test {

using testing::HostTensor;
using testing::OpRunner;

TEST(OpVersionsTest, EntriesTileTheOpsetsWithoutGapsOrOverlaps) {
  OpRunner r;
  const KernelRegistry& reg = r.registry();
  int versioned = 0;
  for (const std::string& op : reg.OpNames()) {
    SCOPED_TRACE(op);
    const std::vector<const OpDef*> entries = reg.OpVersions(op);
    ASSERT_FALSE(entries.empty());
    if (entries.size() > 1) ++versioned;
    EXPECT_GE(entries.front()->since_version, 1);
    EXPECT_EQ(entries.back()->end_version, kOpenEndedVersion) << "the newest entry covers every later opset";
    // Nothing below the first entry.
    EXPECT_EQ(reg.FindOp(op, entries.front()->since_version - 1), nullptr);
    for (size_t i = 0; i < entries.size(); ++i) {
      const OpDef& e = *entries[i];
      SCOPED_TRACE(e.since_version);
      EXPECT_EQ(e.name, op);
      EXPECT_LE(e.since_version, e.end_version);
      if (i + 1 < entries.size()) {
        EXPECT_EQ(entries[i + 1]->since_version, e.end_version + 1) << "no gap, no overlap";
        EXPECT_EQ(reg.FindOp(op, e.end_version + 1), entries[i + 1]);
      }
      // Both boundaries of the range resolve to this entry, as does its middle.
      EXPECT_EQ(reg.FindOp(op, e.since_version), &e);
      EXPECT_EQ(reg.FindOp(op, e.end_version), &e);
      EXPECT_EQ(reg.FindOp(op, e.since_version + (e.end_version - e.since_version) / 2), &e);
      // Each entry has its own CPU kernel, found through any version it covers.
      const KernelFactory* kernel = reg.FindKernel(op, e.since_version, DeviceKind::kCpu);
      EXPECT_NE(kernel, nullptr);
      EXPECT_EQ(reg.FindKernel(op, e.end_version, DeviceKind::kCpu), kernel);
    }
    EXPECT_EQ(reg.FindOp(op), entries.back());
    EXPECT_EQ(reg.FindOp(op, kNewestVersion), entries.back());
  }
  // Dropout, Flatten, Resize, Softmax at least.
  EXPECT_GE(versioned, 4);
}

TEST(OpVersionsTest, VersionedOpsResolveToTheirDefinition) {
  OpRunner r;
  const KernelRegistry& reg = r.registry();
  struct Expect {
    const char* op;
    int version;
    int since;
    int end;
  };
  for (const Expect& e : std::vector<Expect>{{"Dropout", 7, 7, 9},
                                             {"Dropout", 9, 7, 9},
                                             {"Dropout", 10, 10, kOpenEndedVersion},
                                             {"Dropout", 13, 10, kOpenEndedVersion},
                                             {"Flatten", 9, 1, 10},
                                             {"Flatten", 11, 11, kOpenEndedVersion},
                                             {"Resize", 10, 10, 10},
                                             {"Resize", 11, 11, 12},
                                             {"Resize", 12, 11, 12},
                                             {"Resize", 13, 13, kOpenEndedVersion},
                                             {"Softmax", 12, 1, 12},
                                             {"Softmax", 13, 13, kOpenEndedVersion},
                                             {"Range", 11, 11, kOpenEndedVersion},
                                             {"Reshape", 5, 5, kOpenEndedVersion},
                                             {"Relu", 6, 6, kOpenEndedVersion},
                                             {"Clip", 11, 11, kOpenEndedVersion}}) {
    SCOPED_TRACE(std::string(e.op) + "-" + std::to_string(e.version));
    const OpDef* def = reg.FindOp(e.op, e.version);
    ASSERT_NE(def, nullptr);
    EXPECT_EQ(def->since_version, e.since);
    EXPECT_EQ(def->end_version, e.end);
  }
  EXPECT_EQ(reg.FindOp("Resize", 9), nullptr);
  EXPECT_EQ(reg.FindOp("Range", 10), nullptr);
  EXPECT_EQ(reg.FindOp("Reshape", 4), nullptr);
  EXPECT_EQ(reg.FindOp("Clip", 10), nullptr);  // The frontend binds Clip-6 to Clip-11.
  EXPECT_EQ(reg.SupportedVersions("Resize"), "10, 11-12, 13+");
  EXPECT_EQ(reg.SupportedVersions("Range"), "11+");
  EXPECT_EQ(reg.SupportedVersions("NoSuchOp"), "");
}

TEST(OpVersionsTest, EntriesBehaveAsTheirDefinition) {
  OpRunner r;
  const HostTensor x = HostTensor::Of<float>({2, 2}, {0, 0, 0, 0});
  // Dropout-7's mask has the data's dtype, Dropout-10's is bool: one entry each.
  auto d7 = r.Run("Dropout-9", {}, {x});
  auto d10 = r.Run("Dropout-10", {}, {x});
  ASSERT_TRUE(d7.ok() && d10.ok());
  EXPECT_EQ((*d7)[1].dtype, DType::kFloat32);
  EXPECT_EQ((*d10)[1].dtype, DType::kBool);
  // Softmax-1 normalises over the flattened [axis:] dims (axis default 1), Softmax-13
  // along the last axis.
  const HostTensor y = HostTensor::Of<float>({1, 2, 2}, {0, 0, 0, 0});
  auto s1 = r.Run("Softmax-1", {}, {y});
  auto s13 = r.Run("Softmax-13", {}, {y});
  ASSERT_TRUE(s1.ok() && s13.ok());
  EXPECT_FLOAT_EQ((*s1)[0].Values<float>()[0], 0.25f);
  EXPECT_FLOAT_EQ((*s13)[0].Values<float>()[0], 0.5f);
  // Resize-10 takes (X, scales); Resize-13 (X, roi, scales, sizes).
  const HostTensor img = HostTensor::Of<float>({1, 1, 1, 2}, {1, 2});
  const HostTensor scales = HostTensor::Of<float>({4}, {1, 1, 1, 2});
  EXPECT_TRUE(r.Run("Resize-10", {}, {img, scales}).ok());
  EXPECT_FALSE(r.Infer("Resize-13", {}, {img, scales}).ok());
  // Flatten takes negative axes from its opset-11 entry.
  EXPECT_FALSE(r.Infer("Flatten-10", testing::Attrs({{"axis", int64_t{-1}}}), {x}).ok());
  EXPECT_TRUE(r.Infer("Flatten-11", testing::Attrs({{"axis", int64_t{-1}}}), {x}).ok());
}

OpDef Def(const char* name, int since, int end) {
  OpDef def;
  def.name = name;
  def.since_version = since;
  def.end_version = end;
  def.infer = [](const Attributes&, std::span<const ShapeFnArg> in) {
    return std::vector<TensorInfo>{{in[0].dtype, in[0].shape}};
  };
  return def;
}

// Kernels hold the registry's OpDefs by reference: a copy or a move would leave them
// dangling.
static_assert(!std::is_copy_constructible_v<KernelRegistry> && !std::is_move_constructible_v<KernelRegistry>);

TEST(OpVersionsTest, RegistryRefusesOverlapsAndEmptyRanges) {
  KernelRegistry reg;
  ASSERT_TRUE(reg.AddOp(Def("Op", 1, 9)).ok());
  ASSERT_TRUE(reg.AddOp(Def("Op", 13, kOpenEndedVersion)).ok());
  EXPECT_EQ(reg.AddOp(Def("Op", 9, 12)).code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(reg.AddOp(Def("Op", 12, 13)).code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(reg.AddOp(Def("Op", 11, 10)).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(reg.AddOp(Def("Op", 0, 10)).code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(reg.AddOp(Def("Op", 10, 12)).ok());  // The gap, filled.
  EXPECT_EQ(reg.SupportedVersions("Op"), "1-9, 10-12, 13+");
  EXPECT_EQ(reg.OpNames(), std::vector<std::string>{"Op"});
  // Kernels are keyed by entry: a version finds its entry's kernel, or none.
  // Each factory is handed the registry's own entry (which kernels may hold by
  // reference); the tag names the entry it was handed.
  auto factory = [&reg](int tag) {
    return [tag, &reg](const OpDef& def, const Attributes&) -> StatusOr<std::unique_ptr<OpKernel>> {
      if (&def != reg.FindOp("Op", tag)) return Internal("not the registry's OpDef");
      return InvalidArgument(std::to_string(def.since_version));
    };
  };
  // A kernel needs an entry starting at its version.
  EXPECT_EQ(reg.AddKernel("Op", 11, DeviceKind::kCpu, factory(11)).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(reg.AddKernel("Other", 1, DeviceKind::kCpu, factory(1)).code(), StatusCode::kFailedPrecondition);
  ASSERT_TRUE(reg.AddKernel("Op", 1, DeviceKind::kCpu, factory(1)).ok());
  ASSERT_TRUE(reg.AddKernel("Op", 13, DeviceKind::kCpu, factory(13)).ok());
  EXPECT_EQ(reg.AddKernel("Op", 13, DeviceKind::kCpu, factory(13)).code(), StatusCode::kAlreadyExists);
  EXPECT_EQ((*reg.FindKernel("Op", 9, DeviceKind::kCpu))({}).status().message(), "1");
  EXPECT_EQ((*reg.FindKernel("Op", 20, DeviceKind::kCpu))({}).status().message(), "13");
  EXPECT_EQ((*reg.FindKernel("Op", DeviceKind::kCpu))({}).status().message(), "13");
  EXPECT_EQ(reg.FindKernel("Op", 11, DeviceKind::kCpu), nullptr);  // Op-10 has no kernel.
  EXPECT_EQ(reg.FindKernel("Op", 9, DeviceKind::kCuda), nullptr);
}

}  // namespace op_versions_test
}  // namespace remex::kernels
