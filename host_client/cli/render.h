// The plain-text forms of the tooling layer's reports, as `remex` prints them without
// --json. Plain output says what a reader needs; `verbose` adds the wire, copy and
// allocation detail (all of which --json always carries).
#pragma once

#include <cstdio>

#include "host_client/tooling/compare.h"
#include "host_client/tooling/compile.h"
#include "host_client/tooling/farm.h"
#include "host_client/tooling/suite.h"
#include "host_client/tooling/run.h"

namespace remex::cli {

void PrintCompile(const tooling::CompileReport& report, const std::string& output, bool stats, FILE* out = stdout);
void PrintRun(const tooling::RunReport& report, bool verbose, FILE* out = stdout);
void PrintBench(const tooling::BenchReport& report, bool verbose, FILE* out = stdout);
void PrintCheck(const tooling::CheckReport& report, bool verbose, FILE* out = stdout);
void PrintCompare(const compare::PathComparison& report, FILE* out = stdout);
// An aligned table: a line per device (pool, id, state, kind, memory, heartbeat age,
// uptime, labels, description), then one per pool with its counts by state.
void PrintFarmStatus(const tooling::FarmStatusReport& report, FILE* out = stdout);
// `remex suite`: a row per case, then the totals.
void PrintSuite(const tooling::SuiteReport& report, FILE* out = stdout);

}  // namespace remex::cli
