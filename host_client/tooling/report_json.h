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
// A profile of one or more invokes: the object above (rows, total and memory of the
// median run) and "runs", "run_total_ms" (per run), "synchronized", and "nodes":
// [{name, op, host, calls, median_ms, min_ms, max_ms, share_percent, run_ms, inputs,
// outputs},
// ...] largest median first, each operand {"dtype": "float32", "shape": [1, 3, 8, 8]}
// or null for an absent optional input (docs/schema/bench.schema.json). The trace is
// not in it.
nlohmann::json ToJson(const ProfileReport& profile);
nlohmann::json ToJson(const CheckReport& report);
// What every report of run, bench and check says about its session, as an object:
// model, server, device, bytes, compression, module_cache, environment, warnings.
nlohmann::json SessionJson(const SessionReport& session);
nlohmann::json ToJson(const compare::PathComparison& report, double rtol, double atol, bool equal_nan);

}  // namespace remex::tooling
