// Whole files as bytes, their failures as statuses with the OS reason (file_error.h).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "base/status.h"

namespace remex {

// Reads a whole file. NOT_FOUND / PERMISSION_DENIED / DATA_LOSS with the OS reason.
StatusOr<std::vector<std::byte>> ReadFileBytes(const std::string& path);
// Writes a whole file (replacing it). NOT_FOUND / PERMISSION_DENIED / DATA_LOSS with
// the OS reason.
Status WriteFileBytes(const std::string& path, const std::vector<std::byte>& bytes);

}  // namespace remex
