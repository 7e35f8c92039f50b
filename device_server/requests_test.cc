// The request table (requests.def) against the protocol's schema: every member of
// Request's union has a row, and every row names a member by its kind and name.
#include "device_server/requests.h"

#include <capnp/schema.h>
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "device_server/metrics.h"

namespace remex::server {
namespace requests_test {

TEST(RequestTableTest, EveryRequestKindHasARow) {
  const auto fields = capnp::Schema::from<rpc::wire::Request>().getUnionFields();
  ASSERT_GT(fields.size(), 0u);
  for (auto field : fields) {
    const std::string name = field.getProto().getName();
    const auto kind = static_cast<rpc::wire::Request::Which>(field.getProto().getDiscriminantValue());
    SCOPED_TRACE(name);
    const RequestRow* row = FindRequest(kind);
    ASSERT_NE(row, nullptr) << "Request." << name << " has no row in device_server/requests.def: give it one "
                            << "(its handler, lane and whether it creates handles)";
    EXPECT_EQ(row->kind, kind);
    EXPECT_EQ(row->name, name) << "the row of discriminant " << static_cast<int>(kind)
                               << " names another field";
  }
}

TEST(RequestTableTest, EveryRowIsAMemberOfTheUnionOnce) {
  const auto schema = capnp::Schema::from<rpc::wire::Request>();
  std::set<int> kinds;
  for (const RequestRow& row : kRequests) {
    SCOPED_TRACE(std::string(row.name));
    EXPECT_TRUE(kinds.insert(static_cast<int>(row.kind)).second) << "two rows for one kind";
    bool found = false;
    for (auto field : schema.getUnionFields()) {
      if (field.getProto().getDiscriminantValue() != static_cast<uint16_t>(row.kind)) continue;
      found = true;
      EXPECT_EQ(std::string(field.getProto().getName().cStr()), row.name);
    }
    EXPECT_TRUE(found) << "a stale row: Request's union has no member " << static_cast<int>(row.kind);
    EXPECT_EQ(FindRequest(row.kind), &row);
  }
  EXPECT_EQ(kinds.size(), schema.getUnionFields().size());
}

TEST(RequestTableTest, AKindOfANewerProtocolHasNoRow) {
  const auto newer = static_cast<rpc::wire::Request::Which>(
      capnp::Schema::from<rpc::wire::Request>().getUnionFields().size());
  EXPECT_EQ(FindRequest(newer), nullptr);
  EXPECT_EQ(FindRequest(static_cast<rpc::wire::Request::Which>(0xffff)), nullptr);
}

TEST(RequestTableTest, MetricsHaveASlotPerRowAndTwoMore) {
  EXPECT_EQ(RequestMetrics::kSlots, kNumRequests + 2);
  for (const RequestRow& row : kRequests) EXPECT_EQ(RequestMetrics::SlotName(RowIndex(row)), row.name);
  EXPECT_EQ(RequestMetrics::SlotName(RequestMetrics::kMalformed), "malformed");
  EXPECT_EQ(RequestMetrics::SlotName(RequestMetrics::kUnknown), "unknown");

  RequestMetrics metrics;
  metrics.Count(RowIndex(*FindRequest(rpc::wire::Request::INVOKE)), StatusCode::kOk);
  metrics.Count(RowIndex(*FindRequest(rpc::wire::Request::INVOKE)), StatusCode::kOk);
  metrics.Count(RequestMetrics::kUnknown, StatusCode::kUnimplemented);
  metrics.Count(RequestMetrics::kSlots, StatusCode::kOk);  // out of range: not counted
  std::string text;
  metrics.Render(text);
  EXPECT_NE(text.find("remex_requests_total{kind=\"invoke\",code=\"OK\"} 2\n"), std::string::npos) << text;
  EXPECT_NE(text.find("remex_requests_total{kind=\"unknown\",code=\"UNIMPLEMENTED\"} 1\n"), std::string::npos)
      << text;
  EXPECT_EQ(text.find("kind=\"hello\""), std::string::npos) << text;
}

}  // namespace requests_test
}  // namespace remex::server
