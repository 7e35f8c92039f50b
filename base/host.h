// Facts of the host a process runs on, shared by the server's environment fingerprint
// (device_server/environment.h) and the client's (host_client/tooling/environment.h).
#pragma once

#include <string>

namespace remex {

// This host's 1-minute load average (getloadavg(3)): the run-queue length averaged over
// a minute, counting runnable and uninterruptible tasks of all CPUs; -1 when unknown.
double HostLoadAverage1m();

// uname(2)'s system, release and machine: "Linux 6.1.0-18-amd64 x86_64"; "" when
// uname fails.
std::string OsDescription();

}  // namespace remex
