#include "base/file_error.h"

#include <cerrno>
#include <cstring>

namespace remex {

Status FileError(const std::string& what, const std::string& path, int error) {
  std::string message = what + " '" + path + "': " + std::strerror(error);
  if (error == ENOENT || error == ENOTDIR) return NotFound(std::move(message));
  if (error == EACCES || error == EPERM || error == EROFS) return PermissionDenied(std::move(message));
  return DataLoss(std::move(message));
}

}  // namespace remex
