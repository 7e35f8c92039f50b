#include "base/host.h"

#include <sys/utsname.h>

#include <cstdlib>

namespace remex {

double HostLoadAverage1m() {
  double load[1];
  if (getloadavg(load, 1) != 1 || load[0] < 0) return -1;
  return load[0];
}

std::string OsDescription() {
  utsname u{};
  if (uname(&u) != 0) return "";
  return std::string(u.sysname) + " " + u.release + " " + u.machine;
}

}  // namespace remex
