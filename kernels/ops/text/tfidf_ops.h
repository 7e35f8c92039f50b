// TfIdfVectorizer's matching and weighting, written once for the CPU kernel
// (kernels/ops/text/tfidf.cc) and the CUDA kernel (kernels/ops/text/cuda/tfidf_impl.cu): both walk the
// same n-gram trie from every start position of a row with CountFrom and turn the
// counts into outputs with Weigh, so their outputs are the same bits.
//
// Semantics (ONNX TfIdfVectorizer-9, https://onnx.ai/onnx/operators/onnx__TfIdfVectorizer.html),
// as ONNX's reference implementation and ONNX Runtime count: an n-gram of the pool is
// found at (start s, skip distance d) when row[s], row[s + d], ..., row[s + (n - 1) d]
// are its items; unigrams are counted once per position (d = 1 only), longer n-grams
// for every d in [1, max_skip_count + 1]; only n in [min_gram_length, max_gram_length]
// count. The trie holds exactly the pool's n-grams of those lengths (node 0 the root;
// a node is the n-gram spelled by the path to it, with the output coordinate of that
// n-gram when the pool holds it).
// A plain header: <stdint.h> only, so that .cu files include it.
#pragma once

#include <stdint.h>

#if defined(__CUDACC__)
#define REMEX_TFIDF_FN __host__ __device__ __forceinline__
#else
#define REMEX_TFIDF_FN inline
#endif

namespace remex::kernels::tfidf {

// The weighting of the counts (attribute mode).
enum class Mode : int32_t {
  kTf = 0,     // "TF": the count.
  kIdf = 1,    // "IDF": 1 (or the coordinate's weight) where the count is > 0, else 0.
  kTfIdf = 2,  // "TFIDF": the count (times the coordinate's weight).
};

// One trie node. The children of a node are the nodes [first_child, first_child +
// children), in ascending token order.
struct Node {
  int64_t token = 0;    // The item that leads here from the parent (unused at the root).
  int64_t output = -1;  // The output coordinate of the n-gram ending here; -1: a prefix only.
  int64_t first_child = 0;
  int64_t children = 0;
};

struct Params {
  int64_t min_gram = 1;  // 1 <= min_gram <= max_gram.
  int64_t max_gram = 1;
  int64_t max_distance = 1;  // The largest skip distance: max_skip_count + 1 (>= 1).
  Mode mode = Mode::kTf;
};

// The child of nodes[parent] that `token` leads to, or -1.
REMEX_TFIDF_FN int64_t FindChild(const Node* nodes, int64_t parent, int64_t token) {
  const int64_t first = nodes[parent].first_child, end = first + nodes[parent].children;
  int64_t lo = first, hi = end;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (nodes[mid].token < token) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo < end && nodes[lo].token == token ? lo : -1;
}

// Calls count(output) once for every n-gram of the pool found in `row` ([cols] items)
// from position `start` (in [0, cols)): the unigram at `start` (when min_gram is 1),
// then per skip distance d the n-grams of 2 or more items. Items compare as int64.
template <typename T, typename Count>
REMEX_TFIDF_FN void CountFrom(const Node* nodes, const Params& p, const T* row, int64_t cols, int64_t start,
                              Count& count) {
  const int64_t first = FindChild(nodes, 0, static_cast<int64_t>(row[start]));
  if (first < 0) return;
  if (p.min_gram <= 1 && nodes[first].output >= 0) count(nodes[first].output);
  // d < cols - start: the second item row[start + d] is inside the row.
  for (int64_t d = 1; d <= p.max_distance && d < cols - start; ++d) {
    int64_t node = first, at = start;
    for (int64_t n = 2; n <= p.max_gram; ++n) {
      at += d;
      node = FindChild(nodes, node, static_cast<int64_t>(row[at]));
      if (node < 0) break;
      if (n >= p.min_gram && nodes[node].output >= 0) count(nodes[node].output);
      if (d >= cols - at) break;  // The next item would be past the row.
    }
  }
}

// Output coordinate j of a row whose count there is `count`. `weights`: nullptr, or one
// weight per output coordinate.
REMEX_TFIDF_FN float Weigh(uint64_t count, Mode mode, const float* weights, int64_t j) {
  switch (mode) {
    case Mode::kIdf:
      return count > 0 ? (weights ? weights[j] : 1.0f) : 0.0f;
    case Mode::kTfIdf:
      return weights ? static_cast<float>(count) * weights[j] : static_cast<float>(count);
    case Mode::kTf:
    default:
      return static_cast<float>(count);
  }
}

}  // namespace remex::kernels::tfidf

#undef REMEX_TFIDF_FN
