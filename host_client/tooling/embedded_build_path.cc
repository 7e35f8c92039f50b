// The path the build gave libremex_embedded.so, for embedded_server.cc's search. It is a
// file of its own because the path names the build folder: CMake defines
// REMEX_EMBEDDED_BUILD_PATH for this file alone (host_client/tooling/CMakeLists.txt), so a
// build in another folder recompiles this line and nothing else.

#ifndef REMEX_EMBEDDED_BUILD_PATH
#define REMEX_EMBEDDED_BUILD_PATH ""
#endif

namespace remex::tooling {

extern const char kEmbeddedBuildPath[];
const char kEmbeddedBuildPath[] = REMEX_EMBEDDED_BUILD_PATH;

}  // namespace remex::tooling
