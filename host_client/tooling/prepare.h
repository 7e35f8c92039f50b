// Everything run, bench and check do before their own work: the executable (read or
// compiled), a session, the module on the server (uploaded only when its module cache
// lacks it), a VM, and the inputs made and bound.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "base/status.h"
#include "host_client/client/client.h"
#include "host_client/client/npy.h"
#include "host_client/compiler/options.h"
#include "host_client/tooling/compile.h"
#include "host_client/tooling/connection.h"
#include "host_client/tooling/environment.h"

namespace remex::tooling {

// Where a long step is: called with a short description when a step starts ("compiling
// model.onnx", "uploading the module (12.3 MiB)") and with "" when the work is done. A
// front end shows it (the CLI on a terminal, after about a second); may be empty.
using ProgressFn = std::function<void(const std::string& step)>;

struct ModelRequest {
  std::string model;                   // MODEL.onnx or MODEL.rmx
  compiler::CompileOptions compile;    // for .onnx; input_shapes also shape random inputs
  bool changes_compilation = false;    // CompileSpecs::ChangesCompilation (refused for .rmx)
  ServerOptions server;
  std::map<std::string, std::string> input_files;  // input name -> .npy path
  uint64_t seed = 0;                   // of the random inputs
  // Inputs neither given nor shaped come from DIR/NAME.npy here when it exists (check:
  // REFERENCE/inputs); empty: none.
  std::string default_input_dir;
};

struct PreparedModel {
  LoadedExecutable executable;
  // The options the executable was compiled with: the request's, with the choices it
  // left open (--dtype, --layout) made for the server's device (CompileForDevice).
  compiler::CompileOptions compile;
  Connection connection;
  client::ModuleInfo module;
  uint64_t vm = 0;
  bool uploaded = false;  // false: the server's module cache had it
  std::vector<npy::Array> inputs;
  std::vector<uint64_t> input_handles;
  double upload_ms = 0;  // module and inputs

  const client::FunctionInfo& main() const { return module.functions.at(0); }
  client::Session& session() { return *connection.session; }
  // Frees the inputs, the VM, the module and `more` handles on the server.
  Status Release(const std::vector<uint64_t>& more = {});
};

// The input arrays of `fn` in signature order: from `files`, else from
// `default_dir`/NAME.npy (NAME with characters outside [A-Za-z0-9_.-] as '_') when
// that exists, else seeded random data (floats uniform in [-1, 1), integers in
// [0, 10)) of the shape `shapes` gives, or the signature's when static.
// INVALID_ARGUMENT when a file or shape names no input of `fn`, when a given shape
// disagrees with a file's, or a dynamic input has neither; npy::Read's errors.
StatusOr<std::vector<npy::Array>> MakeInputs(const client::FunctionInfo& fn,
                                             const std::map<std::string, std::string>& files,
                                             const std::map<std::string, Shape>& shapes, uint64_t seed,
                                             const std::string& default_dir);

// An input or output name as a file name: characters outside [A-Za-z0-9_.-] as '_'.
std::string FileNameFor(const std::string& name);

// Compiles (or reads) the model, connects, loads it and uploads its inputs. An .onnx is
// compiled again once the server's device is known when the choices the request left
// open differ for it (CompileForDevice: a float16 model in float32 on the CPU device, an
// int8 one NHWC); `compile` says what was used.
StatusOr<PreparedModel> PrepareModel(const ModelRequest& request, const ProgressFn& progress = {});
// As PrepareModel, on a connection made before (one whose model run, bench or check has
// released): the same server, session and lease, request.server unused.
StatusOr<PreparedModel> PrepareModelOn(const ModelRequest& request, Connection connection,
                                       const ProgressFn& progress = {});

// What every report of run, bench and check says about the session.
struct SessionReport {
  std::string model;
  std::string server;
  std::string device;
  // The server's number for the session (hello's sessionId): the one its log, the
  // shell's info and banner, and Python's Session.info() name.
  uint64_t session_id = 0;
  uint64_t bytes_sent = 0, bytes_received = 0;  // on the wire, frames included
  uint64_t executable_bytes = 0;
  bool module_cache_hit = false;  // the module was not uploaded
  std::string module_hash;
  client::CompressionStats compression;
  double compile_ms = 0, upload_ms = 0;
  // The environment fingerprint: the server's, this host's, the compile options
  // (environment.h); warnings come from it (EnvironmentWarnings).
  EnvironmentReport environment;
};
SessionReport DescribeSession(const ModelRequest& request, PreparedModel& prepared);

// Creates `dir` (and parents) and checks a file can be written in it. Errors name the
// folder and carry the OS reason.
Status EnsureWritableDirectory(const std::string& dir);

// Checks that the file `path` can be written (created or replaced), before the work
// whose report it will hold: a file that did not exist is removed again. `what` names
// the file in the error ("the HTML report"); NOT_FOUND for a missing folder,
// PERMISSION_DENIED, or DATA_LOSS (a folder at `path`, ...), with the OS reason.
Status EnsureWritableFile(const std::string& path, const std::string& what);

}  // namespace remex::tooling
