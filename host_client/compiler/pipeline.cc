// The single-function pipeline (see pipeline.h).
#include "host_client/compiler/pipeline.h"

#include <chrono>
#include <set>

#include "host_client/compiler/codegen.h"
#include "host_client/compiler/passes/activation_patterns.h"
#include "host_client/compiler/passes/attention_fusion.h"
#include "host_client/compiler/passes/batchnorm_folding.h"
#include "host_client/compiler/passes/common_subexpressions.h"
#include "host_client/compiler/passes/dead_code.h"
#include "host_client/compiler/passes/elementwise_fusion.h"
#include "host_client/compiler/passes/epilogue_fusion.h"
#include "host_client/compiler/passes/placement.h"
#include "host_client/compiler/passes/quantized_add.h"
#include "host_client/compiler/shape_inference.h"
#include "vm/bytecode.h"

namespace remex::compiler {
namespace {

// Writes options.node_attrs into the graph's nodes (CompileOptions::node_attrs).
Status AnnotateNodes(Graph& graph, const kernels::KernelRegistry& registry, const NodeAttrs& annotations) {
  for (const auto& [name, attrs] : annotations) {
    Node* node = nullptr;
    for (Node& n : graph.nodes) {
      if (n.name == name) node = &n;
    }
    if (!node) return InvalidArgument("tuned node '" + name + "' is no node of the compiled graph");
    const kernels::OpDef* def = registry.FindOp(node->op, node->version);
    for (const auto& [key, value] : attrs) {
      const kernels::TunableAttr* t = nullptr;
      if (def) {
        for (const kernels::TunableAttr& a : def->traits.tunable) {
          if (a.name == key) t = &a;
        }
      }
      if (!t) return InvalidArgument("tuned node '" + name + "': " + node->op + " has no tunable attribute '" + key + "'");
      if (value < t->min || value > t->max) {
        return InvalidArgument("tuned node '" + name + "': " + key + " must be in [" + std::to_string(t->min) + ", " +
                               std::to_string(t->max) + "], got " + std::to_string(value));
      }
      node->attrs.Set(key, value);
    }
  }
  return OkStatus();
}

}  // namespace

StatusOr<vm::ExecutableDef> CompileFunction(Graph graph, const kernels::KernelRegistry& registry,
                                            const CompileOptions& options, CompileStats* stats) {
  if (!options.dispatch.empty()) return InvalidArgument("CompileFunction compiles one function: use CompileGraph for --dispatch");
  const auto start = std::chrono::steady_clock::now();
  CompileStats local;
  local.nodes_in = static_cast<int>(graph.nodes.size());
  REMEX_ASSIGN_OR_RETURN(local.nodes_folded,
                         InferShapes(graph, registry, options.fold_constants, options.bounds));
  local.nodes_removed = EliminateDeadCode(graph);
  if (options.eliminate_common_subexpressions) local.common_subexpressions = EliminateCommonSubexpressions(graph);
  if (options.dtype == DType::kFloat32) {  // first, so that the float32 rewrites below apply
    REMEX_ASSIGN_OR_RETURN(local.precision, ConvertToFloat32(graph, registry));
    EliminateDeadCode(graph);  // the float16 constants now read through their float32 copies
  }
  if (options.fold_batchnorm) {
    local.batchnorms_folded = FoldBatchNormalization(graph);
    // The rest, as a Mul and an Add that elementwise fusion joins to their neighbours.
    if (options.fuse_elementwise) local.batchnorms_decomposed = DecomposeBatchNormalization(graph);
    if (local.batchnorms_folded + local.batchnorms_decomposed > 0) EliminateDeadCode(graph);  // the old parameters
  }
  if (options.fuse_elementwise) {
    const size_t before = graph.nodes.size();
    local.hardswish_recognized = RecognizeHardSwish(graph);
    local.swish_recognized = RecognizeSwish(graph);
    local.gelu_recognized = RecognizeGelu(graph);
    local.activation_nodes_absorbed = static_cast<int>(before - graph.nodes.size());
    if (local.hardswish_recognized + local.swish_recognized + local.gelu_recognized > 0) {
      EliminateDeadCode(graph);  // their constants
    }
  }
  if (options.layout == Layout::kNhwc) {
    REMEX_ASSIGN_OR_RETURN(local.layout, ConvertToNhwc(graph, registry, {.pooling = options.nhwc_pooling}));
    EliminateDeadCode(graph);  // constants replaced by their NHWC forms
  }
  // Counted before the precision pass, whose casts would sit between a transpose
  // and the graph's edge.
  const TransposeCount transposes = CountTransposes(graph);
  local.transposes = transposes.total;
  local.transposes_at_edges = transposes.at_edges;
  if (options.dtype == DType::kFloat16) {
    REMEX_ASSIGN_OR_RETURN(local.precision, ConvertToFloat16(graph, registry));
    EliminateDeadCode(graph);  // casts of inputs only shape readers use
  } else if (options.dtype != DType::kFloat32 && options.dtype != DType::kUndefined) {
    return InvalidArgument("--dtype must be float32 or float16, got " + std::string(DTypeName(options.dtype)));
  }
  if (options.fuse_epilogues && options.fuse_attention) {
    const size_t before = graph.nodes.size();
    local.fused_attentions = FuseAttention(graph);
    local.attention_nodes = static_cast<int>(before - graph.nodes.size()) + local.fused_attentions;
  }
  if (options.fuse_epilogues) {
    EpilogueFusionStats epilogues = FuseEpilogues(graph, registry);
    local.fused_convs = epilogues.fused_convs;
    local.fused_matmuls = epilogues.fused_matmuls;
    local.fused_matmul_integers = epilogues.fused_matmul_integers;
    local.epilogue_nodes = epilogues.epilogue_nodes;
  }
  if (options.fuse_elementwise) {
    local.quantized_adds = FuseQuantizedAdds(graph, registry);
    FusionStats fusion = FuseElementwise(graph, registry);
    local.fused_kernels = fusion.fused_kernels;
    local.nodes_fused = fusion.nodes_fused;
  }
  if (options.place_on_host) PlaceOnHost(graph, registry);
  REMEX_RETURN_IF_ERROR(AnnotateNodes(graph, registry, options.node_attrs));
  REMEX_ASSIGN_OR_RETURN(CodegenResult gen, GenerateCode(graph, registry));
  vm::ExecutableDef def = std::move(gen.executable);
  if (options.compute_threads < 0 || options.compute_threads > kernels::kMaxCpuComputeThreads) {
    return InvalidArgument("--compute-threads must be in [0, " + std::to_string(kernels::kMaxCpuComputeThreads) +
                           "], got " + std::to_string(options.compute_threads));
  }
  def.functions[0].compute_threads = static_cast<uint32_t>(options.compute_threads);
  if (options.plan_memory) local.memory = PlanMemory(def.functions[0], gen.bound_bytes);
  local.copies_to_host = gen.copies_to_host;
  local.kernels = static_cast<int>(def.kernels.size());
  for (const auto& k : def.kernels) local.host_kernels += k.host ? 1 : 0;
  for (const auto& inst : def.functions[0].code) {
    if (inst.op == vm::Opcode::kInvokeShapeFunc) local.runtime_shape_functions++;
  }
  for (const auto& c : def.constants) local.constant_bytes += c.data.size();
  local.constant_bytes_unshared = local.constant_bytes;
  REMEX_ASSIGN_OR_RETURN(FunctionStats fs, DescribeFunction(def, 0, "generic"));
  fs.memory = local.memory;
  local.functions = {fs};
  local.compile_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (stats) *stats = local;
  return def;
}

StatusOr<FunctionStats> DescribeFunction(const vm::ExecutableDef& def, size_t index, std::string role) {
  const vm::FunctionDef& fn = def.functions[index];
  FunctionStats fs;
  fs.name = fn.name;
  fs.role = std::move(role);
  fs.instructions = static_cast<int>(fn.code.size());
  std::set<int64_t> kernels;
  std::vector<int64_t> words;
  for (const auto& inst : fn.code) {
    REMEX_RETURN_IF_ERROR(vm::Encode(inst, words));
    if (inst.op == vm::Opcode::kInvokeShapeFunc) fs.runtime_shape_functions++;
    vm::VisitOperands(inst, [&](char kind, int64_t v) {
      if (kind == 'k') kernels.insert(v);
    });
  }
  fs.code_bytes = words.size() * sizeof(int64_t);
  fs.kernels = static_cast<int>(kernels.size());
  fs.memory.arena_bytes[0] = fn.arena_bytes[0];
  fs.memory.arena_bytes[1] = fn.arena_bytes[1];
  return fs;
}

}  // namespace remex::compiler
