#include "vm/executable.h"

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <zstd.h>

#include <cstring>
#include <exception>

#include "vm/executable.capnp.h"

namespace remex::vm {
namespace {

constexpr size_t kHeaderBytes = 24;
// Upper bound on a whole executable's metadata message (not its constants).
constexpr uint64_t kMaxMetadataBytes = 256ull << 20;
// Upper bound on one constant's decompressed size.
constexpr uint64_t kMaxConstantBytes = 16ull << 30;

void PutU32(std::byte* p, uint32_t v) { std::memcpy(p, &v, 4); }
void PutU64(std::byte* p, uint64_t v) { std::memcpy(p, &v, 8); }
uint32_t GetU32(const std::byte* p) { uint32_t v; std::memcpy(&v, p, 4); return v; }
uint64_t GetU64(const std::byte* p) { uint64_t v; std::memcpy(&v, p, 8); return v; }

}  // namespace

const char* ValueKindName(ValueKind kind) {
  switch (kind) {
    case ValueKind::kTensor: return "tensor";
    case ValueKind::kSequence: return "sequence";
    case ValueKind::kOptionalTensor: return "optional tensor";
    case ValueKind::kOptionalSequence: return "optional sequence";
  }
  return "unknown kind";
}

namespace {

void WriteValues(capnp::List<format::ValueDesc>::Builder out, const std::vector<ValueDesc>& in) {
  for (size_t i = 0; i < in.size(); ++i) {
    out[i].setName(in[i].name);
    out[i].setDtype(static_cast<int32_t>(in[i].dtype));
    auto shape = out[i].initShape(in[i].shape.size());
    for (size_t k = 0; k < in[i].shape.size(); ++k) shape.set(k, in[i].shape[k]);
    auto dims = out[i].initDims(in[i].dims.size());
    for (size_t k = 0; k < in[i].dims.size(); ++k) dims.set(k, in[i].dims[k]);
    out[i].setKind(static_cast<uint8_t>(in[i].kind));
    out[i].setRankUnknown(!in[i].rank_known);
  }
}

StatusOr<std::vector<ValueDesc>> ReadValues(capnp::List<format::ValueDesc>::Reader in) {
  std::vector<ValueDesc> out;
  for (auto v : in) {
    ValueDesc d;
    d.name = v.getName();
    auto dtype = DTypeFromOnnx(v.getDtype());
    if (!dtype) return InvalidArgument("value '" + d.name + "' has unsupported dtype " +
                                       std::to_string(v.getDtype()));
    d.dtype = *dtype;
    for (int64_t dim : v.getShape()) {
      if (dim < -1) return InvalidArgument("value '" + d.name + "' has dimension " +
                                           std::to_string(dim));
      d.shape.push_back(dim);
    }
    for (auto name : v.getDims()) d.dims.push_back(name);
    if (v.getKind() > kMaxValueKind) {
      return InvalidArgument("value '" + d.name + "' has unknown kind " + std::to_string(v.getKind()));
    }
    d.kind = static_cast<ValueKind>(v.getKind());
    d.rank_known = !v.getRankUnknown();
    if (!d.rank_known && (d.kind == ValueKind::kTensor || !d.shape.empty())) {
      return InvalidArgument("value '" + d.name + "': only a sequence's or an optional's elements may have an "
                             "unknown rank, with no dimensions given");
    }
    if (!d.dims.empty() && d.dims.size() != d.shape.size()) {
      return InvalidArgument("value '" + d.name + "' names " + std::to_string(d.dims.size()) +
                             " dimensions of " + std::to_string(d.shape.size()));
    }
    out.push_back(std::move(d));
  }
  return out;
}

Status ParseInto(std::span<const std::byte> bytes, uint64_t max_constant_bytes, std::string_view limit_reason,
                 ExecutableDef& def) {
  if (bytes.size() < kHeaderBytes) {
    return InvalidArgument("executable is " + std::to_string(bytes.size()) +
                           " bytes, shorter than its header");
  }
  if (std::memcmp(bytes.data(), kExecutableMagic, 4) != 0) {
    return InvalidArgument("not a Remex executable (bad magic)");
  }
  uint32_t version = GetU32(bytes.data() + 4);
  if (version != kExecutableVersion) {
    return FailedPrecondition("executable format version " + std::to_string(version) +
                              " is not supported (this build reads version " +
                              std::to_string(kExecutableVersion) + ")");
  }
  uint64_t meta = GetU64(bytes.data() + 8);
  uint64_t payload = GetU64(bytes.data() + 16);
  uint64_t available = bytes.size() - kHeaderBytes;
  if (meta % 8 != 0 || meta > kMaxMetadataBytes || meta > available ||
      payload != available - meta) {
    return InvalidArgument("executable sizes do not match the file (metadata " +
                           std::to_string(meta) + ", payload " + std::to_string(payload) +
                           ", file " + std::to_string(bytes.size()) + " bytes)");
  }
  // Copy the message into word-aligned memory: the file buffer need not be aligned.
  kj::Array<capnp::word> words = kj::heapArray<capnp::word>(meta / 8);
  std::memcpy(words.begin(), bytes.data() + kHeaderBytes, meta);
  const std::byte* payload_base = bytes.data() + kHeaderBytes + meta;

  capnp::ReaderOptions options;
  options.traversalLimitInWords = meta / 8 * 4 + 1024;
  options.nestingLimit = 32;
  capnp::FlatArrayMessageReader message(words.asPtr(), options);
  auto exe = message.getRoot<format::Executable>();
  if (exe.getVersion() != kExecutableVersion) {
    return InvalidArgument("executable metadata version does not match its header");
  }
  def.producer = exe.getProducer();

  for (auto k : exe.getKernels()) {
    KernelEntry entry;
    entry.op = k.getOp();
    entry.node_name = k.getNodeName();
    entry.host = k.getHost();
    entry.version = k.getVersion();
    entry.num_inputs = static_cast<int32_t>(k.getNumInputs());
    entry.num_outputs = static_cast<int32_t>(k.getNumOutputs());
    if (k.getNumInputs() > 4096 || k.getNumOutputs() > 4096) {
      return InvalidArgument("kernel '" + entry.op + "' declares too many operands");
    }
    for (auto a : k.getAttributes()) {
      std::string name = a.getName();
      switch (a.which()) {
        case format::Attribute::INT: entry.attrs.Set(name, a.getInt()); break;
        case format::Attribute::FLOAT: entry.attrs.Set(name, a.getFloat()); break;
        case format::Attribute::STRING: entry.attrs.Set(name, std::string(a.getString())); break;
        case format::Attribute::INTS: {
          std::vector<int64_t> v;
          for (int64_t x : a.getInts()) v.push_back(x);
          entry.attrs.Set(name, std::move(v));
          break;
        }
        case format::Attribute::FLOATS: {
          std::vector<float> v;
          for (float x : a.getFloats()) v.push_back(x);
          entry.attrs.Set(name, std::move(v));
          break;
        }
        case format::Attribute::STRINGS: {
          std::vector<std::string> v;
          for (auto x : a.getStrings()) v.emplace_back(x);
          entry.attrs.Set(name, std::move(v));
          break;
        }
        default:
          return InvalidArgument("attribute '" + name + "' of kernel '" + entry.op +
                                 "' has an unknown kind");
      }
    }
    def.kernels.push_back(std::move(entry));
  }

  // The sum of all constants is bounded before anything is decompressed, so a small
  // file cannot make the loader allocate without limit.
  uint64_t total = 0;
  for (auto c : exe.getConstants()) {
    if (__builtin_add_overflow(total, c.getRawSize(), &total) || total > max_constant_bytes) {
      return ResourceExhausted("executable constants exceed " + std::to_string(max_constant_bytes) + " bytes" +
                               (limit_reason.empty() ? "" : ": " + std::string(limit_reason)));
    }
  }
  size_t index = 0;
  for (auto c : exe.getConstants()) {
    std::string what = "constant " + std::to_string(index++);
    ConstantDef constant;
    auto dtype = DTypeFromOnnx(c.getDtype());
    if (!dtype) return InvalidArgument(what + " has unsupported dtype " + std::to_string(c.getDtype()));
    constant.dtype = *dtype;
    for (int64_t d : c.getShape()) constant.shape.push_back(d);
    auto n = NumElements(constant.shape);
    uint64_t expected = 0;
    if (!n || __builtin_mul_overflow(static_cast<uint64_t>(*n), DTypeSize(constant.dtype), &expected) ||
        expected != c.getRawSize() || expected > kMaxConstantBytes) {
      return InvalidArgument(what + ": shape " + ShapeToString(constant.shape) +
                             " does not match its " + std::to_string(c.getRawSize()) + " bytes");
    }
    uint64_t end = 0;
    if (__builtin_add_overflow(c.getOffset(), c.getWireSize(), &end) || end > payload) {
      return InvalidArgument(what + " lies outside the payload section");
    }
    const std::byte* src = payload_base + c.getOffset();
    constant.data.resize(expected);
    if (c.getCompressed()) {
      unsigned long long declared = ZSTD_getFrameContentSize(src, c.getWireSize());
      if (declared != expected) {
        return InvalidArgument(what + ": compressed chunk does not declare its size " +
                               std::to_string(expected));
      }
      size_t got = ZSTD_decompress(constant.data.data(), expected, src, c.getWireSize());
      if (ZSTD_isError(got) || got != expected) {
        return InvalidArgument(what + ": corrupt zstd chunk (" +
                               std::string(ZSTD_isError(got) ? ZSTD_getErrorName(got) : "short") + ")");
      }
    } else {
      if (c.getWireSize() != expected) return InvalidArgument(what + ": raw size mismatch");
      if (expected) std::memcpy(constant.data.data(), src, expected);
    }
    if (constant.dtype == DType::kBool) CanonicalizeBoolBytes(constant.data.data(), constant.data.size());
    def.constants.push_back(std::move(constant));
  }

  for (auto f : exe.getFunctions()) {
    FunctionDef fn;
    fn.name = f.getName();
    REMEX_ASSIGN_OR_RETURN(fn.inputs, ReadValues(f.getInputs()));
    REMEX_ASSIGN_OR_RETURN(fn.outputs, ReadValues(f.getOutputs()));
    if (f.getNumRegisters() > (1u << 24)) {
      return InvalidArgument("function '" + fn.name + "' declares too many registers");
    }
    fn.num_registers = static_cast<int32_t>(f.getNumRegisters());
    std::vector<int64_t> code;
    code.reserve(f.getCode().size());
    for (int64_t w : f.getCode()) code.push_back(w);
    auto decoded = Decode(code);
    if (!decoded.ok()) return decoded.status().WithContext("function '" + fn.name + "'");
    fn.code = std::move(decoded).value();
    auto arenas = f.getArenaBytes();
    if (arenas.size() > 2) return InvalidArgument("function '" + fn.name + "' has more than two arenas");
    for (size_t m = 0; m < arenas.size(); ++m) {
      if (arenas[m] > kMaxArenaBytes) {
        return InvalidArgument("function '" + fn.name + "' declares an arena of " + std::to_string(arenas[m]) +
                               " bytes");
      }
      fn.arena_bytes[m] = arenas[m];
    }
    if (f.getComputeThreads() > static_cast<uint32_t>(kernels::kMaxCpuComputeThreads)) {
      return InvalidArgument("function '" + fn.name + "' asks for " + std::to_string(f.getComputeThreads()) +
                             " compute threads; at most " + std::to_string(kernels::kMaxCpuComputeThreads));
    }
    fn.compute_threads = f.getComputeThreads();
    def.functions.push_back(std::move(fn));
  }
  for (auto s : exe.getSymbols()) {
    SymbolDef sym{s.getName(), s.getMin(), s.getMax()};
    if (sym.name.empty() || sym.min < 0 || sym.max < -1 || (sym.max >= 0 && sym.max < sym.min)) {
      return InvalidArgument("symbol '" + sym.name + "' has invalid bounds [" + std::to_string(sym.min) +
                             ", " + std::to_string(sym.max) + "]");
    }
    def.symbols.push_back(std::move(sym));
  }
  return OkStatus();
}

}  // namespace

StatusOr<std::vector<std::byte>> SerializeExecutable(const ExecutableDef& def, int zstd_level) {
  capnp::MallocMessageBuilder message;
  auto exe = message.initRoot<format::Executable>();
  exe.setVersion(kExecutableVersion);
  exe.setProducer(def.producer);
  exe.setTarget("any");

  auto kernels = exe.initKernels(def.kernels.size());
  for (size_t i = 0; i < def.kernels.size(); ++i) {
    const KernelEntry& k = def.kernels[i];
    auto out = kernels[i];
    out.setOp(k.op);
    out.setNodeName(k.node_name);
    out.setHost(k.host);
    out.setVersion(k.version);
    out.setNumInputs(static_cast<uint32_t>(k.num_inputs));
    out.setNumOutputs(static_cast<uint32_t>(k.num_outputs));
    auto attrs = out.initAttributes(k.attrs.all().size());
    size_t a = 0;
    for (const auto& [name, value] : k.attrs.all()) {
      auto attr = attrs[a++];
      attr.setName(name);
      if (auto* v = std::get_if<int64_t>(&value)) attr.setInt(*v);
      else if (auto* v = std::get_if<float>(&value)) attr.setFloat(*v);
      else if (auto* v = std::get_if<std::string>(&value)) attr.setString(*v);
      else if (auto* v = std::get_if<std::vector<int64_t>>(&value)) {
        auto l = attr.initInts(v->size());
        for (size_t j = 0; j < v->size(); ++j) l.set(j, (*v)[j]);
      } else if (auto* v = std::get_if<std::vector<float>>(&value)) {
        auto l = attr.initFloats(v->size());
        for (size_t j = 0; j < v->size(); ++j) l.set(j, (*v)[j]);
      } else if (auto* v = std::get_if<std::vector<std::string>>(&value)) {
        auto l = attr.initStrings(v->size());
        for (size_t j = 0; j < v->size(); ++j) l.set(j, (*v)[j]);
      }
    }
  }

  std::vector<std::byte> payload;
  auto constants = exe.initConstants(def.constants.size());
  for (size_t i = 0; i < def.constants.size(); ++i) {
    const ConstantDef& c = def.constants[i];
    auto out = constants[i];
    out.setDtype(static_cast<int32_t>(c.dtype));
    auto shape = out.initShape(c.shape.size());
    for (size_t k = 0; k < c.shape.size(); ++k) shape.set(k, c.shape[k]);
    out.setOffset(payload.size());
    out.setRawSize(c.data.size());
    size_t bound = ZSTD_compressBound(c.data.size());
    size_t start = payload.size();
    payload.resize(start + bound);
    size_t n = ZSTD_compress(payload.data() + start, bound, c.data.data(), c.data.size(), zstd_level);
    if (ZSTD_isError(n)) {
      return Internal(std::string("zstd compress of constant failed: ") + ZSTD_getErrorName(n));
    }
    if (n < c.data.size()) {
      payload.resize(start + n);
      out.setCompressed(true);
      out.setWireSize(n);
    } else {
      payload.resize(start);
      payload.insert(payload.end(), c.data.begin(), c.data.end());
      out.setCompressed(false);
      out.setWireSize(c.data.size());
    }
  }

  auto functions = exe.initFunctions(def.functions.size());
  for (size_t i = 0; i < def.functions.size(); ++i) {
    const FunctionDef& f = def.functions[i];
    auto out = functions[i];
    out.setName(f.name);
    WriteValues(out.initInputs(f.inputs.size()), f.inputs);
    WriteValues(out.initOutputs(f.outputs.size()), f.outputs);
    out.setNumRegisters(static_cast<uint32_t>(f.num_registers));
    std::vector<int64_t> code;
    for (const auto& inst : f.code) REMEX_RETURN_IF_ERROR(Encode(inst, code));
    auto list = out.initCode(code.size());
    for (size_t k = 0; k < code.size(); ++k) list.set(k, code[k]);
    if (f.arena_bytes[0] || f.arena_bytes[1]) {
      auto arenas = out.initArenaBytes(2);
      arenas.set(0, f.arena_bytes[0]);
      arenas.set(1, f.arena_bytes[1]);
    }
    if (f.compute_threads) out.setComputeThreads(f.compute_threads);
  }

  auto symbols = exe.initSymbols(def.symbols.size());
  for (size_t i = 0; i < def.symbols.size(); ++i) {
    symbols[i].setName(def.symbols[i].name);
    symbols[i].setMin(def.symbols[i].min);
    symbols[i].setMax(def.symbols[i].max);
  }

  kj::Array<capnp::word> words = capnp::messageToFlatArray(message);
  auto meta = words.asBytes();
  std::vector<std::byte> file(kHeaderBytes + meta.size() + payload.size());
  std::memcpy(file.data(), kExecutableMagic, 4);
  PutU32(file.data() + 4, kExecutableVersion);
  PutU64(file.data() + 8, meta.size());
  PutU64(file.data() + 16, payload.size());
  std::memcpy(file.data() + kHeaderBytes, meta.begin(), meta.size());
  if (!payload.empty()) {
    std::memcpy(file.data() + kHeaderBytes + meta.size(), payload.data(), payload.size());
  }
  return file;
}

StatusOr<ExecutableDef> ParseExecutable(std::span<const std::byte> bytes, uint64_t max_constant_bytes,
                                        std::string_view limit_reason) {
  ExecutableDef def;
  Status status;
  try {
    status = ParseInto(bytes, max_constant_bytes, limit_reason, def);
  } catch (const std::bad_alloc&) {
    return ResourceExhausted("loading executable: out of memory");
  } catch (const kj::Exception& e) {
    // Cap'n Proto reports malformed messages and exceeded limits by exception.
    return InvalidArgument("corrupt executable metadata: " +
                           std::string(e.getDescription().cStr()));
  } catch (const std::exception& e) {
    return InvalidArgument(std::string("corrupt executable: ") + e.what());
  }
  if (!status.ok()) return status.WithContext("loading executable");
  return def;
}

Executable::Executable(ExecutableDef def) : def_(std::move(def)) {
  for (const auto& c : def_.constants) constant_bytes_ += c.data.size();
}

StatusOr<std::shared_ptr<const Executable>> Executable::FromDef(
    ExecutableDef def, const kernels::KernelRegistry& registry) {
  REMEX_RETURN_IF_ERROR(VerifyExecutable(def, registry).WithContext("verifying executable"));
  return std::shared_ptr<const Executable>(new Executable(std::move(def)));
}

StatusOr<std::shared_ptr<const Executable>> Executable::Load(
    std::span<const std::byte> bytes, const kernels::KernelRegistry& registry, uint64_t max_constant_bytes,
    std::string_view limit_reason) {
  REMEX_ASSIGN_OR_RETURN(ExecutableDef def, ParseExecutable(bytes, max_constant_bytes, limit_reason));
  return FromDef(std::move(def), registry);
}

StatusOr<int> Executable::FunctionIndex(std::string_view name) const {
  std::string names;
  for (size_t i = 0; i < def_.functions.size(); ++i) {
    if (def_.functions[i].name == name) return static_cast<int>(i);
    names += (i ? ", " : "") + def_.functions[i].name;
  }
  return NotFound("no function '" + std::string(name) + "' in the executable (it has: " +
                  names + ")");
}

}  // namespace remex::vm
