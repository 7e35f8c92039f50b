// remex: compile ONNX models to Remex executables and run them on a device server.
//
//   remex compile MODEL.onnx -o MODEL.rmx [--shape NAME=DIMS]...
//   remex run MODEL.onnx|MODEL.rmx [--server HOST:PORT] [--input NAME=FILE.npy]...
//             [--shape NAME=1x3x48x192]... [--seed N] [--fetch all|none|NAME[,NAME]]
//             [--output-dir DIR] [--json]
//   remex compare EXPECTED ACTUAL [--rtol R] [--atol A]
//
// Without --server, `run` starts an embedded device server on a loopback port and
// talks to it over the same protocol as to a remote one.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>

#include "device_server/device_server.h"
#include "host_client/client.h"
#include "host_client/compare.h"
#include "host_client/compiler.h"
#include "host_client/npy.h"
#include "kernels/kernels.h"
#include "vm/executable.h"

namespace fs = std::filesystem;
using remex::Shape;
using remex::Status;
using remex::StatusOr;

namespace {

using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

int Fail(const Status& status) {
  std::fprintf(stderr, "remex: %s\n", status.ToString().c_str());
  return 1;
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

StatusOr<std::vector<std::byte>> CompileModel(const std::string& path, const std::map<std::string, Shape>& shapes,
                                              remex::compiler::CompileStats* stats) {
  remex::compiler::CompileOptions options;
  options.input_shapes = shapes;
  REMEX_ASSIGN_OR_RETURN(const remex::kernels::KernelRegistry* registry, CompilerRegistry());
  REMEX_ASSIGN_OR_RETURN(auto def, remex::compiler::CompileOnnxFile(path, *registry, options, stats));
  return remex::vm::SerializeExecutable(def, options.zstd_level);
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

std::string DeclaredShape(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + (shape[i] < 0 ? std::string("?") : std::to_string(shape[i]));
  return s + "]";
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

struct RunArgs {
  std::string model;
  std::string server;
  std::vector<std::string> inputs;
  std::vector<std::string> shapes;
  uint64_t seed = 0;
  std::string fetch = "all";
  std::string output_dir;
  bool json = false;
  bool save_inputs = false;
};

int Run(const RunArgs& args) {
  auto shapes = ParseShapes(args.shapes);
  if (!shapes.ok()) return Fail(shapes.status());
  nlohmann::json report;
  report["model"] = args.model;

  // 1. The executable.
  auto t = Clock::now();
  std::vector<std::byte> executable;
  remex::compiler::CompileStats stats;
  if (EndsWith(args.model, ".rmx")) {
    auto bytes = ReadFile(args.model);
    if (!bytes.ok()) return Fail(bytes.status());
    executable = std::move(bytes).value();
  } else {
    auto bytes = CompileModel(args.model, *shapes, &stats);
    if (!bytes.ok()) return Fail(bytes.status());
    executable = std::move(bytes).value();
  }
  double compile_ms = MsSince(t);

  // 2. The server: remote, or embedded on loopback.
  std::unique_ptr<remex::server::DeviceServer> embedded;
  std::string host = "127.0.0.1";
  uint16_t port = 0;
  if (args.server.empty()) {
    remex::server::ServerConfig config;
    config.port = 0;
    config.threads = 2;
    auto server = remex::server::DeviceServer::Start(config);
    if (!server.ok()) return Fail(server.status().WithContext("starting the embedded server"));
    embedded = std::move(server).value();
    port = embedded->port();
  } else {
    auto colon = args.server.rfind(':');
    if (colon == std::string::npos) return Fail(remex::InvalidArgument("--server must be HOST:PORT"));
    host = args.server.substr(0, colon);
    try {
      port = static_cast<uint16_t>(std::stoi(args.server.substr(colon + 1)));
    } catch (...) {
      return Fail(remex::InvalidArgument("--server must be HOST:PORT"));
    }
  }
  auto session_or = remex::client::Session::Connect(host, port);
  if (!session_or.ok()) return Fail(session_or.status().WithContext("connecting to " + host + ":" + std::to_string(port)));
  auto& session = *session_or;
  const auto& info = session->server_info();
  std::string device = info.devices.empty() ? "?" : info.devices[0].name + " (" + info.devices[0].description + ")";
  report["server"] = embedded ? "embedded " + host + ":" + std::to_string(port) : args.server;
  report["device"] = device;

  // 3. Upload: module, VM, inputs.
  t = Clock::now();
  auto module = session->LoadModule(executable, fs::path(args.model).filename().string());
  if (!module.ok()) return Fail(module.status().WithContext("loading the module"));
  auto vm = session->CreateVm(module->handle);
  if (!vm.ok()) return Fail(vm.status().WithContext("creating the VM"));
  const auto& fn = module->functions.at(0);
  std::map<std::string, std::string> input_files;
  for (const auto& spec : args.inputs) {
    auto eq = spec.find('=');
    if (eq == std::string::npos) return Fail(remex::InvalidArgument("--input must be NAME=FILE.npy, got '" + spec + "'"));
    input_files[spec.substr(0, eq)] = spec.substr(eq + 1);
  }
  for (const auto& [name, file] : input_files) {
    bool known = false;
    for (const auto& in : fn.inputs) known |= in.name == name;
    if (!known) return Fail(remex::InvalidArgument("--input names '" + name + "', which is not an input of the model"));
  }
  std::mt19937_64 rng(args.seed);
  std::vector<uint64_t> input_handles;
  std::vector<remex::npy::Array> input_arrays;
  for (const auto& in : fn.inputs) {
    remex::npy::Array array;
    auto file = input_files.find(in.name);
    if (file != input_files.end()) {
      auto read = remex::npy::Read(file->second);
      if (!read.ok()) return Fail(read.status().WithContext("input '" + in.name + "'"));
      array = std::move(read).value();
    } else {
      Shape shape = in.shape;
      auto given = shapes->find(in.name);
      if (given != shapes->end()) shape = given->second;
      for (int64_t d : shape) {
        if (d < 0) {
          return Fail(remex::InvalidArgument("input '" + in.name + "' has dynamic shape " + DeclaredShape(in.shape) +
                                             ": give --shape " + in.name + "=DIMS or --input " + in.name + "=FILE.npy"));
        }
      }
      array = RandomArray(in.dtype, shape, rng);
    }
    auto up = session->Upload(array);
    if (!up.ok()) return Fail(up.status().WithContext("uploading input '" + in.name + "'"));
    input_handles.push_back(up->handle);
    input_arrays.push_back(std::move(array));
  }
  auto set = session->SetInputs(*vm, fn.name, input_handles);
  if (!set.ok()) return Fail(set);
  double upload_ms = MsSince(t);

  // 4. Run: outputs stay on the server.
  t = Clock::now();
  auto result = session->Invoke(*vm, fn.name);
  if (!result.ok()) return Fail(result.status().WithContext("invoke"));
  double run_ms = MsSince(t);

  // 5. Fetch what was asked for.
  std::set<std::string> wanted;
  bool fetch_all = args.fetch == "all";
  if (!fetch_all && args.fetch != "none") {
    std::stringstream ss(args.fetch);
    std::string name;
    while (std::getline(ss, name, ',')) {
      bool known = false;
      for (const auto& o : fn.outputs) known |= o.name == name;
      if (!known) return Fail(remex::InvalidArgument("--fetch names '" + name + "', which is not an output"));
      wanted.insert(name);
    }
  }
  if (!args.output_dir.empty()) fs::create_directories(args.output_dir);
  if (args.save_inputs && !args.output_dir.empty()) {
    fs::create_directories(fs::path(args.output_dir) / "inputs");
    for (size_t i = 0; i < fn.inputs.size(); ++i) {
      Status st = remex::npy::Write((fs::path(args.output_dir) / "inputs" / (SanitizeName(fn.inputs[i].name) + ".npy")).string(),
                                    input_arrays[i]);
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
      auto array = session->Download(out.handle);
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

  std::vector<uint64_t> handles = input_handles;
  for (const auto& out : result->outputs) handles.push_back(out.handle);
  handles.push_back(*vm);
  handles.push_back(module->handle);
  Status freed = session->Free(handles);
  if (!freed.ok()) return Fail(freed.WithContext("freeing"));

  report["outputs"] = outputs;
  report["bytes"] = {{"sent", session->bytes_sent()}, {"received", session->bytes_received()},
                     {"executable", executable.size()}};
  report["times_ms"] = {{"compile", compile_ms}, {"upload", upload_ms}, {"run", run_ms}, {"fetch", fetch_ms},
                        {"server_run", result->run_nanos / 1e6}};
  if (args.json) {
    std::printf("%s\n", report.dump(2).c_str());
  } else {
    std::printf("model   %s\ndevice  %s on %s\n", args.model.c_str(), device.c_str(),
                report["server"].get<std::string>().c_str());
    std::printf("outputs\n");
    for (const auto& line : lines) std::printf("%s\n", line.c_str());
    std::printf("wire    %llu bytes sent, %llu bytes received\n",
                static_cast<unsigned long long>(session->bytes_sent()),
                static_cast<unsigned long long>(session->bytes_received()));
    std::printf("time    compile %.1f ms, upload %.1f ms, run %.2f ms (server %.2f ms), fetch %.2f ms\n",
                compile_ms, upload_ms, run_ms, result->run_nanos / 1e6, fetch_ms);
  }
  return 0;
}

int Compile(const std::string& model, const std::string& output, const std::vector<std::string>& shape_specs) {
  auto shapes = ParseShapes(shape_specs);
  if (!shapes.ok()) return Fail(shapes.status());
  remex::compiler::CompileStats stats;
  auto bytes = CompileModel(model, *shapes, &stats);
  if (!bytes.ok()) return Fail(bytes.status());
  std::ofstream out(output, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes->data()), static_cast<std::streamsize>(bytes->size()));
  if (!out) return Fail(remex::DataLoss("cannot write '" + output + "'"));
  std::printf("%s: %d nodes -> %d kernels (%d folded, %d removed, %d shape functions at run time), "
              "%.1f KiB constants, %zu bytes written to %s\n",
              model.c_str(), stats.nodes_in, stats.kernels, stats.nodes_folded, stats.nodes_removed,
              stats.runtime_shape_functions, stats.constant_bytes / 1024.0, bytes->size(), output.c_str());
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
  CLI::App app{"remex: compile ONNX models and run them on a Remex device server"};
  app.require_subcommand(1);

  std::string model, output;
  std::vector<std::string> shapes;
  auto* compile = app.add_subcommand("compile", "compile an ONNX model to a Remex executable (.rmx)");
  compile->add_option("model", model, "MODEL.onnx")->required();
  compile->add_option("-o,--output", output, "MODEL.rmx")->required();
  compile->add_option("--shape", shapes, "NAME=DIMS, e.g. x=1x3x48x192 (repeatable)");

  RunArgs run;
  auto* run_cmd = app.add_subcommand("run", "run a model on a device server and fetch its outputs");
  run_cmd->add_option("model", run.model, "MODEL.onnx or MODEL.rmx")->required();
  run_cmd->add_option("--server", run.server, "HOST:PORT of a remex-server (default: an embedded one on loopback)");
  run_cmd->add_option("--input", run.inputs, "NAME=FILE.npy (repeatable); other inputs are random");
  run_cmd->add_option("--shape", run.shapes, "NAME=DIMS for inputs and compilation (repeatable)");
  run_cmd->add_option("--seed", run.seed, "seed of the random inputs")->capture_default_str();
  run_cmd->add_option("--fetch", run.fetch, "outputs to fetch: all, none or NAME[,NAME]")->capture_default_str();
  run_cmd->add_option("--output-dir", run.output_dir, "write each fetched output as DIR/NAME.npy");
  run_cmd->add_flag("--save-inputs", run.save_inputs, "also write the inputs as DIR/inputs/NAME.npy");
  run_cmd->add_flag("--json", run.json, "print one JSON object");

  std::string expected, actual;
  double rtol = 1e-4, atol = 1e-5;
  auto* compare = app.add_subcommand("compare", "compare .npy files (or folders of them) like numpy.allclose");
  compare->add_option("expected", expected, "EXPECTED.npy or folder")->required();
  compare->add_option("actual", actual, "ACTUAL.npy or folder")->required();
  compare->add_option("--rtol", rtol)->capture_default_str();
  compare->add_option("--atol", atol)->capture_default_str();

  CLI11_PARSE(app, argc, argv);
  // The embedded server logs warnings and errors only.
  spdlog::set_level(spdlog::level::warn);
  if (*compile) return Compile(model, output, shapes);
  if (*run_cmd) return Run(run);
  if (*compare) return Compare(expected, actual, rtol, atol);
  return 2;
}
