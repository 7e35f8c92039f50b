#include "host_client/tooling/embedded_server.h"

#include <dlfcn.h>
#include <link.h>

#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <optional>
#include <string_view>
#include <system_error>
#include <vector>

#include <spdlog/spdlog.h>

#include "base/version.h"
#include "device_server/embedded_abi.h"

namespace remex::tooling {

// libremex_embedded.so in the build tree (embedded_build_path.cc), "" when unknown.
extern const char kEmbeddedBuildPath[];

namespace {

constexpr char kLibraryName[] = "libremex_embedded.so";

// The library's entry points, typed by their declarations in embedded_abi.h.
struct Library {
  std::string path;
  decltype(&remex_embedded_start) start = nullptr;
  decltype(&remex_embedded_port) port = nullptr;
  decltype(&remex_embedded_stop) stop = nullptr;
};

bool IsFile(const std::filesystem::path& p) {
  std::error_code ec;
  return std::filesystem::is_regular_file(p, ec);
}

// The candidates of embedded_server.h's steps 2 and 3, in order.
std::vector<std::string> Candidates() {
  std::vector<std::string> out;
  Dl_info info{};
  link_map* map = nullptr;
  if (dladdr1(reinterpret_cast<const void*>(&Candidates), &info, reinterpret_cast<void**>(&map), RTLD_DL_LINKMAP) !=
          0 &&
      map != nullptr) {
    std::error_code ec;
    // The program itself has no name in its link map; a shared object has the name it was
    // loaded by, relative to the working directory of then (now, as good a guess as any).
    const std::filesystem::path object = map->l_name[0] == '\0'
                                             ? std::filesystem::read_symlink("/proc/self/exe", ec)
                                             : std::filesystem::absolute(map->l_name, ec);
    if (!ec && !object.empty()) {
      const std::filesystem::path dir = object.parent_path();
      out.push_back((dir / kLibraryName).string());
      out.push_back((dir.parent_path() / "lib" / kLibraryName).string());
    }
  }
  if (kEmbeddedBuildPath[0] != '\0') out.push_back(kEmbeddedBuildPath);
  return out;
}

template <typename F>
Status Symbol(void* handle, const std::string& path, const char* name, F*& out) {
  dlerror();
  void* p = dlsym(handle, name);
  if (p == nullptr) return Unavailable(path + " has no " + name + ": not a Remex embedded-server library");
  out = reinterpret_cast<F*>(p);
  return Status();
}

StatusOr<Library> Load() {
  std::string path;
  const char* env = std::getenv("REMEX_EMBEDDED_LIBRARY");
  if (env != nullptr && *env != '\0') {
    path = env;
  } else {
    std::string looked;
    for (const std::string& c : Candidates()) {
      if (IsFile(c)) {
        path = c;
        break;
      }
      looked += (looked.empty() ? "" : ", ") + c;
    }
    if (path.empty()) {
      return Unavailable(std::string("the embedded server's library ") + kLibraryName +
                                " is not installed (looked for " + looked +
                                "; REMEX_EMBEDDED_LIBRARY may name it; a remote remex-server needs no such library)");
    }
  }
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    return Unavailable("cannot load the embedded server's library " + path + ": " +
                              (why != nullptr ? why : "unknown error") +
                              " (a remote remex-server needs no such library)");
  }
  Library lib;
  lib.path = path;
  decltype(&remex_embedded_abi_version) abi = nullptr;
  decltype(&remex_embedded_remex_version) version = nullptr;
  Status s = Symbol(handle, path, "remex_embedded_abi_version", abi);
  if (s.ok()) s = Symbol(handle, path, "remex_embedded_remex_version", version);
  if (s.ok() && (abi() != REMEX_EMBEDDED_ABI_VERSION || std::string_view(version()) != kRemexVersion)) {
    s = Unavailable(path + " is the embedded server of Remex " + version() + " (interface " +
                           std::to_string(abi()) + "); this program is Remex " + kRemexVersion + " (interface " +
                           std::to_string(REMEX_EMBEDDED_ABI_VERSION) + "): install them together");
  }
  if (s.ok()) s = Symbol(handle, path, "remex_embedded_start", lib.start);
  if (s.ok()) s = Symbol(handle, path, "remex_embedded_port", lib.port);
  if (s.ok()) s = Symbol(handle, path, "remex_embedded_stop", lib.stop);
  if (!s.ok()) {
    dlclose(handle);
    return s;
  }
  return lib;  // the handle stays open: servers may be started again
}

}  // namespace

StatusOr<std::unique_ptr<EmbeddedServer>> EmbeddedServer::Start(int compute_threads) {
  if (compute_threads < 0) {
    return InvalidArgument("the embedded server's compute threads: " + std::to_string(compute_threads) +
                           " is negative");
  }
  // Loaded once; a failure is kept, so that every attempt says the same.
  static std::once_flag once;
  static std::optional<StatusOr<Library>> loaded;
  std::call_once(once, [] { loaded.emplace(Load()); });
  if (!loaded->ok()) return loaded->status();
  const Library& lib = loaded->value();

  remex_embedded_server* server = nullptr;
  char error[2048] = {};
  const int code = lib.start(compute_threads, static_cast<int>(spdlog::get_level()), &server, error, sizeof error);
  if (code != 0 || server == nullptr) {
    const int c = code > 0 && code <= static_cast<int>(StatusCode::kDataLoss) ? code
                                                                              : static_cast<int>(StatusCode::kInternal);
    return Status(static_cast<StatusCode>(c), error);
  }
  std::unique_ptr<EmbeddedServer> out(new EmbeddedServer());
  out->server_ = server;
  out->stop_ = lib.stop;
  out->port_ = lib.port(server);
  out->library_ = lib.path;
  return out;
}

EmbeddedServer::~EmbeddedServer() {
  if (server_ != nullptr) stop_(server_);
}

}  // namespace remex::tooling
