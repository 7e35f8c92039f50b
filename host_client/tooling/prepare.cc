#include "host_client/tooling/prepare.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>

#include "base/file_error.h"
#include "kernels/float16.h"

namespace remex::tooling {
namespace fs = std::filesystem;
namespace {

// Seeded input data: uniform in [-1, 1) for floats, [0, 10) for integers.
npy::Array RandomArray(DType dtype, const Shape& shape, std::mt19937_64& rng) {
  npy::Array a;
  a.dtype = dtype;
  a.shape = shape;
  size_t n = static_cast<size_t>(*NumElements(shape));
  a.data.resize(n * DTypeSize(dtype));
  std::uniform_real_distribution<double> real(-1.0, 1.0);
  std::uniform_int_distribution<int> integer(0, 9);
  auto fill = [&](auto* p, auto gen) {
    for (size_t i = 0; i < n; ++i) p[i] = gen();
  };
  switch (dtype) {
    case DType::kFloat32: fill(reinterpret_cast<float*>(a.data.data()), [&] { return static_cast<float>(real(rng)); }); break;
    case DType::kFloat64: fill(reinterpret_cast<double*>(a.data.data()), [&] { return real(rng); }); break;
    case DType::kFloat16:
      fill(reinterpret_cast<uint16_t*>(a.data.data()),
           [&] { return kernels::FloatToHalf(static_cast<float>(real(rng))).bits; });
      break;
    case DType::kBFloat16:
      fill(reinterpret_cast<uint16_t*>(a.data.data()),
           [&] { return kernels::FloatToBFloat16(static_cast<float>(real(rng))).bits; });
      break;
    case DType::kInt64: fill(reinterpret_cast<int64_t*>(a.data.data()), [&] { return static_cast<int64_t>(integer(rng)); }); break;
    case DType::kInt32: fill(reinterpret_cast<int32_t*>(a.data.data()), [&] { return static_cast<int32_t>(integer(rng)); }); break;
    case DType::kBool: fill(reinterpret_cast<uint8_t*>(a.data.data()), [&] { return static_cast<uint8_t>(integer(rng) & 1); }); break;
    default: fill(reinterpret_cast<uint8_t*>(a.data.data()), [&] { return static_cast<uint8_t>(integer(rng)); }); break;
  }
  return a;
}

std::string Mib(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  return buf;
}

double MsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

std::string FileNameFor(const std::string& name) {
  std::string out = name;
  for (char& c : out) {
    bool ok = std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-';
    if (!ok) c = '_';
  }
  return out;
}

StatusOr<std::vector<npy::Array>> MakeInputs(const client::FunctionInfo& fn,
                                             const std::map<std::string, std::string>& files,
                                             const std::map<std::string, Shape>& shapes, uint64_t seed,
                                             const std::string& default_dir) {
  auto known = [&](const std::string& name) {
    for (const auto& in : fn.inputs) {
      if (in.name == name) return true;
    }
    return false;
  };
  std::string names;
  for (const auto& in : fn.inputs) names += (names.empty() ? "" : ", ") + in.name;
  for (const auto& [name, file] : files) {
    if (!known(name)) return InvalidArgument("--input names '" + name + "', which is no input of the model (" + names + ")");
  }
  for (const auto& [name, shape] : shapes) {
    if (!known(name)) return InvalidArgument("--shape names '" + name + "', which is no input of the model (" + names + ")");
  }
  std::mt19937_64 rng(seed);
  std::vector<npy::Array> arrays;
  for (const auto& in : fn.inputs) {
    std::string file;
    const bool given = files.count(in.name) > 0;
    if (given) {
      file = files.at(in.name);
    } else if (!default_dir.empty()) {
      std::string candidate = (fs::path(default_dir) / (FileNameFor(in.name) + ".npy")).string();
      if (fs::exists(candidate)) file = candidate;
    }
    auto shape_given = shapes.find(in.name);
    if (!file.empty()) {
      auto read = npy::Read(file);
      if (!read.ok()) return read.status().WithContext("input '" + in.name + "'");
      if (shape_given != shapes.end() && shape_given->second != read->shape) {
        return InvalidArgument("--shape " + in.name + " gives " + ShapeToString(shape_given->second) + " but " + file +
                               " holds " + ShapeToString(read->shape));
      }
      arrays.push_back(std::move(read).value());
      continue;
    }
    Shape shape = shape_given != shapes.end() ? shape_given->second : in.shape;
    for (int64_t d : shape) {
      if (d < 0) {
        return InvalidArgument("input '" + in.name + "' has dynamic shape " + ShapeToString(in.shape) +
                               ": give --shape " + in.name + "=DIMS or --input " + in.name + "=FILE.npy");
      }
    }
    auto n = NumElements(shape);
    if (!n || static_cast<uint64_t>(*n) > (uint64_t{1} << 34)) {
      return InvalidArgument("input '" + in.name + "': shape " + ShapeToString(shape) + " is too large for random data");
    }
    arrays.push_back(RandomArray(in.dtype, shape, rng));
  }
  return arrays;
}

Status PreparedModel::Release(const std::vector<uint64_t>& more) {
  std::vector<uint64_t> handles = input_handles;
  handles.insert(handles.end(), more.begin(), more.end());
  handles.push_back(vm);
  handles.push_back(module.handle);
  return session().Free(handles).WithContext("freeing");
}

StatusOr<PreparedModel> PrepareModel(const ModelRequest& request, const ProgressFn& progress) {
  return PrepareModelOn(request, Connection{}, progress);
}

StatusOr<PreparedModel> PrepareModelOn(const ModelRequest& request, Connection given, const ProgressFn& progress) {
  auto say = [&](const std::string& step) {
    if (progress) progress(step);
  };
  PreparedModel p;
  if (!fs::path(request.model).has_extension() || fs::path(request.model).extension() != ".rmx") {
    say("compiling " + request.model);
  }
  auto executable = LoadExecutable(request.model, request.compile, request.changes_compilation);
  if (!executable.ok()) {
    say("");
    return executable.status();
  }
  p.executable = std::move(executable).value();
  p.compile = request.compile;
  if (given.session) {
    p.connection = std::move(given);
  } else {
    say("connecting to " + (request.server.address.empty() ? std::string("the embedded server") : request.server.address));
    auto connection = Connect(request.server);
    if (!connection.ok()) {
      say("");
      return connection.status();
    }
    p.connection = std::move(connection).value();
  }
  // The device known, the choices left open are made for it (CompileForDevice): a
  // float16 model meant for the CPU device in float32, an int8 one channels-last.
  const auto& devices = p.session().server_info().devices;
  DeviceCompile for_device = CompileForDevice(devices.empty() ? nullptr : &devices[0], p.executable.traits,
                                              request.compile);
  p.compile = std::move(for_device.options);
  if (!for_device.changes.empty()) {
    say("compiling " + request.model + " again for the " + devices[0].name + " device, " + for_device.changes);
    auto again = LoadExecutable(request.model, p.compile, request.changes_compilation);
    say("");
    if (!again.ok()) return again.status();
    p.executable = std::move(again).value();
  }

  const auto t = std::chrono::steady_clock::now();
  say("loading the module (" + Mib(p.executable.bytes.size()) + ")");
  auto module = p.session().LoadModuleCached(p.executable.bytes, fs::path(request.model).filename().string(), &p.uploaded);
  say("");
  if (!module.ok()) return module.status().WithContext("loading the module");
  p.module = std::move(module).value();
  if (p.module.functions.empty()) return InvalidArgument("the module has no function");
  REMEX_ASSIGN_OR_RETURN(p.vm, p.session().CreateVm(p.module.handle));
  REMEX_ASSIGN_OR_RETURN(p.inputs, MakeInputs(p.main(), request.input_files, request.compile.input_shapes, request.seed,
                                              request.default_input_dir));
  uint64_t input_bytes = 0;
  for (const auto& a : p.inputs) input_bytes += a.data.size();
  say("uploading the inputs (" + Mib(input_bytes) + ")");
  for (size_t i = 0; i < p.inputs.size(); ++i) {
    auto up = p.session().Upload(p.inputs[i]);
    if (!up.ok()) {
      say("");
      return up.status().WithContext("uploading input '" + p.main().inputs[i].name + "'");
    }
    p.input_handles.push_back(up->handle);
  }
  say("");
  REMEX_RETURN_IF_ERROR(p.session().SetInputs(p.vm, p.main().name, p.input_handles));
  p.upload_ms = MsSince(t);
  return p;
}

SessionReport DescribeSession(const ModelRequest& request, PreparedModel& p) {
  SessionReport r;
  const client::Session& s = p.session();
  r.model = request.model;
  r.server = p.connection.server;
  r.device = p.connection.device;
  r.session_id = s.server_info().session_id;
  r.bytes_sent = s.bytes_sent();
  r.bytes_received = s.bytes_received();
  r.executable_bytes = p.executable.bytes.size();
  r.module_cache_hit = !p.uploaded;
  r.module_hash = client::Session::ContentHash(p.executable.bytes);
  r.compression = s.compression_stats();
  r.compile_ms = p.executable.compile_ms;
  r.upload_ms = p.upload_ms;
  // The options apply when LoadExecutable compiled the model (not an .rmx).
  const bool compiled = !(request.model.size() >= 4 && request.model.compare(request.model.size() - 4, 4, ".rmx") == 0);
  r.environment = DescribeEnvironment(s, compiled ? std::optional(p.compile) : std::nullopt);
  return r;
}

Status EnsureWritableDirectory(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return PermissionDenied("cannot create the folder '" + dir + "': " + ec.message());
  std::string probe = (fs::path(dir) / ".remex-write-check-XXXXXX").string();
  int fd = mkstemp(probe.data());
  if (fd < 0) return PermissionDenied("cannot write in the folder '" + dir + "': " + std::strerror(errno));
  close(fd);
  fs::remove(probe, ec);
  return OkStatus();
}

Status EnsureWritableFile(const std::string& path, const std::string& what) {
  std::error_code ec;
  bool existed = fs::exists(path, ec);
  std::FILE* f = std::fopen(path.c_str(), "ab");
  if (!f) return FileError("cannot write " + what, path, errno);
  std::fclose(f);
  if (!existed) fs::remove(path, ec);
  return OkStatus();
}

}  // namespace remex::tooling
