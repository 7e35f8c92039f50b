// The reports of the tooling layer as JSON (nlohmann::json), the one schema `remex ...
// --json` prints and the Python client returns. Times in milliseconds (keys *_ms),
// sizes in bytes, shapes as lists, dtypes by name (float32).
#pragma once

#include <nlohmann/json.hpp>

#include "host_client/tooling/compare.h"
#include "host_client/tooling/compile.h"
#include "host_client/tooling/run.h"

namespace remex::tooling {

nlohmann::json ToJson(const CompileReport& report);
nlohmann::json ToJson(const RunReport& report);
nlohmann::json ToJson(const BenchReport& report);
// A profile: {"rows": [{name, kind, calls, total_ms, mean_us, share_percent, copies,
// copy_bytes}, ...], "total_ms": ...}, as `remex bench --profile --json` nests it.
nlohmann::json ToJson(const std::vector<ProfileEntry>& profile, double total_ms);
nlohmann::json ToJson(const CheckReport& report);
nlohmann::json ToJson(const compare::PathComparison& report, double rtol, double atol, bool equal_nan);

}  // namespace remex::tooling
