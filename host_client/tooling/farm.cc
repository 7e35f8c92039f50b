// `remex farm status` as a report (host_client/tooling/farm.h).

#include "host_client/tooling/farm.h"

#include <map>

namespace remex::tooling {

StatusOr<FarmStatusReport> FarmStatus(const std::string& url, std::chrono::milliseconds timeout,
                                      const std::string& selector) {
  REMEX_ASSIGN_OR_RETURN(farm::RedisUrl parsed, farm::ParseRedisUrl(url));
  REMEX_ASSIGN_OR_RETURN(farm::LabelSelector select, farm::ParseLabelSelector(selector));
  REMEX_ASSIGN_OR_RETURN(std::unique_ptr<farm::RedisClient> client, farm::RedisClient::Connect(parsed, timeout));
  FarmStatusReport report;
  report.url = parsed.ToString();
  report.selector = selector;
  REMEX_ASSIGN_OR_RETURN(std::vector<farm::DeviceRecord> all, client->ListDevices(&report.skipped));
  for (farm::DeviceRecord& d : all) {
    if (select.Matches(d)) report.devices.push_back(std::move(d));
  }
  report.now_ms = farm::UnixMillis();
  std::map<std::string, FarmPoolSummary> pools;
  for (const farm::DeviceRecord& d : report.devices) {
    FarmPoolSummary& p = pools[d.pool];
    p.name = d.pool;
    ++p.devices;
    switch (d.state) {
      case farm::DeviceState::kIdle: ++p.idle; break;
      case farm::DeviceState::kLeased: ++p.leased; break;
      case farm::DeviceState::kDraining: ++p.draining; break;
      case farm::DeviceState::kQuarantined: ++p.quarantined; break;
    }
  }
  for (auto& [name, p] : pools) report.pools.push_back(p);
  return report;
}

nlohmann::json ToJson(const FarmStatusReport& report) {
  nlohmann::json pools = nlohmann::json::array(), devices = nlohmann::json::array();
  for (const FarmPoolSummary& p : report.pools) {
    pools.push_back({{"name", p.name},
                     {"devices", p.devices},
                     {"idle", p.idle},
                     {"leased", p.leased},
                     {"draining", p.draining},
                     {"quarantined", p.quarantined}});
  }
  for (const farm::DeviceRecord& d : report.devices) {
    devices.push_back({{"id", d.id},
                       {"pool", d.pool},
                       {"state", std::string(farm::DeviceStateName(d.state))},
                       {"kind", d.kind},
                       {"device", d.device},
                       {"description", d.description},
                       {"memory_bytes", d.memory_bytes},
                       {"labels", d.labels},
                       {"version", d.version},
                       {"registered_ms", d.registered_ms},
                       {"heartbeat_ms", d.heartbeat_ms},
                       {"heartbeat_age_ms", report.now_ms - d.heartbeat_ms},
                       {"uptime_ms", report.now_ms - d.registered_ms}});
  }
  return {{"farm", report.url},
          {"selector", report.selector},
          {"now_ms", report.now_ms},
          {"pools", pools},
          {"devices", devices},
          {"skipped", report.skipped}};
}

}  // namespace remex::tooling
