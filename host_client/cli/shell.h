// `remex shell`: an interactive shell over one tooling::InteractiveSession, so models
// and tensors stay on the device server between commands.
//
//   remex> load rnn.onnx                 # compiled, uploaded, a VM made: the current model
//   remex:rnn> upload x=x.npy h=h0.npy   # tensors %1 x and %2 h
//   remex:rnn> run                       # inputs by name; output %3 h_next stays there
//   remex:rnn> run h=h_next              # feed the state back: %4 h_next
//   remex:rnn> compare h_next %3         # on the device; only the numbers come back
//
// Shell executes one command line at a time and writes what it prints to a FILE*, so
// it runs the same under a terminal (RunShell: libedit line editing, history, TAB
// completion) as from a script or a test. A tensor is named by the shell's id %N
// (printed whenever one is made) or by its name; a name moves to the newest tensor
// given it (an upload, a run's output, zeros, random), the older one keeps its id, and
// gets the name back when the newer one is freed.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "host_client/client/client.h"
#include "host_client/tooling/interactive.h"
#include "host_client/tooling/prepare.h"
#include "host_client/tooling/progress.h"

namespace remex::cli {

// A tensor the shell made on the server.
struct ShellTensor {
  int id = 0;  // %N
  client::RemoteTensor tensor;
  std::string name;    // "" once the name has moved to a newer tensor (or none given)
  std::string origin;  // "x.npy", "h_next of rnn", "uniform in [0, 1), seed 7"
  // Names this tensor gave up to newer tensors, oldest first: when the newer one is
  // freed, its name comes back here (Free).
  std::vector<std::string> former_names;
};

class Shell {
 public:
  // Takes the session; `out` (not owned) receives everything commands print.
  Shell(std::unique_ptr<tooling::InteractiveSession> session, FILE* out);

  // Runs one command line; blank lines and '#' comments do nothing. Returns the
  // command's error (INVALID_ARGUMENT for unknown commands, options and input names
  // and bad values; FAILED_PRECONDITION with no model loaded; NOT_FOUND for an unknown
  // tensor or model, or a missing file; the session's and the server's errors), which
  // the caller prints. The shell's tables always match the server: a run whose fetch
  // fails keeps its outputs, an upload of several files keeps those that went up.
  Status Execute(const std::string& line);

  // A quit or exit command ran.
  bool done() const { return done_; }
  // The last command was a compare that found mismatching values, or a bench
  // --fail-unstable whose run stayed unstable or whose audit found a mismatch (piped
  // mode exits 1); failure() says which.
  bool mismatch() const { return mismatch_; }
  const std::string& failure() const { return failure_; }
  // "rnn", the current model's name, or "" with none loaded.
  std::string current_model() const;

  // Completions of the word ending `line` (the text before the cursor). The word
  // starts after the last of kWordBreaks; each candidate replaces it whole. Command
  // names first; then, by command: file names (load, upload NAME=, fetch -o), input
  // names with '=' (run, bench, profile, upload), tensor names and %ids (after
  // INPUT=, and for fetch, stats, compare, free), model names (use, unload), option
  // names after '-', and option values (--layout, --dtype, --fetch).
  std::vector<std::string> Complete(const std::string& line) const;
  static constexpr const char* kWordBreaks = " \t=";

  // Where a long step of load is (compiling, uploading the module), and that bench and
  // profile run; may be empty.
  void set_progress(tooling::ProgressFn progress) { progress_ = std::move(progress); }
  // How far bench's and profile's requests are (samples done, time left), polled from
  // the server while they run (tooling::ProgressPoller); may be empty.
  void set_progress_detail(tooling::ProgressFn detail) { progress_detail_ = std::move(detail); }
  // The signal that interrupted the command in progress (tooling::Interrupter's), read
  // by bench between its requests: an interrupted bench prints its partial report. Not
  // owned; null: none.
  void set_interrupt(const std::atomic<int>* signal) { interrupt_ = signal; }
  tooling::InteractiveSession& session() { return *session_; }

  // Every command's name, as the first word of a line takes it.
  static std::vector<std::string> CommandNames();

 private:
  struct Command;
  static const std::vector<Command>& Commands();
  Status Help(const std::vector<std::string>& args);
  Status Load(const std::vector<std::string>& args);
  Status Models(const std::vector<std::string>& args);
  Status Use(const std::vector<std::string>& args);
  Status Unload(const std::vector<std::string>& args);
  Status Inputs(const std::vector<std::string>& args);
  Status Outputs(const std::vector<std::string>& args);
  Status Upload(const std::vector<std::string>& args);
  Status Zeros(const std::vector<std::string>& args);
  Status Random(const std::vector<std::string>& args);
  // zeros and random: NAME DIMS and their options, a tensor made on the server
  // (client::Session::Alloc with a TensorFill).
  Status MakeTensor(const std::string& command, const std::vector<std::string>& args);
  Status Run(const std::vector<std::string>& args);
  Status Fetch(const std::vector<std::string>& args);
  Status Stats(const std::vector<std::string>& args);
  Status Compare(const std::vector<std::string>& args);
  Status Bench(const std::vector<std::string>& args);
  Status Profile(const std::vector<std::string>& args);
  Status Handles(const std::vector<std::string>& args);
  Status Free(const std::vector<std::string>& args);
  Status Info(const std::vector<std::string>& args);
  Status Quit(const std::vector<std::string>& args);

  // The current model; FAILED_PRECONDITION when none is loaded.
  StatusOr<tooling::SessionModel*> Current();
  // A tensor by "%N" or name; NOT_FOUND naming what there is.
  StatusOr<ShellTensor*> Find(const std::string& ref);
  // The tensor of each input of `m`: INPUT=TENSOR pairs first, else the tensor named
  // like the input. INVALID_ARGUMENT for a name that is no input, or an input left
  // without a tensor.
  StatusOr<std::map<std::string, uint64_t>> BindInputs(const tooling::SessionModel& m,
                                                       const std::vector<std::string>& pairs);
  // Adds a tensor the server made (or finds the one with its handle), gives it `name`
  // (taken from any older tensor), and returns it.
  ShellTensor& Add(const client::RemoteTensor& tensor, const std::string& name, const std::string& origin);
  // "%3 h_next: float32 [1, 4]".
  static std::string Describe(const ShellTensor& t);
  // "4 handles hold all 635.5 KiB this session has in use on the server", or what
  // else holds the difference: the one sentence of handles and info.
  static std::string MemorySummary(const std::vector<client::HandleInfo>& handles, uint64_t in_use);

  std::unique_ptr<tooling::InteractiveSession> session_;
  FILE* out_;
  tooling::ProgressFn progress_;
  tooling::ProgressFn progress_detail_;
  // The progress line of a long request: `step` shown, and a poller of the server's
  // progress when progress_detail_ is set (null otherwise). EndBusy clears the line.
  std::unique_ptr<tooling::ProgressPoller> Busy(const std::string& step);
  void EndBusy(std::unique_ptr<tooling::ProgressPoller> poller);
  const std::atomic<int>* interrupt_ = nullptr;
  tooling::SessionModel* current_ = nullptr;
  std::vector<ShellTensor> tensors_;  // ascending id
  int next_id_ = 1;
  bool done_ = false;
  bool mismatch_ = false;
  std::string failure_;  // why mismatch_
};

struct ShellOptions {
  std::string history_file;  // read at the start, written after each line; "": none
};

// Reads command lines from stdin until EOF or quit and returns the exit status.
// On a terminal: a prompt, libedit line editing, history (options.history_file) and
// TAB completion (Shell::Complete); an error prints "error: ..." and the shell goes on;
// Ctrl-C cancels the command in progress on the server (Session::Cancel). Otherwise
// (a script): no prompt, and the first failing command ends the shell with
// tooling::ExitCodeFor of its error (1 for a compare that found mismatches or a bench
// --fail-unstable that stayed unstable); 0 at the
// end of the input.
int RunShell(Shell& shell, const ShellOptions& options);

}  // namespace remex::cli
