// The checked attributes and input view of TfIdfVectorizer, shared by its CPU kernel
// (kernels/ops/text/tfidf.cc) and its CUDA kernel (kernels/ops/text/cuda/tfidf.cc): every attribute and
// input is checked here once. Attributes come from untrusted model files: errors are
// INVALID_ARGUMENT "TfIdfVectorizer: ..." naming the attribute or input, UNIMPLEMENTED
// for pool_strings (Remex has no string tensors).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/status.h"
#include "kernels/kernels.h"
#include "kernels/ops/text/tfidf_ops.h"

namespace remex::kernels::internal {

// Bounds on the attributes' sizes: items of pool_int64s, entries of ngram_counts and
// ngram_indexes (each), and the output coordinates (max(ngram_indexes) + 1).
inline constexpr int64_t kMaxTfIdfItems = int64_t{1} << 24;
inline constexpr int64_t kMaxTfIdfOutputSize = int64_t{1} << 31;

// TfIdfVectorizer-9's attributes (https://onnx.ai/onnx/operators/onnx__TfIdfVectorizer.html),
// checked as ONNX Runtime checks them:
//   - mode: TF, IDF or TFIDF (required).
//   - min_gram_length >= 1, max_gram_length >= min_gram_length, both at most the size of
//     ngram_counts; max_skip_count >= 0 (all required).
//   - pool_int64s: the n-grams, 1-grams first (required, non-empty); a non-empty
//     pool_strings is UNIMPLEMENTED.
//   - ngram_counts (required, non-empty): ngram_counts[i] is where the (i+1)-grams start
//     in the pool; they run to ngram_counts[i + 1] (the pool's end for the last), so the
//     entries must be non-decreasing within [0, pool size], each level a whole number of
//     (i+1)-grams.
//   - ngram_indexes (required, non-empty): the output coordinate of the k-th n-gram of the
//     pool (counting every level, loaded or not), each in [0, kMaxTfIdfOutputSize - 1],
//     at least one per n-gram of the pool.
//   - weights (optional): as ONNX Runtime and ONNX's reference implementation apply
//     them, weights[j] scales output coordinate j: as many as ngram_indexes and at least
//     one per output coordinate.
// Cost: linear in the sizes of ngram_counts and ngram_indexes (the pool is not read).
struct TfIdfAttrs {
  tfidf::Mode mode = tfidf::Mode::kTf;
  int64_t min_gram = 1;
  int64_t max_gram = 1;
  int64_t max_skip_count = 0;
  int64_t output_size = 1;  // max(ngram_indexes) + 1.
};
StatusOr<TfIdfAttrs> TfIdfAttrsOf(const Attributes& attrs);

// What the kernels run with, built once per kernel from the attributes: the n-grams of
// the pool of lengths in [min_gram_length, max_gram_length] as a trie (tfidf::Node,
// node 0 the root) and the weights. INVALID_ARGUMENT as TfIdfAttrsOf, and for an n-gram
// the pool holds twice (as ONNX Runtime refuses it).
struct TfIdfTable {
  TfIdfAttrs attrs;
  std::vector<tfidf::Node> nodes;
  std::vector<float> weights;  // Empty, or attrs.output_size weights.
};
StatusOr<TfIdfTable> TfIdfTableOf(const Attributes& attrs);

// X int32 or int64 [C] or [N, C] -> Y float32 [output_size] or [N, output_size]: rows
// (1 for [C]) of `cols` items each. Y is zero for an empty X.
struct TfIdfView {
  int64_t rows = 0;
  int64_t cols = 0;
  tfidf::Params params;
  Shape output;
};
StatusOr<TfIdfView> TfIdfViewOf(const TfIdfAttrs& attrs, std::span<const ShapeFnArg> in);

}  // namespace remex::kernels::internal
