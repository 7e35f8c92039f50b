#include "host_client/tooling/specs.h"

#include "host_client/tooling/tuning.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <sstream>

#include "host_client/compiler/buckets.h"
#include "host_client/compiler/passes/layout.h"

namespace remex::tooling {
namespace {

// A whole-string decimal integer, or nullopt.
std::optional<int64_t> ToInt(const std::string& text) {
  int64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return v;
}

}  // namespace

StatusOr<Shape> ParseDims(const std::string& text) {
  Shape shape;
  if (text.empty() || text == "scalar") return shape;
  std::stringstream ss(text);
  std::string part;
  while (std::getline(ss, part, 'x')) {
    auto v = ToInt(part);
    if (!v || *v < 0) {
      return InvalidArgument("bad dimension '" + part + "' in shape '" + text + "' (use e.g. 1x3x48x192)");
    }
    shape.push_back(*v);
  }
  if (text.back() == 'x') return InvalidArgument("shape '" + text + "' ends with 'x' (use e.g. 1x3x48x192)");
  return shape;
}

StatusOr<std::map<std::string, Shape>> ParseShapeSpecs(const std::vector<std::string>& specs) {
  std::map<std::string, Shape> shapes;
  for (const auto& spec : specs) {
    auto eq = spec.rfind('=');
    if (eq == std::string::npos || eq == 0) return InvalidArgument("--shape must be NAME=DIMS, got '" + spec + "'");
    const std::string name = spec.substr(0, eq);
    if (shapes.count(name)) return InvalidArgument("--shape gives input '" + name + "' twice");
    auto dims = ParseDims(spec.substr(eq + 1));
    if (!dims.ok()) return dims.status().WithContext("--shape");
    shapes[name] = *dims;
  }
  return shapes;
}

StatusOr<std::map<std::string, compiler::DimBounds>> ParseBoundSpecs(const std::vector<std::string>& specs) {
  std::map<std::string, compiler::DimBounds> out;
  for (const auto& spec : specs) {
    auto eq = spec.rfind('=');
    auto colon = spec.rfind(':');
    auto bad = [&] {
      return InvalidArgument("--bound '" + spec + "' is not SYMBOL=MIN:MAX or INPUT:AXIS=MIN:MAX (e.g. W=32:2048, x:3=32:2048)");
    };
    if (eq == std::string::npos || eq == 0 || colon == std::string::npos || colon < eq) return bad();
    auto min = ToInt(spec.substr(eq + 1, colon - eq - 1));
    const std::string max_text = spec.substr(colon + 1);
    auto max = max_text.empty() ? std::optional<int64_t>(-1) : ToInt(max_text);
    if (!min || !max) return bad();
    if (*min < 0 || (*max >= 0 && *max < *min)) {
      return InvalidArgument("--bound '" + spec + "': need 0 <= MIN <= MAX");
    }
    const std::string name = spec.substr(0, eq);
    if (out.count(name)) return InvalidArgument("--bound gives '" + name + "' twice");
    out[name] = {*min, *max};
  }
  return out;
}

StatusOr<std::map<std::string, std::string>> ParseInputSpecs(const std::vector<std::string>& specs) {
  std::map<std::string, std::string> files;
  for (const auto& spec : specs) {
    auto eq = spec.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size()) {
      return InvalidArgument("--input must be NAME=FILE.npy, got '" + spec + "'");
    }
    const std::string name = spec.substr(0, eq);
    if (files.count(name)) return InvalidArgument("--input gives input '" + name + "' twice");
    files[name] = spec.substr(eq + 1);
  }
  return files;
}

StatusOr<DType> ParseFloatDType(const std::string& name) {
  std::optional<DType> dtype = DTypeFromName(name);
  if (!dtype || (*dtype != DType::kFloat32 && *dtype != DType::kFloat16)) {
    return InvalidArgument("--dtype must be float32 or float16, got '" + name + "'");
  }
  return *dtype;
}

StatusOr<client::CompressionOptions> ParseCompression(const std::string& text) {
  using client::CompressionMode;
  client::CompressionOptions options;
  if (text == "auto") {
    options.mode = CompressionMode::kAuto;
  } else if (text == "none") {
    options.mode = CompressionMode::kNone;
  } else if (text == "zstd" || text.rfind("zstd:", 0) == 0) {
    options.mode = CompressionMode::kZstd;
    if (text.size() > 5) {
      auto level = ToInt(text.substr(5));
      if (!level || *level < 1 || *level > 22) {
        return InvalidArgument("--compression zstd:LEVEL needs a level from 1 to 22, got '" + text.substr(5) + "'");
      }
      options.level = static_cast<int>(*level);
    }
  } else {
    return InvalidArgument("--compression must be auto, none, zstd or zstd:LEVEL, got '" + text + "'");
  }
  return options;
}

StatusOr<std::pair<std::string, uint16_t>> ParseServerAddress(const std::string& text) {
  auto colon = text.rfind(':');
  auto port = colon == std::string::npos ? std::nullopt : ToInt(text.substr(colon + 1));
  if (colon == std::string::npos || colon == 0 || !port || *port < 1 || *port > 65535) {
    return InvalidArgument("--server must be HOST:PORT with a port from 1 to 65535, got '" + text + "'");
  }
  std::string host = text.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  return std::make_pair(host, static_cast<uint16_t>(*port));
}

StatusOr<FetchSpec> ParseFetch(const std::string& text) {
  FetchSpec spec;
  if (text == "all") return spec;
  spec.all = false;
  if (text == "none") return spec;
  std::stringstream ss(text);
  std::string name;
  while (std::getline(ss, name, ',')) {
    if (name.empty()) return InvalidArgument("--fetch must be all, none or output names separated by commas, got '" + text + "'");
    spec.names.insert(name);
  }
  if (spec.names.empty()) return InvalidArgument("--fetch must be all, none or output names separated by commas, got ''");
  return spec;
}

bool CompileSpecs::ChangesCompilation() const {
  const CompileSpecs defaults;
  return !bounds.empty() || !dispatch.empty() || strict || layout != defaults.layout || dtype != defaults.dtype ||
         fuse_epilogues != defaults.fuse_epilogues || fold_batchnorm != defaults.fold_batchnorm ||
         fuse_elementwise != defaults.fuse_elementwise || compute_threads != defaults.compute_threads ||
         !tuning_log.empty();
}

StatusOr<compiler::CompileOptions> ParseCompileSpecs(const CompileSpecs& specs, const std::string& model) {
  compiler::CompileOptions options;
  REMEX_ASSIGN_OR_RETURN(options.input_shapes, ParseShapeSpecs(specs.shapes));
  REMEX_ASSIGN_OR_RETURN(options.bounds, ParseBoundSpecs(specs.bounds));
  auto layout = compiler::ParseLayout(specs.layout);
  if (!layout.ok()) return layout.status().WithContext("--layout");
  options.layout = *layout;
  if (specs.dtype.empty()) {
    options.dtype = DType::kUndefined;  // the model's own
  } else {
    REMEX_ASSIGN_OR_RETURN(options.dtype, ParseFloatDType(specs.dtype));
  }
  for (const auto& text : specs.dispatch) {
    REMEX_ASSIGN_OR_RETURN(compiler::DispatchSpec spec, compiler::ParseDispatchSpec(text));
    options.dispatch.push_back(std::move(spec));
  }
  if (specs.strict && options.dispatch.empty()) return InvalidArgument("--strict needs --dispatch");
  options.strict_dispatch = specs.strict;
  options.fuse_epilogues = specs.fuse_epilogues;
  options.fold_batchnorm = specs.fold_batchnorm;
  options.fuse_elementwise = specs.fuse_elementwise;
  if (specs.compute_threads < 0 || specs.compute_threads > kernels::kMaxCpuComputeThreads) {
    return InvalidArgument("--compute-threads must be in [0, " + std::to_string(kernels::kMaxCpuComputeThreads) +
                           "], got " + std::to_string(specs.compute_threads));
  }
  options.compute_threads = specs.compute_threads;
  if (!specs.tuned_for.empty() && specs.tuning_log.empty()) return InvalidArgument("--tuned-for needs --tuning-log");
  if (!specs.tuning_log.empty()) {
    if (model.empty()) return InvalidArgument("--tuning-log needs the .onnx model its records name");
    REMEX_RETURN_IF_ERROR(ApplyTuningLogFile(specs.tuning_log, model, specs.tuned_for, options));
  }
  return options;
}

namespace {

bool IsVariantKey(const std::string& key) {
  for (const char* k : kVariantKeys) {
    if (key == k) return true;
  }
  return false;
}

// The part of NAME=VALUE before the '=' (the input or symbol a shape or bound names).
std::string NameOf(const std::string& spec) { return spec.substr(0, spec.find('=')); }

}  // namespace

StatusOr<CompileSpecs> ApplyVariant(const CompileSpecs& specs, const std::string& variant) {
  auto fail = [&](const std::string& why) { return InvalidArgument("--variant '" + variant + "': " + why); };
  // Split at the commas that start a new KEY=.
  std::vector<std::string> items;
  size_t start = 0;
  for (;;) {
    size_t comma = variant.find(',', start);
    std::string piece = variant.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    const size_t eq = piece.find('=');
    if (items.empty() || (eq != std::string::npos && IsVariantKey(piece.substr(0, eq)))) {
      items.push_back(piece);
    } else {
      items.back() += "," + piece;
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  std::string known;
  for (const char* k : kVariantKeys) known += (known.empty() ? "" : ", ") + std::string(k);
  CompileSpecs out = specs;
  std::set<std::string> seen;
  bool dispatch_given = false;
  for (const std::string& item : items) {
    const size_t eq = item.find('=');
    if (eq == std::string::npos) return fail("'" + item + "' is no KEY=VALUE (keys: " + known + ")");
    const std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    if (!IsVariantKey(key)) return fail("unknown key '" + key + "' (keys: " + known + ")");
    const bool repeatable = key == "shape" || key == "bound" || key == "dispatch";
    if (!repeatable && !seen.insert(key).second) return fail("'" + key + "' is given twice");
    if (value.empty()) return fail("'" + key + "' has no value");
    auto boolean = [&](bool& field) -> Status {
      if (value == "true")
        field = true;
      else if (value == "false")
        field = false;
      else
        return fail(key + " must be true or false, got '" + value + "'");
      return OkStatus();
    };
    auto replace_named = [&](std::vector<std::string>& list) {
      const std::string name = NameOf(value);
      list.erase(
          std::remove_if(list.begin(), list.end(), [&](const std::string& s) { return NameOf(s) == name; }),
          list.end());
      list.push_back(value);
    };
    if (key == "layout") {
      out.layout = value;
    } else if (key == "dtype") {
      out.dtype = value;
    } else if (key == "fuse-epilogues") {
      REMEX_RETURN_IF_ERROR(boolean(out.fuse_epilogues));
    } else if (key == "fold-batchnorm") {
      REMEX_RETURN_IF_ERROR(boolean(out.fold_batchnorm));
    } else if (key == "fuse-elementwise") {
      REMEX_RETURN_IF_ERROR(boolean(out.fuse_elementwise));
    } else if (key == "compute-threads") {
      char* end = nullptr;
      const long long n = std::strtoll(value.c_str(), &end, 10);
      if (*end != '\0' || n < 0 || n > kernels::kMaxCpuComputeThreads) {
        return fail("compute-threads must be an integer in [0, " + std::to_string(kernels::kMaxCpuComputeThreads) +
                    "], got '" + value + "'");
      }
      out.compute_threads = static_cast<int>(n);
    } else if (key == "tuning-log") {
      out.tuning_log = value;
    } else if (key == "tuned-for") {
      out.tuned_for = value;
    } else if (key == "strict") {
      REMEX_RETURN_IF_ERROR(boolean(out.strict));
    } else if (key == "shape") {
      replace_named(out.shapes);
    } else if (key == "bound") {
      replace_named(out.bounds);
    } else {  // dispatch
      if (!dispatch_given) out.dispatch.clear();
      dispatch_given = true;
      out.dispatch.push_back(value);
    }
  }
  return out;
}

}  // namespace remex::tooling
