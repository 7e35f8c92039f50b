// `remex farm status` as a report (host_client/tooling/farm.h).

#include "host_client/tooling/farm.h"

#include <map>

#include "rpc/farm_lease.h"

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
    if (!select.Matches(d)) continue;
    if (d.state != farm::DeviceState::kQuarantined) {
      d.state = d.drained ? farm::DeviceState::kDraining : d.leased ? farm::DeviceState::kLeased : farm::DeviceState::kIdle;
    }
    report.devices.push_back(std::move(d));
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
  std::vector<std::string> names;
  for (const auto& [name, p] : pools) names.push_back(name);
  REMEX_ASSIGN_OR_RETURN(auto waiting, farm::QueueLengths(*client, names));
  for (auto& [name, p] : pools) {
    p.waiting = waiting[name];
    report.pools.push_back(p);
  }
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
                     {"quarantined", p.quarantined},
                     {"waiting", p.waiting}});
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
                       {"health", d.health},
                       {"registered_ms", d.registered_ms},
                       {"heartbeat_ms", d.heartbeat_ms},
                       {"heartbeat_age_ms", report.now_ms - d.heartbeat_ms},
                       {"uptime_ms", report.now_ms - d.registered_ms},
                       {"holder", d.leased ? nlohmann::json(d.holder) : nlohmann::json(nullptr)},
                       {"lease_age_ms", d.leased ? nlohmann::json(report.now_ms - d.lease_since_ms) : nlohmann::json(nullptr)}});
  }
  return {{"farm", report.url},
          {"selector", report.selector},
          {"now_ms", report.now_ms},
          {"pools", pools},
          {"devices", devices},
          {"skipped", report.skipped}};
}

}  // namespace remex::tooling
