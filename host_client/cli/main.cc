// remex: compile ONNX models to Remex executables, and run, benchmark and check them
// on a device server.
//
//   remex compile MODEL.onnx -o MODEL.rmx [--shape NAME=DIMS]... [--bound SYM=MIN:MAX]...
//                 [--dispatch SPEC]... [--strict] [--layout NCHW|NHWC] [--dtype float32|float16] [--stats]
//   remex gen-sr -o SR.onnx [--height H] [--width W] [--dtype float32|float16] [--seed N]
//                [--depth-to-space native|reshape]
//   remex run MODEL.onnx|MODEL.rmx [--server HOST:PORT] [--input NAME=FILE.npy]...
//             [--shape NAME=1x3x48x192]... [--seed N] [--fetch all|none|NAME[,NAME]]
//             [--output-dir DIR] [--save-inputs] [--compression auto|none|zstd[:LEVEL]] [--json]
//   remex bench MODEL [--server ...] [--input ...] [--shape ...] [--seed N] [--number N]
//             [--repeat N] [--min-repeat-ms MS] [--warmup N] [--cooldown-ms MS]
//             [--l2-flush-bytes B] [--stable-window K] [--stable-threshold F] [--profile]
//             [--compression ...] [--json]
//   remex check MODEL --reference DIR [--server ...] [--input ...] [--shape ...] [--seed N]
//             [--rtol R] [--atol A] [--compression ...] [--json]
//   remex compare EXPECTED ACTUAL [--rtol R] [--atol A]
//
// With --server, run/bench/check prove the server's token when it asks (--token-file FILE,
// else the REMEX_TOKEN environment variable).
// Without --server, run/bench/check start an embedded device server on a loopback port
// and talk to it over the same protocol as to a remote one. Exit status: 0 on success,
// 1 on an error or (check, compare) a mismatch, 2 on a usage error.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <sstream>

#include "device_server/device_server.h"
#include "host_client/tooling/bench_stats.h"
#include "host_client/client/client.h"
#include "rpc/auth.h"
#include "host_client/tooling/compare.h"
#include "host_client/compiler/compiler.h"
#include "host_client/client/npy.h"
#include "host_client/tooling/sr_model.h"
#include "kernels/kernels.h"
#include "vm/executable.h"

namespace fs = std::filesystem;
using remex::Shape;
using remex::Status;
using remex::StatusOr;
using remex::client::Session;

namespace {

using Clock = std::chrono::steady_clock;

constexpr int kExitError = 1;
constexpr int kExitUsage = 2;

double MsSince(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

int Fail(const Status& status) {
  std::fprintf(stderr, "remex: %s\n", status.ToString().c_str());
  return kExitError;
}

// A usage error: bad or missing arguments.
int Usage(const Status& status) {
  std::fprintf(stderr, "remex: %s\n", status.ToString().c_str());
  return kExitUsage;
}

StatusOr<Shape> ParseDims(const std::string& text) {
  Shape shape;
  if (text.empty() || text == "scalar") return shape;
  size_t start = 0;
  while (start <= text.size()) {
    size_t x = text.find('x', start);
    std::string part = text.substr(start, x == std::string::npos ? std::string::npos : x - start);
    try {
      size_t used = 0;
      long long v = std::stoll(part, &used);
      if (used != part.size() || v < 0) throw std::invalid_argument(part);
      shape.push_back(v);
    } catch (...) {
      return remex::InvalidArgument("bad dimension '" + part + "' in shape '" + text + "' (use e.g. 1x3x48x192)");
    }
    if (x == std::string::npos) break;
    start = x + 1;
  }
  return shape;
}

StatusOr<std::map<std::string, Shape>> ParseShapes(const std::vector<std::string>& specs) {
  std::map<std::string, Shape> shapes;
  for (const auto& spec : specs) {
    auto eq = spec.rfind('=');
    if (eq == std::string::npos || eq == 0) {
      return remex::InvalidArgument("--shape must be NAME=DIMS, got '" + spec + "'");
    }
    REMEX_ASSIGN_OR_RETURN(shapes[spec.substr(0, eq)], ParseDims(spec.substr(eq + 1)));
  }
  return shapes;
}

std::string SanitizeName(const std::string& name) {
  std::string out = name;
  for (char& c : out) {
    bool ok = std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-';
    if (!ok) c = '_';
  }
  return out;
}

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Shape functions and CPU kernels (for constant folding) of every op.
StatusOr<const remex::kernels::KernelRegistry*> CompilerRegistry() {
  static const auto registry = remex::kernels::CreateCpuRegistry();
  if (!registry.ok()) return registry.status();
  return registry->get();
}

StatusOr<std::vector<std::byte>> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return remex::NotFound("cannot open '" + path + "'");
  std::vector<char> raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::byte> bytes(raw.size());
  if (!raw.empty()) std::memcpy(bytes.data(), raw.data(), raw.size());
  return bytes;
}

StatusOr<remex::vm::ExecutableDef> CompileToDef(const std::string& path, const std::map<std::string, Shape>& shapes,
                                                const std::map<std::string, remex::compiler::DimBounds>& bounds,
                                                remex::compiler::CompileStats* stats,
                                                remex::compiler::Layout layout = remex::compiler::Layout::kNchw,
                                                const std::vector<remex::compiler::DispatchSpec>& dispatch = {},
                                                bool strict_dispatch = false, remex::DType dtype = remex::DType::kFloat32,
                                                bool fuse_epilogues = true) {
  remex::compiler::CompileOptions options;
  options.fuse_epilogues = fuse_epilogues;
  options.input_shapes = shapes;
  options.bounds = bounds;
  options.layout = layout;
  options.dispatch = dispatch;
  options.strict_dispatch = strict_dispatch;
  options.dtype = dtype;
  REMEX_ASSIGN_OR_RETURN(const remex::kernels::KernelRegistry* registry, CompilerRegistry());
  return remex::compiler::CompileOnnxFile(path, *registry, options, stats);
}

StatusOr<std::vector<std::byte>> CompileModel(const std::string& path, const std::map<std::string, Shape>& shapes,
                                              remex::compiler::CompileStats* stats) {
  REMEX_ASSIGN_OR_RETURN(auto def, CompileToDef(path, shapes, {}, stats));
  return remex::vm::SerializeExecutable(def);
}

// --dtype of compile and gen-sr: float32 or float16 (names as base/dtype.h gives them).
StatusOr<remex::DType> ParseFloatDType(const std::string& name) {
  std::optional<remex::DType> dtype = remex::DTypeFromName(name);
  if (!dtype || (*dtype != remex::DType::kFloat32 && *dtype != remex::DType::kFloat16)) {
    return remex::InvalidArgument("--dtype must be float32 or float16, got '" + name + "'");
  }
  return *dtype;
}

// NAME=MIN:MAX (MAX may be empty: unbounded) for --bound.
StatusOr<std::map<std::string, remex::compiler::DimBounds>> ParseBounds(const std::vector<std::string>& specs) {
  std::map<std::string, remex::compiler::DimBounds> out;
  for (const auto& spec : specs) {
    auto eq = spec.rfind('=');
    auto colon = spec.rfind(':');
    if (eq == std::string::npos || colon == std::string::npos || colon < eq) {
      return remex::InvalidArgument("--bound '" + spec + "' is not NAME=MIN:MAX");
    }
    try {
      remex::compiler::DimBounds b;
      b.min = std::stoll(spec.substr(eq + 1, colon - eq - 1));
      std::string max = spec.substr(colon + 1);
      b.max = max.empty() ? -1 : std::stoll(max);
      out[spec.substr(0, eq)] = b;
    } catch (const std::exception&) {
      return remex::InvalidArgument("--bound '" + spec + "' is not NAME=MIN:MAX");
    }
  }
  return out;
}

// "x: float32 [N, 3, 48, W]".
std::string DescribeValue(const remex::vm::ValueDesc& v) {
  return v.name + ": " + std::string(remex::DTypeName(v.dtype)) + " " + remex::ShapeToString(v.shape, v.dims);
}

// Seeded input data: uniform in [-1, 1) for floats, [0, 10) for integers.
remex::npy::Array RandomArray(remex::DType dtype, const Shape& shape, std::mt19937_64& rng) {
  remex::npy::Array a;
  a.dtype = dtype;
  a.shape = shape;
  size_t n = static_cast<size_t>(*remex::NumElements(shape));
  a.data.resize(n * remex::DTypeSize(dtype));
  std::uniform_real_distribution<double> real(-1.0, 1.0);
  std::uniform_int_distribution<int> integer(0, 9);
  auto fill = [&](auto* p, auto gen) { for (size_t i = 0; i < n; ++i) p[i] = gen(); };
  using remex::DType;
  switch (dtype) {
    case DType::kFloat32: fill(reinterpret_cast<float*>(a.data.data()), [&] { return static_cast<float>(real(rng)); }); break;
    case DType::kFloat64: fill(reinterpret_cast<double*>(a.data.data()), [&] { return real(rng); }); break;
    case DType::kInt64: fill(reinterpret_cast<int64_t*>(a.data.data()), [&] { return static_cast<int64_t>(integer(rng)); }); break;
    case DType::kInt32: fill(reinterpret_cast<int32_t*>(a.data.data()), [&] { return static_cast<int32_t>(integer(rng)); }); break;
    case DType::kBool: fill(reinterpret_cast<uint8_t*>(a.data.data()), [&] { return static_cast<uint8_t>(integer(rng) & 1); }); break;
    default: fill(reinterpret_cast<uint8_t*>(a.data.data()), [&] { return static_cast<uint8_t>(integer(rng)); }); break;
  }
  return a;
}

// A short human summary of a fetched tensor: values when few, else min/max/mean.
std::string Summary(const remex::npy::Array& a) {
  size_t n = static_cast<size_t>(*remex::NumElements(a.shape));
  if (a.dtype != remex::DType::kFloat32 || n == 0) return "";
  const float* p = reinterpret_cast<const float*>(a.data.data());
  char buf[64];
  std::string s;
  if (n <= 16) {
    s = "[";
    for (size_t i = 0; i < n; ++i) {
      std::snprintf(buf, sizeof buf, "%s%.6g", i ? ", " : "", p[i]);
      s += buf;
    }
    size_t best = 0;
    for (size_t i = 1; i < n; ++i) if (p[i] > p[best]) best = i;
    return s + "]  argmax " + std::to_string(best);
  }
  double mn = p[0], mx = p[0], sum = 0;
  for (size_t i = 0; i < n; ++i) { mn = std::min<double>(mn, p[i]); mx = std::max<double>(mx, p[i]); sum += p[i]; }
  std::snprintf(buf, sizeof buf, "min %.6g max %.6g mean %.6g", mn, mx, sum / n);
  return buf;
}

// ---------------------------------------------------------------------------------------
// What run, bench and check share: arguments, the executable, the server connection,
// the module upload and the inputs.

struct CommonArgs {
  std::string model;
  std::string server;
  std::vector<std::string> inputs;
  std::vector<std::string> shapes;
  uint64_t seed = 0;
  std::string compression = "auto";
  std::string token_file;
  std::string tls_ca, tls_cert, tls_key, tls_server_name;
  bool json = false;
};

void AddCommonOptions(CLI::App* cmd, CommonArgs& args) {
  cmd->add_option("model", args.model, "MODEL.onnx or MODEL.rmx")->required();
  cmd->add_option("--server", args.server, "HOST:PORT of a remex-server (default: an embedded one on loopback)");
  cmd->add_option("--input", args.inputs, "NAME=FILE.npy (repeatable); other inputs are random");
  cmd->add_option("--shape", args.shapes, "NAME=DIMS for inputs and compilation (repeatable)");
  cmd->add_option("--seed", args.seed, "seed of the random inputs")->capture_default_str();
  cmd->add_option("--compression", args.compression,
                  "tensor attachments: auto (zstd where it pays), none, or zstd[:LEVEL]")
      ->capture_default_str();
  cmd->add_option("--token-file", args.token_file,
                  "the server's token (remex-server --token-file); default: the REMEX_TOKEN environment variable");
  cmd->add_option("--tls-ca", args.tls_ca,
                  "connect to --server over TLS; PEM file of the CA the server's certificate must chain to");
  cmd->add_option("--tls-cert", args.tls_cert, "with --tls-ca: this client's PEM certificate (mutual TLS)");
  cmd->add_option("--tls-key", args.tls_key, "with --tls-cert: its PEM private key");
  cmd->add_option("--tls-server-name", args.tls_server_name,
                  "with --tls-ca: the name the server's certificate must carry, when --server's host is not it");
  cmd->add_flag("--json", args.json, "print one JSON object");
}

// --tls-ca/--tls-cert/--tls-key as the client's TLS settings; none without --tls-ca.
StatusOr<std::optional<remex::rpc::TlsClientConfig>> ClientTls(const CommonArgs& args) {
  if (args.tls_ca.empty()) {
    if (!args.tls_cert.empty() || !args.tls_key.empty() || !args.tls_server_name.empty()) {
      return remex::InvalidArgument(
          "--tls-cert, --tls-key and --tls-server-name need --tls-ca (the CA of the server's certificate)");
    }
    return std::optional<remex::rpc::TlsClientConfig>();
  }
  if (args.server.empty()) return remex::InvalidArgument("--tls-ca needs --server (the embedded server speaks plaintext)");
  if (args.tls_cert.empty() != args.tls_key.empty()) {
    return remex::InvalidArgument("--tls-cert and --tls-key go together");
  }
  return std::optional<remex::rpc::TlsClientConfig>(
      remex::rpc::TlsClientConfig{args.tls_ca, args.tls_cert, args.tls_key, args.tls_server_name});
}

// The token for --server: --token-file's, else REMEX_TOKEN's, else none.
StatusOr<std::string> ClientToken(const CommonArgs& args) {
  if (!args.token_file.empty()) return remex::rpc::ReadTokenFile(args.token_file);
  const char* env = std::getenv("REMEX_TOKEN");
  if (env == nullptr || *env == '\0') return std::string();
  std::string token(env);
  if (token.size() < remex::rpc::kMinTokenBytes) {
    return remex::InvalidArgument("REMEX_TOKEN has " + std::to_string(token.size()) + " bytes; tokens have at least " +
                                  std::to_string(remex::rpc::kMinTokenBytes));
  }
  return token;
}

// "auto", "none", "zstd" or "zstd:LEVEL" (1-22). INVALID_ARGUMENT otherwise.
StatusOr<remex::client::CompressionOptions> ParseCompression(const std::string& text) {
  using remex::client::CompressionMode;
  remex::client::CompressionOptions options;
  if (text == "auto") {
    options.mode = CompressionMode::kAuto;
  } else if (text == "none") {
    options.mode = CompressionMode::kNone;
  } else if (text == "zstd" || text.rfind("zstd:", 0) == 0) {
    options.mode = CompressionMode::kZstd;
    if (text.size() > 5) {
      std::string level = text.substr(5);
      char* end = nullptr;
      long v = std::strtol(level.c_str(), &end, 10);
      if (level.empty() || *end != '\0' || v < 1 || v > 22) {
        return remex::InvalidArgument("--compression zstd:LEVEL needs a level from 1 to 22, got '" + level + "'");
      }
      options.level = static_cast<int>(v);
    }
  } else {
    return remex::InvalidArgument("--compression must be auto, none, zstd or zstd:LEVEL, got '" + text + "'");
  }
  return options;
}

// NAME=FILE.npy specs by input name.
StatusOr<std::map<std::string, std::string>> ParseInputSpecs(const std::vector<std::string>& specs) {
  std::map<std::string, std::string> files;
  for (const auto& spec : specs) {
    auto eq = spec.find('=');
    if (eq == std::string::npos || eq == 0) {
      return remex::InvalidArgument("--input must be NAME=FILE.npy, got '" + spec + "'");
    }
    files[spec.substr(0, eq)] = spec.substr(eq + 1);
  }
  return files;
}

StatusOr<std::pair<std::string, uint16_t>> ParseServer(const std::string& server) {
  auto colon = server.rfind(':');
  if (colon == std::string::npos || colon == 0) return remex::InvalidArgument("--server must be HOST:PORT");
  std::string port_text = server.substr(colon + 1);
  char* end = nullptr;
  long port = std::strtol(port_text.c_str(), &end, 10);
  if (port_text.empty() || *end != '\0' || port < 1 || port > 65535) {
    return remex::InvalidArgument("--server must be HOST:PORT, got '" + server + "'");
  }
  return std::make_pair(server.substr(0, colon), static_cast<uint16_t>(port));
}

// Arguments of run/bench/check checked before any work; failures are usage errors.
struct Parsed {
  std::map<std::string, Shape> shapes;
  std::map<std::string, std::string> input_files;
  remex::client::CompressionOptions compression;
  std::string token;
  std::optional<remex::rpc::TlsClientConfig> tls;
};

StatusOr<Parsed> ParseCommon(const CommonArgs& args) {
  Parsed p;
  REMEX_ASSIGN_OR_RETURN(p.shapes, ParseShapes(args.shapes));
  REMEX_ASSIGN_OR_RETURN(p.input_files, ParseInputSpecs(args.inputs));
  REMEX_ASSIGN_OR_RETURN(p.compression, ParseCompression(args.compression));
  if (!args.server.empty()) REMEX_RETURN_IF_ERROR(ParseServer(args.server).status());
  REMEX_ASSIGN_OR_RETURN(p.token, ClientToken(args));
  REMEX_ASSIGN_OR_RETURN(p.tls, ClientTls(args));
  return p;
}

// The executable: read from a .rmx file, or compiled from ONNX.
StatusOr<std::vector<std::byte>> LoadExecutable(const std::string& model, const std::map<std::string, Shape>& shapes) {
  if (EndsWith(model, ".rmx")) return ReadFile(model);
  remex::compiler::CompileStats stats;
  return CompileModel(model, shapes, &stats);
}

// A session with a remote server, or with an embedded one on loopback. The session
// is declared after the server, so it closes first.
struct Connection {
  std::unique_ptr<remex::server::DeviceServer> embedded;
  std::unique_ptr<Session> session;
  std::string server;  // "HOST:PORT" or "embedded 127.0.0.1:PORT"
  std::string device;  // "cpu (description)"
};

StatusOr<Connection> ConnectServer(const std::string& server, const remex::client::CompressionOptions& compression,
                                   const std::string& token,
                                   const std::optional<remex::rpc::TlsClientConfig>& tls) {
  Connection c;
  std::string host = "127.0.0.1";
  uint16_t port = 0;
  if (server.empty()) {
    remex::server::ServerConfig config;
    config.port = 0;
    auto started = remex::server::DeviceServer::Start(config);
    if (!started.ok()) return started.status().WithContext("starting the embedded server");
    c.embedded = std::move(started).value();
    port = c.embedded->port();
    c.server = "embedded " + host + ":" + std::to_string(port);
  } else {
    REMEX_ASSIGN_OR_RETURN(auto address, ParseServer(server));
    std::tie(host, port) = address;
    c.server = server;
  }
  remex::client::ConnectOptions options;
  options.compression = compression;
  if (!c.embedded) {  // the embedded server needs neither
    options.token = token;
    options.tls = tls;
  }
  auto session = Session::Connect(host, port, options);
  if (!session.ok()) return session.status().WithContext("connecting to " + host + ":" + std::to_string(port));
  c.session = std::move(session).value();
  const auto& info = c.session->server_info();
  c.device = info.devices.empty() ? "?" : info.devices[0].name + " (" + info.devices[0].description + ")";
  return c;
}

// The module on the server (uploaded only when the server's module cache lacks it)
// and a VM for it.
struct Loaded {
  remex::client::ModuleInfo module;
  uint64_t vm = 0;
  bool uploaded = false;
  const remex::client::FunctionInfo& main() const { return module.functions.at(0); }
};

StatusOr<Loaded> LoadOnServer(Session& session, const std::vector<std::byte>& executable, const std::string& model) {
  Loaded l;
  auto module = session.LoadModuleCached(executable, fs::path(model).filename().string(), &l.uploaded);
  if (!module.ok()) return module.status().WithContext("loading the module");
  l.module = std::move(module).value();
  if (l.module.functions.empty()) return remex::InvalidArgument("the module has no function");
  auto vm = session.CreateVm(l.module.handle);
  if (!vm.ok()) return vm.status().WithContext("creating the VM");
  l.vm = *vm;
  return l;
}

// The input arrays of `fn` in signature order: from --input files, else from
// `default_dir`/NAME.npy (NAME sanitized) when that exists, else seeded random data.
// A --input naming no input of `fn`, or a dynamic input with neither a file nor a
// --shape, sets *usage.
StatusOr<std::vector<remex::npy::Array>> MakeInputs(const remex::client::FunctionInfo& fn, const Parsed& parsed,
                                                    uint64_t seed, const std::string& default_dir, bool* usage) {
  *usage = false;
  for (const auto& [name, file] : parsed.input_files) {
    bool known = false;
    for (const auto& in : fn.inputs) known |= in.name == name;
    if (!known) {
      *usage = true;
      return remex::InvalidArgument("--input names '" + name + "', which is not an input of the model");
    }
  }
  std::mt19937_64 rng(seed);
  std::vector<remex::npy::Array> arrays;
  for (const auto& in : fn.inputs) {
    std::string file;
    auto given_file = parsed.input_files.find(in.name);
    if (given_file != parsed.input_files.end()) {
      file = given_file->second;
    } else if (!default_dir.empty()) {
      std::string candidate = (fs::path(default_dir) / (SanitizeName(in.name) + ".npy")).string();
      if (fs::exists(candidate)) file = candidate;
    }
    if (!file.empty()) {
      auto read = remex::npy::Read(file);
      if (!read.ok()) return read.status().WithContext("input '" + in.name + "'");
      arrays.push_back(std::move(read).value());
      continue;
    }
    Shape shape = in.shape;
    auto given = parsed.shapes.find(in.name);
    if (given != parsed.shapes.end()) shape = given->second;
    for (int64_t d : shape) {
      if (d < 0) {
        *usage = true;
        return remex::InvalidArgument("input '" + in.name + "' has dynamic shape " + remex::ShapeToString(in.shape) +
                                      ": give --shape " + in.name + "=DIMS or --input " + in.name + "=FILE.npy");
      }
    }
    auto n = remex::NumElements(shape);
    if (!n || static_cast<uint64_t>(*n) > (uint64_t{1} << 34)) {
      *usage = true;
      return remex::InvalidArgument("input '" + in.name + "': shape " + remex::ShapeToString(shape) +
                                    " is too large for random data");
    }
    arrays.push_back(RandomArray(in.dtype, shape, rng));
  }
  return arrays;
}

// Uploads `arrays` and binds them as the inputs of `fn`; returns their handles.
StatusOr<std::vector<uint64_t>> BindInputs(Session& session, uint64_t vm, const remex::client::FunctionInfo& fn,
                                           const std::vector<remex::npy::Array>& arrays) {
  std::vector<uint64_t> handles;
  for (size_t i = 0; i < arrays.size(); ++i) {
    auto up = session.Upload(arrays[i]);
    if (!up.ok()) return up.status().WithContext("uploading input '" + fn.inputs[i].name + "'");
    handles.push_back(up->handle);
  }
  REMEX_RETURN_IF_ERROR(session.SetInputs(vm, fn.name, handles));
  return handles;
}

// Everything up to bound inputs, shared by run, bench and check.
struct Prepared {
  std::vector<std::byte> executable;
  Connection conn;
  Loaded loaded;
  std::vector<remex::npy::Array> inputs;
  std::vector<uint64_t> input_handles;
  double compile_ms = 0;
  double upload_ms = 0;
};

// Returns the exit status on failure (usage or error), 0 on success.
int Prepare(const CommonArgs& args, const std::string& default_input_dir, Prepared& p) {
  auto parsed = ParseCommon(args);
  if (!parsed.ok()) return Usage(parsed.status());
  auto t = Clock::now();
  auto executable = LoadExecutable(args.model, parsed->shapes);
  if (!executable.ok()) return Fail(executable.status());
  p.executable = std::move(executable).value();
  p.compile_ms = MsSince(t);

  auto conn = ConnectServer(args.server, parsed->compression, parsed->token, parsed->tls);
  if (!conn.ok()) return Fail(conn.status());
  p.conn = std::move(conn).value();

  t = Clock::now();
  auto loaded = LoadOnServer(*p.conn.session, p.executable, args.model);
  if (!loaded.ok()) return Fail(loaded.status());
  p.loaded = std::move(loaded).value();
  bool usage = false;
  auto inputs = MakeInputs(p.loaded.main(), *parsed, args.seed, default_input_dir, &usage);
  if (!inputs.ok()) return usage ? Usage(inputs.status()) : Fail(inputs.status());
  p.inputs = std::move(inputs).value();
  auto handles = BindInputs(*p.conn.session, p.loaded.vm, p.loaded.main(), p.inputs);
  if (!handles.ok()) return Fail(handles.status());
  p.input_handles = std::move(handles).value();
  p.upload_ms = MsSince(t);
  return 0;
}

// Frees what Prepare created plus `more` handles.
Status Release(Prepared& p, std::vector<uint64_t> more) {
  std::vector<uint64_t> handles = p.input_handles;
  handles.insert(handles.end(), more.begin(), more.end());
  handles.push_back(p.loaded.vm);
  handles.push_back(p.loaded.module.handle);
  return p.conn.session->Free(handles).WithContext("freeing");
}

// The JSON fields every command reports: server, device, wire bytes, attachment
// compression and the module cache.
void ReportCommon(const CommonArgs& args, const Prepared& p, nlohmann::json& report) {
  const Session& s = *p.conn.session;
  report["model"] = args.model;
  report["server"] = p.conn.server;
  report["device"] = p.conn.device;
  report["bytes"] = {{"sent", s.bytes_sent()},
                     {"received", s.bytes_received()},
                     {"executable", p.executable.size()},
                     {"executable_uploaded", p.loaded.uploaded ? p.executable.size() : 0}};
  auto c = s.compression_stats();
  report["compression"] = {{"mode", args.compression},
                           {"raw_sent", c.raw_sent},
                           {"wire_sent", c.wire_sent},
                           {"raw_received", c.raw_received},
                           {"wire_received", c.wire_received}};
  report["module_cache"] = {{"hit", !p.loaded.uploaded}, {"hash", Session::ContentHash(p.executable)}};
}

void PrintCommon(const CommonArgs& args, const Prepared& p) {
  std::printf("model   %s\ndevice  %s on %s\n", args.model.c_str(), p.conn.device.c_str(), p.conn.server.c_str());
  if (p.loaded.uploaded) {
    std::printf("module  %zu bytes uploaded\n", p.executable.size());
  } else {
    std::printf("module  in the server's module cache (0 of %zu bytes uploaded)\n", p.executable.size());
  }
}

void PrintWire(const Session& s) {
  auto c = s.compression_stats();
  std::printf("wire    %llu bytes sent, %llu bytes received; attachments %llu -> %llu bytes sent, "
              "%llu -> %llu bytes received (raw -> wire)\n",
              static_cast<unsigned long long>(s.bytes_sent()), static_cast<unsigned long long>(s.bytes_received()),
              static_cast<unsigned long long>(c.raw_sent), static_cast<unsigned long long>(c.wire_sent),
              static_cast<unsigned long long>(c.raw_received), static_cast<unsigned long long>(c.wire_received));
}

// ---------------------------------------------------------------------------------------
// remex run

struct RunArgs : CommonArgs {
  std::string fetch = "all";
  std::string output_dir;
  bool save_inputs = false;
};

int Run(const RunArgs& args) {
  Prepared p;
  if (int rc = Prepare(args, "", p); rc != 0) return rc;
  Session& session = *p.conn.session;
  const auto& fn = p.loaded.main();

  std::set<std::string> wanted;
  bool fetch_all = args.fetch == "all";
  if (!fetch_all && args.fetch != "none") {
    std::stringstream ss(args.fetch);
    std::string name;
    while (std::getline(ss, name, ',')) {
      bool known = false;
      for (const auto& o : fn.outputs) known |= o.name == name;
      if (!known) return Usage(remex::InvalidArgument("--fetch names '" + name + "', which is not an output"));
      wanted.insert(name);
    }
  }

  // Run: outputs stay on the server.
  auto t = Clock::now();
  auto result = session.Invoke(p.loaded.vm, fn.name);
  if (!result.ok()) return Fail(result.status().WithContext("invoke"));
  double run_ms = MsSince(t);

  // Fetch what was asked for.
  std::error_code dir_error;
  if (!args.output_dir.empty()) fs::create_directories(args.output_dir, dir_error);
  if (dir_error) return Fail(remex::InvalidArgument("cannot create '" + args.output_dir + "': " + dir_error.message()));
  if (args.save_inputs && !args.output_dir.empty()) {
    fs::create_directories(fs::path(args.output_dir) / "inputs", dir_error);
    if (dir_error) return Fail(remex::InvalidArgument("cannot create the inputs folder: " + dir_error.message()));
    for (size_t i = 0; i < fn.inputs.size(); ++i) {
      Status st = remex::npy::Write(
          (fs::path(args.output_dir) / "inputs" / (SanitizeName(fn.inputs[i].name) + ".npy")).string(), p.inputs[i]);
      if (!st.ok()) return Fail(st);
    }
  }
  t = Clock::now();
  nlohmann::json outputs = nlohmann::json::array();
  std::vector<std::string> lines;
  for (size_t k = 0; k < result->outputs.size(); ++k) {
    const auto& out = result->outputs[k];
    const std::string& name = fn.outputs[k].name;
    bool fetch = fetch_all || wanted.count(name);
    nlohmann::json o = {{"name", name}, {"shape", out.shape}, {"dtype", remex::DTypeName(out.dtype)},
                        {"handle", out.handle}, {"fetched", fetch}};
    std::string line = "  " + name + ": " + std::string(remex::DTypeName(out.dtype)) + " " +
                       remex::ShapeToString(out.shape);
    if (fetch) {
      auto array = session.Download(out.handle);
      if (!array.ok()) return Fail(array.status().WithContext("fetching '" + name + "'"));
      line += "  " + Summary(*array);
      if (!args.output_dir.empty()) {
        std::string file = (fs::path(args.output_dir) / (SanitizeName(name) + ".npy")).string();
        Status st = remex::npy::Write(file, *array);
        if (!st.ok()) return Fail(st);
        o["file"] = file;
        line += "  -> " + file;
      }
    } else {
      line += "  (kept on the server, handle " + std::to_string(out.handle) + ")";
    }
    outputs.push_back(o);
    lines.push_back(line);
  }
  double fetch_ms = MsSince(t);

  std::vector<uint64_t> output_handles;
  for (const auto& out : result->outputs) output_handles.push_back(out.handle);
  if (Status st = Release(p, output_handles); !st.ok()) return Fail(st);

  nlohmann::json report;
  ReportCommon(args, p, report);
  report["outputs"] = outputs;
  report["times_ms"] = {{"compile", p.compile_ms}, {"upload", p.upload_ms}, {"run", run_ms},
                        {"fetch", fetch_ms}, {"server_run", result->run_nanos / 1e6}};
  const auto& copies = result->copies;
  report["device_copies"] = {{"host_to_device", {{"count", copies.host_to_device_count},
                                                 {"bytes", copies.host_to_device_bytes}}},
                             {"device_to_host", {{"count", copies.device_to_host_count},
                                                 {"bytes", copies.device_to_host_bytes}}}};
  report["function"] = result->function;
  report["allocations"] = result->allocations;
  if (args.json) {
    std::printf("%s\n", report.dump(2).c_str());
  } else {
    PrintCommon(args, p);
    std::printf("outputs\n");
    for (const auto& line : lines) std::printf("%s\n", line.c_str());
    PrintWire(session);
    std::printf("copies  device->host %llu (%llu B), host->device %llu (%llu B) in the inference\n",
                static_cast<unsigned long long>(copies.device_to_host_count),
                static_cast<unsigned long long>(copies.device_to_host_bytes),
                static_cast<unsigned long long>(copies.host_to_device_count),
                static_cast<unsigned long long>(copies.host_to_device_bytes));
    std::printf("served  by function %s, %llu buffer allocations in the inference\n", result->function.c_str(),
                static_cast<unsigned long long>(result->allocations));
    std::printf("time    compile %.1f ms, upload %.1f ms, run %.2f ms (server %.2f ms), fetch %.2f ms\n",
                p.compile_ms, p.upload_ms, run_ms, result->run_nanos / 1e6, fetch_ms);
  }
  return 0;
}

// ---------------------------------------------------------------------------------------
// remex bench

struct BenchArgs : CommonArgs {
  remex::client::BenchmarkOptions options;
  size_t stable_window = remex::bench::kDefaultStableWindow;
  double stable_threshold = remex::bench::kDefaultStableThreshold;
  bool profile = false;
};

std::string Format(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

// The profile as an aligned table sorted by total time (largest first), and as JSON.
nlohmann::json ProfileReport(const remex::client::ProfileResult& profile, std::vector<std::string>* table) {
  auto rows = profile.rows;
  std::stable_sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.total_nanos > b.total_nanos; });
  uint64_t total = profile.total_nanos;
  if (total == 0) {
    for (const auto& r : rows) total += r.total_nanos;
  }
  std::vector<std::array<std::string, 8>> cells;
  cells.push_back({"name", "kind", "calls", "total ms", "mean us", "share %", "copies", "copy bytes"});
  nlohmann::json json_rows = nlohmann::json::array();
  for (const auto& r : rows) {
    double total_ms = r.total_nanos / 1e6;
    double mean_us = r.calls ? r.total_nanos / 1e3 / static_cast<double>(r.calls) : 0.0;
    double share = total ? 100.0 * static_cast<double>(r.total_nanos) / static_cast<double>(total) : 0.0;
    cells.push_back({r.name, r.kind, std::to_string(r.calls), Format("%.3f", total_ms), Format("%.1f", mean_us),
                     Format("%.1f", share), std::to_string(r.copies), std::to_string(r.copy_bytes)});
    json_rows.push_back({{"name", r.name}, {"kind", r.kind}, {"calls", r.calls}, {"total_ms", total_ms},
                         {"mean_us", mean_us}, {"share_percent", share}, {"copies", r.copies},
                         {"copy_bytes", r.copy_bytes}});
  }
  std::array<size_t, 8> width{};
  for (const auto& row : cells) {
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  }
  for (const auto& row : cells) {
    std::string line = " ";
    for (size_t i = 0; i < row.size(); ++i) {
      std::string pad(width[i] - row[i].size(), ' ');
      line += " " + (i < 2 ? row[i] + pad : pad + row[i]);  // text left, numbers right
    }
    table->push_back(line);
  }
  table->push_back("  (kernel rows break down the InvokeKernel row; shares are of the whole invoke)");
  return {{"rows", json_rows}, {"total_ms", profile.total_nanos / 1e6}};
}

int Bench(const BenchArgs& args) {
  if (args.options.number < 1 || args.options.repeat < 1) {
    return Usage(remex::InvalidArgument("--number and --repeat must be at least 1"));
  }
  if (args.stable_threshold < 0) return Usage(remex::InvalidArgument("--stable-threshold must be >= 0"));
  Prepared p;
  if (int rc = Prepare(args, "", p); rc != 0) return rc;
  Session& session = *p.conn.session;
  const auto& fn = p.loaded.main();

  auto t = Clock::now();
  auto result = session.Benchmark(p.loaded.vm, fn.name, args.options);
  if (!result.ok()) return Fail(result.status().WithContext("benchmark"));
  double bench_ms = MsSince(t);
  std::vector<double> samples_ms;
  for (double s : result->samples_seconds) samples_ms.push_back(s * 1e3);
  auto stats = remex::bench::Summarize(samples_ms);
  auto stability = remex::bench::CheckStability(samples_ms, args.stable_window, args.stable_threshold);

  nlohmann::json profile_json;
  std::vector<std::string> table;
  if (args.profile) {
    auto profile = session.Profile(p.loaded.vm, fn.name);
    if (!profile.ok()) return Fail(profile.status().WithContext("profile"));
    profile_json = ProfileReport(*profile, &table);
  }
  if (Status st = Release(p, {}); !st.ok()) return Fail(st);

  nlohmann::json report;
  ReportCommon(args, p, report);
  report["benchmark"] = {
      {"function", fn.name},
      {"number", result->number},
      {"repeat", result->samples_seconds.size()},
      {"warmup", args.options.warmup},
      {"min_repeat_ms", args.options.min_repeat_ms},
      {"cooldown_ms", args.options.cooldown_ms},
      {"l2_flush_bytes", args.options.l2_flush_bytes},
      {"timer", result->timer},
      {"samples_ms", samples_ms},
      {"mean_ms", stats.mean},
      {"median_ms", stats.median},
      {"p90_ms", stats.p90},
      {"p99_ms", stats.p99},
      {"min_ms", stats.min},
      {"max_ms", stats.max},
      {"std_ms", stats.std},
      {"std_kind", "population"},
      {"stable", stability.stable},
      {"stability", {{"verdict", stability.verdict}, {"window", stability.window},
                     {"threshold", stability.threshold}, {"max_over_min", stability.max_over_min}}}};
  if (args.profile) report["profile"] = profile_json;
  report["times_ms"] = {{"compile", p.compile_ms}, {"upload", p.upload_ms}, {"benchmark", bench_ms}};
  if (args.json) {
    std::printf("%s\n", report.dump(2).c_str());
    return 0;
  }
  PrintCommon(args, p);
  std::printf("bench   %s: %zu samples x %u calls (warmup %u, timer %s), ms per call\n", fn.name.c_str(),
              samples_ms.size(), result->number, args.options.warmup, result->timer.c_str());
  std::printf("        mean %.4f  median %.4f  p90 %.4f  p99 %.4f  min %.4f  max %.4f  std %.4f\n", stats.mean,
              stats.median, stats.p90, stats.p99, stats.min, stats.max, stats.std);
  if (stability.max_over_min > 0) {
    std::printf("        %s: last %zu samples max/min %.3f (threshold %.3f)\n", stability.verdict.c_str(),
                stability.window, stability.max_over_min, 1.0 + stability.threshold);
  } else {
    std::printf("        %s (window %zu)\n", stability.verdict.c_str(), stability.window);
  }
  if (args.profile) {
    std::printf("profile one invoke, %.3f ms on the device\n", profile_json["total_ms"].get<double>());
    for (const auto& line : table) std::printf("%s\n", line.c_str());
  }
  PrintWire(session);
  return 0;
}

// ---------------------------------------------------------------------------------------
// remex check

struct CheckArgs : CommonArgs {
  std::string reference;
  double rtol = 1e-4;
  double atol = 1e-5;
};

int Check(const CheckArgs& args) {
  if (!fs::is_directory(args.reference)) {
    return Usage(remex::InvalidArgument("--reference '" + args.reference + "' is not a folder"));
  }
  Prepared p;
  if (int rc = Prepare(args, (fs::path(args.reference) / "inputs").string(), p); rc != 0) return rc;
  Session& session = *p.conn.session;
  const auto& fn = p.loaded.main();

  auto t = Clock::now();
  auto result = session.Invoke(p.loaded.vm, fn.name);
  if (!result.ok()) return Fail(result.status().WithContext("invoke"));
  double run_ms = MsSince(t);

  // Compare each output with its reference on the device: only the verdict returns.
  t = Clock::now();
  bool all_match = true;
  nlohmann::json outputs = nlohmann::json::array();
  std::vector<std::string> lines;
  std::vector<uint64_t> to_free;
  for (size_t k = 0; k < result->outputs.size(); ++k) {
    const auto& out = result->outputs[k];
    to_free.push_back(out.handle);
    const std::string& name = fn.outputs[k].name;
    std::string file = (fs::path(args.reference) / (SanitizeName(name) + ".npy")).string();
    nlohmann::json o = {{"name", name}, {"shape", out.shape}, {"dtype", remex::DTypeName(out.dtype)},
                        {"reference", file}};
    std::string line = "  " + name + ": " + std::string(remex::DTypeName(out.dtype)) + " " +
                       remex::ShapeToString(out.shape) + "  ";
    std::string reason;
    auto ref = remex::npy::Read(file);
    if (!ref.ok()) {
      reason = "no usable reference: " + ref.status().ToString();
    } else if (ref->dtype != out.dtype) {
      reason = "reference dtype is " + std::string(remex::DTypeName(ref->dtype));
    } else if (ref->shape != out.shape) {
      reason = "reference shape is " + remex::ShapeToString(ref->shape);
    }
    if (!reason.empty()) {
      all_match = false;
      o["match"] = false;
      o["reason"] = reason;
      outputs.push_back(o);
      lines.push_back(line + "MISMATCH  (" + reason + ")");
      continue;
    }
    auto uploaded = session.Upload(*ref);
    if (!uploaded.ok()) return Fail(uploaded.status().WithContext("uploading the reference of '" + name + "'"));
    to_free.push_back(uploaded->handle);
    auto cmp = session.Compare(out.handle, uploaded->handle, args.rtol, args.atol);
    if (!cmp.ok()) return Fail(cmp.status().WithContext("comparing '" + name + "'"));
    bool match = cmp->mismatches == 0;
    all_match &= match;
    o["match"] = match;
    o["count"] = cmp->count;
    o["mismatches"] = cmp->mismatches;
    o["max_abs_error"] = cmp->max_abs_error;
    o["max_rel_error"] = cmp->max_rel_error;
    o["first_mismatch"] = cmp->first_mismatch;
    outputs.push_back(o);
    char buf[256];
    std::snprintf(buf, sizeof buf, "%s  (%llu of %llu elements mismatch, max abs error %.3g, max rel error %.3g",
                  match ? "ok" : "MISMATCH", static_cast<unsigned long long>(cmp->mismatches),
                  static_cast<unsigned long long>(cmp->count), cmp->max_abs_error, cmp->max_rel_error);
    line += buf;
    if (!match) line += ", first at flat index " + std::to_string(cmp->first_mismatch);
    lines.push_back(line + ")");
  }
  double compare_ms = MsSince(t);
  if (Status st = Release(p, to_free); !st.ok()) return Fail(st);

  nlohmann::json report;
  ReportCommon(args, p, report);
  report["match"] = all_match;
  report["rtol"] = args.rtol;
  report["atol"] = args.atol;
  report["outputs"] = outputs;
  report["times_ms"] = {{"compile", p.compile_ms}, {"upload", p.upload_ms}, {"run", run_ms},
                        {"compare", compare_ms}, {"server_run", result->run_nanos / 1e6}};
  report["device_copies"] = {{"host_to_device", {{"count", result->copies.host_to_device_count},
                                                 {"bytes", result->copies.host_to_device_bytes}}},
                             {"device_to_host", {{"count", result->copies.device_to_host_count},
                                                 {"bytes", result->copies.device_to_host_bytes}}}};
  if (args.json) {
    std::printf("%s\n", report.dump(2).c_str());
  } else {
    PrintCommon(args, p);
    std::printf("check   against %s (rtol %g, atol %g)\n", args.reference.c_str(), args.rtol, args.atol);
    for (const auto& line : lines) std::printf("%s\n", line.c_str());
    PrintWire(session);
    std::printf("%s\n", all_match ? "match" : "MISMATCH");
  }
  return all_match ? 0 : kExitError;
}

// The functions of a compiled executable, one line each (`remex compile --stats`).
void PrintFunctions(const remex::compiler::CompileStats& stats, uint64_t executable_bytes) {
  if (stats.buckets > 0) std::printf("buckets %d\n", stats.buckets);
  std::printf("%-44s %-10s %7s %7s %9s %6s %12s %10s %9s\n", "function", "role", "kernels", "instrs", "code B",
              "shapefn", "arena B", "host B", "planned");
  for (const auto& f : stats.functions) {
    std::string planned = f.role == "bucket" ? std::to_string(f.memory.planned) + "/" +
                                                   std::to_string(f.memory.planned + f.memory.dynamic)
                                             : "-";
    std::printf("%-44s %-10s %7d %7d %9llu %6d %12llu %10llu %9s\n", f.name.c_str(), f.role.c_str(), f.kernels,
                f.instructions, static_cast<unsigned long long>(f.code_bytes), f.runtime_shape_functions,
                static_cast<unsigned long long>(f.memory.arena_bytes[0]),
                static_cast<unsigned long long>(f.memory.arena_bytes[1]), planned.c_str());
  }
  uint64_t code_bytes = 0;
  for (const auto& f : stats.functions) code_bytes += f.code_bytes;
  std::printf("bytecode %llu bytes in %zu functions; constants %llu bytes (%llu if each function kept its own); "
              "executable %llu bytes; compiled in %.2f s\n",
              static_cast<unsigned long long>(code_bytes), stats.functions.size(),
              static_cast<unsigned long long>(stats.constant_bytes),
              static_cast<unsigned long long>(stats.constant_bytes_unshared),
              static_cast<unsigned long long>(executable_bytes), stats.compile_seconds);
}

int Compile(const std::string& model, const std::string& output, const std::vector<std::string>& shape_specs,
            const std::vector<std::string>& bound_specs, const std::vector<std::string>& dispatch_specs,
            bool strict, const std::string& layout_name, const std::string& dtype_name, bool print_stats,
            bool fuse_epilogues) {
  auto shapes = ParseShapes(shape_specs);
  if (!shapes.ok()) return Usage(shapes.status());
  auto bounds = ParseBounds(bound_specs);
  if (!bounds.ok()) return Usage(bounds.status());
  auto layout = remex::compiler::ParseLayout(layout_name);
  if (!layout.ok()) return Usage(layout.status());
  std::vector<remex::compiler::DispatchSpec> dispatch;
  for (const auto& text : dispatch_specs) {
    auto spec = remex::compiler::ParseDispatchSpec(text);
    if (!spec.ok()) return Usage(spec.status());
    dispatch.push_back(*spec);
  }
  if (strict && dispatch.empty()) return Usage(remex::InvalidArgument("--strict needs --dispatch"));
  auto dtype = ParseFloatDType(dtype_name);
  if (!dtype.ok()) return Usage(dtype.status());
  remex::compiler::CompileStats stats;
  auto def = CompileToDef(model, *shapes, *bounds, &stats, *layout, dispatch, strict, *dtype, fuse_epilogues);
  if (!def.ok()) return Fail(def.status());
  auto bytes = remex::vm::SerializeExecutable(*def);
  if (!bytes.ok()) return Fail(bytes.status());
  const auto& fn = def->functions[0];
  for (const auto& v : fn.inputs) std::printf("input   %s\n", DescribeValue(v).c_str());
  for (const auto& v : fn.outputs) std::printf("output  %s\n", DescribeValue(v).c_str());
  for (const auto& s : def->symbols) {
    std::printf("symbol  %s in [%lld, %s]\n", s.name.c_str(), static_cast<long long>(s.min),
                s.max >= 0 ? std::to_string(s.max).c_str() : "inf");
  }
  if (stats.buckets > 0) {
    std::printf("dispatch %d buckets over %zu symbols: %zu functions (dispatcher, %d clones%s)\n", stats.buckets,
                dispatch.size(), def->functions.size(), stats.buckets, strict ? "; --strict" : ", generic");
  }
  if (print_stats) {
    std::map<std::string, int> by_op;
    for (const auto& k : def->kernels) by_op[k.op + (k.host ? " (host)" : "")]++;
    std::printf("kernels by op:\n");
    for (const auto& [op, n] : by_op) std::printf("  %-28s %d\n", op.c_str(), n);
    std::printf("host kernels %d, shape functions at run time %d, explicit copies to host %d, bytecode %zu instructions\n",
                stats.host_kernels, stats.runtime_shape_functions, stats.copies_to_host, fn.code.size());
    std::printf("transpose kernels %d: %d at the edges, %d in the body\n", stats.transposes,
                stats.transposes_at_edges, stats.transposes - stats.transposes_at_edges);
    const auto& l = stats.layout;
    std::printf("layout %s: %d layout changes (%d at the edges, %d in the body), %d nodes NHWC, %d constants permuted\n",
                *layout == remex::compiler::Layout::kNhwc ? "NHWC" : "NCHW",
                l.transposes_at_edges + l.transposes_in_body, l.transposes_at_edges, l.transposes_in_body,
                l.nodes_nhwc, l.constants_permuted);
    std::printf("fused epilogues: %d FusedConv and %d FusedMatMul kernels absorb %d Add and activation nodes\n",
                stats.fused_convs, stats.fused_matmuls, stats.epilogue_nodes);
    std::printf("fused elementwise: %d FusedElementwise kernels replace %d nodes\n", stats.fused_kernels,
                stats.nodes_fused);
    std::printf("dtype %s: %d nodes converted to float16, %d constants converted, %d casts inserted\n",
                dtype_name.c_str(), stats.precision.nodes_converted, stats.precision.constants_converted,
                stats.precision.casts_inserted);
    PrintFunctions(stats, bytes->size());
  }
  std::ofstream out(output, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes->data()), static_cast<std::streamsize>(bytes->size()));
  if (!out) return Fail(remex::DataLoss("cannot write '" + output + "'"));
  std::printf("%s: %d nodes -> %d kernels (%d folded, %d removed, %d shape functions at run time), "
              "%.1f KiB constants, %zu bytes written to %s\n",
              model.c_str(), stats.nodes_in, stats.kernels, stats.nodes_folded, stats.nodes_removed,
              stats.runtime_shape_functions, stats.constant_bytes / 1024.0, bytes->size(), output.c_str());
  return 0;
}

int GenSr(const std::string& output, int64_t height, int64_t width, const std::string& dtype_name, uint64_t seed,
          const std::string& depth_to_space) {
  remex::sr::SrModelOptions options;
  options.height = height;
  options.width = width;
  options.seed = seed;
  if (depth_to_space == "reshape") {
    options.depth_to_space_as_reshape = true;
  } else if (depth_to_space != "native") {
    return Usage(remex::InvalidArgument("--depth-to-space must be native or reshape, got '" + depth_to_space + "'"));
  }
  auto dtype = ParseFloatDType(dtype_name);
  if (!dtype.ok()) return Usage(dtype.status());
  options.dtype = *dtype;
  Status st = remex::sr::WriteSrModel(options, output);
  if (st.code() == remex::StatusCode::kInvalidArgument) return Usage(st);
  if (!st.ok()) return Fail(st);
  std::printf("super-resolution x4 model %s [1, 3, %lld, %lld] -> [1, 3, %lld, %lld] written to %s\n",
              dtype_name.c_str(), static_cast<long long>(height), static_cast<long long>(width),
              static_cast<long long>(4 * height), static_cast<long long>(4 * width), output.c_str());
  std::printf("convolutions: %.3f GFLOP per inference (2 per multiply-add), depth_to_space %s\n",
              remex::sr::SrModelFlops(options) / 1e9, depth_to_space.c_str());
  return 0;
}

int Compare(const std::string& expected, const std::string& actual, double rtol, double atol) {
  auto result = remex::compare::ComparePaths(expected, actual, rtol, atol);
  if (!result.ok()) return Fail(result.status());
  for (const auto& line : result->lines) std::printf("%s\n", line.c_str());
  std::printf("%s\n", result->ok ? "match" : "MISMATCH");
  return result->ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"remex: compile ONNX models, and run, benchmark and check them on a Remex device server"};
  app.require_subcommand(1);

  std::string model, output;
  std::vector<std::string> shapes;
  auto* compile = app.add_subcommand("compile", "compile an ONNX model to a Remex executable (.rmx)");
  compile->add_option("model", model, "MODEL.onnx")->required();
  compile->add_option("-o,--output", output, "MODEL.rmx")->required();
  compile->add_option("--shape", shapes, "NAME=DIMS, e.g. x=1x3x48x192 (repeatable)");
  std::vector<std::string> bounds;
  bool compile_stats = false;
  compile->add_option("--bound", bounds, "SYMBOL=MIN:MAX bounds of a symbolic input dim, e.g. W=32:2048 (repeatable)");
  compile->add_flag("--stats", compile_stats, "print kernels by op, placement, layout, buckets and functions");
  std::vector<std::string> dispatch;
  bool strict = false;
  compile->add_option("--dispatch", dispatch,
                      "shape buckets of a symbolic input dim: SYMBOL=log:BASE[:MIN:MAX], SYMBOL=uniform:STEP[:MIN:MAX] "
                      "or SYMBOL=edges:E1,E2,... (repeatable: a grid)");
  compile->add_flag("--strict", strict, "with --dispatch: refuse shapes outside every bucket instead of running "
                                        "the generic function");
  std::string layout = "NCHW";
  compile->add_option("--layout", layout, "activation layout between convolutions: NCHW or NHWC")
      ->capture_default_str();
  std::string compile_dtype = "float32";
  compile->add_option("--dtype", compile_dtype,
                      "activation and weight dtype: float32, or float16 (inputs and outputs stay float32)")
      ->capture_default_str();
  bool no_fuse_epilogues = false;
  compile->add_flag("--no-fuse-epilogues", no_fuse_epilogues,
                    "keep Conv and MatMul, their Add and their activation as separate kernels (no FusedConv, "
                    "no FusedMatMul)");

  std::string sr_output, sr_dtype = "float32";
  int64_t sr_height = 720, sr_width = 1280;
  uint64_t sr_seed = 1;
  auto* gen_sr = app.add_subcommand("gen-sr", "write a synthetic EDSR-style x4 super-resolution ONNX model");
  gen_sr->add_option("-o,--output", sr_output, "SR.onnx")->required();
  gen_sr->add_option("--height", sr_height, "input height")->capture_default_str();
  gen_sr->add_option("--width", sr_width, "input width")->capture_default_str();
  gen_sr->add_option("--dtype", sr_dtype, "float32 or float16")->capture_default_str();
  gen_sr->add_option("--seed", sr_seed, "weight generator seed")->capture_default_str();
  std::string sr_d2s = "native";
  gen_sr->add_option("--depth-to-space", sr_d2s,
                     "native (DepthToSpace nodes) or reshape (their Reshape-Transpose-Reshape definition)")
      ->capture_default_str();

  RunArgs run;
  auto* run_cmd = app.add_subcommand("run", "run a model on a device server and fetch its outputs");
  AddCommonOptions(run_cmd, run);
  run_cmd->add_option("--fetch", run.fetch, "outputs to fetch: all, none or NAME[,NAME]")->capture_default_str();
  run_cmd->add_option("--output-dir", run.output_dir, "write each fetched output as DIR/NAME.npy");
  run_cmd->add_flag("--save-inputs", run.save_inputs, "also write the inputs as DIR/inputs/NAME.npy");

  BenchArgs bench;
  auto* bench_cmd = app.add_subcommand("bench", "time a model on a device server (no output data is fetched)");
  AddCommonOptions(bench_cmd, bench);
  bench_cmd->add_option("--number", bench.options.number, "calls per sample")->capture_default_str();
  bench_cmd->add_option("--repeat", bench.options.repeat, "samples")->capture_default_str();
  bench_cmd->add_option("--min-repeat-ms", bench.options.min_repeat_ms,
                        "grow --number until one sample takes at least this long")
      ->capture_default_str();
  bench_cmd->add_option("--warmup", bench.options.warmup, "untimed calls first")->capture_default_str();
  bench_cmd->add_option("--cooldown-ms", bench.options.cooldown_ms, "sleep between samples")->capture_default_str();
  bench_cmd->add_option("--l2-flush-bytes", bench.options.l2_flush_bytes,
                        "write this many bytes on the device before each sample")
      ->capture_default_str();
  bench_cmd->add_option("--stable-window", bench.stable_window, "samples the stability verdict looks at (the last K)")
      ->capture_default_str();
  bench_cmd->add_option("--stable-threshold", bench.stable_threshold,
                        "stable when max/min of the window <= 1 + F (0.1 = 10 %)")
      ->capture_default_str();
  bench_cmd->add_flag("--profile", bench.profile, "also profile one invoke per op and instruction kind");

  CheckArgs check;
  auto* check_cmd = app.add_subcommand("check", "run a model and compare its outputs with references on the device");
  AddCommonOptions(check_cmd, check);
  check_cmd->add_option("--reference", check.reference,
                        "folder of NAME.npy references (inputs from DIR/inputs/NAME.npy when present)")
      ->required();
  check_cmd->add_option("--rtol", check.rtol)->capture_default_str();
  check_cmd->add_option("--atol", check.atol)->capture_default_str();

  std::string expected, actual;
  double rtol = 1e-4, atol = 1e-5;
  auto* compare = app.add_subcommand("compare", "compare .npy files (or folders of them) like numpy.allclose");
  compare->add_option("expected", expected, "EXPECTED.npy or folder")->required();
  compare->add_option("actual", actual, "ACTUAL.npy or folder")->required();
  compare->add_option("--rtol", rtol)->capture_default_str();
  compare->add_option("--atol", atol)->capture_default_str();

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);  // prints help or the error
    return code == 0 ? 0 : kExitUsage;
  }
  // The embedded server logs warnings and errors only.
  spdlog::set_level(spdlog::level::warn);
  if (*compile) {
    return Compile(model, output, shapes, bounds, dispatch, strict, layout, compile_dtype, compile_stats,
                   !no_fuse_epilogues);
  }
  if (*gen_sr) return GenSr(sr_output, sr_height, sr_width, sr_dtype, sr_seed, sr_d2s);
  if (*run_cmd) return Run(run);
  if (*bench_cmd) return Bench(bench);
  if (*check_cmd) return Check(check);
  if (*compare) return Compare(expected, actual, rtol, atol);
  return kExitUsage;
}
