// Shape-bucket dispatch (see dispatch.h).
#include "host_client/compiler/dispatch.h"

#include <algorithm>
#include <chrono>

#include "host_client/compiler/bytecode/link.h"
#include "host_client/compiler/pipeline.h"

namespace remex::compiler {
namespace {

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
  base.bucket_choices.clear();

  // The generic function fixes the signature and the symbols with their bounds.
  CompileStats generic_stats;
  REMEX_ASSIGN_OR_RETURN(vm::ExecutableDef generic, CompileFunction(graph, registry, base, &generic_stats));
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
  for (const auto& [name, choices] : options.bucket_choices) {
    bool found = false;
    for (const Bucket& b : buckets) found = found || b.FunctionName(signature.name) == name;
    if (!found) {
      std::string names;
      for (const Bucket& b : buckets) names += (names.empty() ? "" : ", ") + b.FunctionName(signature.name);
      return InvalidArgument("tuned choices for '" + name + "', which is no bucket of this --dispatch (its buckets: " +
                             names + ")");
    }
  }

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
    if (auto it = options.bucket_choices.find(bucket.FunctionName(signature.name)); it != options.bucket_choices.end()) {
      ApplyChoices(it->second, o);
    }
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
    auto def = CompileFunction(std::move(g), registry, o, &clone_stats);
    if (!def.ok()) return def.status().WithContext("bucket " + bucket.FunctionName(signature.name));
    FunctionStats fs = clone_stats.functions[0];
    fs.role = "bucket";
    REMEX_ASSIGN_OR_RETURN(size_t index, linker.Add(std::move(def).value(), bucket.FunctionName(signature.name)));
    clone_index.push_back(index);
    fs.name = out.functions[clone_index.back()].name;
    fs.memory = clone_stats.memory;
    local.functions.push_back(fs);
  }
  size_t generic_index = 0;
  if (!options.strict_dispatch) {
    FunctionStats fs = generic_stats.functions[0];
    REMEX_ASSIGN_OR_RETURN(generic_index, linker.Add(std::move(generic), signature.name + ".generic"));
    fs.name = out.functions[generic_index].name;
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
