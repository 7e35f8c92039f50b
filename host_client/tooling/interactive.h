// An interactive session with a device server: what `remex shell` and the Python client
// (python/remex) drive, on the same connection code as run, bench and check.
//
// Unlike run, bench and check, which free everything they made before they return,
// an interactive session keeps its models and tensors on the server until they are
// freed or the session closes: handles outlive one command. The server frees every
// handle of a session when its connection ends, so closing loses nothing to leaks.
//
//   auto s = InteractiveSession::Open(options);           // remote, embedded or leased
//   SessionModel* m = *(*s)->Load("cls.rmx", {}, false);
//   auto x = (*s)->client().Upload(array);                // a tensor handle
//   auto r = (*s)->Invoke(*m, {{"x", x->handle}});        // outputs stay on the server
//   auto y = (*s)->client().Download(r->result.outputs[0].handle);
//
// Not thread-safe: one caller at a time (the Python client holds a lock per session).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "host_client/client/client.h"
#include "host_client/compiler/options.h"
#include "host_client/tooling/connection.h"
#include "host_client/tooling/prepare.h"
#include "host_client/tooling/run.h"
#include "vm/executable.h"

namespace remex::tooling {

// A model loaded in an interactive session: its module and one VM on the server.
struct SessionModel {
  std::string name;  // unique in the session: the file's stem ("cls"), else "cls-2", ...
  std::string path;
  client::ModuleInfo module;  // the functions as the server reports them (-1: dynamic dim)
  uint64_t vm = 0;
  // main's inputs and outputs with their symbolic dims named (DescribeValue).
  std::vector<vm::ValueDesc> inputs, outputs;
  uint64_t executable_bytes = 0;
  bool uploaded = false;  // false: the server's module cache had it
  double compile_ms = 0;  // 0 for an .rmx
  double load_ms = 0;     // module upload (or cache hit) and VM creation
  // Per output: the tensor SetOutput bound (0: none; the invoke makes a new one).
  std::vector<uint64_t> bound_outputs;
  // The inputs bound last (setInput is skipped when a call binds the same handles:
  // the server never reuses a handle).
  std::vector<uint64_t> bound_inputs;

  const client::FunctionInfo& main() const { return module.functions.at(0); }
  // Index of main's input or output `name`; INVALID_ARGUMENT listing the names.
  StatusOr<size_t> InputIndex(const std::string& name) const;
  StatusOr<size_t> OutputIndex(const std::string& name) const;
};

// One call of a model's main function.
struct InvokeReport {
  client::InvokeResult result;  // outputs as handles with dtypes and shapes
  double run_ms = 0;            // the round trip, measured on the host
};

// One input of InteractiveSession::Run: a tensor of the session (handle), or bytes
// uploaded for the call and freed after it (handle 0: dtype, shape and bytes, row-major,
// exactly dtype x shape's size; borrowed until Run returns).
struct RunInput {
  std::string name;
  uint64_t handle = 0;
  DType dtype = DType::kFloat32;
  Shape shape;
  std::span<const std::byte> bytes;
};

// What Run returns: the call (every output as a handle; a fetched output that is not
// bound no longer exists on the server) and, per output, its data when it was fetched.
struct CallReport {
  InvokeReport invoke;
  std::vector<std::optional<npy::Array>> fetched;
};

class InteractiveSession {
 public:
  // Connects as Connect does (an embedded server when options.address and options.farm
  // are empty; a leased device, held until the session closes, with options.farm), with
  // Connect's errors.
  static StatusOr<std::unique_ptr<InteractiveSession>> Open(const ServerOptions& options);

  client::Session& client() { return *connection_.session; }
  const Connection& connection() const { return connection_; }
  // Hello again: the server's identity and this session's bytes in use on the device.
  StatusOr<client::ServerInfo> Info() { return client().Hello(); }

  // Loads MODEL.onnx (compiled with `options` first, as `remex compile` would, with the
  // choices they leave open made for the server's device: CompileForDevice) or
  // MODEL.rmx, uploads it unless the server's module cache has it, and creates a VM.
  // The errors of LoadExecutable, of the upload (the server's verification) and of
  // vmCreate; a model whose main function takes or gives a sequence is refused by the
  // server.
  StatusOr<SessionModel*> Load(const std::string& path, const compiler::CompileOptions& options,
                               bool changes_compilation, const ProgressFn& progress = {});
  // The model named `name`; NOT_FOUND listing the loaded ones.
  StatusOr<SessionModel*> Model(const std::string& name);
  const std::vector<std::unique_ptr<SessionModel>>& models() const { return models_; }
  // Frees the model's VM and module on the server (its bound outputs stay, as tensors).
  Status Unload(const std::string& name);

  // Runs main with every input bound to a tensor by name (tensor handles), one round
  // trip when the inputs are those of the last call, else setInput and invoke written
  // together. Outputs stay on the server: bound ones (SetOutput) keep their handle,
  // the others are new tensors the caller owns. INVALID_ARGUMENT for a name that is no
  // input or an input not given (listing them); the server's errors (NOT_FOUND for an
  // unknown handle, INVALID_ARGUMENT for a dtype or shape the model does not take).
  StatusOr<InvokeReport> Invoke(SessionModel& m, const std::map<std::string, uint64_t>& inputs,
                                std::chrono::milliseconds deadline = std::chrono::milliseconds(0));
  // Runs main once in one round trip: the uploads of the byte inputs, setInput (unless
  // the same handles are bound), the invoke (its outputs named by the client) and the
  // downloads of the outputs `fetch` marks (one flag per output) go out in one write;
  // then the uploads and the fetched outputs that are not bound are freed without
  // waiting (client::Session::FreeWithoutReply). The outputs not fetched stay, with
  // handles of the server's as Invoke's. What the decode loop of a language
  // model needs: a token uploaded, the cache kept on the server, the logits fetched, in
  // one round trip per step. Errors: Invoke's (the inputs by name), the server's for
  // an upload ("uploading input 'NAME'") or a download ("fetching 'NAME'"), the first
  // of them; whatever fails, nothing the call made stays on the server.
  StatusOr<CallReport> Run(SessionModel& m, std::span<const RunInput> inputs, const std::vector<bool>& fetch);
  // Binds output `output` of main to `tensor` (0 unbinds): later calls write it there
  // (seed 003's invoke_with_outputs). INVALID_ARGUMENT for an unknown output, or a
  // tensor whose dtype or static shape does not fit it.
  Status SetOutput(SessionModel& m, const std::string& output, uint64_t tensor);
  // Binds the inputs (as Invoke; none given: those of the last call stay bound) and runs
  // the server's time evaluator, and with options.profile the profiled calls: the
  // numbers of `remex bench`.
  StatusOr<BenchReport> Bench(SessionModel& m, const std::map<std::string, uint64_t>& inputs,
                              const BenchOptions& options);
  // Binds the inputs (as Bench), makes one untimed call (a warm-up: the first call of a
  // VM allocates its buffers) and profiles the next `runs` (1..rpc::kMaxProfileRuns):
  // rows per op and instruction kind of the median run, largest first, its total in ms
  // and its device memory, and per node the median over the runs (profile.h).
  using ProfileReport = tooling::ProfileReport;
  StatusOr<ProfileReport> Profile(SessionModel& m, const std::map<std::string, uint64_t>& inputs,
                                  uint32_t runs = kDefaultProfileRuns);

 private:
  explicit InteractiveSession(Connection connection) : connection_(std::move(connection)) {}
  Status BindInputs(SessionModel& m, const std::map<std::string, uint64_t>& inputs,
                    std::vector<uint64_t>* handles);
  // BindInputs, then setInput unless the same handles are bound; no inputs at all keep
  // those of the last call.
  Status SetInputs(SessionModel& m, const std::map<std::string, uint64_t>& inputs);
  Connection connection_;
  std::vector<std::unique_ptr<SessionModel>> models_;
};

}  // namespace remex::tooling
