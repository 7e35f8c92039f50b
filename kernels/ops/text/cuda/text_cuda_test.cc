// Differential tests of the TfIdfVectorizer CUDA kernel (kernels/ops/text/cuda/tfidf.cc) against
// the CPU kernel: random pools of 1- to 4-grams over a small vocabulary (so that many
// match), every mode with and without weights (negative ones included), permuted and
// gapped output coordinates, gram length ranges and skip counts, 1-D and 2-D inputs of
// int32 and int64 (items beyond int32), empty inputs and rows long enough for many
// threads to add to the same counts. Outputs must match bit for bit.
//
// Tests that run kernels skip themselves when no CUDA GPU is visible; registration runs
// everywhere.

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/cuda_test_util.h"
#include "kernels/kernels.h"
#include "kernels/test_util.h"

namespace remex::kernels {
namespace {

using testing::Attrs;
using testing::CudaRegistry;
using testing::HostTensor;

using Ints = std::vector<int64_t>;

TEST(TextCudaRegistration, RegistersEveryEntry) {
  auto registry = CudaRegistry({});
  ASSERT_TRUE(registry);
  EXPECT_TRUE(registry->FindKernel("TfIdfVectorizer", 9, DeviceKind::kCuda));
}

TEST(TextCudaRegistration, RefusesBadAttributesWhenMade) {
  auto registry = CudaRegistry({});
  ASSERT_TRUE(registry);
  const KernelFactory* factory = registry->FindKernel("TfIdfVectorizer", 9, DeviceKind::kCuda);
  ASSERT_TRUE(factory);
  const Attributes good = Attrs({{"mode", std::string("TF")},
                                 {"min_gram_length", int64_t{1}},
                                 {"max_gram_length", int64_t{2}},
                                 {"max_skip_count", int64_t{0}},
                                 {"ngram_counts", Ints{0, 2}},
                                 {"ngram_indexes", Ints{0, 1, 2}},
                                 {"pool_int64s", Ints{1, 2, 1, 2}}});
  EXPECT_TRUE((*factory)(good).ok());
  Attributes twice = good;
  twice.Set("pool_int64s", Ints{1, 1, 1, 2});
  auto k = (*factory)(twice);
  ASSERT_FALSE(k.ok());
  EXPECT_EQ(k.status().code(), StatusCode::kInvalidArgument) << k.status().ToString();
  Attributes strings = good;
  strings.Set("pool_strings", std::vector<std::string>{"a"});
  k = (*factory)(strings);
  ASSERT_FALSE(k.ok());
  EXPECT_EQ(k.status().code(), StatusCode::kUnimplemented) << k.status().ToString();
}

class TextCudaTest : public testing::CudaStreamTest {
 protected:
  void Check(const Attributes& attrs, std::vector<HostTensor> inputs) {
    auto out =
        testing::RunOnCpuAndCuda(*registry_, "TfIdfVectorizer", attrs, inputs, std::nullopt, stream_, 0xCD);
    ASSERT_TRUE(out.ok()) << "TfIdfVectorizer on cuda: " << out.status().ToString();
    ASSERT_EQ(out->cpu.size(), 1u);
    testing::ExpectSameElements("TfIdfVectorizer", out->cpu[0], out->cuda[0].bytes, 0, 0);
  }

  int64_t Uniform(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng_); }

  // Items of the vocabulary: 0 .. size - 1, the last one 2^40 + 1 for int64.
  int64_t Item(int64_t v, int64_t size, bool int64) const {
    return int64 && v == size - 1 ? (int64_t{1} << 40) + 1 : v;
  }

  // A pool of distinct n-grams per level 1 .. levels over `vocabulary` items.
  struct Pool {
    Ints counts, items;
    int64_t ngrams = 0;
  };
  Pool RandomPool(int64_t levels, int64_t vocabulary, bool int64) {
    Pool p;
    for (int64_t n = 1; n <= levels; ++n) {
      p.counts.push_back(static_cast<int64_t>(p.items.size()));
      std::set<Ints> seen;
      const int64_t want = n == 1 ? Uniform(0, vocabulary) : Uniform(0, 12);
      for (int64_t k = 0; k < want * 4 && static_cast<int64_t>(seen.size()) < want; ++k) {
        Ints g;
        for (int64_t i = 0; i < n; ++i) g.push_back(Item(Uniform(0, vocabulary - 1), vocabulary, int64));
        if (!seen.insert(g).second) continue;
        p.items.insert(p.items.end(), g.begin(), g.end());
        ++p.ngrams;
      }
    }
    if (p.items.empty()) {  // The pool must not be empty.
      p.items.push_back(0);
      p.ngrams = 1;
      p.counts.assign(static_cast<size_t>(levels), 1);
      p.counts[0] = 0;
    }
    return p;
  }

  HostTensor RandomInput(Shape shape, int64_t vocabulary, bool int64) {
    const int64_t n = *NumElements(shape);
    std::vector<int64_t> v(static_cast<size_t>(n));
    // A few items outside the vocabulary (and negative ones).
    for (int64_t& x : v)
      x = Uniform(0, 19) == 0 ? -Uniform(1, 3) : Item(Uniform(0, vocabulary), vocabulary, int64);
    if (int64) return HostTensor::Of<int64_t>(std::move(shape), v);
    return HostTensor::Of<int32_t>(std::move(shape), std::vector<int32_t>(v.begin(), v.end()));
  }

  std::mt19937 rng_{20261126};
};

TEST_F(TextCudaTest, RandomPoolsModesAndSkips) {
  const char* modes[] = {"TF", "IDF", "TFIDF"};
  for (int iter = 0; iter < 96; ++iter) {
    SCOPED_TRACE(std::to_string(iter));
    const bool int64 = iter % 2 == 1;
    const std::string mode = modes[(iter / 2) % 3];
    const bool weighted = (iter / 6) % 2 == 1;
    const bool batched = (iter / 12) % 2 == 1;
    const int64_t vocabulary = Uniform(2, 6);
    const int64_t levels = Uniform(1, 4);
    const Pool pool = RandomPool(levels, vocabulary, int64);
    const int64_t min_gram = Uniform(1, levels), max_gram = Uniform(min_gram, levels);
    const int64_t skip = iter % 8 == 7 ? INT64_MAX : Uniform(0, 5);
    // Output coordinates: a permutation, sometimes with repeats and gaps.
    Ints indexes(static_cast<size_t>(pool.ngrams));
    std::iota(indexes.begin(), indexes.end(), 0);
    std::shuffle(indexes.begin(), indexes.end(), rng_);
    if (iter % 5 == 0) {
      for (int64_t& j : indexes) j = j % 3 == 0 ? j / 3 : j + 2;
    }
    Attributes attrs = Attrs({{"mode", mode},
                              {"min_gram_length", min_gram},
                              {"max_gram_length", max_gram},
                              {"max_skip_count", skip},
                              {"ngram_counts", pool.counts},
                              {"ngram_indexes", indexes},
                              {"pool_int64s", pool.items}});
    if (weighted) {
      const int64_t size = *std::max_element(indexes.begin(), indexes.end()) + 1;
      std::vector<float> w(static_cast<size_t>(std::max<int64_t>(size, pool.ngrams)));
      indexes.resize(w.size(), 0);  // As many coordinates as weights.
      attrs.Set("ngram_indexes", indexes);
      for (float& x : w) x = static_cast<float>(Uniform(-1000, 1000)) / 7.0f;
      attrs.Set("weights", w);
    }
    const int64_t cols = Uniform(0, 40);
    const Shape shape = batched ? Shape{Uniform(1, 5), cols} : Shape{cols};
    Check(attrs, {RandomInput(shape, vocabulary, int64)});
  }
}

TEST_F(TextCudaTest, LongRowsShareCounts) {
  // A vocabulary of 2 items, every 1- to 3-gram in the pool: every start position of
  // [2, 5000] and [10000] items adds to the same few counts, at 8 skip distances.
  Ints items;
  Ints counts;
  for (int64_t n = 1; n <= 3; ++n) {
    counts.push_back(static_cast<int64_t>(items.size()));
    for (int64_t g = 0; g < (int64_t{1} << n); ++g) {
      for (int64_t i = n - 1; i >= 0; --i) items.push_back((g >> i) & 1);
    }
  }
  Ints indexes(14);
  std::iota(indexes.begin(), indexes.end(), 0);
  for (const char* mode : {"TF", "TFIDF"}) {
    Attributes attrs = Attrs({{"mode", std::string(mode)},
                              {"min_gram_length", int64_t{1}},
                              {"max_gram_length", int64_t{3}},
                              {"max_skip_count", int64_t{7}},
                              {"ngram_counts", counts},
                              {"ngram_indexes", indexes},
                              {"pool_int64s", items}});
    if (std::string(mode) == "TFIDF") attrs.Set("weights", std::vector<float>(14, 0.1f));
    std::vector<int32_t> bits(10000);
    for (int32_t& b : bits) b = static_cast<int32_t>(Uniform(0, 1));
    Check(attrs, {HostTensor::Of<int32_t>({2, 5000}, bits)});
    Check(attrs, {HostTensor::Of<int64_t>({10000}, Ints(bits.begin(), bits.end()))});
  }
}

TEST_F(TextCudaTest, EmptyInputs) {
  const Attributes attrs = Attrs({{"mode", std::string("TFIDF")},
                                  {"min_gram_length", int64_t{1}},
                                  {"max_gram_length", int64_t{2}},
                                  {"max_skip_count", int64_t{3}},
                                  {"ngram_counts", Ints{0, 2}},
                                  {"ngram_indexes", Ints{0, 1, 2}},
                                  {"pool_int64s", Ints{1, 2, 1, 2}},
                                  {"weights", std::vector<float>{-1.0f, 2.0f, 3.0f}}});
  Check(attrs, {HostTensor::Of<int32_t>({0}, {})});
  Check(attrs, {HostTensor::Of<int64_t>({3, 0}, {})});
  Check(attrs, {HostTensor::Of<int64_t>({0, 4}, {})});
}

}  // namespace
}  // namespace remex::kernels
