#include "host_client/cli/shell.h"

#include <editline/readline.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <random>
#include <set>
#include <thread>
#include <utility>

#include "host_client/cli/progress.h"
#include "host_client/client/npy.h"
#include "host_client/tooling/compare.h"
#include "host_client/tooling/compile.h"
#include "host_client/tooling/exit_code.h"
#include "host_client/tooling/interrupt.h"
#include "host_client/tooling/report_json.h"
#include "host_client/tooling/results_store.h"
#include "host_client/tooling/specs.h"
#include "host_client/tooling/text.h"
#include "rpc/frame.h"
#include "rpc/wire_util.h"

namespace remex::cli {
namespace {

namespace fs = std::filesystem;
using Args = std::vector<std::string>;

std::string Format(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

std::string Join(const std::vector<std::string>& parts, const std::string& sep) {
  std::string s;
  for (size_t i = 0; i < parts.size(); ++i) s += (i ? sep : "") + parts[i];
  return s;
}

bool StartsWith(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

// Splits a command line into words at blanks; '...' and "..." quote, a backslash
// escapes the next character (outside single quotes). INVALID_ARGUMENT for an open quote.
StatusOr<Args> SplitWords(const std::string& line) {
  Args words;
  std::string word;
  bool in_word = false;
  char quote = 0;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quote) {
      if (c == quote) {
        quote = 0;
      } else if (c == '\\' && quote == '"' && i + 1 < line.size()) {
        word += line[++i];
      } else {
        word += c;
      }
    } else if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
      if (in_word) words.push_back(std::move(word));
      word.clear();
      in_word = false;
    } else {
      in_word = true;
      if (c == '\'' || c == '"') {
        quote = c;
      } else if (c == '\\' && i + 1 < line.size()) {
        word += line[++i];
      } else {
        word += c;
      }
    }
  }
  if (quote) return InvalidArgument(std::string("unterminated ") + quote + " quote");
  if (in_word) words.push_back(std::move(word));
  return words;
}

// The words of a command after its name: positional words, and options with values
// ("--fetch all" or "--fetch=all", repeatable) or without.
struct Parsed {
  Args positional;
  std::map<std::string, Args> values;
  std::set<std::string> flags;

  const Args& All(const std::string& option) const {
    static const Args kNone;
    auto it = values.find(option);
    return it == values.end() ? kNone : it->second;
  }
  // The last value given, or `fallback`.
  std::string Last(const std::string& option, const std::string& fallback = "") const {
    const Args& v = All(option);
    return v.empty() ? fallback : v.back();
  }
  bool Has(const std::string& option) const { return flags.count(option) || values.count(option); }
};

StatusOr<Parsed> ParseArgs(const std::string& command, const Args& args,
                           const std::set<std::string>& value_options,
                           const std::set<std::string>& flag_options = {}) {
  Parsed p;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a.size() < 2 || a[0] != '-') {
      p.positional.push_back(a);
      continue;
    }
    const size_t eq = a.find('=');
    const std::string name = a.substr(0, eq);
    if (value_options.count(name)) {
      if (eq != std::string::npos) {
        p.values[name].push_back(a.substr(eq + 1));
      } else if (i + 1 < args.size()) {
        p.values[name].push_back(args[++i]);
      } else {
        return InvalidArgument(command + ": " + name + " needs a value; see help " + command);
      }
    } else if (flag_options.count(name) && eq == std::string::npos) {
      p.flags.insert(name);
    } else {
      std::vector<std::string> known(value_options.begin(), value_options.end());
      known.insert(known.end(), flag_options.begin(), flag_options.end());
      return InvalidArgument(command + ": unknown option '" + a + "'" +
                             (known.empty() ? " (it takes none)" : " (it takes " + Join(known, ", ") + ")") +
                             "; see help " + command);
    }
  }
  return p;
}

// A whole-string unsigned decimal in [min, 2^32).
StatusOr<uint32_t> ParseCount(const std::string& option, const std::string& text, uint32_t min) {
  uint32_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || v < min) {
    return InvalidArgument(option + " must be a whole number >= " + std::to_string(min) + ", got '" + text +
                           "'");
  }
  return v;
}

StatusOr<double> ParseNumber(const std::string& option, const std::string& text) {
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || errno == ERANGE) {
    return InvalidArgument(option + " must be a number, got '" + text + "'");
  }
  return v;
}

// A name the user gives a tensor or a model: a reference must be able to say it.
Status CheckName(const std::string& what, const std::string& name) {
  if (name.empty() || name[0] == '%' || name[0] == '-' ||
      name.find_first_of(" \t=\"'\\") != std::string::npos) {
    return InvalidArgument(what + " '" + name +
                           "' cannot be used: names must not be empty, start with % or -, or hold blanks, =, "
                           "quotes or backslashes");
  }
  return OkStatus();
}

// Levenshtein distance, for "did you mean".
size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

uint64_t TensorBytes(const client::RemoteTensor& t) {
  const auto n = NumElements(t.shape);
  return n ? static_cast<uint64_t>(*n) * DTypeSize(t.dtype) : 0;
}

// Files and folders whose path starts with `word`: folders end in '/', files are kept
// when their extension is one of `extensions` (any when empty). Hidden entries only
// when the typed name starts with '.'.
std::vector<std::string> CompleteFiles(const std::string& word, const std::vector<std::string>& extensions) {
  const size_t slash = word.rfind('/');
  const std::string dir = slash == std::string::npos ? "" : word.substr(0, slash + 1);
  const std::string base = slash == std::string::npos ? word : word.substr(slash + 1);
  std::vector<std::string> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir.empty() ? "." : dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!StartsWith(name, base) || (name[0] == '.' && (base.empty() || base[0] != '.'))) continue;
    std::error_code type_ec;
    if (it->is_directory(type_ec)) {
      out.push_back(dir + name + "/");
    } else if (extensions.empty() || std::find(extensions.begin(), extensions.end(),
                                               it->path().extension().string()) != extensions.end()) {
      out.push_back(dir + name);
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

struct Shell::Command {
  const char* name;
  const char* usage;
  const char* summary;
  const char* details;
  Status (Shell::*run)(const Args&);
  std::vector<const char*> options;  // for completion
};

const std::vector<Shell::Command>& Shell::Commands() {
  static const std::vector<Command> kCommands = {
      {"load",
       "load FILE.onnx|FILE.rmx [--shape NAME=DIMS ...] [--bound SPEC ...] [--dispatch SPEC ...] [--strict]\n"
       "     [--layout NCHW|NHWC] [--dtype float32|float16] [--no-fuse-epilogues] [--no-fold-batchnorm]\n"
       "     [--no-fuse-elementwise] [--compute-threads N] [--tuning-log FILE [--tuned-for FINGERPRINT]]\n"
       "     [--as NAME]",
       "compile (an .onnx) and load a model; it becomes the current one",
       "Compiles MODEL.onnx with the compile options of `remex compile` (docs/cli.md) or reads\n"
       "MODEL.rmx, uploads it unless the server's module cache has it, and makes a VM. The\n"
       "model is named after the file (rnn.onnx: rnn; a second one rnn-2), or --as NAME, and\n"
       "becomes the current model: run, bench, profile, inputs and outputs use it.",
       &Shell::Load,
       {"--shape", "--bound", "--dispatch", "--strict", "--layout", "--dtype", "--no-fuse-epilogues",
        "--no-fold-batchnorm", "--no-fuse-elementwise", "--compute-threads", "--tuning-log", "--tuned-for", "--as"}},
      {"models",
       "models",
       "list the loaded models (* marks the current one)",
       "Lists the loaded models: name, file, inputs and outputs, and the executable's size.",
       &Shell::Models,
       {}},
      {"use",
       "use MODEL",
       "make a loaded model the current one",
       "Makes MODEL (a name from models) the current model.",
       &Shell::Use,
       {}},
      {"unload",
       "unload MODEL",
       "free a model's VM and module on the server",
       "Frees MODEL's VM and module on the server. Tensors its runs made stay.",
       &Shell::Unload,
       {}},
      {"inputs",
       "inputs",
       "the current model's inputs, and the tensor run would pass to each",
       "Lists the current model's inputs with their dtypes and shapes (symbolic dims by name)\n"
       "and, for each, the tensor run passes when no INPUT=TENSOR names one: the tensor named\n"
       "like the input.",
       &Shell::Inputs,
       {}},
      {"outputs",
       "outputs",
       "the current model's outputs, and the tensors named like them",
       "Lists the current model's outputs with their dtypes and shapes, and the tensor that\n"
       "now carries each output's name (the newest run's).",
       &Shell::Outputs,
       {}},
      {"upload",
       "upload NAME=FILE.npy [NAME=FILE.npy ...]",
       "upload .npy files as tensors named NAME",
       "Uploads each FILE.npy as a new tensor on the server and names it NAME; the name moves\n"
       "from any older tensor (which keeps its %N). A tensor named like a model input is what\n"
       "run passes to that input.",
       &Shell::Upload,
       {}},
      {"zeros",
       "zeros NAME DIMS [--dtype DTYPE]",
       "make a tensor of zeros on the server",
       "Makes a tensor of DIMS (e.g. 1x3x48x320; scalar for rank 0) filled with 0 on the server,\n"
       "no bytes uploaded, and names it NAME (the name moves from any older tensor). --dtype:\n"
       "float32 (default), float16, bfloat16, float64, int8 ... uint64, bool.",
       &Shell::Zeros,
       {"--dtype"}},
      {"random",
       "random NAME DIMS [--dtype DTYPE] [--seed N] [--low L] [--high H] | [--normal [--mean M] [--scale S]]",
       "make a tensor of seeded random values on the server",
       "Makes a tensor of DIMS filled on the server, no bytes uploaded, and names it NAME.\n"
       "Uniform in [--low, --high) (ONNX RandomUniform; default [0, 1) for floating dtypes,\n"
       "[0, 10) for integers, [0, 2) for bool; integers take the floor), or with --normal,\n"
       "mean + scale * a standard normal draw (ONNX RandomNormal; default 0 and 1; floating\n"
       "dtypes). The same --seed gives the same tensor on every server and device; without\n"
       "one a seed is drawn and printed, so the tensor can be made again.",
       &Shell::Random,
       {"--dtype", "--seed", "--low", "--high", "--normal", "--mean", "--scale"}},
      {"run",
       "run [INPUT=TENSOR ...] [--fetch all|none|NAME[,NAME]]",
       "run the current model once",
       "Runs the current model's main function. Each input gets the TENSOR given as\n"
       "INPUT=TENSOR, else the tensor named like the input. The outputs stay on the server as\n"
       "new tensors named like the outputs (the name moves to them; older ones keep their\n"
       "%N), so `run h=h_next` feeds a state back without it leaving the device. --fetch\n"
       "(default all) downloads outputs to print a summary: float32 values with their argmax\n"
       "when 16 or fewer, else min, max and mean.",
       &Shell::Run,
       {"--fetch"}},
      {"fetch",
       "fetch TENSOR [-o FILE.npy]",
       "download a tensor: its summary, or write it to a file",
       "Downloads TENSOR (%N or a name), prints its summary and with -o writes it as FILE.npy.",
       &Shell::Fetch,
       {"-o"}},
      {"stats",
       "stats TENSOR",
       "count, min, max, mean, std, NaNs and infinities, computed on the device",
       "Computes TENSOR's statistics on the device; only the numbers cross the wire.",
       &Shell::Stats,
       {}},
      {"compare",
       "compare A B [--rtol R] [--atol A] [--no-equal-nan]",
       "compare two tensors on the device",
       "Compares tensor A with the reference B on the device, as `remex check` does:\n"
       "|a - b| <= atol + rtol * |b| per element (defaults rtol 1e-4, atol 1e-5; a NaN in\n"
       "both is a match unless --no-equal-nan). Prints the mismatches and the largest absolute\n"
       "and relative errors. In a script, mismatches end the shell with status 1.",
       &Shell::Compare,
       {"--rtol", "--atol", "--no-equal-nan"}},
      {"bench",
       "bench [INPUT=TENSOR ...] [--number N] [--repeat N] [--warmup N] [--min-repeat-ms MS] [--cooldown-ms "
       "MS]\n"
       "      [--min-duration-s S] [--min-samples N] [--confidence C] [--window-ms MS] [--stable-window K]\n"
       "      [--stable-threshold F] [--stable-percentile Q] [--max-trials N] [--fail-unstable]\n"
       "      [--scenario single-stream|multi-stream|server|offline] [--concurrency A[:B[:STEP]]]\n"
       "      [--samples-per-query N] [--target-qps Q] [--latency-bound-ms L] [--find-peak]\n"
       "      [--audit|--no-audit] [--audit-samples N] [--audit-rtol R] [--audit-atol A] [--seed N]\n"
       "      [--record URL [--tag KEY=VALUE ...]]",
       "time the current model on the server",
       "Times the current model with the server's time evaluator, inputs as run binds them, as\n"
       "`remex bench` does, with its options and defaults (--number 1 --repeat 10 --warmup 1;\n"
       "a run shorter than --min-duration-s 1 or --min-samples 30, or not stable over its last\n"
       "3 windows of --window-ms 250, is extended, up to --max-trials 10 requests). Prints the\n"
       "median, p90 and p99 with their --confidence intervals. --scenario runs a load scenario\n"
       "on the server instead (MLPerf LoadGen's; docs/cli.md, \"Load scenarios\"), one row per\n"
       "--concurrency level, with the same flags and defaults as `remex bench`. With\n"
       "--fail-unstable, a run still unstable ends a script with status 1; so does an audit\n"
       "that finds a mismatch. --record URL writes the result to a results store (sqlite:///PATH\n"
       "or postgresql://...) with its --tag KEY=VALUE pairs, as `remex bench --record` does.",
       &Shell::Bench,
       {"--number",
        "--repeat",
        "--warmup",
        "--min-repeat-ms",
        "--cooldown-ms",
        "--min-duration-s",
        "--min-samples",
        "--confidence",
        "--window-ms",
        "--stable-window",
        "--stable-threshold",
        "--stable-percentile",
        "--max-trials",
        "--fail-unstable",
        "--scenario",
        "--concurrency",
        "--samples-per-query",
        "--target-qps",
        "--latency-bound-ms",
        "--find-peak",
        "--audit",
        "--no-audit",
        "--audit-samples",
        "--audit-rtol",
        "--audit-atol",
        "--seed",
        "--record",
        "--tag"}},
      {"profile",
       "profile [--runs N] [--top N] [INPUT=TENSOR ...]",
       "profile calls of the current model per op and per node",
       "Runs the current model once warm and N times profiled (--runs, default 5), and prints\n"
       "the time per op and instruction kind of the median call, largest first, and the --top\n"
       "slowest nodes (default 10) with their shapes and median time, as `remex bench --profile`\n"
       "does.",
       &Shell::Profile,
       {"--runs", "--top"}},
      {"handles",
       "handles",
       "what this session holds on the server, with sizes",
       "Lists every handle this session holds on the server (modules, VMs, tensors): its size\n"
       "(a tensor's bytes, a module's weights), what it holds of the session's memory on the\n"
       "server (size classes: a tensor its block, a VM its weights' copy, planned memory and\n"
       "last inputs and outputs, even those whose handles were freed, until its next run), its\n"
       "device and what the shell calls it. The last line sets the total against the bytes\n"
       "in use that info reports, and says what holds any difference.",
       &Shell::Handles,
       {}},
      {"free",
       "free TENSOR [TENSOR ...]",
       "free tensors on the server",
       "Frees the tensors (%N or names) on the server; their ids are gone. A name a freed\n"
       "tensor held goes back to the tensor that held it before (the newest such one still\n"
       "there), as the line printed says.",
       &Shell::Free,
       {}},
      {"info",
       "info",
       "the server, its devices and memory, and this session's bytes in use",
       "Says hello to the server again: its name, version and protocol, this session's id,\n"
       "per device its memory and the bytes this session uses there, and how much of that\n"
       "the session's handles hold (handles breaks it down).",
       &Shell::Info,
       {}},
      {"help",
       "help [COMMAND]",
       "list the commands, or explain one",
       "help lists the commands; help COMMAND explains one.",
       &Shell::Help,
       {}},
      {"quit",
       "quit",
       "leave the shell (the server frees this session's models and tensors)",
       "Leaves the shell. The session ends and the server frees everything it held.",
       &Shell::Quit,
       {}},
      {"exit", "exit", "leave the shell, as quit", "Leaves the shell, as quit.", &Shell::Quit, {}},
  };
  return kCommands;
}

std::vector<std::string> Shell::CommandNames() {
  std::vector<std::string> names;
  for (const auto& c : Commands()) names.push_back(c.name);
  return names;
}

Shell::Shell(std::unique_ptr<tooling::InteractiveSession> session, FILE* out)
    : session_(std::move(session)), out_(out) {}

std::string Shell::current_model() const { return current_ ? current_->name : ""; }

Status Shell::Execute(const std::string& line) {
  mismatch_ = false;
  failure_.clear();
  const size_t first = line.find_first_not_of(" \t\r\n");
  if (first == std::string::npos || line[first] == '#') return OkStatus();
  REMEX_ASSIGN_OR_RETURN(Args words, SplitWords(line));
  if (words.empty()) return OkStatus();
  const std::string name = words[0];
  words.erase(words.begin());
  for (const auto& c : Commands()) {
    if (name == c.name) return (this->*c.run)(words);
  }
  // A command it begins, else the closest within two edits.
  std::string guess;
  size_t best = 3;
  for (const auto& c : Commands()) {
    if (name.size() >= 2 && StartsWith(c.name, name)) {
      guess = c.name;
      break;
    }
    if (const size_t d = EditDistance(name, c.name); d < best) {
      best = d;
      guess = c.name;
    }
  }
  return InvalidArgument("unknown command '" + name + "'" +
                         (guess.empty() ? "" : " (did you mean " + guess + "?)") +
                         "; type help for the commands");
}

// ---- tensors and models ----------------------------------------------------------

StatusOr<tooling::SessionModel*> Shell::Current() {
  if (!current_) return FailedPrecondition("no model is loaded: load FILE.onnx|FILE.rmx first");
  return current_;
}

StatusOr<ShellTensor*> Shell::Find(const std::string& ref) {
  if (StartsWith(ref, "%")) {
    int id = 0;
    auto [end, ec] = std::from_chars(ref.data() + 1, ref.data() + ref.size(), id);
    if (ref.size() < 2 || ec != std::errc() || end != ref.data() + ref.size()) {
      return InvalidArgument("'" + ref + "' is no tensor id (ids are %1, %2, ...)");
    }
    for (auto& t : tensors_) {
      if (t.id == id) return &t;
    }
    return NotFound("no tensor " + ref + " (freed, or never made; handles lists what there is)");
  }
  std::vector<std::string> names;
  for (auto& t : tensors_) {
    if (t.name == ref) return &t;
    if (!t.name.empty()) names.push_back(t.name);
  }
  return NotFound("no tensor named '" + ref + "'" +
                  (names.empty() ? " (there are no named tensors: upload NAME=FILE.npy)"
                                 : " (named tensors: " + Join(names, ", ") + ")"));
}

ShellTensor& Shell::Add(const client::RemoteTensor& tensor, const std::string& name,
                        const std::string& origin) {
  ShellTensor* t = nullptr;
  for (auto& existing : tensors_) {
    if (existing.tensor.handle == tensor.handle) t = &existing;  // one handle, one id
  }
  if (!t) {
    tensors_.push_back(ShellTensor{next_id_++, tensor, "", origin, {}});
    t = &tensors_.back();
  }
  if (!name.empty()) {
    for (auto& other : tensors_) {
      if (other.name == name && &other != t) {
        other.name.clear();
        other.former_names.push_back(name);  // back to it when the newer tensor is freed
      }
    }
    t->name = name;
  }
  return *t;
}

std::string Shell::Describe(const ShellTensor& t) {
  return "%" + std::to_string(t.id) + (t.name.empty() ? "" : " " + t.name) + ": " +
         std::string(DTypeName(t.tensor.dtype)) + " " + ShapeToString(t.tensor.shape);
}

StatusOr<std::map<std::string, uint64_t>> Shell::BindInputs(const tooling::SessionModel& m,
                                                            const Args& pairs) {
  std::map<std::string, uint64_t> bound;
  for (const auto& pair : pairs) {
    const size_t eq = pair.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == pair.size()) {
      return InvalidArgument("'" + pair + "' is not INPUT=TENSOR (e.g. h=h_next or x=%1)");
    }
    const std::string input = pair.substr(0, eq);
    REMEX_RETURN_IF_ERROR(m.InputIndex(input).status().WithContext(m.name));
    REMEX_ASSIGN_OR_RETURN(ShellTensor * t, Find(pair.substr(eq + 1)));
    bound[input] = t->tensor.handle;
  }
  std::vector<std::string> missing;
  for (const auto& v : m.inputs) {
    if (bound.count(v.name)) continue;
    auto t = std::find_if(tensors_.begin(), tensors_.end(),
                          [&](const ShellTensor& t) { return t.name == v.name; });
    if (t == tensors_.end()) {
      missing.push_back(v.name);
    } else {
      bound[v.name] = t->tensor.handle;
    }
  }
  if (!missing.empty()) {
    return InvalidArgument("no tensor for the input(s) " + Join(missing, ", ") + " of " + m.name +
                           ": upload " + missing[0] + "=FILE.npy, or pass " + missing[0] + "=TENSOR");
  }
  return bound;
}

// ---- commands --------------------------------------------------------------------

Status Shell::Help(const Args& args) {
  if (args.size() > 1) return InvalidArgument("help takes at most one command name");
  if (args.empty()) {
    std::vector<std::vector<std::string>> rows;
    for (const auto& c : Commands()) rows.push_back({c.name, c.summary});
    std::fputs("commands (help COMMAND for its options):\n", out_);
    std::fputs(tooling::FormatTable(rows, "  ", 2, 2).c_str(), out_);
    std::fputs(
        "A TENSOR is %N (the id printed when it was made) or its name. TAB completes commands,\n"
        "files, input, tensor and model names; Ctrl-C cancels a command running on the server.\n",
        out_);
    return OkStatus();
  }
  for (const auto& c : Commands()) {
    if (args[0] == c.name) {
      std::fprintf(out_, "usage: %s\n%s\n", c.usage, c.details);
      return OkStatus();
    }
  }
  return InvalidArgument("help: unknown command '" + args[0] + "'; help lists the commands");
}

Status Shell::Load(const Args& args) {
  REMEX_ASSIGN_OR_RETURN(
      Parsed p, ParseArgs("load", args,
                          {"--shape", "--bound", "--dispatch", "--layout", "--dtype", "--compute-threads",
                           "--tuning-log", "--tuned-for", "--as"},
                          {"--strict", "--no-fuse-epilogues", "--no-fold-batchnorm", "--no-fuse-elementwise"}));
  if (p.positional.size() != 1) {
    return InvalidArgument("load takes one model file, FILE.onnx or FILE.rmx; see help load");
  }
  const std::string& path = p.positional[0];
  tooling::CompileSpecs specs;
  specs.shapes = p.All("--shape");
  specs.bounds = p.All("--bound");
  specs.dispatch = p.All("--dispatch");
  specs.strict = p.Has("--strict");
  specs.layout = p.Last("--layout", specs.layout);
  specs.dtype = p.Last("--dtype", specs.dtype);
  specs.fuse_epilogues = !p.Has("--no-fuse-epilogues");
  specs.fold_batchnorm = !p.Has("--no-fold-batchnorm");
  specs.fuse_elementwise = !p.Has("--no-fuse-elementwise");
  if (p.Has("--compute-threads")) {
    REMEX_ASSIGN_OR_RETURN(uint32_t threads, ParseCount("--compute-threads", p.Last("--compute-threads"), 0));
    specs.compute_threads = static_cast<int>(std::min<uint32_t>(threads, 1u << 20));
  }
  specs.tuning_log = p.Last("--tuning-log");
  specs.tuned_for = p.Last("--tuned-for");
  REMEX_ASSIGN_OR_RETURN(compiler::CompileOptions options, tooling::ParseCompileSpecs(specs, path));
  const std::string as = p.Last("--as");
  if (p.Has("--as")) {
    REMEX_RETURN_IF_ERROR(CheckName("--as", as));
    if (session_->Model(as).ok()) {
      return InvalidArgument("a model named '" + as + "' is loaded already: unload " + as +
                             ", or pick another --as");
    }
  }
  std::error_code ec;
  if (!fs::exists(path, ec)) return NotFound("cannot open '" + path + "': no such file");
  REMEX_ASSIGN_OR_RETURN(tooling::SessionModel * m,
                         session_->Load(path, options, specs.ChangesCompilation(), progress_));
  if (!as.empty()) m->name = as;
  current_ = m;
  std::string how = m->compile_ms > 0 ? "compiled in " + Format("%.1f ms", m->compile_ms) + ", " : "";
  how += m->uploaded ? "module uploaded (" + tooling::FormatBytes(m->executable_bytes) + ")"
                     : "module in the server's cache (" + tooling::FormatBytes(m->executable_bytes) + ")";
  std::fprintf(out_, "loaded %s from %s: %s, VM ready in %.1f ms\n", m->name.c_str(), path.c_str(),
               how.c_str(), m->load_ms);
  for (const auto& v : m->inputs) std::fprintf(out_, "  input   %s\n", tooling::DescribeValue(v).c_str());
  for (const auto& v : m->outputs) std::fprintf(out_, "  output  %s\n", tooling::DescribeValue(v).c_str());
  return OkStatus();
}

Status Shell::Models(const Args& args) {
  if (!args.empty()) return InvalidArgument("models takes no arguments");
  if (session_->models().empty()) {
    std::fputs("no model is loaded (load FILE.onnx|FILE.rmx)\n", out_);
    return OkStatus();
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& m : session_->models()) {
    std::vector<std::string> in, outs;
    for (const auto& v : m->inputs) in.push_back(v.name);
    for (const auto& v : m->outputs) outs.push_back(v.name);
    rows.push_back({m.get() == current_ ? "*" : " ", m->name, m->path, "in: " + Join(in, ", "),
                    "out: " + Join(outs, ", "), tooling::FormatBytes(m->executable_bytes)});
  }
  std::fputs(tooling::FormatTable(rows, "", 2, 5).c_str(), out_);
  return OkStatus();
}

Status Shell::Use(const Args& args) {
  if (args.size() != 1) return InvalidArgument("use takes one model name; models lists them");
  REMEX_ASSIGN_OR_RETURN(current_, session_->Model(args[0]));
  std::fprintf(out_, "current model: %s (%s)\n", current_->name.c_str(), current_->path.c_str());
  return OkStatus();
}

Status Shell::Unload(const Args& args) {
  if (args.size() != 1) return InvalidArgument("unload takes one model name; models lists them");
  REMEX_ASSIGN_OR_RETURN(tooling::SessionModel * m, session_->Model(args[0]));
  const bool was_current = m == current_;
  const std::string name = m->name;
  Status st = session_->Unload(name);  // m is gone after this, whatever it returns
  if (was_current) current_ = session_->models().empty() ? nullptr : session_->models().back().get();
  REMEX_RETURN_IF_ERROR(st);
  std::fprintf(out_, "unloaded %s%s\n", name.c_str(),
               was_current
                   ? (current_ ? ("; current model: " + current_->name).c_str() : "; no model is current")
                   : "");
  return OkStatus();
}

Status Shell::Inputs(const Args& args) {
  if (!args.empty()) return InvalidArgument("inputs takes no arguments");
  REMEX_ASSIGN_OR_RETURN(tooling::SessionModel * m, Current());
  std::vector<std::vector<std::string>> rows;
  for (const auto& v : m->inputs) {
    auto t = std::find_if(tensors_.begin(), tensors_.end(),
                          [&](const ShellTensor& t) { return t.name == v.name; });
    rows.push_back({tooling::DescribeValue(v),
                    t == tensors_.end()
                        ? "<- none: upload " + v.name + "=FILE.npy, or run " + v.name + "=TENSOR"
                        : "<- " + Describe(*t)});
  }
  std::fprintf(out_, "%s inputs:\n%s", m->name.c_str(), tooling::FormatTable(rows, "  ", 3, 2).c_str());
  return OkStatus();
}

Status Shell::Outputs(const Args& args) {
  if (!args.empty()) return InvalidArgument("outputs takes no arguments");
  REMEX_ASSIGN_OR_RETURN(tooling::SessionModel * m, Current());
  std::vector<std::vector<std::string>> rows;
  for (const auto& v : m->outputs) {
    auto t = std::find_if(tensors_.begin(), tensors_.end(),
                          [&](const ShellTensor& t) { return t.name == v.name; });
    rows.push_back(
        {tooling::DescribeValue(v), t == tensors_.end() ? "(no tensor yet: run)" : "-> " + Describe(*t)});
  }
  std::fprintf(out_, "%s outputs:\n%s", m->name.c_str(), tooling::FormatTable(rows, "  ", 3, 2).c_str());
  return OkStatus();
}

Status Shell::Upload(const Args& args) {
  REMEX_ASSIGN_OR_RETURN(Parsed p, ParseArgs("upload", args, {}));
  if (p.positional.empty()) return InvalidArgument("upload takes NAME=FILE.npy pairs; see help upload");
  // Every file is read before anything is uploaded.
  std::vector<std::pair<std::string, std::string>> pairs;
  std::vector<npy::Array> arrays;
  for (const auto& pair : p.positional) {
    const size_t eq = pair.find('=');
    if (eq == std::string::npos || eq + 1 == pair.size()) {
      return InvalidArgument("'" + pair + "' is not NAME=FILE.npy (e.g. x=x.npy)");
    }
    const std::string name = pair.substr(0, eq), file = pair.substr(eq + 1);
    REMEX_RETURN_IF_ERROR(CheckName("tensor name", name));
    auto array = npy::Read(file);
    if (!array.ok()) return array.status().WithContext("upload " + name);
    pairs.emplace_back(name, file);
    arrays.push_back(std::move(array).value());
  }
  for (size_t i = 0; i < pairs.size(); ++i) {
    auto remote = session_->client().Upload(arrays[i]);
    if (!remote.ok()) return remote.status().WithContext("uploading " + pairs[i].second);
    const ShellTensor& t = Add(*remote, pairs[i].first, pairs[i].second);
    std::fprintf(out_, "%s (%s) from %s\n", Describe(t).c_str(),
                 tooling::FormatBytes(TensorBytes(t.tensor)).c_str(), pairs[i].second.c_str());
  }
  return OkStatus();
}

Status Shell::Zeros(const Args& args) { return MakeTensor("zeros", args); }

Status Shell::Random(const Args& args) { return MakeTensor("random", args); }

Status Shell::MakeTensor(const std::string& command, const Args& args) {
  const bool random = command == "random";
  REMEX_ASSIGN_OR_RETURN(
      Parsed p, random
                    ? ParseArgs(command, args, {"--dtype", "--seed", "--low", "--high", "--mean", "--scale"},
                                {"--normal"})
                    : ParseArgs(command, args, {"--dtype"}));
  if (p.positional.size() != 2) return InvalidArgument(command + " takes NAME DIMS; see help " + command);
  const std::string& name = p.positional[0];
  REMEX_RETURN_IF_ERROR(CheckName("tensor name", name));
  REMEX_ASSIGN_OR_RETURN(Shape shape, tooling::ParseDims(p.positional[1]));
  const std::string dtype_name = p.Last("--dtype", "float32");
  const std::optional<DType> dtype = DTypeFromName(dtype_name);
  if (!dtype || *dtype == DType::kUndefined) {
    return InvalidArgument("--dtype: '" + dtype_name +
                           "' is no dtype with numbers (float32, float16, bfloat16, " +
                           "float64, int8, uint8, int16, uint16, int32, uint32, int64, uint64, bool)");
  }
  TensorFill fill;
  std::string how = "zeros";
  if (random) {
    const bool normal = p.Has("--normal");
    if (normal && (p.Has("--low") || p.Has("--high"))) {
      return InvalidArgument("--low and --high are a uniform fill's; --normal takes --mean and --scale");
    }
    if (!normal && (p.Has("--mean") || p.Has("--scale")))
      return InvalidArgument("--mean and --scale need --normal");
    fill.kind = normal ? TensorFill::Kind::kNormal : TensorFill::Kind::kUniform;
    if (p.Has("--seed")) {
      const std::string text = p.Last("--seed");
      auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), fill.seed);
      if (text.empty() || ec != std::errc() || end != text.data() + text.size()) {
        return InvalidArgument("--seed must be a whole number >= 0, got '" + text + "'");
      }
    } else {
      fill.seed = std::random_device{}() & 0xffffffffu;  // printed below, short enough to retype
    }
    if (normal) {
      if (p.Has("--mean")) {
        REMEX_ASSIGN_OR_RETURN(fill.mean, ParseNumber("--mean", p.Last("--mean")));
      }
      if (p.Has("--scale")) {
        REMEX_ASSIGN_OR_RETURN(fill.scale, ParseNumber("--scale", p.Last("--scale")));
      }
      how =
          "normal, mean " + tooling::Format("%g", fill.mean) + ", scale " + tooling::Format("%g", fill.scale);
    } else {
      fill = ResolveFillBounds(*dtype, fill);
      if (p.Has("--low")) {
        REMEX_ASSIGN_OR_RETURN(fill.low, ParseNumber("--low", p.Last("--low")));
      }
      if (p.Has("--high")) {
        REMEX_ASSIGN_OR_RETURN(fill.high, ParseNumber("--high", p.Last("--high")));
      }
      how = "uniform in [" + tooling::Format("%g", fill.low) + ", " + tooling::Format("%g", fill.high) + ")";
    }
    how += ", seed " + std::to_string(fill.seed);
  }
  auto made = session_->client().Alloc(*dtype, shape, fill);
  if (!made.ok()) return made.status().WithContext(command + " " + name);
  const ShellTensor& t = Add(*made, name, how);
  std::fprintf(out_, "%s (%s), %s, made on the server\n", Describe(t).c_str(),
               tooling::FormatBytes(TensorBytes(t.tensor)).c_str(), how.c_str());
  return OkStatus();
}

Status Shell::Run(const Args& args) {
  REMEX_ASSIGN_OR_RETURN(Parsed p, ParseArgs("run", args, {"--fetch"}));
  REMEX_ASSIGN_OR_RETURN(tooling::SessionModel * m, Current());
  auto fetch = tooling::ParseFetch(p.Last("--fetch", "all"));
  REMEX_RETURN_IF_ERROR(fetch.status());
  for (const auto& name : fetch->names) {
    REMEX_RETURN_IF_ERROR(m->OutputIndex(name).status().WithContext("--fetch"));
  }
  REMEX_ASSIGN_OR_RETURN(auto inputs, BindInputs(*m, p.positional));
  REMEX_ASSIGN_OR_RETURN(tooling::InvokeReport r, session_->Invoke(*m, inputs));
  // Every output becomes a shell tensor before anything can fail.
  std::vector<std::pair<int, std::string>> made;  // id, output name
  for (size_t k = 0; k < r.result.outputs.size(); ++k) {
    const std::string name = k < m->outputs.size() ? m->outputs[k].name : "output" + std::to_string(k);
    made.emplace_back(Add(r.result.outputs[k], name, name + " of " + m->name).id, name);
  }
  std::fprintf(out_, "%s: %s in %.3f ms (%.3f ms on the server)%s%s\n", m->name.c_str(), m->main().name.c_str(),
               r.run_ms, r.result.run_nanos / 1e6,
               r.result.function.empty() || r.result.function == m->main().name
                   ? ""
                   : (", served by " + r.result.function).c_str(),
               r.result.graph ? ", a device graph" : "");
  for (const auto& [id, name] : made) {
    REMEX_ASSIGN_OR_RETURN(ShellTensor * t, Find("%" + std::to_string(id)));
    std::string line = "  " + Describe(*t);
    if (fetch->all || fetch->names.count(name)) {
      auto array = session_->client().Download(t->tensor.handle);
      if (!array.ok()) return array.status().WithContext("fetching " + name);
      const std::string summary = tooling::ArraySummary(*array);
      if (!summary.empty()) line += "  " + summary;
    }
    std::fprintf(out_, "%s\n", line.c_str());
  }
  return OkStatus();
}

Status Shell::Fetch(const Args& args) {
  REMEX_ASSIGN_OR_RETURN(Parsed p, ParseArgs("fetch", args, {"-o"}));
  if (p.positional.size() != 1) return InvalidArgument("fetch takes one TENSOR; see help fetch");
  REMEX_ASSIGN_OR_RETURN(ShellTensor * t, Find(p.positional[0]));
  REMEX_ASSIGN_OR_RETURN(npy::Array array, session_->client().Download(t->tensor.handle));
  std::string line = Describe(*t);
  const std::string summary = tooling::ArraySummary(array);
  if (!summary.empty()) line += "  " + summary;
  if (p.Has("-o")) {
    const std::string file = p.Last("-o");
    REMEX_RETURN_IF_ERROR(npy::Write(file, array).WithContext("writing " + file));
    line += "\n  written to " + file + " (" + tooling::FormatBytes(array.data.size()) + ")";
  }
  std::fprintf(out_, "%s\n", line.c_str());
  return OkStatus();
}

Status Shell::Stats(const Args& args) {
  if (args.size() != 1) return InvalidArgument("stats takes one TENSOR; see help stats");
  REMEX_ASSIGN_OR_RETURN(ShellTensor * t, Find(args[0]));
  REMEX_ASSIGN_OR_RETURN(client::TensorStats s, session_->client().Stats(t->tensor.handle));
  std::fprintf(out_, "%s\n  count %llu  min %.6g  max %.6g  mean %.6g  std %.6g  nan %llu  inf %llu\n",
               Describe(*t).c_str(), static_cast<unsigned long long>(s.count), s.min, s.max, s.mean, s.std,
               static_cast<unsigned long long>(s.nan_count), static_cast<unsigned long long>(s.inf_count));
  return OkStatus();
}

Status Shell::Compare(const Args& args) {
  REMEX_ASSIGN_OR_RETURN(Parsed p, ParseArgs("compare", args, {"--rtol", "--atol"}, {"--no-equal-nan"}));
  if (p.positional.size() != 2) return InvalidArgument("compare takes two tensors, A and the reference B");
  REMEX_ASSIGN_OR_RETURN(double rtol, ParseNumber("--rtol", p.Last("--rtol", "1e-4")));
  REMEX_ASSIGN_OR_RETURN(double atol, ParseNumber("--atol", p.Last("--atol", "1e-5")));
  REMEX_RETURN_IF_ERROR(compare::CheckTolerances(rtol, atol));
  REMEX_ASSIGN_OR_RETURN(ShellTensor * a, Find(p.positional[0]));
  REMEX_ASSIGN_OR_RETURN(ShellTensor * b, Find(p.positional[1]));
  REMEX_ASSIGN_OR_RETURN(
      client::TensorComparison c,
      session_->client().Compare(a->tensor.handle, b->tensor.handle, rtol, atol, !p.Has("--no-equal-nan")));
  std::fprintf(out_, "%s vs %s (rtol %g, atol %g)\n", Describe(*a).c_str(), Describe(*b).c_str(), rtol, atol);
  if (c.mismatches == 0) {
    std::fprintf(out_, "  match: %llu values", static_cast<unsigned long long>(c.count));
  } else {
    std::fprintf(out_, "  MISMATCH: %llu of %llu values differ, the first at flat index %lld",
                 static_cast<unsigned long long>(c.mismatches), static_cast<unsigned long long>(c.count),
                 static_cast<long long>(c.first_mismatch));
    mismatch_ = true;
    failure_ = "the tensors differ";
  }
  std::fprintf(out_, "; max abs error %.6g, max rel error %.6g\n", c.max_abs_error, c.max_rel_error);
  return OkStatus();
}

Status Shell::Bench(const Args& args) {
  REMEX_ASSIGN_OR_RETURN(
      Parsed p, ParseArgs("bench", args,
                          {"--number", "--repeat", "--warmup", "--min-repeat-ms", "--cooldown-ms",
                           "--min-duration-s", "--min-samples", "--confidence", "--window-ms",
                           "--stable-window", "--stable-threshold", "--stable-percentile", "--max-trials",
                           "--scenario", "--concurrency", "--samples-per-query", "--target-qps",
                           "--latency-bound-ms", "--audit-samples", "--audit-rtol", "--audit-atol", "--seed",
                           "--record", "--tag"},
                          {"--fail-unstable", "--find-peak", "--audit", "--no-audit"}));
  REMEX_ASSIGN_OR_RETURN(tooling::SessionModel * m, Current());
  tooling::BenchOptions options;
  auto count = [&](const char* flag, auto& field, uint32_t min) -> Status {
    REMEX_ASSIGN_OR_RETURN(uint32_t v, ParseCount(flag, p.Last(flag, std::to_string(field)), min));
    field = v;
    return OkStatus();
  };
  auto number = [&](const char* flag, double& field) -> Status {
    if (!p.Has(flag)) return OkStatus();
    REMEX_ASSIGN_OR_RETURN(field, ParseNumber(flag, p.Last(flag)));
    return OkStatus();
  };
  auto& t = options.timing;
  REMEX_RETURN_IF_ERROR(count("--number", t.number, 1));
  REMEX_RETURN_IF_ERROR(count("--repeat", t.repeat, 1));
  REMEX_RETURN_IF_ERROR(count("--warmup", t.warmup, 0));
  REMEX_RETURN_IF_ERROR(count("--min-repeat-ms", t.min_repeat_ms, 0));
  REMEX_RETURN_IF_ERROR(count("--cooldown-ms", t.cooldown_ms, 0));
  REMEX_RETURN_IF_ERROR(count("--min-samples", options.min_samples, 0));
  REMEX_RETURN_IF_ERROR(count("--stable-window", options.stable_window, 2));
  REMEX_RETURN_IF_ERROR(count("--max-trials", options.max_trials, 1));
  REMEX_RETURN_IF_ERROR(number("--min-duration-s", options.min_duration_s));
  REMEX_RETURN_IF_ERROR(number("--confidence", options.confidence));
  REMEX_RETURN_IF_ERROR(number("--window-ms", options.window_ms));
  REMEX_RETURN_IF_ERROR(number("--stable-threshold", options.stable_threshold));
  REMEX_RETURN_IF_ERROR(number("--stable-percentile", options.stable_percentile));
  options.fail_unstable = p.Has("--fail-unstable");
  REMEX_RETURN_IF_ERROR(tooling::CheckBenchOptions(options));
  // A load scenario: the same mapping as remex bench's (tooling::MakeLoadOptions).
  tooling::LoadSpec load;
  load.scenario = p.Last("--scenario");
  load.concurrency = p.Last("--concurrency");
  if (p.Has("--samples-per-query")) {
    REMEX_ASSIGN_OR_RETURN(load.samples_per_query, ParseCount("--samples-per-query", p.Last("--samples-per-query"), 0));
  }
  REMEX_RETURN_IF_ERROR(number("--target-qps", load.target_qps));
  REMEX_RETURN_IF_ERROR(number("--latency-bound-ms", load.latency_bound_ms));
  load.find_peak = p.Has("--find-peak");
  if (p.Has("--audit") && p.Has("--no-audit")) return InvalidArgument("--audit and --no-audit contradict each other");
  if (p.Has("--audit") || p.Has("--no-audit")) load.audit = p.Has("--audit");
  REMEX_RETURN_IF_ERROR(count("--audit-samples", load.audit_samples, 0));
  REMEX_RETURN_IF_ERROR(number("--audit-rtol", load.audit_rtol));
  REMEX_RETURN_IF_ERROR(number("--audit-atol", load.audit_atol));
  if (p.Has("--seed")) {
    const std::string text = p.Last("--seed");
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), load.seed);
    if (text.empty() || ec != std::errc() || end != text.data() + text.size()) {
      return InvalidArgument("--seed must be a whole number >= 0, got '" + text + "'");
    }
  }
  REMEX_ASSIGN_OR_RETURN(options.load, tooling::MakeLoadOptions(load));
  // --record and --tag are checked before any work, as remex bench checks them.
  const std::string record_url = p.Last("--record");
  if (p.Has("--record")) REMEX_RETURN_IF_ERROR(tooling::CheckResultsUrl(record_url).WithContext("--record"));
  if (p.Has("--tag") && !p.Has("--record")) return InvalidArgument("--tag needs --record");
  REMEX_ASSIGN_OR_RETURN(auto tags, tooling::ParseTags(p.All("--tag")));
  REMEX_ASSIGN_OR_RETURN(auto inputs, BindInputs(*m, p.positional));
  const std::string date = tooling::UtcNow();
  options.interrupt = interrupt_;  // Ctrl-C: the samples so far, partial
  auto busy = Busy("benchmarking " + m->name);
  auto bench = session_->Bench(*m, inputs, options);
  EndBusy(std::move(busy));
  REMEX_ASSIGN_OR_RETURN(tooling::BenchReport r, std::move(bench));
  std::fputs(tooling::BenchText(r).c_str(), out_);
  // In a script, an unstable run asked to fail, or an audit that found a mismatch, ends
  // the shell with status 1.
  failure_ = tooling::BenchFailure(r);
  if (!failure_.empty()) mismatch_ = true;
  if (p.Has("--record")) {
    nlohmann::json j = tooling::ToJson(r);
    j["date"] = date;
    // A partial run (Ctrl-C) is kept as an error, as remex bench --record keeps it.
    const std::string verdict = !r.partial.empty() ? "error" : failure_.empty() ? "pass" : "fail";
    auto id = tooling::RecordReport(record_url, "bench", m->path, j, "", tags, verdict,
                                    r.partial.empty() ? failure_ : "partial: " + r.partial);
    if (!id.ok()) return id.status().WithContext("--record: the result above was not recorded");
    std::fprintf(out_, "recorded as run %lld in %s\n", static_cast<long long>(*id),
                 tooling::RedactResultsUrl(record_url).c_str());
  }
  return OkStatus();
}

Status Shell::Profile(const Args& args) {
  REMEX_ASSIGN_OR_RETURN(Parsed p, ParseArgs("profile", args, {"--runs", "--top"}));
  REMEX_ASSIGN_OR_RETURN(
      uint32_t runs, ParseCount("--runs", p.Last("--runs", std::to_string(tooling::kDefaultProfileRuns)), 1));
  if (runs > rpc::kMaxProfileRuns) {
    return InvalidArgument("--runs must be in [1, " + std::to_string(rpc::kMaxProfileRuns) + "]");
  }
  REMEX_ASSIGN_OR_RETURN(
      uint32_t top, ParseCount("--top", p.Last("--top", std::to_string(tooling::kDefaultProfileTop)), 0));
  REMEX_ASSIGN_OR_RETURN(tooling::SessionModel * m, Current());
  REMEX_ASSIGN_OR_RETURN(auto inputs, BindInputs(*m, p.positional));
  auto busy = Busy("profiling " + m->name);
  auto profiled = session_->Profile(*m, inputs, runs);
  EndBusy(std::move(busy));
  REMEX_ASSIGN_OR_RETURN(auto profile, std::move(profiled));
  std::fputs(tooling::ProfileText(profile, top).c_str(), out_);
  return OkStatus();
}

// The sentence of handles and info on where the session's memory is: what the
// handles hold against the bytes in use that hello reports (servers of protocol 1.6
// on say what each handle holds; older ones only the sizes).
std::string Shell::MemorySummary(const std::vector<client::HandleInfo>& handles, uint64_t in_use) {
  uint64_t held = 0;
  bool known = !handles.empty();
  for (const auto& h : handles) {
    held += h.held_bytes;
    known = known && h.held_known;
  }
  const std::string n = std::to_string(handles.size()) + (handles.size() == 1 ? " handle" : " handles");
  if (!known) {
    return n + "; the session has " + tooling::FormatBytes(in_use) + " in use on the server";
  }
  if (held == in_use) {
    return n + " hold all " + tooling::FormatBytes(in_use) + " this session has in use on the server";
  }
  return n + " hold " + tooling::FormatBytes(held) + " of the " + tooling::FormatBytes(in_use) +
         " this session has in use on the server; the other " +
         tooling::FormatBytes(in_use > held ? in_use - held : 0) + " belongs to a request still running";
}

std::unique_ptr<tooling::ProgressPoller> Shell::Busy(const std::string& step) {
  if (!progress_) return nullptr;
  progress_(step);
  if (!progress_detail_) return nullptr;
  return std::make_unique<tooling::ProgressPoller>(session_->client(), progress_detail_);
}

void Shell::EndBusy(std::unique_ptr<tooling::ProgressPoller> poller) {
  poller.reset();  // stops polling before the line is cleared
  if (progress_) progress_("");
}

Status Shell::Handles(const Args& args) {
  if (!args.empty()) return InvalidArgument("handles takes no arguments");
  REMEX_ASSIGN_OR_RETURN(std::vector<client::HandleInfo> handles, session_->client().ListHandles());
  REMEX_ASSIGN_OR_RETURN(client::ServerInfo info, session_->Info());
  std::vector<std::vector<std::string>> rows = {
      {"handle", "kind", "size", "held", "device", "tensor", "shell"}};
  for (const auto& h : handles) {
    std::string what;
    for (const auto& m : session_->models()) {
      if (h.handle == m->module.handle || h.handle == m->vm) what = "model " + m->name;
    }
    for (const auto& t : tensors_) {
      if (t.tensor.handle == h.handle) {
        what = "%" + std::to_string(t.id) + (t.name.empty() ? "" : " " + t.name) + " (" + t.origin + ")";
      }
    }
    rows.push_back({std::to_string(h.handle), h.kind, h.bytes ? tooling::FormatBytes(h.bytes) : "-",
                    h.held_known && h.held_bytes ? tooling::FormatBytes(h.held_bytes) : "-", h.device,
                    h.kind == "tensor" ? std::string(DTypeName(h.dtype)) + " " + ShapeToString(h.shape) : "",
                    what});
  }
  uint64_t in_use = 0;
  for (const auto& d : info.devices) in_use += d.bytes_in_use;
  std::fputs(tooling::FormatTable(rows, "  ", 2, rows[0].size()).c_str(), out_);
  std::fprintf(out_, "%s\n", MemorySummary(handles, in_use).c_str());
  return OkStatus();
}

Status Shell::Free(const Args& args) {
  if (args.empty()) return InvalidArgument("free takes one or more tensors; see help free");
  std::vector<uint64_t> handles;
  std::vector<std::string> freed;
  for (const auto& ref : args) {  // every reference is resolved before anything is freed
    REMEX_ASSIGN_OR_RETURN(ShellTensor * t, Find(ref));
    if (std::find(handles.begin(), handles.end(), t->tensor.handle) != handles.end()) continue;
    handles.push_back(t->tensor.handle);
    freed.push_back("%" + std::to_string(t->id) + (t->name.empty() ? "" : " " + t->name));
  }
  REMEX_RETURN_IF_ERROR(session_->client().Free(handles));
  std::vector<std::string> names;  // the names the freed tensors held
  std::erase_if(tensors_, [&](const ShellTensor& t) {
    const bool gone = std::find(handles.begin(), handles.end(), t.tensor.handle) != handles.end();
    if (gone && !t.name.empty()) names.push_back(t.name);
    return gone;
  });
  std::fprintf(out_, "freed %s\n", Join(freed, ", ").c_str());
  // Each name goes back to the newest tensor that gave it up and has no name now.
  for (const auto& name : names) {
    for (auto t = tensors_.rbegin(); t != tensors_.rend(); ++t) {
      auto former = std::find(t->former_names.begin(), t->former_names.end(), name);
      if (former == t->former_names.end() || !t->name.empty()) continue;
      t->former_names.erase(former);
      t->name = name;
      std::fprintf(out_, "  %s names %%%d again: %s\n", name.c_str(), t->id, Describe(*t).c_str());
      break;
    }
  }
  return OkStatus();
}

Status Shell::Info(const Args& args) {
  if (!args.empty()) return InvalidArgument("info takes no arguments");
  REMEX_ASSIGN_OR_RETURN(client::ServerInfo s, session_->Info());
  const auto& c = session_->connection();
  std::fprintf(out_, "server   %s: %s %s, protocol %u.%u, session %llu\n", c.server.c_str(), s.name.c_str(),
               s.version.c_str(), static_cast<unsigned>(s.protocol_major),
               static_cast<unsigned>(s.protocol_minor), static_cast<unsigned long long>(s.session_id));
  for (const auto& d : s.devices) {
    std::fprintf(out_, "device   %s%s: %s memory, %s in use by this session\n", d.name.c_str(),
                 d.description.empty() ? "" : (" (" + d.description + ")").c_str(),
                 d.memory_bytes ? tooling::FormatBytes(d.memory_bytes).c_str() : "unknown",
                 tooling::FormatBytes(d.bytes_in_use).c_str());
  }
  std::vector<std::string> models;
  for (const auto& m : session_->models())
    models.push_back(m->name + (m.get() == current_ ? " (current)" : ""));
  std::fprintf(out_, "models   %s\n", models.empty() ? "none" : Join(models, ", ").c_str());
  std::fprintf(out_, "tensors  %zu\n", tensors_.size());
  // The same figure handles breaks down, from the same two requests.
  if (s.protocol_minor >= rpc::kMinorListHandles) {
    REMEX_ASSIGN_OR_RETURN(std::vector<client::HandleInfo> handles, session_->client().ListHandles());
    uint64_t in_use = 0;
    for (const auto& d : s.devices) in_use += d.bytes_in_use;
    std::fprintf(out_, "handles  %s (handles lists them)\n", MemorySummary(handles, in_use).c_str());
  }
  return OkStatus();
}

Status Shell::Quit(const Args& args) {
  if (!args.empty()) return InvalidArgument("quit takes no arguments");
  done_ = true;
  return OkStatus();
}

// ---- completion ------------------------------------------------------------------

std::vector<std::string> Shell::Complete(const std::string& line) const {
  const size_t cut = line.find_last_of(kWordBreaks);
  const size_t start = cut == std::string::npos ? 0 : cut + 1;
  const std::string word = line.substr(start);
  const bool after_equals = start > 0 && line[start - 1] == '=';
  Args before;
  {
    auto split = SplitWords(line.substr(0, start));
    if (split.ok()) before = std::move(split).value();  // an open quote: complete as if closed
  }
  std::string key;  // NAME of NAME=<word>
  if (after_equals && !before.empty()) {
    key = before.back();
    key.pop_back();
    before.pop_back();
  }
  std::vector<std::string> candidates;
  auto add = [&](const std::string& c) {
    if (StartsWith(c, word) && std::find(candidates.begin(), candidates.end(), c) == candidates.end()) {
      candidates.push_back(c);
    }
  };
  auto tensors = [&] {
    for (const auto& t : tensors_) {
      if (!t.name.empty()) add(t.name);
    }
    for (const auto& t : tensors_) add("%" + std::to_string(t.id));
  };
  auto inputs = [&] {
    if (!current_) return;
    for (const auto& v : current_->inputs) add(v.name + "=");
  };
  if (before.empty()) {
    if (!after_equals) {
      for (const auto& c : Commands()) add(c.name);
    }
    return candidates;
  }
  const std::string& command = before[0];
  const Command* cmd = nullptr;
  for (const auto& c : Commands()) {
    if (command == c.name) cmd = &c;
  }
  if (!cmd) return candidates;
  // The values of an option: true when `option` takes one (listed or not).
  auto option_value = [&](const std::string& option) {
    if (option == "--layout") {
      for (const char* v : {"NCHW", "NHWC"}) add(v);
    } else if (option == "--dtype" && (command == "zeros" || command == "random")) {
      for (const char* v : {"float32", "float16", "bfloat16", "float64", "int8", "uint8", "int16", "uint16",
                            "int32", "uint32", "int64", "uint64", "bool"}) {
        add(v);
      }
    } else if (option == "--dtype") {
      for (const char* v : {"float32", "float16"}) add(v);
    } else if (option == "--fetch") {
      add("all");
      add("none");
      if (current_) {
        for (const auto& v : current_->outputs) add(v.name);
      }
    } else if (option == "--scenario") {
      for (const char* v : {"single-stream", "multi-stream", "server", "offline"}) add(v);
    } else if (option == "-o") {
      candidates = CompleteFiles(word, {".npy"});
    } else {
      // A number, a spec or a name nobody can guess; flags take no value.
      const bool known = std::find(cmd->options.begin(), cmd->options.end(), option) != cmd->options.end();
      static const std::set<std::string> kFlags = {
          "--strict",       "--no-fuse-epilogues", "--no-fold-batchnorm", "--no-fuse-elementwise",
          "--no-equal-nan", "--fail-unstable",     "--find-peak",
          "--audit",        "--no-audit",          "--normal"};
      return known && !kFlags.count(option);
    }
    return true;
  };
  if (after_equals) {
    if (StartsWith(key, "-")) {
      option_value(key);  // --fetch=...
    } else if (command == "upload") {
      candidates = CompleteFiles(word, {".npy"});
    } else if (command == "run" || command == "bench" || command == "profile") {
      tensors();
    }
    return candidates;
  }
  if (before.size() > 1 && StartsWith(before.back(), "-") && option_value(before.back())) return candidates;
  if (StartsWith(word, "-")) {
    for (const char* o : cmd->options) add(o);
    return candidates;
  }
  if (command == "help") {
    if (before.size() == 1) {
      for (const auto& c : Commands()) add(c.name);
    }
  } else if (command == "load") {
    for (const auto& f : CompleteFiles(word, {".onnx", ".rmx"})) candidates.push_back(f);
  } else if (command == "upload" || command == "run" || command == "bench" || command == "profile") {
    inputs();
  } else if (command == "fetch" || command == "stats" || command == "free" ||
             (command == "compare" && before.size() < 3)) {
    tensors();
  } else if ((command == "use" || command == "unload") && before.size() == 1) {
    for (const auto& m : session_->models()) add(m->name);
  }
  return candidates;
}

// ---- the terminal and scripts ----------------------------------------------------

namespace {

// readline's completion callbacks take no user data: the shell they ask and the
// candidates of the completion in progress live here while RunInteractive runs.
Shell* g_completing_shell = nullptr;
std::vector<std::string> g_candidates;
// Ctrl-C: the handler tells the interrupter, whose thread cancels the request.
tooling::Interrupter* g_interrupter = nullptr;

char* NextCandidate(const char*, int state) {
  static size_t next = 0;
  if (state == 0) next = 0;
  return next < g_candidates.size() ? strdup(g_candidates[next++].c_str()) : nullptr;
}

char** CompleteWord(const char* text, int, int end) {
  rl_attempted_completion_over = 1;  // no fallback to file names
  if (!g_completing_shell || !rl_line_buffer || end < 0) return nullptr;
  g_candidates = g_completing_shell->Complete(std::string(rl_line_buffer, static_cast<size_t>(end)));
  if (g_candidates.empty()) return nullptr;
  // "NAME=" and "dir/" go on without a blank.
  const std::string& only = g_candidates[0];
  const bool open = g_candidates.size() == 1 && !only.empty() && (only.back() == '=' || only.back() == '/');
  rl_completion_append_character = open ? '\0' : ' ';
  return rl_completion_matches(text, NextCandidate);
}

extern "C" void OnInterrupt(int sig) {
  if (tooling::Interrupter* irq = g_interrupter) irq->Notify(sig);
}

int RunPiped(Shell& shell) {
  char* buffer = nullptr;
  size_t capacity = 0;
  size_t number = 0;
  int rc = tooling::kExitOk;
  while (getline(&buffer, &capacity, stdin) >= 0) {
    ++number;
    std::string line(buffer);
    while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
    const Status st = shell.Execute(line);
    std::fflush(stdout);
    if (!st.ok()) {
      std::fprintf(stderr, "error: %s\nremex shell: stopped at line %zu: %s\n", st.ToString().c_str(), number,
                   line.c_str());
      rc = tooling::ExitCodeFor(st);
      break;
    }
    if (shell.mismatch()) {
      std::fprintf(stderr, "remex shell: stopped at line %zu: %s: %s\n", number, shell.failure().c_str(),
                   line.c_str());
      rc = tooling::kExitMismatch;
      break;
    }
    if (shell.done()) break;
  }
  std::free(buffer);
  return rc;
}

int RunInteractive(Shell& shell, const ShellOptions& options) {
  static char word_breaks[] = " \t=";
  rl_readline_name = "remex";
  rl_catch_signals = 0;  // Ctrl-C is ours (below), not a reason for readline to give up
  rl_attempted_completion_function = CompleteWord;
  rl_basic_word_break_characters = word_breaks;
  rl_completer_word_break_characters = word_breaks;
  g_completing_shell = &shell;
  using_history();
  stifle_history(1000);
  if (!options.history_file.empty()) {
    (void)read_history(options.history_file.c_str());  // absent the first time
  }

  // Ctrl-C while a command runs cancels its request on the server (a bench prints the
  // samples taken so far); at the prompt it does nothing (Ctrl-U clears the line,
  // Ctrl-D leaves).
  auto irq = tooling::Interrupter::Start(
      [](const std::string& message) { std::fprintf(stderr, "\n%s\n", message.c_str()); });
  struct sigaction previous = {};
  const bool interrupts = irq.ok();
  if (interrupts) {
    g_interrupter = irq->get();
    shell.set_interrupt(&(*irq)->signal());
    struct sigaction action = {};
    action.sa_handler = OnInterrupt;
    action.sa_flags = SA_RESTART;
    sigemptyset(&action.sa_mask);
    sigaction(SIGINT, &action, &previous);
  }

  const auto& c = shell.session().connection();
  std::printf("remex shell on %s, %s, session %llu: help lists the commands, quit or Ctrl-D leaves\n",
              c.server.c_str(), c.device.c_str(),
              static_cast<unsigned long long>(shell.session().client().server_info().session_id));
  TerminalProgress progress(true);
  shell.set_progress([&progress](const std::string& step) { progress.Step(step); });
  shell.set_progress_detail([&progress](const std::string& detail) { progress.Detail(detail); });
  bool history_warned = false;
  std::string last;
  while (!shell.done()) {
    const std::string model = shell.current_model();
    const std::string prompt = "remex" + (model.empty() ? "" : ":" + model) + "> ";
    std::fflush(stdout);
    rl_resize_terminal();  // readline does not catch SIGWINCH here (rl_catch_signals)
    char* raw = readline(prompt.c_str());
    if (!raw) {  // Ctrl-D
      std::fputc('\n', stdout);
      break;
    }
    const std::string line(raw);
    std::free(raw);
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    if (line != last) {
      add_history(line.c_str());
      last = line;
      if (!options.history_file.empty() && write_history(options.history_file.c_str()) != 0 &&
          !history_warned) {
        std::fprintf(stderr, "remex shell: cannot write the history file '%s'\n",
                     options.history_file.c_str());
        history_warned = true;
      }
    }
    if (interrupts) {
      (*irq)->Reset();  // a Ctrl-C at the prompt is none of this command's
      (*irq)->Watch(&shell.session().client());
    }
    const Status st = shell.Execute(line);
    if (interrupts) (*irq)->Watch(nullptr);
    std::fflush(stdout);
    if (!st.ok()) std::fprintf(stderr, "error: %s\n", st.ToString().c_str());
  }
  shell.set_progress({});
  shell.set_progress_detail({});
  if (interrupts) {
    sigaction(SIGINT, &previous, nullptr);
    g_interrupter = nullptr;
    shell.set_interrupt(nullptr);
  }
  g_completing_shell = nullptr;
  return tooling::kExitOk;
}

}  // namespace

int RunShell(Shell& shell, const ShellOptions& options) {
  return isatty(STDIN_FILENO) ? RunInteractive(shell, options) : RunPiped(shell);
}

}  // namespace remex::cli
