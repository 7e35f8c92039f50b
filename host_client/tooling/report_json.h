// The reports of the tooling layer as JSON (nlohmann::json), the one schema `remex ...
// --json` prints and the Python client returns. Times in milliseconds (keys *_ms),
// sizes in bytes, shapes as lists, dtypes by name (float32).
//
// The reports of run, bench and check name their schema and its version
// ("schema": "remex.bench", "schema_version": 2). The bench schema is written down in
// docs/schema/bench.schema.json (JSON Schema 2020-12). Adding a key keeps the version;
// removing, renaming or retyping one bumps it (docs/cli.md).
#pragma once

#include <nlohmann/json.hpp>

#include "host_client/tooling/compare.h"
#include "host_client/tooling/compile.h"
#include "host_client/tooling/run.h"

namespace remex::tooling {

inline constexpr char kRunSchema[] = "remex.run";
inline constexpr int kRunSchemaVersion = 1;
inline constexpr char kBenchSchema[] = "remex.bench";
// 2: the first versioned bench report (version 1 is the unversioned one before it).
inline constexpr int kBenchSchemaVersion = 2;
inline constexpr char kCheckSchema[] = "remex.check";
inline constexpr int kCheckSchemaVersion = 1;

nlohmann::json ToJson(const CompileReport& report);
nlohmann::json ToJson(const RunReport& report);
nlohmann::json ToJson(const BenchReport& report);
// A profile: {"rows": [{name, kind, calls, total_ms, mean_us, share_percent, copies,
// copy_bytes, allocations, allocated_bytes, peak_live_bytes}, ...], "total_ms": ...,
// "live_bytes_before": ..., "live_bytes_after": ..., "peak_live_bytes": ...}, as
// `remex bench --profile --json` nests it (bytes: the session allocator's size classes;
// the live bytes 0 without `memory`).
nlohmann::json ToJson(const std::vector<ProfileEntry>& profile, double total_ms, const ProfileMemory& memory = {});
nlohmann::json ToJson(const CheckReport& report);
nlohmann::json ToJson(const compare::PathComparison& report, double rtol, double atol, bool equal_nan);

}  // namespace remex::tooling
