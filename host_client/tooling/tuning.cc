// Tuning over the wire (see tuning.h).
#include "host_client/tooling/tuning.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <cstdlib>
#include <iterator>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "base/content_hash.h"
#include "host_client/compiler/buckets.h"
#include "host_client/tooling/compile.h"
#include "host_client/tooling/connection.h"
#include "host_client/tooling/farm.h"
#include "host_client/tooling/results_store.h"
#include "host_client/tooling/text.h"
#include "host_client/tooling/variants.h"

namespace remex::tooling {

using nlohmann::json;
using compiler::TunedChoices;

namespace {

using Clock = std::chrono::steady_clock;

std::string DTypeText(DType d) { return d == DType::kUndefined ? std::string("model") : std::string(DTypeName(d)); }
const char* BoolText(bool b) { return b ? "true" : "false"; }

// The value of axis `key` in `c`, as --space writes it.
std::string AxisValue(const TunedChoices& c, const std::string& key) {
  if (key == "layout") return compiler::LayoutName(c.layout);
  if (key == "dtype") return DTypeText(c.dtype);
  if (key == "fold-batchnorm") return BoolText(c.fold_batchnorm);
  if (key == "fuse-epilogues") return BoolText(c.fuse_epilogues);
  if (key == "compute-threads") return std::to_string(c.compute_threads);
  return BoolText(c.fuse_elementwise);
}

// A per-node axis: its --space key, the kernel attribute and its range (kernels.h), and
// whether the CPU device's kernels take it (else the CUDA device's do).
struct NodeAxis {
  const char* key;
  const char* attr;
  int64_t min, max;
  bool cpu;
};
constexpr NodeAxis kNodeAxes[] = {{"cudnn-algo", "cudnn_algo", 0, kernels::kCudnnFwdAlgoCount - 1, false},
                                  {"cudnn-math", "cudnn_math", 0, kernels::kCudnnMathTypeCount - 1, false},
                                  {"cublaslt-algo", "cublaslt_algo", 0, kernels::kCublasLtAlgoCount - 1, false},
                                  {"onednn-algo", "onednn_algo", 0, kernels::kOnednnConvAlgoCount - 1, true}};
static_assert(std::size(kNodeAxes) == std::size(kNodeTuningKeys));

const NodeAxis* FindNodeAxis(const std::string& key) {
  for (const NodeAxis& a : kNodeAxes) {
    if (key == a.key) return &a;
  }
  return nullptr;
}

std::string DimsText(const Shape& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) out += (i ? "x" : "") + std::to_string(s[i]);
  return out.empty() ? "scalar" : out;
}

json ShapesJson(const std::map<std::string, Shape>& shapes) {
  json j = json::object();
  for (const auto& [name, s] : shapes) j[name] = s;
  return j;
}

}  // namespace

// ---- choices -----------------------------------------------------------------------

json ToJson(const TunedChoices& c) {
  json j = {{"layout", compiler::LayoutName(c.layout)},
            {"dtype", DTypeText(c.dtype)},
            {"fold_batchnorm", c.fold_batchnorm},
            {"fuse_epilogues", c.fuse_epilogues},
            {"fuse_elementwise", c.fuse_elementwise}};
  if (c.compute_threads) j["compute_threads"] = c.compute_threads;
  if (!c.node_attrs.empty()) j["node_attrs"] = c.node_attrs;
  return j;
}

StatusOr<TunedChoices> TunedChoicesFromJson(const json& j) {
  if (!j.is_object()) return InvalidArgument("tuned choices: not a JSON object");
  TunedChoices c;
  auto text = [&](const char* field) -> StatusOr<std::string> {
    if (!j.contains(field) || !j[field].is_string())
      return InvalidArgument(std::string("tuned choices: '") + field + "' missing or not a string");
    return j[field].get<std::string>();
  };
  auto boolean = [&](const char* field, bool& out) -> Status {
    if (!j.contains(field) || !j[field].is_boolean())
      return InvalidArgument(std::string("tuned choices: '") + field + "' missing or not a boolean");
    out = j[field].get<bool>();
    return OkStatus();
  };
  REMEX_ASSIGN_OR_RETURN(std::string layout, text("layout"));
  REMEX_ASSIGN_OR_RETURN(std::string dtype, text("dtype"));
  REMEX_RETURN_IF_ERROR(SetTunedChoice(c, "layout", layout).WithContext("tuned choices"));
  REMEX_RETURN_IF_ERROR(SetTunedChoice(c, "dtype", dtype).WithContext("tuned choices"));
  REMEX_RETURN_IF_ERROR(boolean("fold_batchnorm", c.fold_batchnorm));
  REMEX_RETURN_IF_ERROR(boolean("fuse_epilogues", c.fuse_epilogues));
  REMEX_RETURN_IF_ERROR(boolean("fuse_elementwise", c.fuse_elementwise));
  if (j.contains("compute_threads")) {
    const json& t = j["compute_threads"];
    if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() > kernels::kMaxCpuComputeThreads) {
      return InvalidArgument("tuned choices: 'compute_threads' is not an integer in [0, " +
                             std::to_string(kernels::kMaxCpuComputeThreads) + "]");
    }
    c.compute_threads = static_cast<int>(t.get<int64_t>());
  }
  if (j.contains("node_attrs")) {
    // Names and values only; the compiler checks them against the graph and the ops.
    const json& nodes = j["node_attrs"];
    if (!nodes.is_object()) return InvalidArgument("tuned choices: 'node_attrs' is not an object");
    for (const auto& [node, attrs] : nodes.items()) {
      if (!attrs.is_object()) return InvalidArgument("tuned choices: node_attrs of '" + node + "' is not an object");
      for (const auto& [key, value] : attrs.items()) {
        if (!value.is_number_integer()) {
          return InvalidArgument("tuned choices: node_attrs of '" + node + "': '" + key + "' is not an integer");
        }
        c.node_attrs[node][key] = value.get<int64_t>();
      }
    }
  }
  return c;
}

Status SetTunedChoice(TunedChoices& c, const std::string& key, const std::string& value) {
  auto boolean = [&](bool& field) -> Status {
    if (value == "true") {
      field = true;
    } else if (value == "false") {
      field = false;
    } else {
      return InvalidArgument(key + " must be true or false, got '" + value + "'");
    }
    return OkStatus();
  };
  if (key == "layout") {
    auto layout = compiler::ParseLayout(value);
    if (!layout.ok()) return layout.status().WithContext("layout");
    if (*layout == compiler::Layout::kAuto) return InvalidArgument("layout must be NCHW or NHWC, got '" + value + "'");
    c.layout = *layout;
    return OkStatus();
  }
  if (key == "dtype") {
    if (value == "model") {
      c.dtype = DType::kUndefined;
      return OkStatus();
    }
    if (value != "float32" && value != "float16")
      return InvalidArgument("dtype must be model, float32 or float16, got '" + value + "'");
    c.dtype = value == "float16" ? DType::kFloat16 : DType::kFloat32;
    return OkStatus();
  }
  if (key == "fold-batchnorm") return boolean(c.fold_batchnorm);
  if (key == "fuse-epilogues") return boolean(c.fuse_epilogues);
  if (key == "fuse-elementwise") return boolean(c.fuse_elementwise);
  if (key == "compute-threads") {
    char* end = nullptr;
    errno = 0;
    const long long n = std::strtoll(value.c_str(), &end, 10);
    if (value.empty() || *end != '\0' || errno != 0 || n < 0 || n > kernels::kMaxCpuComputeThreads) {
      return InvalidArgument("compute-threads must be an integer in [0, " +
                             std::to_string(kernels::kMaxCpuComputeThreads) + "], got '" + value + "'");
    }
    c.compute_threads = static_cast<int>(n);
    return OkStatus();
  }
  std::string keys;
  for (const char* k : kTuningKeys) keys += (keys.empty() ? "" : ", ") + std::string(k);
  return InvalidArgument("unknown choice '" + key + "' (the choices: " + keys + ")");
}

std::string TunedChoicesText(const TunedChoices& c, const TunedChoices& start) {
  std::string out;
  for (const char* key : kTuningKeys) {
    const std::string v = AxisValue(c, key);
    if (v != AxisValue(start, key)) out += (out.empty() ? "" : ",") + std::string(key) + "=" + v;
  }
  if (c.node_attrs != start.node_attrs) {
    size_t nodes = 0;
    for (const auto& [name, attrs] : c.node_attrs) {
      auto it = start.node_attrs.find(name);
      nodes += it == start.node_attrs.end() || it->second != attrs ? 1 : 0;
    }
    out += (out.empty() ? "+" : ",+") + std::to_string(nodes) + " per-node";
  }
  return out.empty() ? "start" : out;
}

StatusOr<std::vector<TuningAxis>> ParseTuningSpace(const std::vector<std::string>& specs) {
  std::vector<TuningAxis> out;
  for (const std::string& spec : specs) {
    auto fail = [&](const std::string& why) { return InvalidArgument("--space '" + spec + "': " + why); };
    const size_t eq = spec.find('=');
    if (eq == std::string::npos) return fail("expected KEY=V1,V2,...");
    TuningAxis axis;
    axis.key = spec.substr(0, eq);
    for (const TuningAxis& a : out) {
      if (a.key == axis.key) return fail("'" + axis.key + "' is given twice");
    }
    std::stringstream ss(spec.substr(eq + 1));
    std::string value;
    const NodeAxis* node_axis = FindNodeAxis(axis.key);
    while (std::getline(ss, value, ',')) {
      if (node_axis) {
        char* end = nullptr;
        errno = 0;
        const long long v = std::strtoll(value.c_str(), &end, 10);
        if (value.empty() || *end != '\0' || errno != 0 || v < node_axis->min || v > node_axis->max) {
          return fail(axis.key + " takes integers in [" + std::to_string(node_axis->min) + ", " +
                      std::to_string(node_axis->max) + "], got '" + value + "'");
        }
        value = std::to_string(v);
      } else if (TunedChoices scratch; !SetTunedChoice(scratch, axis.key, value).ok()) {
        std::string keys = SetTunedChoice(scratch, axis.key, value).message();
        if (keys.rfind("unknown choice", 0) == 0) {
          keys.pop_back();  // ")"
          for (const char* k : kNodeTuningKeys) keys += ", " + std::string(k);
          keys += ")";
        }
        return fail(keys);
      }
      if (std::find(axis.values.begin(), axis.values.end(), value) == axis.values.end()) axis.values.push_back(value);
    }
    if (axis.values.empty()) return fail("no values");
    out.push_back(std::move(axis));
  }
  return out;
}

std::vector<TuningAxis> DefaultTuningSpace(const std::string& device) {
  std::vector<TuningAxis> space = {{"layout", {"NCHW", "NHWC"}},
                                   {"fold-batchnorm", {"true", "false"}},
                                   {"fuse-epilogues", {"true", "false"}},
                                   {"fuse-elementwise", {"true", "false"}}};
  // The CPU device has no float16 arithmetic (compile.h, CompileForDevice).
  if (device == "cpu") space.push_back({"compute-threads", {"0", "1"}});
  if (device != "cpu") space.insert(space.begin() + 1, TuningAxis{"dtype", {"model", "float16"}});
  for (const NodeAxis& a : kNodeAxes) {
    if (a.cpu != (device == "cpu")) continue;
    TuningAxis axis{a.key, {}};
    for (int64_t v = a.min; v <= a.max; ++v) axis.values.push_back(std::to_string(v));
    space.push_back(std::move(axis));
  }
  return space;
}

std::string TuningFingerprint(const client::ServerInfo& info) {
  const client::ServerEnvironment& e = info.environment;
  const std::string device = info.devices.empty() ? "" : info.devices[0].name;
  if (device.rfind("cuda", 0) == 0) {
    size_t index = 0;
    if (device.size() > 5) index = static_cast<size_t>(std::strtoul(device.c_str() + 5, nullptr, 10));
    if (index < e.gpus.size()) {
      const client::GpuEnvironment& g = e.gpus[index];
      return "gpu: " + (g.name.empty() ? std::string("unknown") : g.name) + ", compute capability " +
             (g.compute_capability.empty() ? std::string("unknown") : g.compute_capability);
    }
    return "gpu: unknown";
  }
  return "cpu: " + (e.cpu_model.empty() ? std::string("unknown") : e.cpu_model) + ", " +
         (e.compute_threads ? std::to_string(e.compute_threads) : std::string("unknown")) + " compute threads";
}

// ---- the log -----------------------------------------------------------------------

namespace {

// Whether every field a reader of the log uses has its type (or is absent): a record
// that fails is skipped like a torn line, so that no reader meets a wrong type.
bool WellFormed(const json& j) {
  auto is = [&](const char* k, auto&& pred) { return !j.contains(k) || pred(j[k]); };
  auto string = [](const json& v) { return v.is_string(); };
  auto integer = [](const json& v) { return v.is_number_integer(); };
  auto boolean = [](const json& v) { return v.is_boolean(); };
  auto number_or_null = [](const json& v) { return v.is_number() || v.is_null(); };
  auto object = [](const json& v) { return v.is_object(); };
  auto object_or_null = [](const json& v) { return v.is_object() || v.is_null(); };
  for (const char* k : {"kind", "fingerprint", "model_hash", "bucket"}) {
    if (!j.contains(k) || !j[k].is_string()) return false;
  }
  for (const char* k : {"model", "server", "label", "status", "reason", "phase", "recorded_at"}) {
    if (!is(k, string)) return false;
  }
  for (const char* k : {"round", "measured", "rejected", "rounds", "samples"}) {
    if (!is(k, integer)) return false;
  }
  for (const char* k : {"complete", "beyond_noise"}) {
    if (!is(k, boolean)) return false;
  }
  for (const char* k : {"ratio", "ratio_low", "ratio_high", "p_value", "median_ms", "median_low_ms", "median_high_ms",
                        "start_median_ms"}) {
    if (!is(k, number_or_null)) return false;
  }
  for (const char* k : {"shapes", "start", "choice"}) {
    if (!is(k, object)) return false;
  }
  if (!is("winner", object_or_null)) return false;
  if (j.contains("candidates") && !j["candidates"].is_array()) return false;
  // A round's incumbent is a choice; a measure's, whether it was the incumbent.
  if (j.contains("incumbent") && !j["incumbent"].is_object() && !j["incumbent"].is_boolean()) return false;
  return true;
}

}  // namespace

StatusOr<TuningLog> ReadTuningLog(const std::string& path) {
  TuningLog log;
  std::error_code ec;
  const bool exists = std::filesystem::exists(path, ec);
  if (ec) return PermissionDenied("the tuning log " + path + ": " + ec.message());
  if (!exists) return log;
  std::ifstream in(path);
  if (!in) {
    const int e = errno;
    const std::string why = "the tuning log " + path + " cannot be read: " + std::strerror(e);
    return e == EACCES ? PermissionDenied(why) : NotFound(why);
  }
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object() || !j.contains("schema") || !j["schema"].is_string() || j["schema"] != kTuningLogSchema ||
        !j.contains("schema_version") || !j["schema_version"].is_number_integer()) {
      log.skipped_lines++;
      continue;
    }
    if (j["schema_version"].get<int64_t>() > kTuningLogSchemaVersion) {
      return InvalidArgument("the tuning log " + path + " has a record of schema_version " +
                             std::to_string(j["schema_version"].get<int64_t>()) + "; this remex reads up to " +
                             std::to_string(kTuningLogSchemaVersion));
    }
    if (!WellFormed(j)) {
      log.skipped_lines++;
      continue;
    }
    log.records.push_back(std::move(j));
  }
  if (in.bad()) return DataLoss("reading the tuning log " + path);
  return log;
}

StatusOr<std::map<std::string, TunedChoices>> TunedChoicesFromLog(const TuningLog& log, const std::string& model_hash,
                                                                  const std::string& fingerprint, std::string* used) {
  std::set<std::string> fingerprints;
  for (const json& r : log.records) {
    if (r.value("kind", "") == "best" && r.value("model_hash", "") == model_hash) {
      fingerprints.insert(r.value("fingerprint", ""));
    }
  }
  std::string fp = fingerprint;
  if (fp.empty()) {
    if (fingerprints.empty()) return NotFound("the tuning log has no tuned bucket for this model (hash " + model_hash + ")");
    if (fingerprints.size() > 1) {
      std::string names;
      for (const auto& f : fingerprints) names += "\n  " + f;
      return InvalidArgument("the tuning log holds this model tuned on several devices; name one with --tuned-for:" +
                             names);
    }
    fp = *fingerprints.begin();
  } else if (!fingerprints.count(fp)) {
    std::string names;
    for (const auto& f : fingerprints) names += "\n  " + f;
    return NotFound("the tuning log has no tuned bucket for this model on '" + fp + "'" +
                    (names.empty() ? std::string() : "; it has:" + names));
  }
  std::map<std::string, TunedChoices> out;
  for (const json& r : log.records) {
    if (r.value("kind", "") != "best" || r.value("model_hash", "") != model_hash || r.value("fingerprint", "") != fp)
      continue;
    auto choice = TunedChoicesFromJson(r.value("choice", json()));
    if (!choice.ok()) continue;  // as ReplayLog: a record that does not parse is skipped
    out[r.value("bucket", "")] = *choice;  // the latest record of a bucket wins
  }
  if (used) *used = fp;
  return out;
}

// ---- remex tune --------------------------------------------------------------------

namespace {

// A bucket to tune: its function name, representative shapes, and the compile options
// of it alone (the start's choices).
struct BucketPlan {
  std::string name;
  std::map<std::string, Shape> shapes;
  compiler::CompileOptions options;
};

// What replaying the log of a bucket gives.
struct Replay {
  TunedChoices incumbent;
  std::set<std::string> tried;  // choices' JSON dumps
  int rounds = 0, measured = 0, rejected = 0;
  bool complete = false;
  bool nodes_done = false;   // a per-node round is logged
  std::optional<json> best;  // the complete "best" record
};

// A candidate of a round.
struct Candidate {
  TunedChoices choice;
  std::string label;
  std::string rmx;     // compiled executable's path
  std::string status;  // "ok", "rejected"
  std::string reason;  // why rejected
};

// What a worker holds for its whole life: its device's lease or the embedded server,
// how to open a fresh session to that same device after an error closed one, and the
// session.
struct Device {
  std::unique_ptr<farm::LeaseHolder> lease;
  std::unique_ptr<EmbeddedServer> embedded;
  ServerOptions options;  // the device itself: its address and token, no farm
  std::string label;      // as records name it: "HOST:PORT (leased from pool P)", ...
};
struct Link {
  Device device;
  Connection connection;  // session only: the lease and embedded server are the device's
};

class Tuner {
 public:
  Tuner(const TuneOptions& o, const ProgressFn& progress) : o_(o), progress_(progress) {}
  StatusOr<TuneReport> Run();

 private:
  void Say(const std::string& step) {
    std::lock_guard<std::mutex> lock(say_mu_);
    if (progress_) progress_(step);
  }
  bool Interrupted() const { return o_.bench.interrupt && o_.bench.interrupt->load() != 0; }
  bool BudgetSpent() const { return o_.budget_s > 0 && Clock::now() >= deadline_; }
  json Record(const char* kind, const BucketPlan& plan, const std::string& server) const;
  Status Append(const std::vector<json>& records);
  Replay ReplayLog(const BucketPlan& plan) const;
  // The bucket's executable of `choice`, written to `path`, or the path it was written
  // to before.
  StatusOr<std::string> CompileCandidate(const BucketPlan& plan, const TunedChoices& choice, const std::string& path);
  Status Worker(Connection first);
  Status TuneOne(size_t index, Link& link);
  // Compiles `c` to `path` and checks it on the device against the reference: c.status
  // "rejected" with the reason, or "ok". Errors only when no device is left.
  Status CheckCandidate(const BucketPlan& plan, Candidate& c, const std::string& path, const std::string& ref_dir,
                        Link& link);
  // The per-node phase (tuning.h): may replace the incumbent, logs one round.
  // `finished`: false when a budget or a signal cut it short (nothing logged then).
  Status TuneNodes(const BucketPlan& plan, const std::string& dir, const std::string& ref_dir,
                   const std::string& server, Link& link, TunedChoices& incumbent,
                   std::string& incumbent_rmx, int& round, TuneBucket& result, bool* finished);
  // Appends a round's measure records and its round record (`phase`: "descent" or
  // "nodes"; `winner` null when none won), and counts the round in the totals.
  Status LogRound(const BucketPlan& plan, const std::string& server, int round, const char* phase,
                  const TunedChoices& incumbent, const std::vector<Candidate>& candidates, int measured,
                  int rejected, const TunedChoices* winner, std::vector<json> records, TuneBucket& result);
  // Each node's median ms over the profiled invokes of the executable at `rmx`.
  StatusOr<std::map<std::string, double>> ProfileNodes(const BucketPlan& plan, const std::string& rmx,
                                                       const std::string& ref_dir, Link& link);
  // A fresh session to the link's device (its lease kept), after an error closed one;
  // FAILED_PRECONDITION when the device now has another fingerprint.
  Status Reconnect(Link& link);
  ModelRequest CandidateRequest(const BucketPlan& plan, const std::string& rmx, const std::string& ref_dir) const;

  const TuneOptions& o_;
  ProgressFn progress_;
  std::mutex say_mu_;
  std::mutex mu_;  // guards everything below that workers share
  TuningLog log_;
  std::string model_hash_, fingerprint_, device_;
  TunedChoices start_;
  compiler::CompileOptions resolved_;  // the start options, symbols resolved
  bool has_float16_ = false;
  std::vector<TuningAxis> space_;
  std::vector<BucketPlan> plans_;
  std::vector<TuneBucket> results_;
  std::set<std::string> servers_;
  size_t next_ = 0;
  std::string tmp_;
  Clock::time_point deadline_;
  int measured_ = 0, rejected_ = 0;
  std::map<std::string, std::string> compiled_;  // bucket + choice -> its .rmx (CompileCandidate)
};

json Tuner::Record(const char* kind, const BucketPlan& plan, const std::string& server) const {
  return {{"schema", kTuningLogSchema}, {"schema_version", kTuningLogSchemaVersion},
          {"kind", kind},               {"fingerprint", fingerprint_},
          {"model_hash", model_hash_},  {"model", std::filesystem::path(o_.request.model).filename().string()},
          {"bucket", plan.name},        {"shapes", ShapesJson(plan.shapes)},
          {"start", ToJson(start_)},    {"server", server},
          {"recorded_at", UtcNow()}};
}

Status Tuner::Append(const std::vector<json>& records) {
  std::string text;
  for (const json& r : records) text += r.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
  std::lock_guard<std::mutex> lock(mu_);
  std::ofstream out(o_.log_path, std::ios::app);
  out << text;
  out.flush();
  if (!out) return DataLoss("appending to the tuning log " + o_.log_path);
  for (const json& r : records) log_.records.push_back(r);
  return OkStatus();
}

Replay Tuner::ReplayLog(const BucketPlan& plan) const {
  Replay r;
  r.incumbent = start_;
  const json shapes = ShapesJson(plan.shapes), start = ToJson(start_);
  for (const json& rec : log_.records) {
    if (rec.value("fingerprint", "") != fingerprint_ || rec.value("model_hash", "") != model_hash_ ||
        rec.value("bucket", "") != plan.name || rec.value("shapes", json()) != shapes ||
        rec.value("start", json()) != start) {
      continue;
    }
    const std::string kind = rec.value("kind", "");
    if (kind == "round") {
      r.rounds = std::max(r.rounds, rec.value("round", 0));
      for (const json& c : rec.value("candidates", json::array())) r.tried.insert(c.dump());
      r.measured += rec.value("measured", 0);
      r.rejected += rec.value("rejected", 0);
      if (rec.value("phase", "") == "nodes") r.nodes_done = true;
      if (auto w = TunedChoicesFromJson(rec.value("winner", json())); w.ok()) r.incumbent = *w;
    } else if (kind == "best" && rec.value("complete", false)) {
      if (auto c = TunedChoicesFromJson(rec.value("choice", json())); c.ok()) {
        r.complete = true;
        r.incumbent = *c;
        r.best = rec;
      }
    }
  }
  r.tried.insert(ToJson(start_).dump());
  r.tried.insert(ToJson(r.incumbent).dump());
  return r;
}

StatusOr<std::string> Tuner::CompileCandidate(const BucketPlan& plan, const TunedChoices& choice,
                                              const std::string& path) {
  // A choice compiled for this bucket before (the reference is often the start, and the
  // start the first incumbent) is not compiled again.
  const std::string key = plan.name + "\n" + ToJson(choice).dump();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = compiled_.find(key); it != compiled_.end()) return it->second;
  }
  // As the final executable: the choices the bucket's, the rest the start's.
  compiler::CompileOptions options = plan.options;
  options.bucket_choices[plan.name] = choice;
  REMEX_ASSIGN_OR_RETURN(CompileReport report, CompileModel(o_.request.model, options));
  REMEX_RETURN_IF_ERROR(WriteFileBytes(path, report.bytes));
  std::lock_guard<std::mutex> lock(mu_);
  compiled_[key] = path;
  return path;
}

ModelRequest Tuner::CandidateRequest(const BucketPlan& plan, const std::string& rmx, const std::string& ref_dir) const {
  ModelRequest r;
  r.model = rmx;
  r.server = o_.request.server;
  r.seed = o_.request.seed;
  for (const auto& [name, shape] : plan.shapes) {
    if (ref_dir.empty()) {
      r.compile.input_shapes[name] = shape;
    } else {
      r.input_files[name] = ref_dir + "/inputs/" + FileNameFor(name) + ".npy";
    }
  }
  return r;
}

Status Tuner::Reconnect(Link& link) {
  link.connection = Connection();
  REMEX_ASSIGN_OR_RETURN(link.connection, Connect(link.device.options));
  const std::string fp = TuningFingerprint(link.connection.session->server_info());
  if (fp != fingerprint_) {
    link.connection = Connection();
    return FailedPrecondition("the device reconnected to is '" + fp + "', not '" + fingerprint_ + "'");
  }
  return OkStatus();
}

Status Tuner::CheckCandidate(const BucketPlan& plan, Candidate& c, const std::string& path, const std::string& ref_dir,
                             Link& link) {
  auto rmx = CompileCandidate(plan, c.choice, path);
  if (!rmx.ok()) {
    c.status = "rejected";
    c.reason = "compile: " + rmx.status().ToString();
    return OkStatus();
  }
  c.rmx = *rmx;
  if (!link.connection.session) REMEX_RETURN_IF_ERROR(Reconnect(link));
  ModelRequest req = CandidateRequest(plan, c.rmx, ref_dir);
  auto p = PrepareModelOn(req, std::move(link.connection));
  if (!p.ok()) {
    c.status = "rejected";
    c.reason = "device: " + p.status().ToString();
    return OkStatus();
  }
  const bool f16 = c.choice.dtype == DType::kFloat16 || (c.choice.dtype == DType::kUndefined && has_float16_);
  CheckOptions check;
  check.reference = ref_dir;
  check.rtol = f16 ? o_.float16_rtol : o_.rtol;
  check.atol = f16 ? o_.float16_atol : o_.atol;
  auto checked = CheckModel(req, *p, check);  // frees what it made
  link.connection = std::move(p->connection);
  if (!checked.ok()) {
    c.status = "rejected";
    c.reason = "device: " + checked.status().ToString();
    link.connection = Connection();  // a fresh session for the next, the server's state unknown
    return OkStatus();
  }
  if (!checked->match) {
    c.status = "rejected";
    for (const CheckOutput& out : checked->outputs) {
      if (out.verdict == "match") continue;
      char buf[160];
      std::snprintf(buf, sizeof buf, " (max abs error %.3g, max rel error %.3g; rtol %g, atol %g)",
                    out.stats.max_abs_error, out.stats.max_rel_error, check.rtol, check.atol);
      c.reason = "mismatch: output " + out.name + ": " + (out.reason.empty() ? out.verdict : out.reason) + buf;
      break;
    }
  }
  return OkStatus();
}

StatusOr<std::map<std::string, double>> Tuner::ProfileNodes(const BucketPlan& plan, const std::string& rmx,
                                                            const std::string& ref_dir, Link& link) {
  if (!link.connection.session) REMEX_RETURN_IF_ERROR(Reconnect(link));
  ModelRequest req = CandidateRequest(plan, rmx, ref_dir);
  REMEX_ASSIGN_OR_RETURN(PreparedModel p, PrepareModelOn(req, std::move(link.connection)));
  auto report = ProfileVm(p.session(), p.vm, p.main().name, o_.bench.profile_runs, /*trace=*/false);
  Status freed = p.Release();
  link.connection = std::move(p.connection);
  if (!report.ok() || !freed.ok()) link.connection = Connection();
  REMEX_RETURN_IF_ERROR(report.status());
  REMEX_RETURN_IF_ERROR(freed);
  std::map<std::string, double> out;
  for (const ProfileNodeEntry& n : report->nodes) out[n.name] = n.median_ms;
  return out;
}

Status Tuner::TuneNodes(const BucketPlan& plan, const std::string& dir, const std::string& ref_dir,
                        const std::string& server, Link& link, TunedChoices& incumbent,
                        std::string& incumbent_rmx, int& round, TuneBucket& result, bool* finished) {
  *finished = false;
  // Each per-node axis of the space, with the nodes of the incumbent's executable whose
  // op takes its attribute.
  REMEX_ASSIGN_OR_RETURN(std::vector<std::byte> bytes, ReadFileBytes(incumbent_rmx));
  REMEX_ASSIGN_OR_RETURN(vm::ExecutableDef executable, vm::ParseExecutable(bytes));
  REMEX_ASSIGN_OR_RETURN(const kernels::KernelRegistry* registry, CompilerRegistry());
  struct Work {
    const NodeAxis* axis;
    std::vector<int64_t> values;
    std::vector<std::string> nodes;
  };
  std::vector<Work> work;
  for (const TuningAxis& a : space_) {
    const NodeAxis* axis = FindNodeAxis(a.key);
    if (!axis) continue;
    Work w{axis, {}, {}};
    for (const std::string& v : a.values) w.values.push_back(std::stoll(v));  // checked by ParseTuningSpace
    std::set<std::string> names;
    for (const vm::KernelEntry& k : executable.kernels) {
      const kernels::OpDef* def = k.host || k.node_name.empty() ? nullptr : registry->FindOp(k.op);
      if (!def) continue;
      for (const kernels::TunableAttr& t : def->traits.tunable) {
        if (t.name == axis->attr) names.insert(k.node_name);
      }
    }
    w.nodes.assign(names.begin(), names.end());
    if (!w.nodes.empty()) work.push_back(std::move(w));
  }
  if (work.empty()) {
    *finished = true;
    return OkStatus();
  }
  auto say = [&](const std::string& s) { Say(plan.name + ": per node: " + s); };

  // One candidate per value: every node of the axis set to it.
  std::vector<Candidate> candidates;
  std::vector<std::pair<size_t, int64_t>> axis_value;
  for (size_t a = 0; a < work.size(); ++a) {
    for (int64_t v : work[a].values) {
      TunedChoices c = incumbent;
      for (const std::string& n : work[a].nodes) c.node_attrs[n][work[a].axis->attr] = v;
      if (c == incumbent) continue;
      candidates.push_back({c, std::string(work[a].axis->key) + "=" + std::to_string(v), "", "ok", ""});
      axis_value.emplace_back(a, v);
    }
  }
  for (size_t k = 0; k < candidates.size(); ++k) {
    if (Interrupted() || BudgetSpent()) return OkStatus();
    say("checking " + candidates[k].label);
    REMEX_RETURN_IF_ERROR(CheckCandidate(plan, candidates[k],
                                         dir + "/n" + std::to_string(round) + "c" + std::to_string(k) + ".rmx",
                                         ref_dir, link));
  }
  say("profiling " + std::to_string(candidates.size() + 1) + " executables");
  REMEX_ASSIGN_OR_RETURN(auto base_ms, ProfileNodes(plan, incumbent_rmx, ref_dir, link));
  std::vector<std::map<std::string, double>> cand_ms(candidates.size());
  for (size_t k = 0; k < candidates.size(); ++k) {
    if (Interrupted() || BudgetSpent()) return OkStatus();
    if (candidates[k].status != "ok") continue;
    auto ms = ProfileNodes(plan, candidates[k].rmx, ref_dir, link);
    if (!ms.ok()) {  // it passed one run but fails under repeated ones
      candidates[k].status = "rejected";
      candidates[k].reason = "profile: " + ms.status().ToString();
      continue;
    }
    cand_ms[k] = std::move(ms).value();
  }
  ++round;
  // Per axis and node, the value whose median is lowest and 2 % under the incumbent's.
  TunedChoices combined = incumbent;
  for (size_t a = 0; a < work.size(); ++a) {
    for (const std::string& n : work[a].nodes) {
      auto base = base_ms.find(n);
      if (base == base_ms.end()) continue;
      double best = base->second * 0.98;
      std::optional<int64_t> pick;
      for (size_t k = 0; k < candidates.size(); ++k) {
        if (axis_value[k].first != a || candidates[k].status != "ok") continue;
        auto t = cand_ms[k].find(n);
        if (t != cand_ms[k].end() && t->second < best) {
          best = t->second;
          pick = axis_value[k].second;
        }
      }
      if (pick) combined.node_attrs[n][work[a].axis->attr] = *pick;
    }
  }

  std::vector<json> records;
  int rejected = 0, measured = 0;
  for (size_t k = 0; k < candidates.size(); ++k) {
    json m = Record("measure", plan, server);
    m["round"] = round;
    m["phase"] = "nodes";
    m["choice"] = ToJson(candidates[k].choice);
    m["label"] = candidates[k].label;
    m["incumbent"] = false;
    m["status"] = candidates[k].status;
    if (candidates[k].status == "ok") {
      json nodes = json::object();
      for (const std::string& n : work[axis_value[k].first].nodes) {
        if (cand_ms[k].count(n)) nodes[n] = cand_ms[k][n];
      }
      m["node_median_ms"] = nodes;
      measured++;
    } else {
      m["reason"] = candidates[k].reason;
      rejected++;
    }
    records.push_back(std::move(m));
  }
  std::optional<TunedChoices> winner;
  if (!(combined == incumbent)) {
    Candidate c{combined, TunedChoicesText(combined, start_), "", "ok", ""};
    say("checking the per-node picks");
    REMEX_RETURN_IF_ERROR(CheckCandidate(plan, c, dir + "/n" + std::to_string(round) + "picks.rmx", ref_dir, link));
    json m = Record("measure", plan, server);
    m["round"] = round;
    m["phase"] = "nodes";
    m["choice"] = ToJson(combined);
    m["label"] = c.label;
    m["incumbent"] = false;
    m["status"] = c.status;
    if (c.status == "ok") {
      if (!link.connection.session) REMEX_RETURN_IF_ERROR(Reconnect(link));
      say("benchmarking the per-node picks against the incumbent");
      std::vector<VariantRequest> pair = {{"incumbent", CandidateRequest(plan, incumbent_rmx, ref_dir)},
                                          {c.label, CandidateRequest(plan, c.rmx, ref_dir)}};
      auto report = BenchVariantsOn(pair, o_.bench, link.connection);
      if (report.ok()) {
        const VariantSummary& s = report->summary[1];
        m["median_ms"] = s.median.value;
        m["samples"] = s.samples_ms.size();
        m["ratio"] = s.vs_first->ratio;
        m["ratio_low"] = s.vs_first->ratio_low;
        m["ratio_high"] = s.vs_first->ratio_high;
        m["p_value"] = s.vs_first->p_value;
        m["beyond_noise"] = s.vs_first->beyond_noise;
        measured++;
        if (s.vs_first->beyond_noise && s.vs_first->ratio < 1) {
          winner = combined;
          incumbent_rmx = c.rmx;
        }
      } else {
        c.status = "rejected";
        c.reason = "benchmark: " + report.status().ToString();
        m["status"] = c.status;
      }
    }
    if (c.status != "ok") {
      m["reason"] = c.reason;
      rejected++;
    }
    records.push_back(std::move(m));
  }
  REMEX_RETURN_IF_ERROR(LogRound(plan, server, round, "nodes", incumbent, candidates, measured, rejected,
                                 winner ? &*winner : nullptr, std::move(records), result));
  if (winner) incumbent = *winner;
  *finished = true;
  return OkStatus();
}

Status Tuner::LogRound(const BucketPlan& plan, const std::string& server, int round, const char* phase,
                       const TunedChoices& incumbent, const std::vector<Candidate>& candidates, int measured,
                       int rejected, const TunedChoices* winner, std::vector<json> records, TuneBucket& result) {
  json r = Record("round", plan, server);
  r["round"] = round;
  r["phase"] = phase;
  r["incumbent"] = ToJson(incumbent);
  json all = json::array();
  for (const Candidate& c : candidates) all.push_back(ToJson(c.choice));
  r["candidates"] = all;
  r["measured"] = measured;
  r["rejected"] = rejected;
  r["winner"] = winner ? ToJson(*winner) : json(nullptr);
  records.push_back(std::move(r));
  REMEX_RETURN_IF_ERROR(Append(records));
  result.rounds = round;
  result.measured += measured;
  result.rejected += rejected;
  std::lock_guard<std::mutex> lock(mu_);
  measured_ += measured;
  rejected_ += rejected;
  return OkStatus();
}

Status Tuner::TuneOne(size_t index, Link& link) {
  const BucketPlan& plan = plans_[index];
  const std::string server = link.device.label;
  Replay replay;
  {
    std::lock_guard<std::mutex> lock(mu_);
    replay = ReplayLog(plan);
  }
  TuneBucket result;
  result.bucket = plan.name;
  result.shapes = plan.shapes;
  result.start = start_;
  result.choice = replay.incumbent;
  result.rounds = replay.rounds;
  result.measured = replay.measured;
  result.rejected = replay.rejected;
  result.server = server;
  if (replay.complete) {
    result.from_log = true;
    result.complete = true;
    const json& b = *replay.best;
    auto number = [&](const char* k) {
      return b.contains(k) && b[k].is_number() ? std::optional<double>(b[k].get<double>()) : std::nullopt;
    };
    if (number("ratio") && number("ratio_low") && number("ratio_high")) {
      result.ratio = number("ratio");
      result.ratio_low = number("ratio_low");
      result.ratio_high = number("ratio_high");
      result.beyond_noise = b.value("beyond_noise", false);
    }
    result.server = b.value("server", "");
    result.node_choices = static_cast<int>(result.choice.node_attrs.size());
    std::lock_guard<std::mutex> lock(mu_);
    results_[index] = result;
    return OkStatus();
  }
  if (BudgetSpent() || Interrupted()) {
    // Nothing measured: the replayed choice so far, not complete.
    if (!Interrupted()) {
      json best = Record("best", plan, server);
      best["choice"] = ToJson(result.choice);
      best["label"] = TunedChoicesText(result.choice, start_);
      best["complete"] = false;
      best["rounds"] = result.rounds;
      REMEX_RETURN_IF_ERROR(Append({best}));
    }
    result.node_choices = static_cast<int>(result.choice.node_attrs.size());
    std::lock_guard<std::mutex> lock(mu_);
    results_[index] = result;
    return OkStatus();
  }
  const std::string dir = tmp_ + "/bucket" + std::to_string(index);
  std::error_code fs_error;
  std::filesystem::create_directories(dir, fs_error);
  if (fs_error) return DataLoss("creating " + dir + ": " + fs_error.message());
  auto say = [&](const std::string& s) { Say(s.empty() ? "" : plan.name + ": " + s); };

  // The reference: the start in float32 on the CPU device, and its inputs.
  const std::string ref_dir = dir + "/reference";
  {
    say("computing the reference");
    TunedChoices ref_choice = start_;
    if (has_float16_ || ref_choice.dtype == DType::kFloat16) ref_choice.dtype = DType::kFloat32;
    REMEX_ASSIGN_OR_RETURN(std::string rmx, CompileCandidate(plan, ref_choice, dir + "/reference.rmx"));
    ModelRequest req = CandidateRequest(plan, rmx, "");
    RunOptions run;
    run.output_dir = ref_dir;
    run.save_inputs = true;
    Connection cpu;
    const bool on_target = device_ == "cpu";
    if (!on_target) {
      ServerOptions embedded;
      embedded.request_timeout = o_.request.server.request_timeout;
      REMEX_ASSIGN_OR_RETURN(cpu, Connect(embedded));
    }
    auto p = PrepareModelOn(req, on_target ? std::move(link.connection) : std::move(cpu));
    if (!p.ok()) return p.status().WithContext(plan.name + ": the reference");
    auto ran = RunModel(req, *p, run);  // frees what it made
    if (on_target) link.connection = std::move(p->connection);
    REMEX_RETURN_IF_ERROR(ran.status().WithContext(plan.name + ": the reference"));
  }

  TunedChoices incumbent = replay.incumbent;
  std::string incumbent_rmx;
  REMEX_ASSIGN_OR_RETURN(incumbent_rmx, CompileCandidate(plan, incumbent, dir + "/incumbent0.rmx"));
  std::set<std::string> tried = replay.tried;
  int round = replay.rounds;
  // A logged per-node round ends the descent: its winner carries node attributes that
  // another layout or dtype may not have.
  bool complete = replay.nodes_done;
  while (!complete) {
    if (Interrupted()) break;
    if (BudgetSpent()) break;
    // Every choice one axis away from the incumbent, not measured before.
    std::vector<Candidate> candidates;
    bool deferred = false;
    for (const TuningAxis& axis : space_) {
      if (FindNodeAxis(axis.key)) continue;  // the per-node phase's, below
      for (const std::string& value : axis.values) {
        TunedChoices c = incumbent;
        if (!SetTunedChoice(c, axis.key, value).ok() || tried.count(ToJson(c).dump())) continue;
        if (candidates.size() + 1 >= kMaxVariants) {
          deferred = true;  // the next round's
          continue;
        }
        tried.insert(ToJson(c).dump());
        candidates.push_back({c, TunedChoicesText(c, start_), "", "ok", ""});
      }
    }
    if (candidates.empty()) {
      complete = true;
      break;
    }
    ++round;
    // Compile each and check it on the device against the reference.
    for (size_t k = 0; k < candidates.size(); ++k) {
      Candidate& c = candidates[k];
      if (Interrupted()) break;
      say("round " + std::to_string(round) + ": checking " + c.label);
      REMEX_RETURN_IF_ERROR(
          CheckCandidate(plan, c, dir + "/r" + std::to_string(round) + "c" + std::to_string(k) + ".rmx", ref_dir,
                         link)
              .WithContext(plan.name));
    }
    if (Interrupted()) break;
    // The incumbent and every candidate that passed, interleaved.
    std::vector<VariantRequest> variants = {{"incumbent", CandidateRequest(plan, incumbent_rmx, ref_dir)}};
    std::vector<size_t> benched;
    for (size_t k = 0; k < candidates.size(); ++k) {
      if (candidates[k].status != "ok") continue;
      benched.push_back(k);
      variants.push_back({candidates[k].label, CandidateRequest(plan, candidates[k].rmx, ref_dir)});
    }
    std::vector<json> records;
    std::optional<size_t> winner;
    if (!benched.empty()) {
      if (!link.connection.session) {
        if (Status st = Reconnect(link); !st.ok()) return st.WithContext(plan.name);
      }
      say("round " + std::to_string(round) + ": benchmarking " + std::to_string(variants.size()) +
          " choices interleaved");
      // Each row's summary: the incumbent's first, each candidate's against it. With k
      // candidates, each comparison at confidence 1 - (1 - C) / k (Bonferroni): the
      // chance that any candidate of the round wins by noise alone stays under 1 - C.
      std::vector<std::optional<VariantSummary>> rows(variants.size());
      BenchOptions bench = o_.bench;
      bench.confidence = 1 - (1 - o_.bench.confidence) / static_cast<double>(variants.size() - 1);
      auto report = BenchVariantsOn(variants, bench, link.connection);
      if (report.ok()) {
        for (size_t v = 0; v < variants.size(); ++v) rows[v] = report->summary[v];
      } else {
        // One of them fails under repeated runs: each alone against the incumbent, the
        // ones that fail so rejected; an incumbent that fails with every one is an error.
        Status last = report.status();
        for (size_t v = 1; v < variants.size(); ++v) {
          if (!link.connection.session) {
            if (Status st = Reconnect(link); !st.ok()) return st.WithContext(plan.name);
          }
          auto pair = BenchVariantsOn({variants[0], variants[v]}, bench, link.connection);
          if (pair.ok()) {
            if (!rows[0]) rows[0] = pair->summary[0];
            rows[v] = pair->summary[1];
          } else {
            last = pair.status();
            Candidate& c = candidates[benched[v - 1]];
            c.status = "rejected";
            c.reason = "benchmark: " + pair.status().ToString();
          }
        }
        if (!rows[0]) return last.WithContext(plan.name + ", round " + std::to_string(round));
      }
      for (size_t v = 0; v < variants.size(); ++v) {
        if (!rows[v]) continue;
        const VariantSummary& s = *rows[v];
        json m = Record("measure", plan, server);
        m["round"] = round;
        m["choice"] = ToJson(v == 0 ? incumbent : candidates[benched[v - 1]].choice);
        m["label"] = v == 0 ? TunedChoicesText(incumbent, start_) : variants[v].label;
        m["incumbent"] = v == 0;
        m["status"] = "ok";
        m["median_ms"] = s.median.value;
        m["median_low_ms"] = s.median.bounded ? json(s.median.lower) : json(nullptr);
        m["median_high_ms"] = s.median.bounded ? json(s.median.upper) : json(nullptr);
        m["samples"] = s.samples_ms.size();
        if (s.vs_first) {
          m["ratio"] = s.vs_first->ratio;
          m["ratio_low"] = s.vs_first->ratio_low;
          m["ratio_high"] = s.vs_first->ratio_high;
          m["p_value"] = s.vs_first->p_value;
          m["beyond_noise"] = s.vs_first->beyond_noise;
          m["confidence"] = bench.confidence;
          if (s.vs_first->beyond_noise && s.vs_first->ratio < 1 &&
              (!winner || s.vs_first->ratio < rows[*winner + 1]->vs_first->ratio)) {
            winner = v - 1;
          }
        }
        records.push_back(std::move(m));
      }
    }
    int rejected = 0;
    for (const Candidate& c : candidates) rejected += c.status == "ok" ? 0 : 1;
    const int measured = static_cast<int>(candidates.size()) - rejected;
    for (const Candidate& c : candidates) {
      if (c.status == "ok") continue;
      json m = Record("measure", plan, server);
      m["round"] = round;
      m["choice"] = ToJson(c.choice);
      m["label"] = c.label;
      m["incumbent"] = false;
      m["status"] = "rejected";
      m["reason"] = c.reason;
      records.push_back(std::move(m));
    }
    const Candidate* won = winner ? &candidates[benched[*winner]] : nullptr;
    REMEX_RETURN_IF_ERROR(LogRound(plan, server, round, "descent", incumbent, candidates, measured, rejected,
                                   won ? &won->choice : nullptr, std::move(records), result));
    if (!won) {
      if (deferred) continue;  // the candidates past kMaxVariants, against the same incumbent
      complete = true;
      break;
    }
    incumbent = won->choice;
    incumbent_rmx = won->rmx;
  }

  bool node_axes = false;
  for (const TuningAxis& axis : space_) node_axes = node_axes || FindNodeAxis(axis.key) != nullptr;
  if (complete && node_axes && !replay.nodes_done) {
    // Not complete until the per-node phase is: a budget or a signal before or in it
    // leaves it to the next run.
    bool finished = false;
    if (!Interrupted() && !BudgetSpent()) {
      REMEX_RETURN_IF_ERROR(
          TuneNodes(plan, dir, ref_dir, server, link, incumbent, incumbent_rmx, round, result, &finished)
              .WithContext(plan.name + ", per node"));
    }
    complete = finished;
  }

  // The choice against the start, side by side.
  json best = Record("best", plan, server);
  if (!(incumbent == start_) && complete && !Interrupted()) {
    const std::string label = TunedChoicesText(incumbent, start_);
    say("confirming " + label + " against the start");
    auto start_rmx = CompileCandidate(plan, start_, dir + "/start.rmx");
    if (!start_rmx.ok()) return start_rmx.status().WithContext(plan.name);
    if (!link.connection.session) {
      if (Status st = Reconnect(link); !st.ok()) return st.WithContext(plan.name);
    }
    std::vector<VariantRequest> pair = {{"start", CandidateRequest(plan, *start_rmx, ref_dir)},
                                        {label, CandidateRequest(plan, incumbent_rmx, ref_dir)}};
    auto report = BenchVariantsOn(pair, o_.bench, link.connection);
    if (report.ok()) {
      const SampleComparison& c = *report->summary[1].vs_first;
      result.ratio = c.ratio;
      result.ratio_low = c.ratio_low;
      result.ratio_high = c.ratio_high;
      result.beyond_noise = c.beyond_noise;
      best["ratio"] = c.ratio;
      best["ratio_low"] = c.ratio_low;
      best["ratio_high"] = c.ratio_high;
      best["p_value"] = c.p_value;
      best["beyond_noise"] = c.beyond_noise;
      best["start_median_ms"] = report->summary[0].median.value;
      best["median_ms"] = report->summary[1].median.value;
      if (c.beyond_noise && c.ratio > 1) {
        // Slower than the start, side by side: the rounds' gains did not add up (each
        // was judged against its own incumbent). The start stays.
        best["reverted"] = TunedChoicesText(incumbent, start_);
        incumbent = start_;
      }
    } else {
      best["confirm_error"] = report.status().ToString();  // the choice stands, unconfirmed
    }
  }
  result.choice = incumbent;
  result.complete = complete;
  result.node_choices = static_cast<int>(incumbent.node_attrs.size());
  best["choice"] = ToJson(incumbent);
  best["label"] = TunedChoicesText(incumbent, start_);
  best["complete"] = complete;
  best["rounds"] = result.rounds;
  if (!Interrupted()) REMEX_RETURN_IF_ERROR(Append({best}));
  say("");
  std::filesystem::remove_all(dir, fs_error);
  std::lock_guard<std::mutex> lock(mu_);
  results_[index] = result;
  return OkStatus();
}

Status Tuner::Worker(Connection first) {
  // The device outlives every session the worker opens to it: a session closed by an
  // error is reopened to the same device, under the same lease.
  Link link;
  link.device.label = first.server;
  link.device.options = o_.request.server;
  link.device.options.farm.reset();
  if (first.lease) {
    link.device.options.address = first.lease->lease().device_id;
    link.device.options.token = first.lease->lease().token;
  }
  if (first.embedded) {
    link.device.options.address = "127.0.0.1:" + std::to_string(first.embedded->port());
    link.device.options.token.clear();
    link.device.options.tls.reset();
  }
  link.device.lease = std::move(first.lease);
  link.device.embedded = std::move(first.embedded);
  link.connection = std::move(first);
  {
    std::lock_guard<std::mutex> lock(mu_);
    servers_.insert(link.device.label);
  }
  for (;;) {
    size_t index;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (next_ >= plans_.size() || Interrupted()) break;
      index = next_++;
    }
    if (!link.connection.session) REMEX_RETURN_IF_ERROR(Reconnect(link));
    REMEX_RETURN_IF_ERROR(TuneOne(index, link));
  }
  link.connection = Connection();  // the session before the lease and the server
  return OkStatus();
}

StatusOr<TuneReport> Tuner::Run() {
  const auto t0 = Clock::now();
  const std::string& model = o_.request.model;
  if (model.size() < 5 || model.substr(model.size() - 5) != ".onnx")
    return InvalidArgument("remex tune takes an .onnx model, got '" + model + "'");
  if (o_.log_path.empty()) return InvalidArgument("--log: the tuning log's path is required");
  if (!(o_.budget_s >= 0) || !std::isfinite(o_.budget_s) || o_.budget_s > 1e9) {
    return InvalidArgument("--budget-s must be a number of seconds >= 0");
  }
  deadline_ = t0 + std::chrono::milliseconds(static_cast<int64_t>(o_.budget_s * 1000));
  REMEX_RETURN_IF_ERROR(CheckBenchOptions(o_.bench));
  if (o_.bench.load) return InvalidArgument("remex tune runs the time evaluator: --scenario does not apply");
  for (double t : {o_.rtol, o_.atol, o_.float16_rtol, o_.float16_atol}) {
    if (!(t >= 0) || t > 1e6) return InvalidArgument("tolerances must be finite and >= 0");
  }
  space_ = o_.space;
  {
    // The space as ParseTuningSpace checks it (a caller may have built it by hand).
    std::vector<std::string> specs;
    for (const TuningAxis& axis : space_) {
      std::string values;
      for (const std::string& v : axis.values) values += (values.empty() ? "" : ",") + v;
      specs.push_back(axis.key + "=" + values);
    }
    REMEX_RETURN_IF_ERROR(ParseTuningSpace(specs).status());
  }
  if (!o_.output_path.empty()) REMEX_RETURN_IF_ERROR(EnsureWritableFile(o_.output_path, "the tuned executable"));
  REMEX_ASSIGN_OR_RETURN(std::vector<std::byte> model_bytes, ReadFileBytes(model));
  model_hash_ = ContentHash(model_bytes);
  REMEX_ASSIGN_OR_RETURN(log_, ReadTuningLog(o_.log_path));
  REMEX_RETURN_IF_ERROR(EnsureWritableFile(o_.log_path, "the tuning log"));

  // The first device: its fingerprint and kind settle the start and the space.
  Say("connecting");
  REMEX_ASSIGN_OR_RETURN(Connection first, Connect(o_.request.server));
  fingerprint_ = TuningFingerprint(first.session->server_info());
  const auto& devices = first.session->server_info().devices;
  device_ = devices.empty() ? "" : devices[0].name;
  if (space_.empty()) space_ = DefaultTuningSpace(device_);
  for (const TuningAxis& axis : space_) {
    const NodeAxis* node_axis = FindNodeAxis(axis.key);
    if (node_axis && node_axis->cpu != (device_ == "cpu")) {
      return InvalidArgument("--space " + axis.key + ": the " + device_ + " device's kernels do not take " +
                             node_axis->attr + " (" + (node_axis->cpu ? "the cpu device's" : "a cuda device's") +
                             " do)");
    }
  }

  // The start options, compiled whole once: they are checked, their symbols resolved,
  // and the buckets listed.
  Say("compiling " + std::filesystem::path(model).filename().string());
  compiler::CompileOptions given = o_.request.compile;
  given.bucket_choices.clear();
  given.strict_dispatch = false;
  REMEX_ASSIGN_OR_RETURN(CompileReport whole, CompileModel(model, given));
  has_float16_ = whole.traits.has_float16;
  resolved_ = whole.options;
  // The choices the options leave open, made for this device (CompileForDevice).
  const DeviceCompile for_device =
      CompileForDevice(devices.empty() ? nullptr : &devices[0], whole.traits, given);
  resolved_.dtype = for_device.options.dtype;
  resolved_.layout = for_device.options.layout;
  resolved_.nhwc_pooling = for_device.options.nhwc_pooling;
  resolved_.fuse_attention = for_device.options.fuse_attention;
  start_ = ChoicesOf(resolved_);
  const vm::FunctionDef& signature = whole.executable.functions.at(0);
  std::map<std::string, compiler::DimBounds> bounds;
  for (const vm::SymbolDef& s : whole.executable.symbols) bounds[s.name] = {s.min, s.max};
  std::vector<compiler::Bucket> buckets;
  if (!resolved_.dispatch.empty()) {
    REMEX_ASSIGN_OR_RETURN(buckets, compiler::MakeBucketGrid(resolved_.dispatch, bounds));
  } else {
    buckets.push_back({});  // the one function
  }
  for (const compiler::Bucket& b : buckets) {
    BucketPlan plan;
    plan.name = b.dims.empty() ? signature.name : b.FunctionName(signature.name);
    plan.options = resolved_;
    plan.options.dispatch.clear();
    for (const compiler::BucketDim& d : b.dims) {
      plan.options.bounds[d.symbol] = {d.min, d.max};
      compiler::DispatchSpec spec;
      spec.symbol = d.symbol;
      spec.kind = compiler::DispatchSpec::Kind::kEdges;
      spec.edges = {d.max};
      plan.options.dispatch.push_back(spec);
    }
    plan.options.strict_dispatch = !b.dims.empty();
    for (const vm::ValueDesc& in : signature.inputs) {
      if (in.kind != vm::ValueKind::kTensor || !in.rank_known) {
        return InvalidArgument("remex tune: input '" + in.name + "' is not a tensor of known rank");
      }
      Shape s = in.shape;
      for (size_t k = 0; k < s.size(); ++k) {
        if (s[k] >= 0) continue;
        const std::string symbol = k < in.dims.size() ? in.dims[k] : "";
        int64_t v = 1;
        if (auto it = bounds.find(symbol); it != bounds.end()) v = std::max<int64_t>(1, it->second.min);
        for (const compiler::BucketDim& d : b.dims) {
          if (d.symbol == symbol) v = d.max;
        }
        s[k] = v;
      }
      plan.shapes[in.name] = s;
    }
    plans_.push_back(std::move(plan));
  }
  for (const BucketPlan& plan : plans_) {
    TuneBucket b;  // what a bucket no worker reached reports (a signal)
    b.bucket = plan.name;
    b.shapes = plan.shapes;
    b.start = b.choice = start_;
    results_.push_back(std::move(b));
  }

  char tmpl[] = "/tmp/remex-tune-XXXXXX";
  if (!mkdtemp(tmpl)) return DataLoss("creating a temporary folder for the candidates");
  tmp_ = tmpl;
  struct Cleanup {
    std::string dir;
    ~Cleanup() {
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
    }
  } cleanup{tmp_};

  // One worker per device: with a farm, as many leases as buckets and matching devices.
  size_t workers = 1;
  if (o_.request.server.farm) {
    const FarmLeaseOptions& f = *o_.request.server.farm;
    auto status = FarmStatus(f.url, std::chrono::milliseconds(10000), f.selector);
    if (status.ok()) {
      size_t usable = 0;
      for (const auto& d : status->devices) {
        if (d.pool == f.pool && d.state != farm::DeviceState::kQuarantined && d.state != farm::DeviceState::kDraining) usable++;
      }
      workers = std::max<size_t>(1, std::min(usable, plans_.size()));
      if (o_.max_devices > 0) workers = std::min(workers, static_cast<size_t>(o_.max_devices));
    }
  }
  std::vector<Status> statuses(workers, OkStatus());
  std::vector<std::thread> threads;
  std::mutex first_mu;
  for (size_t w = 0; w < workers; ++w) {
    threads.emplace_back([&, w] {
      Connection c;
      if (w == 0) {
        c = std::move(first);
      } else {
        auto more = Connect(o_.request.server);
        if (!more.ok()) return;  // fewer devices free than listed: the others share the queue
        if (TuningFingerprint(more->session->server_info()) != fingerprint_) return;  // released
        c = std::move(more).value();
      }
      statuses[w] = Worker(std::move(c));
    });
  }
  for (auto& t : threads) t.join();
  Say("");
  for (const Status& st : statuses) REMEX_RETURN_IF_ERROR(st);

  TuneReport report;
  report.model = model;
  report.model_hash = model_hash_;
  report.fingerprint = fingerprint_;
  report.servers.assign(servers_.begin(), servers_.end());
  report.space = space_;
  report.buckets = results_;
  report.measured = measured_;
  report.rejected = rejected_;
  report.log = o_.log_path;
  report.log_skipped_lines = log_.skipped_lines;
  if (Interrupted()) {
    report.stopped = "interrupted by signal " + std::to_string(o_.bench.interrupt->load());
  } else {
    for (const TuneBucket& b : results_) {
      if (!b.complete) report.stopped = "budget";
    }
  }
  if (!o_.output_path.empty() && !Interrupted()) {
    Say("compiling the tuned executable");
    // Each bucket's choice as this run reports it (what `remex compile --tuning-log`
    // also takes, the log's latest record of each bucket being this run's).
    compiler::CompileOptions final_options = o_.request.compile;
    for (size_t i = 0; i < plans_.size(); ++i) final_options.bucket_choices[plans_[i].name] = results_[i].choice;
    auto compiled = CompileModel(model, final_options);
    Say("");
    if (!compiled.ok()) return compiled.status().WithContext("the tuned executable");
    REMEX_RETURN_IF_ERROR(WriteFileBytes(o_.output_path, compiled->bytes));
    report.output = o_.output_path;
    report.output_hash = ContentHash(compiled->bytes);
  }
  report.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return report;
}

}  // namespace

Status ApplyTuningLogFile(const std::string& log_path, const std::string& model_path, const std::string& fingerprint,
                          compiler::CompileOptions& options, std::string* used) {
  REMEX_ASSIGN_OR_RETURN(TuningLog log, ReadTuningLog(log_path));
  REMEX_ASSIGN_OR_RETURN(std::vector<std::byte> bytes, ReadFileBytes(model_path));
  auto choices = TunedChoicesFromLog(log, ContentHash(bytes), fingerprint, used);
  if (!choices.ok()) return choices.status().WithContext("the tuning log " + log_path);
  options.bucket_choices = std::move(choices).value();
  return OkStatus();
}

StatusOr<TuneReport> Tune(const TuneOptions& options, const ProgressFn& progress) {
  Tuner tuner(options, progress);
  return tuner.Run();
}

json ToJson(const TuneReport& r) {
  json space = json::object();
  for (const TuningAxis& a : r.space) space[a.key] = a.values;
  json buckets = json::array();
  for (const TuneBucket& b : r.buckets) {
    auto opt = [](const std::optional<double>& v) { return v ? json(*v) : json(nullptr); };
    buckets.push_back({{"bucket", b.bucket},
                       {"shapes", ShapesJson(b.shapes)},
                       {"start", ToJson(b.start)},
                       {"choice", ToJson(b.choice)},
                       {"label", TunedChoicesText(b.choice, b.start)},
                       {"ratio", opt(b.ratio)},
                       {"ratio_low", opt(b.ratio_low)},
                       {"ratio_high", opt(b.ratio_high)},
                       {"beyond_noise", b.beyond_noise},
                       {"rounds", b.rounds},
                       {"measured", b.measured},
                       {"rejected", b.rejected},
                       {"node_choices", b.node_choices},
                       {"from_log", b.from_log},
                       {"complete", b.complete},
                       {"server", b.server}});
  }
  return {{"schema", kTuneSchema},
          {"schema_version", kTuneSchemaVersion},
          {"model", r.model},
          {"model_hash", r.model_hash},
          {"fingerprint", r.fingerprint},
          {"servers", r.servers},
          {"space", space},
          {"buckets", buckets},
          {"measured", r.measured},
          {"rejected", r.rejected},
          {"output", r.output.empty() ? json(nullptr) : json(r.output)},
          {"output_hash", r.output_hash.empty() ? json(nullptr) : json(r.output_hash)},
          {"log", r.log},
          {"log_skipped_lines", r.log_skipped_lines},
          {"stopped", r.stopped.empty() ? json(nullptr) : json(r.stopped)},
          {"seconds", r.seconds}};
}

std::string TuneText(const TuneReport& r) {
  std::string out = "tuned " + std::filesystem::path(r.model).filename().string() + " on " + r.fingerprint + " (" +
                    std::to_string(r.servers.size()) + (r.servers.size() == 1 ? " server" : " servers") + ")\n";
  std::vector<std::vector<std::string>> rows = {{"bucket", "shapes", "choice", "vs start", "rounds", "measured"}};
  for (const TuneBucket& b : r.buckets) {
    std::string shapes;
    for (const auto& [name, s] : b.shapes) shapes += (shapes.empty() ? "" : " ") + name + "=" + DimsText(s);
    std::string vs = "-";
    if (b.ratio) {
      char buf[96];
      std::snprintf(buf, sizeof buf, "%.3fx [%.3f, %.3f]%s", *b.ratio, *b.ratio_low, *b.ratio_high,
                    b.beyond_noise ? "" : " (within noise)");
      vs = buf;
    }
    std::string rounds = std::to_string(b.rounds) + (b.from_log ? " (log)" : b.complete ? "" : " (stopped)");
    rows.push_back({b.bucket, shapes, TunedChoicesText(b.choice, b.start), vs, rounds,
                    std::to_string(b.measured) + (b.rejected ? " +" + std::to_string(b.rejected) + " rejected" : "")});
  }
  out += FormatTable(rows, "  ", 2, 6);
  out += std::to_string(r.measured) + " candidates measured, " + std::to_string(r.rejected) + " rejected; log " + r.log;
  if (r.log_skipped_lines) out += " (" + std::to_string(r.log_skipped_lines) + " unreadable lines skipped)";
  out += "\n";
  if (!r.output.empty()) out += "wrote " + r.output + " (" + r.output_hash + ")\n";
  if (r.stopped == "budget") out += "the budget ran out: run the same command again to go on from the log\n";
  else if (!r.stopped.empty()) out += r.stopped + ": nothing written; run the same command again to go on from the log\n";
  return out;
}

}  // namespace remex::tooling
