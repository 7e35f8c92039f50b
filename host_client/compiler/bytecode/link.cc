// Linking of separately compiled functions (see link.h).
#include "host_client/compiler/bytecode/link.h"

#ifndef XXH_INLINE_ALL
#define XXH_INLINE_ALL
#endif
#include <xxhash.h>

#include "vm/bytecode.h"

namespace remex::compiler {

StatusOr<size_t> Linker::Add(vm::ExecutableDef part, std::string name) {
  if (part.functions.empty()) return InvalidArgument("link: '" + name + "' has no function");
  std::vector<int64_t> constant_map(part.constants.size(), -1);
  const int64_t kernel_base = static_cast<int64_t>(out_.kernels.size());
  const int64_t function_base = static_cast<int64_t>(out_.functions.size());
  const int64_t num_kernels = static_cast<int64_t>(part.kernels.size());
  const int64_t num_functions = static_cast<int64_t>(part.functions.size());
  // Every operand that indexes a table of the part (signature letters k, c, f) is
  // remapped into the linked executable's tables.
  Status status = OkStatus();
  auto remap = [&](char kind, int64_t& v) {
    if (!status.ok()) return;
    auto bad = [&](const char* table) {
      status = InvalidArgument("link: " + std::string(table) + " index " + std::to_string(v) + " of '" + name +
                               "' is out of range");
    };
    switch (kind) {
      case 'k':
        if (v < 0 || v >= num_kernels) return bad("kernel");
        v += kernel_base;
        break;
      case 'c': {
        if (v < 0 || static_cast<size_t>(v) >= part.constants.size()) return bad("constant");
        int64_t& c = constant_map[v];
        if (c < 0) {
          unshared_bytes_ += part.constants[v].data.size();
          c = Intern(std::move(part.constants[v]));
        }
        v = c;
        break;
      }
      case 'f':
        if (v < 0 || v >= num_functions) return bad("function");
        v += function_base;
        break;
      default:
        break;  // registers, dtypes, immediates, jumps: local to the function
    }
  };
  std::vector<vm::FunctionDef> functions = std::move(part.functions);
  for (size_t i = 0; i < functions.size(); ++i) {
    vm::FunctionDef& fn = functions[i];
    fn.name = i == 0 ? name : name + "/" + fn.name;
    for (vm::Instruction& inst : fn.code) vm::VisitOperands(inst, remap);
    REMEX_RETURN_IF_ERROR(status);
  }
  for (auto& k : part.kernels) out_.kernels.push_back(std::move(k));
  for (auto& fn : functions) out_.functions.push_back(std::move(fn));
  return static_cast<size_t>(function_base);
}

int64_t Linker::Intern(vm::ConstantDef c) {
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

}  // namespace remex::compiler
