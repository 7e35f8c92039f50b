// TfIdfVectorizer: attribute checks, the n-gram trie, the shape function and the CPU
// kernel (ONNX TfIdfVectorizer-9, https://onnx.ai/onnx/operators/onnx__TfIdfVectorizer.html).
// What is checked is documented with the view in kernels/ops/text/tfidf_view.h; the matching and
// weighting are kernels/ops/text/tfidf_ops.h's, shared with the CUDA kernel.
//
// The kernel factory builds the trie once per kernel (refusing duplicate n-grams); the
// shape function checks the attributes without reading the pool.

#include <algorithm>
#include <cstdint>
#include <memory>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "kernels/internal.h"
#include "kernels/ops/text/tfidf_view.h"
#include "kernels/transform_common.h"

namespace remex::kernels::internal {
namespace {

constexpr std::string_view kOp = "TfIdfVectorizer";

// The list attribute `name` of type T without a copy: nullptr when absent,
// INVALID_ARGUMENT when it has another type.
template <typename T>
StatusOr<const T*> ListAttr(const Attributes& attrs, std::string_view name, std::string_view type) {
  auto it = attrs.all().find(name);
  if (it == attrs.all().end()) return static_cast<const T*>(nullptr);
  if (const T* v = std::get_if<T>(&it->second)) return v;
  return OpError(kOp, "attribute '" + std::string(name) + "' must be " + std::string(type));
}

StatusOr<int64_t> RequiredInt(const Attributes& attrs, std::string_view name) {
  StatusOr<int64_t> v = attrs.Int(name);
  if (!v.ok()) return OpError(kOp, v.status().message());
  return *v;
}

// The pool (pool_int64s), required and non-empty; pool_strings is UNIMPLEMENTED.
StatusOr<const std::vector<int64_t>*> PoolOf(const Attributes& attrs) {
  REMEX_ASSIGN_OR_RETURN(const std::vector<std::string>* strings,
                         ListAttr<std::vector<std::string>>(attrs, "pool_strings", "strings"));
  if (strings && !strings->empty()) {
    return Unimplemented(
        "TfIdfVectorizer: pool_strings is not implemented (Remex has no string tensors; use pool_int64s with "
        "int32 or int64 input)");
  }
  REMEX_ASSIGN_OR_RETURN(const std::vector<int64_t>* pool,
                         ListAttr<std::vector<int64_t>>(attrs, "pool_int64s", "ints"));
  if (!pool || pool->empty())
    return OpError(kOp, "attribute 'pool_int64s' is required and must not be empty");
  if (static_cast<int64_t>(pool->size()) > kMaxTfIdfItems) {
    return OpError(kOp, "pool_int64s holds " + std::to_string(pool->size()) + " items, at most " +
                            std::to_string(kMaxTfIdfItems) + " are accepted");
  }
  return pool;
}

// One level of the pool: the (n)-grams at items [begin, begin + count * n).
struct Level {
  int64_t n = 0, begin = 0, count = 0;
};

// The levels of ngram_counts over a pool of `total` items, checked.
StatusOr<std::vector<Level>> LevelsOf(const std::vector<int64_t>& counts, int64_t total) {
  std::vector<Level> levels;
  for (size_t i = 0; i < counts.size(); ++i) {
    const int64_t n = static_cast<int64_t>(i) + 1;
    const int64_t begin = counts[i];
    const int64_t end = i + 1 < counts.size() ? counts[i + 1] : total;
    if (begin < 0 || begin > end || end > total) {
      return OpError(kOp, "ngram_counts must be non-decreasing within [0, " + std::to_string(total) +
                              "] (the size of pool_int64s): the " + std::to_string(n) + "-grams run from " +
                              std::to_string(begin) + " to " + std::to_string(end));
    }
    if ((end - begin) % n != 0) {
      return OpError(kOp, "the " + std::to_string(end - begin) + " items of the " + std::to_string(n) +
                              "-grams in pool_int64s (ngram_counts[" + std::to_string(i) +
                              "]) are not a whole number of " + std::to_string(n) + "-grams");
    }
    levels.push_back({n, begin, (end - begin) / n});
  }
  return levels;
}

}  // namespace

StatusOr<TfIdfAttrs> TfIdfAttrsOf(const Attributes& attrs) {
  TfIdfAttrs a;
  StatusOr<std::string> mode = attrs.String("mode");
  if (!mode.ok()) return OpError(kOp, mode.status().message());
  if (*mode == "TF") {
    a.mode = tfidf::Mode::kTf;
  } else if (*mode == "IDF") {
    a.mode = tfidf::Mode::kIdf;
  } else if (*mode == "TFIDF") {
    a.mode = tfidf::Mode::kTfIdf;
  } else {
    return OpError(kOp, "mode must be TF, IDF or TFIDF, got '" + *mode + "'");
  }
  REMEX_ASSIGN_OR_RETURN(a.min_gram, RequiredInt(attrs, "min_gram_length"));
  REMEX_ASSIGN_OR_RETURN(a.max_gram, RequiredInt(attrs, "max_gram_length"));
  REMEX_ASSIGN_OR_RETURN(a.max_skip_count, RequiredInt(attrs, "max_skip_count"));
  if (a.min_gram < 1) return OpError(kOp, "min_gram_length must be >= 1, got " + std::to_string(a.min_gram));
  if (a.max_gram < a.min_gram) {
    return OpError(kOp, "max_gram_length must be >= min_gram_length (" + std::to_string(a.min_gram) +
                            "), got " + std::to_string(a.max_gram));
  }
  if (a.max_skip_count < 0) {
    return OpError(kOp, "max_skip_count must be >= 0, got " + std::to_string(a.max_skip_count));
  }

  REMEX_ASSIGN_OR_RETURN(const std::vector<int64_t>* pool, PoolOf(attrs));
  REMEX_ASSIGN_OR_RETURN(const std::vector<int64_t>* counts,
                         ListAttr<std::vector<int64_t>>(attrs, "ngram_counts", "ints"));
  if (!counts || counts->empty())
    return OpError(kOp, "attribute 'ngram_counts' is required and must not be empty");
  if (static_cast<int64_t>(counts->size()) > kMaxTfIdfItems) {
    return OpError(kOp, "ngram_counts holds " + std::to_string(counts->size()) + " entries, at most " +
                            std::to_string(kMaxTfIdfItems) + " are accepted");
  }
  if (a.max_gram > static_cast<int64_t>(counts->size())) {
    return OpError(kOp, "max_gram_length (" + std::to_string(a.max_gram) +
                            ") must be at most the size of ngram_counts (" + std::to_string(counts->size()) +
                            ")");
  }
  REMEX_ASSIGN_OR_RETURN(std::vector<Level> levels, LevelsOf(*counts, static_cast<int64_t>(pool->size())));
  int64_t ngrams = 0;
  for (const Level& l : levels) ngrams += l.count;  // At most the pool's size.

  REMEX_ASSIGN_OR_RETURN(const std::vector<int64_t>* indexes,
                         ListAttr<std::vector<int64_t>>(attrs, "ngram_indexes", "ints"));
  if (!indexes || indexes->empty()) {
    return OpError(kOp, "attribute 'ngram_indexes' is required and must not be empty");
  }
  if (static_cast<int64_t>(indexes->size()) > kMaxTfIdfItems) {
    return OpError(kOp, "ngram_indexes holds " + std::to_string(indexes->size()) + " entries, at most " +
                            std::to_string(kMaxTfIdfItems) + " are accepted");
  }
  if (static_cast<int64_t>(indexes->size()) < ngrams) {
    return OpError(kOp, "ngram_indexes holds " + std::to_string(indexes->size()) + " entries for the " +
                            std::to_string(ngrams) + " n-grams of pool_int64s (one per n-gram)");
  }
  int64_t max_index = 0;
  for (size_t i = 0; i < indexes->size(); ++i) {
    const int64_t j = (*indexes)[i];
    if (j < 0 || j >= kMaxTfIdfOutputSize) {
      return OpError(kOp, "ngram_indexes[" + std::to_string(i) + "] = " + std::to_string(j) +
                              " is out of range [0, " + std::to_string(kMaxTfIdfOutputSize) + ")");
    }
    max_index = std::max(max_index, j);
  }
  a.output_size = max_index + 1;

  REMEX_ASSIGN_OR_RETURN(const std::vector<float>* weights,
                         ListAttr<std::vector<float>>(attrs, "weights", "floats"));
  if (weights && !weights->empty()) {
    if (weights->size() != indexes->size()) {
      return OpError(kOp, "weights holds " + std::to_string(weights->size()) + " values, ngram_indexes " +
                              std::to_string(indexes->size()) + " (they must be of equal size)");
    }
    if (static_cast<int64_t>(weights->size()) < a.output_size) {
      return OpError(kOp, "weights holds " + std::to_string(weights->size()) +
                              " values, fewer than the output's size max(ngram_indexes) + 1 = " +
                              std::to_string(a.output_size) + " (weights[j] scales output coordinate j)");
    }
  }
  return a;
}

StatusOr<TfIdfTable> TfIdfTableOf(const Attributes& attrs) try {
  TfIdfTable table;
  REMEX_ASSIGN_OR_RETURN(table.attrs, TfIdfAttrsOf(attrs));
  const TfIdfAttrs& a = table.attrs;
  const std::vector<int64_t>& pool = **PoolOf(attrs);
  // Present and of the right types: TfIdfAttrsOf has checked them.
  const std::vector<int64_t>& counts = **ListAttr<std::vector<int64_t>>(attrs, "ngram_counts", "ints");
  const std::vector<int64_t>& indexes = **ListAttr<std::vector<int64_t>>(attrs, "ngram_indexes", "ints");
  REMEX_ASSIGN_OR_RETURN(std::vector<Level> levels, LevelsOf(counts, static_cast<int64_t>(pool.size())));
  const std::vector<float> weights = *attrs.Floats("weights", {});
  if (!weights.empty()) table.weights.assign(weights.begin(), weights.begin() + a.output_size);

  // The n-grams of lengths [min_gram, max_gram]; every level numbers its n-grams on
  // from the previous one, loaded or not.
  struct Gram {
    int64_t begin = 0, n = 0, output = 0;
    int64_t node = 0;  // The trie node of the prefix placed so far.
  };
  std::vector<Gram> grams;
  int64_t id = 0;
  for (const Level& l : levels) {
    if (l.n >= a.min_gram && l.n <= a.max_gram) {
      for (int64_t k = 0; k < l.count; ++k) grams.push_back({l.begin + k * l.n, l.n, indexes[id + k], 0});
    }
    id += l.count;
  }

  // Level by level: the grams still longer than the depth, sorted by (parent node, next
  // item), give the next level's nodes in that order, so that each node's children are
  // contiguous and ascending.
  std::vector<tfidf::Node>& nodes = table.nodes;
  nodes.emplace_back();
  std::vector<int64_t> live(grams.size());
  for (size_t k = 0; k < grams.size(); ++k) live[k] = static_cast<int64_t>(k);
  for (int64_t depth = 1; !live.empty(); ++depth) {
    auto item = [&](int64_t k) { return pool[grams[k].begin + depth - 1]; };
    std::sort(live.begin(), live.end(), [&](int64_t x, int64_t y) {
      if (grams[x].node != grams[y].node) return grams[x].node < grams[y].node;
      if (item(x) != item(y)) return item(x) < item(y);
      return x < y;
    });
    for (size_t i = 0; i < live.size();) {
      const int64_t parent = grams[live[i]].node, token = item(live[i]);
      const int64_t node = static_cast<int64_t>(nodes.size());
      nodes.push_back({token, -1, 0, 0});
      if (nodes[parent].children == 0) nodes[parent].first_child = node;
      ++nodes[parent].children;
      for (; i < live.size() && grams[live[i]].node == parent && item(live[i]) == token; ++i) {
        Gram& g = grams[live[i]];
        g.node = node;
        if (g.n != depth) continue;
        if (nodes[node].output >= 0) {
          return OpError(kOp, "pool_int64s holds the " + std::to_string(g.n) + "-gram at items [" +
                                  std::to_string(g.begin) + ", " + std::to_string(g.begin + g.n) +
                                  ") more than once");
        }
        nodes[node].output = g.output;
      }
    }
    live.erase(std::remove_if(live.begin(), live.end(), [&](int64_t k) { return grams[k].n == depth; }),
               live.end());
  }
  return table;
} catch (const std::bad_alloc&) {
  return ResourceExhausted("TfIdfVectorizer: out of memory building the n-gram table");
}

StatusOr<TfIdfView> TfIdfViewOf(const TfIdfAttrs& attrs, std::span<const ShapeFnArg> in) {
  if (in.size() != 1 || !in[0].present) return OpError(kOp, "expects one input X");
  if (in[0].dtype != DType::kInt32 && in[0].dtype != DType::kInt64) {
    return OpError(kOp, "X must be int32 or int64, got " + std::string(DTypeName(in[0].dtype)));
  }
  const Shape& xs = in[0].shape;
  TfIdfView v;
  if (xs.size() == 1) {
    v.rows = 1;
    v.cols = xs[0];
    v.output = {attrs.output_size};
  } else if (xs.size() == 2) {
    v.rows = xs[0];
    v.cols = xs[1];
    v.output = {v.rows, attrs.output_size};
  } else {
    return OpError(kOp, "X must be [C] or [N, C], got " + ShapeToString(xs));
  }
  REMEX_RETURN_IF_ERROR(CheckedNumElements(kOp, xs).status());
  REMEX_RETURN_IF_ERROR(CheckOutputSize(kOp, DType::kFloat32, v.output));
  int64_t count_bytes;  // The kernels' uint64 counts, one per output element.
  if (__builtin_mul_overflow(v.rows * attrs.output_size, int64_t{8}, &count_bytes)) {
    return OpError(kOp, "output " + ShapeToString(v.output) + " is too large");
  }
  v.params.mode = attrs.mode;
  v.params.min_gram = attrs.min_gram;
  v.params.max_gram = attrs.max_gram;
  // A skip distance of cols or more fits no n-gram of 2 items or more.
  const int64_t longest = std::max<int64_t>(v.cols - 1, 1);
  v.params.max_distance = attrs.max_gram == 1 ? 1 : std::min(attrs.max_skip_count, longest - 1) + 1;
  return v;
}

namespace {

StatusOr<std::vector<TensorInfo>> InferTfIdf(const Attributes& attrs, std::span<const ShapeFnArg> in) {
  REMEX_ASSIGN_OR_RETURN(TfIdfAttrs a, TfIdfAttrsOf(attrs));
  REMEX_ASSIGN_OR_RETURN(TfIdfView v, TfIdfViewOf(a, in));
  return std::vector<TensorInfo>{{DType::kFloat32, v.output}};
}

OpDef TfIdfDef() {
  OpDef def;
  def.name = "TfIdfVectorizer";
  def.since_version = 9;
  def.min_inputs = def.max_inputs = 1;
  def.input_deps = {ShapeDep::kShape};
  def.infer = InferTfIdf;
  def.output_dtypes = [](const Attributes&, std::span<const DType>) {
    return std::vector<DType>{DType::kFloat32};
  };
  return def;
}

class TfIdfKernel final : public ValidatedKernel {
 public:
  static StatusOr<std::unique_ptr<TfIdfKernel>> Create(const OpDef& def, const Attributes& attrs) {
    REMEX_ASSIGN_OR_RETURN(TfIdfTable table, TfIdfTableOf(attrs));
    return std::make_unique<TfIdfKernel>(def, attrs, std::move(table));
  }
  TfIdfKernel(const OpDef& def, const Attributes& attrs, TfIdfTable table)
      : ValidatedKernel(def, attrs), table_(std::move(table)) {}

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    REMEX_ASSIGN_OR_RETURN(TfIdfView v, TfIdfViewOf(table_.attrs, ToShapeArgs(in)));
    if (in[0].dtype == DType::kInt32)
      return Vectorize(v, DataAs<const int32_t>(in[0]), DataAs<float>(out[0]));
    return Vectorize(v, DataAs<const int64_t>(in[0]), DataAs<float>(out[0]));
  }

 private:
  template <typename T>
  Status Vectorize(const TfIdfView& v, const T* x, float* y) {
    const int64_t size = table_.attrs.output_size;
    const float* weights = table_.weights.empty() ? nullptr : table_.weights.data();
    std::vector<uint64_t> counts(static_cast<size_t>(size));
    auto count = [&](int64_t j) { ++counts[j]; };
    for (int64_t r = 0; r < v.rows; ++r) {
      std::fill(counts.begin(), counts.end(), 0);
      for (int64_t s = 0; s < v.cols; ++s) {
        tfidf::CountFrom(table_.nodes.data(), v.params, x + r * v.cols, v.cols, s, count);
      }
      for (int64_t j = 0; j < size; ++j) y[r * size + j] = tfidf::Weigh(counts[j], v.params.mode, weights, j);
    }
    return OkStatus();
  }

  const TfIdfTable table_;
};

}  // namespace

Status AddTfIdfOpDefs(KernelRegistry& registry) { return registry.AddOp(TfIdfDef()); }

Status AddTfIdfCpuKernels(KernelRegistry& registry) {
  return AddCpuKernel<TfIdfKernel>(registry, "TfIdfVectorizer");
}

}  // namespace remex::kernels::internal
