// `remex bench --scenario` against a real remex-server process: the load scenarios
// generated on the server (single-stream sweeps, multi-stream, server with Poisson
// arrivals and the peak search, offline), the accuracy audit, cold-start phases and
// memory in every benchmark's report, and the usage errors of the load flags.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cstring>

#include <filesystem>
#include <fstream>

#include "base/file_bytes.h"
#include "host_client/client/client.h"
#include "host_client/client/npy.h"

#include "tests/cli_test_util.h"
#include "tests/mlp_model.h"

namespace remex {
namespace {


constexpr int64_t kSide = 64;

class CliLoadTest : public remex::testing::CliTest {
 protected:
  CliLoadTest() : CliTest("remex_cli_load") {}
  void SetUp() override {
    CliTest::SetUp();
    model_ = remex::testing::SaveMlpModel(dir_, kSide);
  }
  // `remex bench MODEL --server ... ARGS --json`, exit 0, its JSON.
  nlohmann::json Bench(const std::string& args) {
    auto r = Cli("bench " + model_ + Server() + " " + args + " --json");
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return Json(r);
  }
  std::string model_;
};

void ExpectLevelConsistent(const nlohmann::json& level) {
  const auto& t = level["timeline"];
  ASSERT_EQ(t["issue_s"].size(), level["queries"].get<size_t>());
  ASSERT_EQ(t["latency_ms"].size(), level["queries"].get<size_t>());
  EXPECT_EQ(level["completed"].get<uint64_t>() + level["dropped"].get<uint64_t>(), level["queries"].get<uint64_t>());
  EXPECT_GT(level["throughput_qps"].get<double>(), 0.0);
  const auto& l = level["latency_ms"];
  EXPECT_LE(l["min"].get<double>(), l["p50"].get<double>());
  EXPECT_LE(l["p50"].get<double>(), l["p90"].get<double>());
  EXPECT_LE(l["p90"].get<double>(), l["p99"].get<double>());
  EXPECT_LE(l["p99"].get<double>(), l["max"].get<double>());
  for (const auto& p : level["percentiles"]) {
    if (!p["bounded"].get<bool>()) continue;
    EXPECT_LE(p["lower_ms"].get<double>(), p["value_ms"].get<double>());
    EXPECT_GE(p["upper_ms"].get<double>(), p["value_ms"].get<double>());
  }
}

TEST_F(CliLoadTest, SingleStreamSweepHasOneLevelPerConcurrency) {
  auto j = Bench("--scenario single-stream --concurrency 1:3 --min-duration-s 0.3");
  const auto& load = j["load"];
  EXPECT_EQ(load["scenario"], "single-stream");
  ASSERT_EQ(load["levels"].size(), 3u) << j.dump();
  for (int c = 1; c <= 3; ++c) {
    const auto& level = load["levels"][c - 1];
    EXPECT_EQ(level["concurrency"].get<int>(), c);
    ExpectLevelConsistent(level);
    EXPECT_GE(level["duration_s"].get<double>(), 0.3 * 0.9);
    EXPECT_EQ(level["dropped"].get<int>(), 0);
  }
  // Three instances share the constants: the weights are held once.
  EXPECT_EQ(j["memory"]["weights_bytes"].get<uint64_t>(), (kSide * kSide + kSide) * 4u);
}

TEST_F(CliLoadTest, ServerScenarioMeetsItsTargetAndPassesTheAudit) {
  auto j = Bench("--scenario server --target-qps 200 --min-duration-s 1 --seed 3");
  const auto& load = j["load"];
  ASSERT_EQ(load["levels"].size(), 1u);
  const auto& level = load["levels"][0];
  ExpectLevelConsistent(level);
  // About 200 Poisson arrivals in a second; the device keeps up with this small model.
  EXPECT_GE(level["queries"].get<int>(), 140);
  EXPECT_LE(level["queries"].get<int>(), 260);
  EXPECT_EQ(level["dropped"].get<int>(), 0);
  // The throughput is what completed over the run's duration (how fast the device keeps up
  // is a benchmark's question, not this test's: a loaded machine measured 118 QPS here).
  EXPECT_NEAR(level["throughput_qps"].get<double>() * level["duration_s"].get<double>(),
              level["completed"].get<double>(), 1.0) << level.dump();
  // The audit is on by default for the server scenario.
  EXPECT_GT(level["audit"]["checked"].get<int>(), 0) << level["audit"].dump();
  EXPECT_TRUE(level["audit"]["passed"].get<bool>());
  // The arrivals are the seed's: the same seed gives the same schedule.
  auto again = Bench("--scenario server --target-qps 200 --min-duration-s 1 --seed 3");
  const auto& a = level["timeline"]["issue_s"];
  const auto& b = again["load"]["levels"][0]["timeline"]["issue_s"];
  ASSERT_GT(std::min(a.size(), b.size()), 50u);
  for (size_t q = 0; q < 50; ++q) EXPECT_DOUBLE_EQ(a[q].get<double>(), b[q].get<double>()) << q;
}

TEST_F(CliLoadTest, FindPeakReportsTheHighestValidRate) {
  auto j = Bench("--scenario server --find-peak --latency-bound-ms 50 --target-qps 100 --min-duration-s 0.3");
  const auto& peak = j["load"]["peak"];
  ASSERT_TRUE(peak["qps"].is_number()) << j["load"].dump();
  const double qps = peak["qps"].get<double>();
  EXPECT_GE(qps, 100.0);
  ASSERT_GE(peak["probes"].size(), 2u);
  // The peak is a valid probe, and no valid probe is higher.
  bool found = false;
  for (const auto& p : peak["probes"]) {
    if (p["valid"].get<bool>()) {
      EXPECT_LE(p["target_qps"].get<double>(), qps);
    }
    if (p["target_qps"].get<double>() == qps) found = p["valid"].get<bool>();
  }
  EXPECT_TRUE(found);
}

TEST_F(CliLoadTest, MultiStreamQueriesCarryTheirSamples) {
  auto j = Bench("--scenario multi-stream --samples-per-query 4 --min-duration-s 0.3");
  const auto& level = j["load"]["levels"][0];
  ExpectLevelConsistent(level);
  EXPECT_EQ(level["concurrency"].get<int>(), 4);  // one instance per sample by default
  EXPECT_EQ(level["samples"].get<uint64_t>(), 4 * level["completed"].get<uint64_t>());
}

TEST_F(CliLoadTest, OfflineIssuesEveryQueryAtTheStart) {
  auto j = Bench("--scenario offline --concurrency 2 --min-duration-s 0.3");
  const auto& level = j["load"]["levels"][0];
  ExpectLevelConsistent(level);
  for (const auto& t : level["timeline"]["issue_s"]) EXPECT_EQ(t.get<double>(), 0.0);
  EXPECT_GT(level["audit"]["checked"].get<int>(), 0);
}

TEST_F(CliLoadTest, EveryBenchReportsColdStartAndMemory) {
  auto j = Bench("--repeat 5 --number 2");
  const auto& phases = j["phases_ms"];
  for (const char* key : {"module_load", "vm_create", "first_invoke", "warm_median"}) {
    ASSERT_TRUE(phases[key].is_number()) << key << ": " << phases.dump();
    EXPECT_GT(phases[key].get<double>(), 0.0) << key;
  }
  const auto& m = j["memory"];
  EXPECT_EQ(m["weights_bytes"].get<uint64_t>(), (kSide * kSide + kSide) * 4u);
  // One call holds at least its output (16 KiB) above what was live before.
  EXPECT_GE(m["invoke_peak_bytes"].get<uint64_t>(), kSide * kSide * 4u);
  EXPECT_GT(m["server_resident_bytes"].get<uint64_t>(), 0u);
  EXPECT_GE(m["server_resident_peak_bytes"].get<uint64_t>(), m["server_resident_bytes"].get<uint64_t>());
  // The text says it too.
  auto r = Cli("bench " + model_ + Server() + " --repeat 5");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // The module now comes from the server's cache: the text says so.
  EXPECT_NE(r.output.find("cold    module from the cache, VM create"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("memory  weights"), std::string::npos) << r.output;
}

TEST_F(CliLoadTest, FromClientDrivesTheScenariosOverTheWire) {
  auto j = Bench("--scenario single-stream --concurrency 1:2 --min-duration-s 0.3 --from-client");
  const auto& load = j["load"];
  EXPECT_TRUE(load["from_client"].get<bool>());
  ASSERT_EQ(load["levels"].size(), 2u);
  for (const auto& level : load["levels"]) {
    ExpectLevelConsistent(level);
    EXPECT_EQ(level["audit"]["checked"].get<int>(), 0);  // the outputs never leave the server
  }
  auto s = Bench("--scenario server --target-qps 100 --min-duration-s 0.5 --from-client --seed 4");
  const auto& level = s["load"]["levels"][0];
  ExpectLevelConsistent(level);
  EXPECT_GE(level["queries"].get<int>(), 25);
  // The same seed gives the server's generator's schedule.
  auto on_server = Bench("--scenario server --target-qps 100 --min-duration-s 0.5 --seed 4 --no-audit");
  const auto& a = level["timeline"]["issue_s"];
  const auto& b = on_server["load"]["levels"][0]["timeline"]["issue_s"];
  for (size_t q = 0; q < std::min<size_t>({a.size(), b.size(), 20}); ++q) {
    EXPECT_NEAR(a[q].get<double>(), b[q].get<double>(), 1e-6) << q;
  }
}

// The audit catches timed samples whose outputs differ from the reference call's. Made
// to happen with the raw protocol: the VM's output is bound to its own input, so the
// reference call writes y = Relu(x W + b) over x, and every timed sample (an instance
// reading that x) computes from the changed x.
TEST_F(CliLoadTest, TheAuditNamesASampleThatDiffersFromTheReference) {
  const std::string rmx = dir_ + "/mlp.rmx";
  auto c = Cli("compile " + model_ + " -o " + rmx);
  ASSERT_EQ(c.exit_code, 0) << c.output;
  auto bytes = ReadFileBytes(rmx);
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  auto session = client::Session::Connect("127.0.0.1", server_.port());
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  auto module = (*session)->LoadModule(*bytes, "mlp");
  ASSERT_TRUE(module.ok()) << module.status().ToString();
  auto vm = (*session)->CreateVm(module->handle);
  ASSERT_TRUE(vm.ok());
  npy::Array x;
  x.dtype = DType::kFloat32;
  x.shape = {1, kSide, kSide};
  x.data.resize(kSide * kSide * 4);
  for (size_t i = 0; i < kSide * kSide; ++i) {
    const float v = static_cast<float>(i % 7) / 7.0f;
    std::memcpy(x.data.data() + 4 * i, &v, 4);
  }
  auto input = (*session)->Upload(x);
  ASSERT_TRUE(input.ok());
  ASSERT_TRUE((*session)->SetInputs(*vm, "main", {input->handle}).ok());
  client::LoadTestOptions o;
  o.min_queries = 20;
  o.audit_samples = 8;
  // Untouched inputs: every audited sample matches.
  auto clean = (*session)->LoadTest(*vm, "main", o);
  ASSERT_TRUE(clean.ok()) << clean.status().ToString();
  EXPECT_EQ(clean->audit_checked, 8u);
  EXPECT_EQ(clean->audit_mismatches, 0u) << clean->audit_first_mismatch;
  // The output written over the input: every audited sample differs, and is named.
  ASSERT_TRUE((*session)->SetOutput(*vm, "main", 0, input->handle).ok());
  auto dirty = (*session)->LoadTest(*vm, "main", o);
  ASSERT_TRUE(dirty.ok()) << dirty.status().ToString();
  EXPECT_EQ(dirty->audit_checked, 8u);
  EXPECT_EQ(dirty->audit_mismatches, 8u);
  EXPECT_NE(dirty->audit_first_mismatch.find("output 'y'"), std::string::npos) << dirty->audit_first_mismatch;
  EXPECT_NE(dirty->audit_first_mismatch.find("values differ"), std::string::npos) << dirty->audit_first_mismatch;
}

TEST_F(CliLoadTest, LoadFlagsThatContradictAreUsageErrors) {
  for (const std::string args : {"--target-qps 10", "--scenario server", "--scenario single-stream --target-qps 5",
                                 "--scenario server --find-peak", "--scenario nope", "--scenario offline --concurrency 0",
                                 "--scenario offline --concurrency 3:2", "--scenario offline --concurrency 1:65",
                                 "--scenario single-stream --samples-per-query 4", "--from-client",
                                 "--scenario server --target-qps 5 --from-client --audit"}) {
    auto r = Cli("bench " + model_ + Server() + " " + args);
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.output;
  }
}

}  // namespace
}  // namespace remex
