#include "base/file_bytes.h"

#include <cerrno>
#include <cstdio>
#include <memory>

#include "base/file_error.h"

namespace remex {

StatusOr<std::vector<std::byte>> ReadFileBytes(const std::string& path) {
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) return FileError("cannot open", path, errno);
  std::vector<std::byte> bytes;
  std::byte buffer[1 << 16];
  size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof buffer, f.get())) > 0)
    bytes.insert(bytes.end(), buffer, buffer + n);
  if (std::ferror(f.get())) return FileError("cannot read", path, errno);
  return bytes;
}

Status WriteFileBytes(const std::string& path, const std::vector<std::byte>& bytes) {
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "wb"), &std::fclose);
  if (!f) return FileError("cannot write", path, errno);
  if (std::fwrite(bytes.data(), 1, bytes.size(), f.get()) != bytes.size())
    return FileError("cannot write", path, errno);
  if (std::fclose(f.release()) != 0) return FileError("cannot write", path, errno);
  return OkStatus();
}

}  // namespace remex
