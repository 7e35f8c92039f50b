// The load scenarios of the `loadTest` request (rpc/remex.capnp LoadTest, protocol
// 1.4), after MLPerf LoadGen's ("Scenarios" in its rules), and their names as the CLI,
// the reports and the server's errors spell them. Shared by the server's load
// generator and the client. Plain C++.
#pragma once

#include <string_view>

namespace remex {

enum class LoadScenario { kSingleStream, kMultiStream, kServer, kOffline };

inline constexpr LoadScenario kLoadScenarios[] = {LoadScenario::kSingleStream, LoadScenario::kMultiStream,
                                                  LoadScenario::kServer, LoadScenario::kOffline};

// "single-stream", "multi-stream", "server", "offline".
constexpr const char* LoadScenarioName(LoadScenario s) {
  switch (s) {
    case LoadScenario::kSingleStream: return "single-stream";
    case LoadScenario::kMultiStream: return "multi-stream";
    case LoadScenario::kServer: return "server";
    case LoadScenario::kOffline: return "offline";
  }
  return "unknown";
}

}  // namespace remex
