// The statistics and the per-op and per-node differences behind `remex bench --variant`
// and `remex diff` (the CLI runs them against a real server: tests/cli_profile_test.cc).
#include "host_client/tooling/variants.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "host_client/tooling/report_json.h"

namespace remex::tooling {
namespace variants_test {

using nlohmann::json;

std::vector<double> LogNormal(size_t n, double median, double sigma, uint32_t seed) {
  std::mt19937 rng(seed);
  std::lognormal_distribution<double> d(std::log(median), sigma);
  std::vector<double> v(n);
  for (double& x : v) x = d(rng);
  return v;
}

TEST(CompareSamples, AShiftBeyondTheNoiseAndNoShift) {
  const auto base = LogNormal(60, 10.0, 0.05, 1);
  const auto slower = LogNormal(60, 12.0, 0.05, 2);
  auto c = CompareSamples(base, slower, 0.95);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_NEAR(c->ratio, 1.2, 0.03);
  EXPECT_LT(c->ratio_low, c->ratio);
  EXPECT_GT(c->ratio_high, c->ratio);
  EXPECT_GT(c->ratio_low, 1.0);
  EXPECT_LT(c->p_value, 1e-6);
  EXPECT_TRUE(c->beyond_noise);

  const auto same = LogNormal(60, 10.0, 0.05, 3);
  auto n = CompareSamples(base, same, 0.95);
  ASSERT_TRUE(n.ok());
  EXPECT_NEAR(n->ratio, 1.0, 0.03);
  EXPECT_LE(n->ratio_low, 1.0);
  EXPECT_GE(n->ratio_high, 1.0);
  EXPECT_FALSE(n->beyond_noise);

  // A sample equal in both: ratio 1 exactly, p 1.
  auto self = CompareSamples(base, base, 0.95);
  ASSERT_TRUE(self.ok());
  EXPECT_DOUBLE_EQ(self->ratio, 1.0);
  EXPECT_FALSE(self->beyond_noise);

  EXPECT_FALSE(CompareSamples({}, base, 0.95).ok());
  EXPECT_FALSE(CompareSamples(base, std::vector<double>{1.0, 0.0}, 0.95).ok());
  EXPECT_FALSE(CompareSamples(base, base, 1.0).ok());
}

TEST(SummarizeVariants, TheFirstIsTheBaseline) {
  auto rows = SummarizeVariants({"base", "x"}, {LogNormal(30, 5, 0.02, 4), LogNormal(30, 4, 0.02, 5)}, 0.95);
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  ASSERT_EQ(rows->size(), 2u);
  EXPECT_FALSE((*rows)[0].vs_first.has_value());
  ASSERT_TRUE((*rows)[1].vs_first.has_value());
  EXPECT_LT((*rows)[1].vs_first->ratio, 1.0);
  EXPECT_TRUE((*rows)[0].median.bounded);  // 30 samples bound the median at 95 %
  EXPECT_LE((*rows)[0].median.lower, (*rows)[0].stats.median);
  EXPECT_FALSE(SummarizeVariants({"only"}, {{1.0}}, 0.95).ok());
}

json Profile(const std::vector<std::pair<std::string, double>>& ops,
             const std::vector<std::pair<std::string, double>>& nodes, bool with_nodes = true) {
  json rows = json::array();
  for (const auto& [name, ms] : ops) rows.push_back({{"name", name}, {"kind", "kernel"}, {"total_ms", ms}});
  json j = {{"rows", rows}, {"total_ms", 10.0}};
  if (with_nodes) {
    json n = json::array();
    for (const auto& [name, ms] : nodes) n.push_back({{"name", name}, {"op", "Op"}, {"median_ms", ms}});
    j["nodes"] = n;
  }
  return j;
}

TEST(DiffProfiles, MatchesOpsAndNodesLargestDifferenceFirst) {
  const json a = Profile({{"FusedConv", 5.0}, {"Add", 1.0}}, {{"conv+relu", 5.0}, {"add", 1.0}});
  const json b = Profile({{"Conv", 4.0}, {"Add", 1.5}}, {{"conv", 4.0}, {"add", 1.5}});
  ProfileDiff d = DiffProfiles(a, b);
  ASSERT_EQ(d.ops.size(), 3u);
  EXPECT_EQ(d.ops[0].name, "FusedConv");
  EXPECT_FALSE(d.ops[0].b_ms.has_value());
  EXPECT_DOUBLE_EQ(d.ops[0].delta_ms, -5.0);
  EXPECT_EQ(d.ops[1].name, "Conv");
  EXPECT_FALSE(d.ops[1].a_ms.has_value());
  EXPECT_EQ(d.ops[2].name, "Add");
  EXPECT_DOUBLE_EQ(d.ops[2].delta_ms, 0.5);
  ASSERT_TRUE(d.has_nodes);
  ASSERT_EQ(d.nodes.size(), 3u);
  EXPECT_EQ(d.nodes[2].name, "add");
  EXPECT_EQ(d.nodes[2].kind, "Op");
  // One profile without nodes (an older report): per op only.
  EXPECT_FALSE(DiffProfiles(a, Profile({{"Add", 1.0}}, {}, false)).has_nodes);
}

TEST(DiffBenchReports, ReadsTheSamplesAndRefusesOtherReports) {
  auto report = [](std::vector<double> samples) {
    return json{{"schema", kBenchSchema},
                {"schema_version", kBenchSchemaVersion},
                {"benchmark", {{"samples_ms", samples}}}};
  };
  const json a = report(LogNormal(20, 2.0, 0.01, 6));
  const json b = report(LogNormal(20, 3.0, 0.01, 7));
  auto d = DiffBenchReports(a, "a.json", b, "b.json", 0.95);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_TRUE(d->summary[1].vs_first->beyond_noise);
  EXPECT_FALSE(d->profile.has_value());
  const json j = ToJson(*d);
  EXPECT_EQ(j["schema"], kDiffSchema);
  EXPECT_TRUE(j["beyond_noise"].get<bool>());
  EXPECT_EQ(j["variants"][0]["label"], "a.json");
  EXPECT_TRUE(j["variants"][0]["ratio"].is_null());

  json load = a;
  load.erase("benchmark");
  load["load"] = json::object();
  auto no_samples = DiffBenchReports(a, "a.json", load, "load.json", 0.95);
  ASSERT_FALSE(no_samples.ok());
  EXPECT_NE(no_samples.status().message().find("'load.json' has no time evaluator samples"),
            std::string::npos);
  json newer = a;
  newer["schema_version"] = kBenchSchemaVersion + 1;
  EXPECT_EQ(DiffBenchReports(a, "a", newer, "b", 0.95).status().code(), StatusCode::kInvalidArgument);
  json other = a;
  other["schema"] = "remex.run";
  EXPECT_EQ(DiffBenchReports(other, "a", b, "b", 0.95).status().code(), StatusCode::kInvalidArgument);
  json negative = report({1.0, -2.0});
  EXPECT_EQ(DiffBenchReports(a, "a", negative, "b", 0.95).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace variants_test
}  // namespace remex::tooling
