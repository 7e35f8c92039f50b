// The compiler's entry points (see compiler.h).
#include "host_client/compiler/compiler.h"

#include <map>
#include <vector>

#include "host_client/compiler/dispatch.h"
#include "host_client/compiler/onnx_import.h"
#include "host_client/compiler/pipeline.h"

namespace remex::compiler {

std::vector<InputSymbol> InputSymbols(const Graph& graph) {
  std::vector<InputSymbol> out;
  for (int in : graph.inputs) {
    const Value& v = graph.values[in];
    if (!v.rank_known) continue;
    for (size_t d = 0; d < v.shape.size(); ++d) {
      if (v.shape[d] >= 0) continue;
      const std::string name = d < v.dims.size() && !v.dims[d].empty() ? v.dims[d] : v.name + ":" + std::to_string(d);
      out.push_back({name, v.name + ":" + std::to_string(d)});
    }
  }
  return out;
}

Status ResolveSymbolNames(const Graph& graph, CompileOptions& options) {
  const std::vector<InputSymbol> symbols = InputSymbols(graph);
  auto resolve = [&](const std::string& name, const char* flag) -> StatusOr<std::string> {
    for (const InputSymbol& s : symbols) {
      if (s.name == name) return s.name;
    }
    for (const InputSymbol& s : symbols) {
      if (s.site == name) return s.name;
    }
    std::string valid;
    for (const InputSymbol& s : symbols) {
      valid += (valid.empty() ? "" : ", ") + (s.name == s.site ? s.name : s.name + " (" + s.site + ")");
    }
    return InvalidArgument(std::string(flag) + " names '" + name +
                           "', which is no symbolic input dimension; the model's: " +
                           (valid.empty() ? std::string("none (every input dim is static)") : valid));
  };
  std::map<std::string, DimBounds> bounds;
  for (const auto& [name, b] : options.bounds) {
    REMEX_ASSIGN_OR_RETURN(std::string symbol, resolve(name, "--bound"));
    if (bounds.count(symbol)) return InvalidArgument("--bound gives '" + symbol + "' twice (as '" + name + "')");
    bounds[symbol] = b;
  }
  options.bounds = std::move(bounds);
  for (DispatchSpec& spec : options.dispatch) {
    REMEX_ASSIGN_OR_RETURN(spec.symbol, resolve(spec.symbol, "--dispatch"));
  }
  return OkStatus();
}

StatusOr<vm::ExecutableDef> CompileGraph(Graph graph, const kernels::KernelRegistry& registry,
                                         const CompileOptions& given, CompileStats* stats) {
  CompileOptions options = given;
  REMEX_RETURN_IF_ERROR(ResolveSymbolNames(graph, options));
  if (!options.dispatch.empty()) return CompileDispatched(graph, registry, options, stats);
  if (!options.bucket_choices.empty()) {
    // Without buckets, the one function is "main".
    for (const auto& [name, choices] : options.bucket_choices) {
      if (name != "main") {
        return InvalidArgument("tuned choices for '" + name +
                               "', which is no function of this compile (without --dispatch its one function is "
                               "'main')");
      }
    }
    auto it = options.bucket_choices.find("main");
    ApplyChoices(it->second, options);
    options.bucket_choices.clear();
  }
  return CompileFunction(std::move(graph), registry, options, stats);
}

StatusOr<vm::ExecutableDef> CompileOnnxFile(const std::string& path,
                                            const kernels::KernelRegistry& registry,
                                            const CompileOptions& options, CompileStats* stats) {
  REMEX_ASSIGN_OR_RETURN(Graph graph, ImportOnnxFile(path, registry, options.input_shapes));
  return CompileGraph(std::move(graph), registry, options, stats);
}

}  // namespace remex::compiler
