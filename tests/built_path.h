// Paths a test program finds relative to its own folder, so that no object of a test
// names the tree's folder and a clone elsewhere hits the compiler cache.
#pragma once

#include <filesystem>
#include <string>
#include <system_error>

namespace remex::testing {

// A path that CMake gives relative to the folder the test program is built in
// (tests/CMakeLists.txt's REMEX_*_BUILT, and the kernels' tests that read the source
// tree), resolved against the running program's own folder (/proc/self/exe).
inline std::string BuiltPath(const char* relative) {
  std::error_code ec;
  const std::filesystem::path program = std::filesystem::read_symlink("/proc/self/exe", ec);
  return (program.parent_path() / relative).lexically_normal().string();
}

}  // namespace remex::testing
