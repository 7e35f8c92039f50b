// What a user types, parsed: the text forms of shapes, bounds, compression, server
// addresses and compile settings that every front end (the remex CLI, the shell, the
// Python client) accepts, and their one parser each. Errors are INVALID_ARGUMENT,
// name the flag ("--shape", ...) and say what was expected.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "base/dtype.h"
#include "base/status.h"
#include "host_client/client/client.h"
#include "host_client/compiler/options.h"

namespace remex::tooling {

// "1x3x48x192" (or "scalar" / "" for rank 0) -> {1, 3, 48, 192}; dims >= 0.
StatusOr<Shape> ParseDims(const std::string& text);

// --shape NAME=DIMS, repeatable, by input name.
StatusOr<std::map<std::string, Shape>> ParseShapeSpecs(const std::vector<std::string>& specs);

// --bound SYMBOL=MIN:MAX or INPUT:AXIS=MIN:MAX (MAX empty: unbounded), by the name
// given; the compiler resolves INPUT:AXIS to the symbol (compiler.h,
// ResolveSymbolNames). 0 <= MIN <= MAX.
StatusOr<std::map<std::string, compiler::DimBounds>> ParseBoundSpecs(const std::vector<std::string>& specs);

// --input NAME=FILE.npy, repeatable, by input name.
StatusOr<std::map<std::string, std::string>> ParseInputSpecs(const std::vector<std::string>& specs);

// --dtype of compile and gen-sr: float32 or float16 (base/dtype.h names).
StatusOr<DType> ParseFloatDType(const std::string& name);

// The values the front ends offer (the CLI's --help checks and completion, the shell's
// completion and messages): --layout (compiler::ParseLayout decides), compile's --dtype
// (ParseFloatDType decides), and the dtypes of a tensor made on the server (the shell's
// zeros and random: every dtype with numbers).
inline constexpr const char* kLayoutNames[] = {"NCHW", "NHWC", "auto"};
inline constexpr const char* kCompileDTypeNames[] = {"float32", "float16"};
inline constexpr const char* kNumericDTypeNames[] = {"float32", "float16", "bfloat16", "float64", "int8",
                                                     "uint8",   "int16",   "uint16",   "int32",   "uint32",
                                                     "int64",   "uint64",  "bool"};

// --compression: auto, none, zstd or zstd:LEVEL (1-22).
StatusOr<client::CompressionOptions> ParseCompression(const std::string& text);

// --server HOST:PORT (port 1-65535; HOST may be a name, IPv4, or [IPv6]).
StatusOr<std::pair<std::string, uint16_t>> ParseServerAddress(const std::string& text);

// --fetch: all, none, or output names separated by commas.
struct FetchSpec {
  bool all = true;
  std::set<std::string> names;  // when !all; empty: none
};
StatusOr<FetchSpec> ParseFetch(const std::string& text);

// The compile settings every subcommand that takes an .onnx accepts (remex compile,
// run, bench, check), as typed. Defaults are the compiler's.
struct CompileSpecs {
  std::vector<std::string> shapes;    // --shape NAME=DIMS
  std::vector<std::string> bounds;    // --bound SYMBOL=MIN:MAX | INPUT:AXIS=MIN:MAX
  std::vector<std::string> dispatch;  // --dispatch SYMBOL=log:2[:MIN:MAX] ... (compiler/buckets.h)
  bool strict = false;                // --strict: no generic function behind the buckets
  std::string layout;                 // --layout NCHW | NHWC | auto; "": auto (CompileForDevice)
  std::string dtype;                  // --dtype float32 | float16; empty: the model's own
  bool fuse_epilogues = true;         // --no-fuse-epilogues clears it
  bool fold_batchnorm = true;         // --no-fold-batchnorm clears it
  bool fuse_elementwise = true;       // --no-fuse-elementwise clears it
  int compute_threads = 0;            // --compute-threads N: at most N CPU compute threads; 0: the device's
  std::string tuning_log;             // --tuning-log FILE: each bucket's tuned choices (tuning.h)
  std::string tuned_for;              // --tuned-for FINGERPRINT: whose, when the log has several

  // Whether any setting other than --shape differs from the default: such settings
  // apply only when compiling, so they contradict an .rmx model.
  bool ChangesCompilation() const;
};

// The compiler's options from the specs. INVALID_ARGUMENT naming the flag. With
// --tuning-log, `model` is the .onnx whose content hash selects the log's records
// (ApplyTuningLogFile, tuning.h): INVALID_ARGUMENT for --tuned-for without it or no
// model, and the log's errors (NOT_FOUND when it holds nothing of this model).
StatusOr<compiler::CompileOptions> ParseCompileSpecs(const CompileSpecs& specs, const std::string& model = "");

// The compile settings of `remex bench --variant`, the flags' names without "--":
// layout, dtype, fuse-epilogues, fold-batchnorm, fuse-elementwise, compute-threads, strict,
// shape, bound, dispatch, tuning-log, tuned-for.
inline constexpr const char* kVariantKeys[] = {"layout",           "dtype",           "fuse-epilogues", "fold-batchnorm",
                                               "fuse-elementwise", "compute-threads", "strict",         "shape",
                                               "bound",            "dispatch",        "tuning-log",     "tuned-for"};

// `specs` with one variant's settings applied: KEY=VALUE[,KEY=VALUE...], each key as its
// flag and each value as that flag takes it; the booleans (fuse-epilogues,
// fold-batchnorm, fuse-elementwise, strict) take true or false. A shape or bound replaces the one of the
// same input or symbol (or adds one); the variant's dispatch specs replace the
// command's. A comma that does not start a new KEY= belongs to the value before it
// (dispatch=W=edges:64,128). INVALID_ARGUMENT naming --variant and the key for an
// unknown key (listing them), a missing "=", a bad boolean or a key given twice; the
// values themselves are checked by ParseCompileSpecs.
StatusOr<CompileSpecs> ApplyVariant(const CompileSpecs& specs, const std::string& variant);

}  // namespace remex::tooling
