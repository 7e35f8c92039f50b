// Shape buckets for dispatch (dispatch.h): one specialised clone of the graph per bucket of input sizes,
// chosen at run time by the inputs' shapes.
//
// A generic function serves every shape, but it reruns each shape function and
// allocates every intermediate on every call, and its kernels cannot be chosen per
// size. `remex compile --dispatch SPEC` instead cuts the range of one or more symbolic
// input dims into buckets and compiles the whole pipeline once per bucket, with the
// symbol bounded by the bucket's edges:
//   - every derived dim is then bounded, so memory is planned statically
//     (memory_plan.h): one arena per clone, allocated on its first call and reused;
//   - a bucket of a single size fixes the dim, so its clone has static shapes and
//     runs no shape function at all;
//   - each clone has its own kernel instances (per-size algorithm choices).
// Weights are shared: constants are deduplicated by content across the clones.
//
// The dispatcher and the linking of the clones: dispatch.h.
//
// SPEC, per symbol (several specs multiply into a grid of buckets):
//   SYMBOL=log:BASE[:MIN:MAX]     upper edges MIN, MIN*BASE, MIN*BASE^2, ... up to MAX
//   SYMBOL=uniform:STEP[:MIN:MAX] upper edges the multiples of STEP from MIN up to MAX
//   SYMBOL=edges:E1,E2,...        explicit upper edges, increasing
// MIN:MAX default to the symbol's bounds (--bound). The first bucket starts at the
// symbol's lower bound, each next one just above the previous edge; the last edge
// generated is the first one >= MAX. Buckets wholly outside the symbol's bounds are
// dropped and the rest clipped to them. Examples, with W bounded to [1, 2048]:
//   W=log:2:32:2048   [1,32] [33,64] [65,128] ... [1025,2048]      7 buckets
//   W=uniform:512     [1,512] [513,1024] [1025,1536] [1537,2048]   4 buckets
//   W=edges:320,640   [1,320] [321,640], and wider inputs run the generic function
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "host_client/compiler/graph.h"

namespace remex::compiler {

struct DispatchSpec {
  enum class Kind { kLogarithmic, kUniform, kEdges };
  std::string symbol;
  Kind kind = Kind::kLogarithmic;
  int64_t base = 2;   // kLogarithmic, >= 2
  int64_t step = 0;   // kUniform, >= 1
  int64_t min = -1;   // kLogarithmic, kUniform: first edge; -1: the symbol's lower bound
  int64_t max = -1;   // last edge covers it; -1: the symbol's upper bound
  std::vector<int64_t> edges;  // kEdges
};

// Parses one SPEC (grammar above). INVALID_ARGUMENT naming what is wrong.
StatusOr<DispatchSpec> ParseDispatchSpec(std::string_view text);

// One dim's range within a bucket, inclusive.
struct BucketDim {
  std::string symbol;
  int64_t min = 0;
  int64_t max = 0;
};

struct Bucket {
  std::vector<BucketDim> dims;  // in spec order
  // "main[W=33..64]", "main[H=32,W=1..32]".
  std::string FunctionName(const std::string& base) const;
};

// The buckets of one spec, given the symbol's bounds: inclusive [min, max] ranges,
// increasing and contiguous. INVALID_ARGUMENT when the spec needs bounds the symbol
// lacks, or no bucket is left inside them.
StatusOr<std::vector<std::pair<int64_t, int64_t>>> BucketRanges(const DispatchSpec& spec, DimBounds bounds);

// The grid of buckets of several specs (their product, first spec outermost).
// `bounds` holds each symbol's bounds. INVALID_ARGUMENT for a symbol named twice, or
// more than `max_buckets` buckets.
StatusOr<std::vector<Bucket>> MakeBucketGrid(const std::vector<DispatchSpec>& specs,
                                             const std::map<std::string, DimBounds>& bounds,
                                             size_t max_buckets = 256);

}  // namespace remex::compiler
