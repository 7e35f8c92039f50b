// TfIdfVectorizer (kernels/ops/text/tfidf.cc): ONNX's examples (the node tests' pools and
// inputs), the three modes with and without weights, permuted output coordinates,
// trigrams over int64 items beyond int32, empty inputs, and the attribute and input
// errors. Expected values worked out by hand (checked against a port of ONNX's
// reference implementation).

#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/test_util.h"

namespace remex::kernels {
namespace tfidf_test {

using testing::Attrs;
using testing::HostTensor;
using testing::OpRunner;

using Ints = std::vector<int64_t>;
using Floats = std::vector<float>;

constexpr char kOp[] = "TfIdfVectorizer";

std::string Message(const StatusOr<std::vector<HostTensor>>& s) {
  return s.ok() ? "" : s.status().ToString();
}

// ONNX's node-test pool: unigrams 2, 3, 5, 4; bigrams (5, 6), (7, 8), (6, 7).
Attributes OnnxAttrs(const std::string& mode, int64_t min_gram, int64_t max_gram, int64_t skip) {
  return Attrs({{"mode", mode},
                {"min_gram_length", min_gram},
                {"max_gram_length", max_gram},
                {"max_skip_count", skip},
                {"ngram_counts", Ints{0, 4}},
                {"ngram_indexes", Ints{0, 1, 2, 3, 4, 5, 6}},
                {"pool_int64s", Ints{2, 3, 5, 4, 5, 6, 7, 8, 6, 7}}});
}

HostTensor OnnxInput() { return HostTensor::Of<int32_t>({12}, {1, 1, 3, 3, 3, 7, 8, 6, 7, 5, 6, 8}); }
HostTensor OnnxBatch() { return HostTensor::Of<int32_t>({2, 6}, {1, 1, 3, 3, 3, 7, 8, 6, 7, 5, 6, 8}); }

void ExpectOutput(OpRunner& r, const Attributes& attrs, const HostTensor& x, const Shape& shape,
                  const Floats& want) {
  auto out = r.Run(kOp, attrs, {x});
  ASSERT_TRUE(out.ok()) << Message(out);
  ASSERT_EQ(out->size(), 1u);
  EXPECT_EQ((*out)[0].dtype, DType::kFloat32);
  EXPECT_EQ((*out)[0].shape, shape);
  EXPECT_EQ((*out)[0].Values<float>(), want);
}

TEST(TfIdfVectorizerTest, OnnxExamples) {
  OpRunner r;
  // Bigrams only, no skips: (7, 8), (6, 7) and (5, 6) once each.
  ExpectOutput(r, OnnxAttrs("TF", 2, 2, 0), OnnxInput(), {7}, {0, 0, 0, 0, 1, 1, 1});
  ExpectOutput(r, OnnxAttrs("TF", 2, 2, 0), OnnxBatch(), {2, 7}, {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1});
  // Up to 5 skipped items: (7, 8) also at distances 6 and 3.
  ExpectOutput(r, OnnxAttrs("TF", 2, 2, 5), OnnxInput(), {7}, {0, 0, 0, 0, 1, 3, 1});
  ExpectOutput(r, OnnxAttrs("TF", 2, 2, 5), OnnxBatch(), {2, 7}, {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1});
  // Unigrams too, counted once per position whatever the skips: 3 three times, 5 once.
  ExpectOutput(r, OnnxAttrs("TF", 1, 2, 5), OnnxInput(), {7}, {0, 3, 1, 0, 1, 3, 1});
  ExpectOutput(r, OnnxAttrs("TF", 1, 2, 5), OnnxBatch(), {2, 7}, {0, 3, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1, 1, 1});
  // An empty unigram level.
  const Attributes level_empty = Attrs({{"mode", std::string("TF")},
                                        {"min_gram_length", int64_t{2}},
                                        {"max_gram_length", int64_t{2}},
                                        {"max_skip_count", int64_t{0}},
                                        {"ngram_counts", Ints{0, 0}},
                                        {"ngram_indexes", Ints{0, 1, 2}},
                                        {"pool_int64s", Ints{5, 6, 7, 8, 6, 7}}});
  ExpectOutput(r, level_empty, OnnxInput(), {3}, {1, 1, 1});
}

TEST(TfIdfVectorizerTest, Modes) {
  OpRunner r;
  const Floats w = {0.5f, 0.25f, 2, 4, -1, 8, 0.125f};
  // Counts 0 3 1 0 1 3 1 (TF above).
  ExpectOutput(r, OnnxAttrs("IDF", 1, 2, 5), OnnxInput(), {7}, {0, 1, 1, 0, 1, 1, 1});
  ExpectOutput(r, OnnxAttrs("TFIDF", 1, 2, 5), OnnxInput(), {7}, {0, 3, 1, 0, 1, 3, 1});
  Attributes a = OnnxAttrs("IDF", 1, 2, 5);
  a.Set("weights", w);
  ExpectOutput(r, a, OnnxInput(), {7}, {0, 0.25f, 2, 0, -1, 8, 0.125f});
  a.Set("mode", std::string("TFIDF"));
  ExpectOutput(r, a, OnnxInput(), {7}, {0, 0.75f, 2, 0, -1, 24, 0.125f});
  // Weights scale output coordinates (as ONNX Runtime applies them): with the n-grams
  // mapped to the coordinates in reverse, coordinate 0 holds (6, 7) and takes w[0].
  a.Set("ngram_indexes", Ints{6, 5, 4, 3, 2, 1, 0});
  a.Set("mode", std::string("TF"));
  ExpectOutput(r, a, OnnxInput(), {7}, {1, 3, 1, 0, 1, 3, 0});
  a.Set("mode", std::string("IDF"));
  ExpectOutput(r, a, OnnxInput(), {7}, {0.5f, 0.25f, 2, 0, -1, 8, 0});
}

TEST(TfIdfVectorizerTest, TrigramsOfInt64ItemsWithSkips) {
  OpRunner r;
  const int64_t a = int64_t{1} << 40, b = -7, c = 3;
  // 1-gram a; 2-gram (a, b); 3-grams (a, b, c), (b, b, b).
  Attributes attrs = Attrs({{"mode", std::string("TF")},
                            {"min_gram_length", int64_t{1}},
                            {"max_gram_length", int64_t{3}},
                            {"max_skip_count", int64_t{1}},
                            {"ngram_counts", Ints{0, 1, 3}},
                            {"ngram_indexes", Ints{0, 1, 2, 3}},
                            {"pool_int64s", Ints{a, a, b, a, b, c, b, b, b}}});
  const HostTensor x = HostTensor::Of<int64_t>({7}, {a, b, b, c, b, b, b});
  // (a, b) at distances 1 and 2; (b, b, b) at items 4-6 and 2, 4, 6.
  ExpectOutput(r, attrs, x, {4}, {1, 2, 0, 2});
  attrs.Set("max_skip_count", int64_t{0});
  ExpectOutput(r, attrs, x, {4}, {1, 1, 0, 1});
  attrs.Set("max_skip_count", int64_t{1});
  attrs.Set("min_gram_length", int64_t{3});
  ExpectOutput(r, attrs, x, {4}, {0, 0, 0, 2});
  // Two rows, 2- and 3-grams, distances 1 to 3.
  attrs.Set("min_gram_length", int64_t{2});
  attrs.Set("max_skip_count", int64_t{2});
  ExpectOutput(r, attrs, HostTensor::Of<int64_t>({2, 7}, {a, b, b, c, b, b, b, b, b, b, b, a, c, b}), {2, 4},
               {0, 2, 0, 2, 0, 1, 0, 3});
  // A huge skip count is bounded by the row: (a, b) at distances 1, 2, 4, 5 and 6.
  attrs.Set("max_skip_count", INT64_MAX);
  ExpectOutput(r, attrs, x, {4}, {0, 5, 0, 2});
  // int32 items compare as int64: -7 matches b.
  attrs.Set("min_gram_length", int64_t{3});
  ExpectOutput(r, attrs, HostTensor::Of<int32_t>({3}, {-7, -7, -7}), {4}, {0, 0, 0, 1});
}

TEST(TfIdfVectorizerTest, UnloadedLevelsKeepTheirCoordinates) {
  OpRunner r;
  // Unigrams are not loaded (min_gram_length 2) but number the n-grams: the bigrams
  // take ngram_indexes[4..6]. A unigram repeated in the unloaded level is accepted.
  Attributes attrs = OnnxAttrs("TF", 2, 2, 0);
  attrs.Set("pool_int64s", Ints{2, 3, 2, 4, 5, 6, 7, 8, 6, 7});
  attrs.Set("ngram_indexes", Ints{0, 0, 0, 0, 3, 2, 1});
  ExpectOutput(r, attrs, OnnxInput(), {4}, {0, 1, 1, 1});
}

TEST(TfIdfVectorizerTest, EmptyInputs) {
  OpRunner r;
  Attributes attrs = OnnxAttrs("TFIDF", 1, 2, 5);
  attrs.Set("weights", Floats{1, 2, 3, 4, 5, 6, 7});
  ExpectOutput(r, attrs, HostTensor::Of<int32_t>({0}, {}), {7}, Floats(7, 0.0f));
  ExpectOutput(r, attrs, HostTensor::Of<int64_t>({2, 0}, {}), {2, 7}, Floats(14, 0.0f));
  ExpectOutput(r, attrs, HostTensor::Of<int64_t>({0, 3}, {}), {0, 7}, {});
  ExpectOutput(r, OnnxAttrs("TF", 2, 2, 5), HostTensor::Of<int32_t>({1}, {5}), {7}, Floats(7, 0.0f));
}

// The status of running TfIdfVectorizer (shape function, kernel creation, kernel).
Status RunStatus(OpRunner& r, const Attributes& attrs, HostTensor x = OnnxInput()) {
  auto out = r.Run(kOp, attrs, {std::move(x)});
  return out.ok() ? OkStatus() : out.status();
}

void ExpectInvalid(OpRunner& r, const Attributes& attrs, const std::string& what,
                   HostTensor x = OnnxInput()) {
  const Status s = RunStatus(r, attrs, std::move(x));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << what << ": " << s.ToString();
  EXPECT_NE(s.message().find("TfIdfVectorizer"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find(what), std::string::npos) << s.ToString();
}

TEST(TfIdfVectorizerTest, AttributeErrors) {
  OpRunner r;
  auto with = [](std::string name, AttrValue v) {
    Attributes a = OnnxAttrs("TF", 1, 2, 1);
    a.Set(std::move(name), std::move(v));
    return a;
  };
  ASSERT_TRUE(RunStatus(r, OnnxAttrs("TF", 1, 2, 1)).ok());
  ExpectInvalid(r, with("mode", std::string("BM25")), "mode");
  for (const char* name : {"mode", "min_gram_length", "max_gram_length", "max_skip_count", "ngram_counts",
                           "ngram_indexes", "pool_int64s"}) {
    const Attributes all = OnnxAttrs("TF", 1, 2, 1);
    Attributes a;
    for (const auto& [k, v] : all.all()) {
      if (k != name) a.Set(k, v);
    }
    ExpectInvalid(r, a, name);
  }
  ExpectInvalid(r, with("min_gram_length", int64_t{0}), "min_gram_length");
  ExpectInvalid(r, with("max_gram_length", int64_t{0}), "max_gram_length");
  ExpectInvalid(r, with("max_gram_length", int64_t{3}), "max_gram_length");  // Past ngram_counts.
  ExpectInvalid(r, with("max_skip_count", int64_t{-1}), "max_skip_count");
  ExpectInvalid(r, with("ngram_counts", Ints{}), "ngram_counts");
  ExpectInvalid(r, with("ngram_counts", Ints{0, 11}), "ngram_counts");
  ExpectInvalid(r, with("ngram_counts", Ints{5, 4}), "ngram_counts");
  ExpectInvalid(r, with("ngram_counts", Ints{-1, 4}), "ngram_counts");
  ExpectInvalid(r, with("ngram_counts", Ints{0, 3}), "ngram_counts");  // 7 items are not whole bigrams.
  ExpectInvalid(r, with("ngram_counts", Floats{0, 4}), "ngram_counts");
  ExpectInvalid(r, with("ngram_indexes", Ints{}), "ngram_indexes");
  ExpectInvalid(r, with("ngram_indexes", Ints{0, 1, 2, 3, 4, 5}), "ngram_indexes");  // 7 n-grams.
  ExpectInvalid(r, with("ngram_indexes", Ints{0, 1, 2, -3, 4, 5, 6}), "ngram_indexes");
  ExpectInvalid(r, with("ngram_indexes", Ints{0, 1, 2, int64_t{1} << 40, 4, 5, 6}), "ngram_indexes");
  ExpectInvalid(r, with("pool_int64s", Ints{}), "pool_int64s");
  ExpectInvalid(r, with("weights", Floats{1, 2, 3}), "weights");
  Attributes gaps = with("ngram_indexes", Ints{0, 1, 2, 3, 4, 5, 9});
  ASSERT_TRUE(RunStatus(r, gaps).ok());
  gaps.Set("weights", Floats{1, 2, 3, 4, 5, 6, 7});  // Fewer than the 10 coordinates.
  ExpectInvalid(r, gaps, "weights");
  // A loaded n-gram twice (the bigram (5, 6)), refused when the kernel is made.
  ExpectInvalid(r, with("pool_int64s", Ints{2, 3, 5, 4, 5, 6, 7, 8, 5, 6}), "more than once");
  ExpectInvalid(r, with("pool_int64s", Ints{2, 3, 2, 4, 5, 6, 7, 8, 6, 7}), "more than once");
  // Strings: not implemented.
  const Status s = RunStatus(r, with("pool_strings", std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(s.code(), StatusCode::kUnimplemented) << s.ToString();
  EXPECT_NE(s.message().find("pool_strings"), std::string::npos) << s.ToString();
}

TEST(TfIdfVectorizerTest, InputErrors) {
  OpRunner r;
  const Attributes attrs = OnnxAttrs("TF", 1, 2, 1);
  ExpectInvalid(r, attrs, "X", HostTensor::Of<float>({2}, {1, 2}));
  ExpectInvalid(r, attrs, "X", HostTensor::Of<int32_t>({1, 1, 2}, {1, 2}));
  ExpectInvalid(r, attrs, "X", HostTensor::Of<int64_t>({}, {1}));
  EXPECT_FALSE(r.Run(kOp, attrs, {}).ok());
  EXPECT_FALSE(r.Run(kOp, attrs, {OnnxInput(), OnnxInput()}).ok());
}

}  // namespace tfidf_test
}  // namespace remex::kernels
