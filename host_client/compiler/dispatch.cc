#include "host_client/compiler/dispatch.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstring>
#include <set>

#ifndef XXH_INLINE_ALL
#define XXH_INLINE_ALL
#endif
#include <xxhash.h>

#include "host_client/compiler/compiler.h"

namespace remex::compiler {
namespace {

std::vector<std::string_view> Split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (true) {
    size_t end = s.find(sep, start);
    out.push_back(s.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  return out;
}

StatusOr<int64_t> ParseInt(std::string_view text, std::string_view spec, const char* what) {
  int64_t v = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || ptr != text.data() + text.size() || v < 0) {
    return InvalidArgument("--dispatch '" + std::string(spec) + "': " + what + " '" + std::string(text) +
                           "' is not a non-negative integer");
  }
  return v;
}

std::string RangeText(int64_t lo, int64_t hi) {
  return lo == hi ? std::to_string(lo) : std::to_string(lo) + ".." + std::to_string(hi);
}

}  // namespace

StatusOr<DispatchSpec> ParseDispatchSpec(std::string_view text) {
  const std::string usage = "--dispatch '" + std::string(text) +
                            "' is not SYMBOL=log:BASE[:MIN:MAX], SYMBOL=uniform:STEP[:MIN:MAX] or "
                            "SYMBOL=edges:E1,E2,...";
  size_t eq = text.rfind('=');
  if (eq == std::string_view::npos || eq == 0) return InvalidArgument(usage);
  DispatchSpec spec;
  spec.symbol = std::string(text.substr(0, eq));
  std::vector<std::string_view> parts = Split(text.substr(eq + 1), ':');
  const std::string_view kind = parts[0];
  if (kind == "edges") {
    spec.kind = DispatchSpec::Kind::kEdges;
    if (parts.size() != 2 || parts[1].empty()) return InvalidArgument(usage);
    for (std::string_view e : Split(parts[1], ',')) {
      REMEX_ASSIGN_OR_RETURN(int64_t v, ParseInt(e, text, "edge"));
      if (!spec.edges.empty() && v <= spec.edges.back()) {
        return InvalidArgument("--dispatch '" + std::string(text) + "': edges must increase");
      }
      spec.edges.push_back(v);
    }
    return spec;
  }
  if (kind != "log" && kind != "uniform") return InvalidArgument(usage);
  if (parts.size() != 2 && parts.size() != 4) return InvalidArgument(usage);
  if (kind == "log") {
    spec.kind = DispatchSpec::Kind::kLogarithmic;
    REMEX_ASSIGN_OR_RETURN(spec.base, ParseInt(parts[1], text, "base"));
    if (spec.base < 2) return InvalidArgument("--dispatch '" + std::string(text) + "': the base must be >= 2");
  } else {
    spec.kind = DispatchSpec::Kind::kUniform;
    REMEX_ASSIGN_OR_RETURN(spec.step, ParseInt(parts[1], text, "step"));
    if (spec.step < 1) return InvalidArgument("--dispatch '" + std::string(text) + "': the step must be >= 1");
  }
  if (parts.size() == 4) {
    REMEX_ASSIGN_OR_RETURN(spec.min, ParseInt(parts[2], text, "MIN"));
    REMEX_ASSIGN_OR_RETURN(spec.max, ParseInt(parts[3], text, "MAX"));
    if (spec.max < spec.min) return InvalidArgument("--dispatch '" + std::string(text) + "': MAX is below MIN");
    if (spec.kind == DispatchSpec::Kind::kLogarithmic && spec.min < 1) {
      return InvalidArgument("--dispatch '" + std::string(text) + "': a logarithmic MIN must be >= 1");
    }
  }
  return spec;
}

std::string Bucket::FunctionName(const std::string& base) const {
  std::string name = base + "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) name += ",";
    name += dims[i].symbol + "=" + RangeText(dims[i].min, dims[i].max);
  }
  return name + "]";
}

StatusOr<std::vector<std::pair<int64_t, int64_t>>> BucketRanges(const DispatchSpec& spec, DimBounds bounds) {
  std::vector<int64_t> edges = spec.edges;
  if (spec.kind != DispatchSpec::Kind::kEdges) {
    int64_t lo = spec.min >= 0 ? spec.min : bounds.min;
    int64_t hi = spec.max >= 0 ? spec.max : bounds.max;
    if (hi < 0) {
      return InvalidArgument("--dispatch for '" + spec.symbol + "' needs MIN:MAX or an upper bound (--bound " +
                             spec.symbol + "=MIN:MAX)");
    }
    int64_t first = std::max<int64_t>(lo, 1);
    if (spec.kind == DispatchSpec::Kind::kUniform) first = (first + spec.step - 1) / spec.step * spec.step;
    for (int64_t e = first;;) {
      edges.push_back(e);
      if (e >= hi) break;
      e = spec.kind == DispatchSpec::Kind::kLogarithmic ? e * spec.base : e + spec.step;
    }
  }
  std::vector<std::pair<int64_t, int64_t>> ranges;
  int64_t lo = bounds.min;
  for (int64_t e : edges) {
    int64_t hi = bounds.max >= 0 ? std::min(e, bounds.max) : e;
    if (hi >= lo) ranges.emplace_back(lo, hi);
    lo = std::max(lo, e + 1);
    if (bounds.max >= 0 && lo > bounds.max) break;
  }
  if (ranges.empty()) {
    return InvalidArgument("--dispatch for '" + spec.symbol + "' leaves no bucket inside its bounds [" +
                           std::to_string(bounds.min) + ", " +
                           (bounds.max >= 0 ? std::to_string(bounds.max) : std::string("inf")) + "]");
  }
  return ranges;
}

StatusOr<std::vector<Bucket>> MakeBucketGrid(const std::vector<DispatchSpec>& specs,
                                             const std::map<std::string, DimBounds>& bounds, size_t max_buckets) {
  std::vector<Bucket> grid(1);
  std::set<std::string> seen;
  for (const DispatchSpec& spec : specs) {
    if (!seen.insert(spec.symbol).second) {
      return InvalidArgument("--dispatch names '" + spec.symbol + "' twice");
    }
    auto b = bounds.find(spec.symbol);
    REMEX_ASSIGN_OR_RETURN(auto ranges, BucketRanges(spec, b != bounds.end() ? b->second : DimBounds{}));
    if (grid.size() * ranges.size() > max_buckets) {
      return InvalidArgument("--dispatch makes more than " + std::to_string(max_buckets) + " buckets");
    }
    std::vector<Bucket> next;
    for (const Bucket& cell : grid) {
      for (const auto& [lo, hi] : ranges) {
        Bucket c = cell;
        c.dims.push_back({spec.symbol, lo, hi});
        next.push_back(std::move(c));
      }
    }
    grid = std::move(next);
  }
  return grid;
}

namespace {

// Appends functions of separately compiled executables into one, remapping their
// kernel and constant indices; constants equal in dtype, shape and bytes are stored
// once, and only constants a function loads are kept.
class Linker {
 public:
  explicit Linker(vm::ExecutableDef& out) : out_(out) {}

  size_t Add(vm::ExecutableDef part, std::string name) {
    std::vector<int64_t> constant_map(part.constants.size(), -1);
    const int64_t kernel_base = static_cast<int64_t>(out_.kernels.size());
    for (auto& k : part.kernels) out_.kernels.push_back(std::move(k));
    vm::FunctionDef fn = std::move(part.functions[0]);
    fn.name = std::move(name);
    for (vm::Instruction& inst : fn.code) {
      if (inst.op == vm::Opcode::kLoadConst) {
        int64_t& c = constant_map[inst.scalars[1]];
        if (c < 0) {
          unshared_bytes_ += part.constants[inst.scalars[1]].data.size();
          c = Intern(std::move(part.constants[inst.scalars[1]]));
        }
        inst.scalars[1] = c;
      } else if (inst.op == vm::Opcode::kInvokeKernel || inst.op == vm::Opcode::kInvokeShapeFunc) {
        inst.scalars[0] += kernel_base;
      }
    }
    out_.functions.push_back(std::move(fn));
    return out_.functions.size() - 1;
  }

  uint64_t unshared_bytes() const { return unshared_bytes_; }

 private:
  int64_t Intern(vm::ConstantDef c) {
    XXH64_hash_t h = XXH3_64bits(c.data.data(), c.data.size());
    h ^= static_cast<XXH64_hash_t>(c.dtype) * 0x9E3779B97F4A7C15ull;
    for (int64_t d : c.shape) h = h * 31 + static_cast<XXH64_hash_t>(d);
    for (int64_t i : index_[h]) {
      const vm::ConstantDef& o = out_.constants[i];
      if (o.dtype == c.dtype && o.shape == c.shape && o.data == c.data) return i;
    }
    out_.constants.push_back(std::move(c));
    int64_t i = static_cast<int64_t>(out_.constants.size() - 1);
    index_[h].push_back(i);
    return i;
  }

  vm::ExecutableDef& out_;
  std::map<XXH64_hash_t, std::vector<int64_t>> index_;
  uint64_t unshared_bytes_ = 0;
};

// Where each symbol can be read at run time: the first input dim it names.
struct SymbolSite {
  int64_t input = -1;
  int64_t axis = -1;
};

}  // namespace

StatusOr<vm::ExecutableDef> CompileDispatched(const Graph& graph, const kernels::KernelRegistry& registry,
                                              const CompileOptions& options, CompileStats* stats) {
  const auto start = std::chrono::steady_clock::now();
  CompileOptions base = options;
  base.dispatch.clear();
  base.strict_dispatch = false;

  // The generic function fixes the signature and the symbols with their bounds.
  CompileStats generic_stats;
  REMEX_ASSIGN_OR_RETURN(vm::ExecutableDef generic, CompileGraph(graph, registry, base, &generic_stats));
  const vm::FunctionDef signature = generic.functions[0];
  std::map<std::string, DimBounds> bounds;
  for (const vm::SymbolDef& s : generic.symbols) bounds[s.name] = {s.min, s.max};
  std::map<std::string, SymbolSite> sites;
  for (size_t i = 0; i < signature.inputs.size(); ++i) {
    const auto& dims = signature.inputs[i].dims;
    for (size_t d = 0; d < dims.size(); ++d) {
      if (!dims[d].empty() && !sites.count(dims[d])) {
        sites[dims[d]] = {static_cast<int64_t>(i), static_cast<int64_t>(d)};
      }
    }
  }
  for (const DispatchSpec& spec : options.dispatch) {
    if (!sites.count(spec.symbol)) {
      std::string names;
      for (const auto& [name, site] : sites) names += (names.empty() ? "" : ", ") + name;
      return InvalidArgument("--dispatch names '" + spec.symbol + "', which is no symbolic input dimension (the model's: " +
                             (names.empty() ? std::string("none") : names) + ")");
    }
  }
  REMEX_ASSIGN_OR_RETURN(std::vector<Bucket> buckets, MakeBucketGrid(options.dispatch, bounds));

  vm::ExecutableDef out;
  out.producer = generic.producer;
  out.symbols = generic.symbols;
  if (options.strict_dispatch) {
    // The buckets' span becomes the symbols' bounds: the VM refuses the rest.
    for (vm::SymbolDef& s : out.symbols) {
      bool dispatched = false;
      int64_t lo = 0, hi = 0;
      for (const Bucket& b : buckets) {
        for (const BucketDim& d : b.dims) {
          if (d.symbol != s.name) continue;
          lo = dispatched ? std::min(lo, d.min) : d.min;
          hi = dispatched ? std::max(hi, d.max) : d.max;
          dispatched = true;
        }
      }
      if (dispatched) {
        s.min = lo;
        s.max = hi;
      }
    }
  }
  vm::FunctionDef dispatcher;
  dispatcher.name = signature.name;
  dispatcher.inputs = signature.inputs;
  dispatcher.outputs = signature.outputs;
  dispatcher.num_registers = static_cast<int32_t>(signature.inputs.size());
  out.functions.push_back(dispatcher);  // filled in below, once the clones have indices
  Linker linker(out);
  // The graph-level figures (folding, fusion, layout, precision, transposes) are the
  // generic compile's; the executable-level ones are recounted below.
  CompileStats local = generic_stats;
  local.buckets = static_cast<int>(buckets.size());
  local.functions = {FunctionStats{}};
  local.memory = {};
  local.host_kernels = local.runtime_shape_functions = 0;
  local.constant_bytes = 0;

  std::vector<size_t> clone_index;
  for (const Bucket& bucket : buckets) {
    Graph g = graph;
    CompileOptions o = base;
    o.plan_memory = true;
    for (const BucketDim& d : bucket.dims) {
      if (d.min == d.max) {
        // A single size: the dim becomes static, and so does everything derived from it.
        o.bounds.erase(d.symbol);
        for (int in : g.inputs) {
          Value& v = g.values[in];
          for (size_t k = 0; k < v.shape.size() && k < v.dims.size(); ++k) {
            if (v.shape[k] < 0 && v.dims[k] == d.symbol) {
              v.shape[k] = d.min;
              v.dims[k].clear();
            }
          }
        }
      } else {
        o.bounds[d.symbol] = {d.min, d.max};
      }
    }
    CompileStats clone_stats;
    auto def = CompileGraph(std::move(g), registry, o, &clone_stats);
    if (!def.ok()) return def.status().WithContext("bucket " + bucket.FunctionName(signature.name));
    FunctionStats fs = clone_stats.functions[0];
    fs.role = "bucket";
    clone_index.push_back(linker.Add(std::move(def).value(), bucket.FunctionName(signature.name)));
    fs.name = out.functions.back().name;
    fs.memory = clone_stats.memory;
    local.functions.push_back(fs);
  }
  size_t generic_index = 0;
  if (!options.strict_dispatch) {
    FunctionStats fs = generic_stats.functions[0];
    generic_index = linker.Add(std::move(generic), signature.name + ".generic");
    fs.name = out.functions.back().name;
    local.functions.push_back(fs);
  }

  // The dispatcher: per bucket, a test of each dispatched dim that does not span its
  // symbol's whole range, then the TailCall; the generic function last.
  std::vector<int64_t> args(signature.inputs.size());
  for (size_t i = 0; i < args.size(); ++i) args[i] = static_cast<int64_t>(i);
  std::vector<vm::Instruction>& code = out.functions[0].code;
  for (size_t b = 0; b < buckets.size(); ++b) {
    const bool last_strict = options.strict_dispatch && b + 1 == buckets.size();
    std::vector<size_t> tests;
    for (const BucketDim& d : buckets[b].dims) {
      const DimBounds& sb = bounds[d.symbol];
      if (last_strict || (d.min <= sb.min && sb.max >= 0 && d.max >= sb.max)) continue;
      const SymbolSite& site = sites[d.symbol];
      tests.push_back(code.size());
      code.push_back({vm::Opcode::kIfDimIn, {site.input, site.axis, d.min, d.max, 0}, {}});
    }
    code.push_back({vm::Opcode::kTailCall, {static_cast<int64_t>(clone_index[b])}, {args}});
    for (size_t t : tests) code[t].scalars[4] = static_cast<int64_t>(code.size());
  }
  if (!options.strict_dispatch) {
    code.push_back({vm::Opcode::kTailCall, {static_cast<int64_t>(generic_index)}, {args}});
  }

  REMEX_ASSIGN_OR_RETURN(local.functions[0], DescribeFunction(out, 0, "dispatcher"));
  local.kernels = static_cast<int>(out.kernels.size());
  for (const auto& k : out.kernels) local.host_kernels += k.host ? 1 : 0;
  for (const auto& f : local.functions) local.runtime_shape_functions += f.runtime_shape_functions;
  for (const auto& c : out.constants) local.constant_bytes += c.data.size();
  local.constant_bytes_unshared = linker.unshared_bytes();
  local.compile_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (stats) *stats = local;
  return out;
}

}  // namespace remex::compiler
