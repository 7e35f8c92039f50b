// The exit status of the remex CLI, for CI:
//   0  success
//   1  a mismatch (check, compare, a bench scenario's audit) or a failed threshold
//      (bench --fail-unstable)
//   2  a usage error: bad flags, contradictory settings, a model or input the
//      compiler or the server refuses as invalid
//   3  an infrastructure error: connection, server, device or file system
#pragma once

#include "base/status.h"

namespace remex::tooling {

enum ExitCode : int {
  kExitOk = 0,
  kExitMismatch = 1,
  kExitUsage = 2,
  kExitInfrastructure = 3,
};

// 2 for INVALID_ARGUMENT, UNIMPLEMENTED, FAILED_PRECONDITION and OUT_OF_RANGE (what
// was asked cannot be done as asked), 3 for every other error, 0 for OK.
inline ExitCode ExitCodeFor(const Status& status) {
  switch (status.code()) {
    case StatusCode::kOk: return kExitOk;
    case StatusCode::kInvalidArgument:
    case StatusCode::kUnimplemented:
    case StatusCode::kFailedPrecondition:
    case StatusCode::kOutOfRange:
      return kExitUsage;
    default:
      return kExitInfrastructure;
  }
}

}  // namespace remex::tooling
