// The op table (kernels/ops/ops.def) and the checks that hold registration to it.
#include "kernels/op_table.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

namespace remex::kernels::internal {
namespace op_table_test {

// The entries of a full CPU registry with the family each row gives them.
std::vector<RegisteredOp> AsRegistered(const KernelRegistry& registry) {
  std::vector<RegisteredOp> out;
  for (const OpRow& row : OpTable()) {
    const OpDef* def = registry.FindOp(row.op, row.since_version);
    if (def) out.push_back({row.family, def});
  }
  return out;
}

TEST(OpTable, RowsAreWellFormedAndNameKnownFamilies) {
  std::set<std::string_view> families;
#define REMEX_OP_FAMILY(family) families.insert(#family);
#include "kernels/ops/families.def"
  ASSERT_FALSE(OpTable().empty());
  for (const OpRow& row : OpTable()) {
    SCOPED_TRACE(OpRowString(row));
    EXPECT_TRUE(families.count(row.family)) << "family not in kernels/ops/families.def";
    EXPECT_GE(row.since_version, 1);
    EXPECT_GE(row.end_version, row.since_version);
  }
}

TEST(OpTable, EveryRowIsRegisteredWithItsKernels) {
  auto registry = CreateCpuRegistry();
  ASSERT_TRUE(registry.ok()) << registry.status().ToString();
  size_t entries = 0;
  for (const std::string& op : (*registry)->OpNames()) entries += (*registry)->OpVersions(op).size();
  EXPECT_EQ(entries, OpTable().size());
  for (const OpRow& row : OpTable()) {
    const OpDef* def = (*registry)->FindOp(row.op, row.since_version);
    ASSERT_NE(def, nullptr) << OpRowString(row);
    EXPECT_EQ(def->since_version, row.since_version) << OpRowString(row);
    EXPECT_EQ(def->end_version, row.end_version) << OpRowString(row);
    EXPECT_EQ(def->domain, row.domain) << OpRowString(row);
    EXPECT_NE((*registry)->FindKernel(row.op, row.since_version, DeviceKind::kCpu), nullptr) << OpRowString(row);
  }
}

TEST(OpTable, AnEntryWithoutItsRowIsNamedWithTheRowToAdd) {
  auto registry = CreateCpuRegistry();
  ASSERT_TRUE(registry.ok()) << registry.status().ToString();
  const std::vector<RegisteredOp> registered = AsRegistered(**registry);
  ASSERT_TRUE(CheckOpDefsAgainstTable(OpTable(), registered).ok());
  std::vector<OpRow> rows;
  const OpRow* dropped = nullptr;
  for (const OpRow& row : OpTable()) {
    if (!dropped && row.op == "Conv") {
      dropped = &row;
      continue;
    }
    rows.push_back(row);
  }
  ASSERT_NE(dropped, nullptr);
  const Status s = CheckOpDefsAgainstTable(rows, registered);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("entry without a row, add: " + OpRowString(*dropped)), std::string::npos) << s.ToString();
}

TEST(OpTable, ARowWithoutItsEntryOrInAnotherFamilyIsNamed) {
  auto registry = CreateCpuRegistry();
  ASSERT_TRUE(registry.ok()) << registry.status().ToString();
  std::vector<RegisteredOp> registered = AsRegistered(**registry);
  std::vector<OpRow> rows(OpTable().begin(), OpTable().end());
  rows.push_back({"elementwise", "", "NoSuchOp", 1, kOpenEndedVersion, OpDevices::kCpuCuda});
  Status s = CheckOpDefsAgainstTable(rows, registered);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("row without a registered OpDef: REMEX_OP(elementwise, \"\", NoSuchOp, 1, kOpen"),
            std::string::npos)
      << s.ToString();

  rows.pop_back();
  ASSERT_EQ(registered.front().def->name, rows.front().op);
  registered.front().family = "signal";
  s = CheckOpDefsAgainstTable(rows, registered);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("differs from what is registered: REMEX_OP(signal"), std::string::npos) << s.ToString();
}

TEST(OpTable, MissingAndUnlistedKernelsAreNamed) {
  KernelRegistry registry;
  ASSERT_TRUE(RegisterOpDefs(registry).ok());
  // OpDefs only: every row misses its CPU kernel.
  Status s = CheckKernelsAgainstTable(OpTable(), registry, DeviceKind::kCpu);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("no cpu kernel for " + OpRowString(OpTable().front())), std::string::npos);

  // A CUDA kernel for an entry whose row says kCpuOnly.
  std::vector<OpRow> rows(OpTable().begin(), OpTable().end());
  rows.front().devices = OpDevices::kCpuOnly;
  const OpRow& first = rows.front();
  ASSERT_TRUE(registry
                  .AddKernel(first.op, first.since_version, DeviceKind::kCuda,
                             [](const OpDef&, const Attributes&) -> StatusOr<std::unique_ptr<OpKernel>> {
                               return Unimplemented("never made");
                             })
                  .ok());
  s = CheckKernelsAgainstTable(rows, registry, DeviceKind::kCuda);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("a cuda kernel for " + OpRowString(first) + ", whose row leaves the device out"),
            std::string::npos)
      << s.ToString();
}

}  // namespace op_table_test
}  // namespace remex::kernels::internal
