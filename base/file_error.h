// Failed file operations as statuses, with the OS reason.
#pragma once

#include <string>

#include "base/status.h"

namespace remex {

// "WHAT 'PATH': REASON" with the OS reason of `error` (an errno value, strerror's
// text); NOT_FOUND for a missing file or folder, PERMISSION_DENIED when access is
// refused (or the file system is read-only), DATA_LOSS otherwise.
Status FileError(const std::string& what, const std::string& path, int error);

}  // namespace remex
