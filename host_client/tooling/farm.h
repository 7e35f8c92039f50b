// The device farm as the tooling layer reports it (`remex farm status`): every device
// registered in the farm's Redis (rpc/farm.h) and a summary per pool.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "rpc/farm.h"

namespace remex::tooling {

struct FarmPoolSummary {
  std::string name;
  int devices = 0;
  int idle = 0, leased = 0, draining = 0, quarantined = 0;
  int64_t waiting = 0;  // clients in the pool's lease queue
};

struct FarmStatusReport {
  std::string url;                         // Canonical redis://HOST:PORT/DB.
  std::string selector;                    // The label selector devices were listed by ("" all).
  int64_t now_ms = 0;                      // Unix time of the listing, ms.
  // By pool, then id. `state` is what the device is to a client: quarantined (its
  // self-test failed), draining (drained: leased no more), leased, or idle.
  std::vector<farm::DeviceRecord> devices;
  std::vector<FarmPoolSummary> pools;       // By name.
  std::vector<std::string> skipped;         // Records that did not parse, with why.
};

// Lists the farm at `url` (redis://HOST:PORT[/DB]), the devices that match `selector`
// (farm::ParseLabelSelector's grammar; "" lists all) and their pools. INVALID_ARGUMENT
// for a bad URL or selector, UNAVAILABLE when Redis cannot be reached within `timeout`.
StatusOr<FarmStatusReport> FarmStatus(const std::string& url, std::chrono::milliseconds timeout,
                                      const std::string& selector = "");

// {"farm", "selector", "now_ms", "pools": [{name, devices, idle, leased, draining, quarantined,
//  waiting}], "devices": [{id, pool, state, kind, device, description, memory_bytes,
//  labels {}, version, health, registered_ms, heartbeat_ms, heartbeat_age_ms, uptime_ms,
//  holder, lease_age_ms}], "skipped": []} (holder and lease_age_ms null when not leased).
nlohmann::json ToJson(const FarmStatusReport& report);

}  // namespace remex::tooling
