// FusedAttention (kernels/ops/math/attention.cc): softmax(scale Q K^T + mask) V against a
// double-precision loop written here, with Q, K, V and Y in the head-split and
// head-merged axis orders exporters write ([B, S, H, D] through q_perm [0, 2, 1, 3]),
// K given transposed, masks that broadcast, query blocks past one scratch block, several
// compute threads, rank 3, no keys; and the errors for inputs that do not agree.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/test_util.h"

namespace remex::kernels {
namespace attention_test {

using testing::Attrs;
using testing::HostTensor;
using testing::OpRunner;

std::vector<float> Random(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

Shape Permuted(const Shape& logical, const std::vector<int64_t>& perm) {
  // The stored shape whose Transpose by `perm` is `logical`: stored[perm[i]] = logical[i].
  Shape s(logical.size());
  for (size_t i = 0; i < perm.size(); ++i) s[perm[i]] = logical[i];
  return s;
}

// The offsets of a tensor stored so that Transpose(stored, perm) is `logical`: element
// (i0, i1, i2, i3) of the logical tensor is at i0 s[0] + i1 s[1] + i2 s[2] + i3 s[3]
// (stored[perm[i]] = logical[i], so logical axis i steps by the stored stride of axis
// perm[i]). Worked out once per tensor: the reference loops below index millions of
// elements.
struct StoredIndex {
  StoredIndex(const Shape& logical, const std::vector<int64_t>& perm) {
    const Shape stored = Permuted(logical, perm);
    std::vector<size_t> stored_strides(stored.size());
    size_t stride = 1;
    for (size_t a = stored.size(); a-- > 0;) {
      stored_strides[a] = stride;
      stride *= static_cast<size_t>(stored[a]);
    }
    for (size_t i = 0; i < perm.size(); ++i) s[i] = stored_strides[perm[i]];
  }
  size_t operator()(int64_t i0, int64_t i1, int64_t i2, int64_t i3) const {
    return i0 * s[0] + i1 * s[1] + i2 * s[2] + i3 * s[3];
  }
  size_t s[4] = {};
};

struct Case {
  int64_t b = 1, h = 2, sq = 3, sk = 5, d = 4, dv = 4;
  std::vector<int64_t> q_perm = {0, 1, 2, 3}, k_perm = {0, 1, 2, 3}, v_perm = {0, 1, 2, 3},
                       y_perm = {0, 1, 2, 3};
  float scale = 0.5f;
  Shape mask = {};           // empty: no mask
  bool causal_mask = false;  // -1e9 where the key lies after the query (with mask [Sq, Sk])
};

// Runs the case through the kernel and the reference; returns the largest difference.
double MaxError(const Case& c, uint32_t seed = 1) {
  const Shape ql = {c.b, c.h, c.sq, c.d}, kl = {c.b, c.h, c.sk, c.d}, vl = {c.b, c.h, c.sk, c.dv};
  const std::vector<float> q = Random(static_cast<size_t>(*NumElements(ql)), seed);
  const std::vector<float> k = Random(static_cast<size_t>(*NumElements(kl)), seed + 1);
  const std::vector<float> v = Random(static_cast<size_t>(*NumElements(vl)), seed + 2);
  std::vector<float> m;
  if (!c.mask.empty()) {
    m = Random(static_cast<size_t>(*NumElements(c.mask)), seed + 3);
    if (c.causal_mask) {
      for (int64_t i = 0; i < c.sq; ++i) {
        for (int64_t j = 0; j < c.sk; ++j) m[i * c.sk + j] = j > i + (c.sk - c.sq) ? -1e9f : 0.0f;
      }
    }
  }
  std::vector<HostTensor> in = {HostTensor::Of<float>(Permuted(ql, c.q_perm), q),
                                HostTensor::Of<float>(Permuted(kl, c.k_perm), k),
                                HostTensor::Of<float>(Permuted(vl, c.v_perm), v)};
  if (!c.mask.empty()) in.push_back(HostTensor::Of<float>(c.mask, m));
  OpRunner r;
  auto out = r.Run("FusedAttention",
                   Attrs({{"scale", c.scale},
                          {"q_perm", c.q_perm},
                          {"k_perm", c.k_perm},
                          {"v_perm", c.v_perm},
                          {"y_perm", c.y_perm}}),
                   in);
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  if (!out.ok()) return 1e9;
  const Shape yl = {c.b, c.h, c.sq, c.dv};
  EXPECT_EQ((*out)[0].shape, Permuted(yl, c.y_perm));
  const std::vector<float> y = (*out)[0].Values<float>();
  // The mask's element for (b, h, i, j), broadcasting right-aligned.
  auto mask_at = [&](int64_t b, int64_t h, int64_t i, int64_t j) -> double {
    if (c.mask.empty()) return 0;
    const int64_t full[4] = {b, h, i, j};
    size_t off = 0;
    const size_t lead = 4 - c.mask.size();
    for (size_t a = 0; a < c.mask.size(); ++a) off = off * c.mask[a] + (c.mask[a] == 1 ? 0 : full[lead + a]);
    return m[off];
  };
  const StoredIndex qi(ql, c.q_perm), ki(kl, c.k_perm), vi(vl, c.v_perm), yi(yl, c.y_perm);
  double worst = 0;
  for (int64_t b = 0; b < c.b; ++b) {
    for (int64_t h = 0; h < c.h; ++h) {
      for (int64_t i = 0; i < c.sq; ++i) {
        std::vector<double> s(static_cast<size_t>(c.sk));
        double mx = -std::numeric_limits<double>::infinity(), sum = 0;
        for (int64_t j = 0; j < c.sk; ++j) {
          double dot = 0;
          for (int64_t t = 0; t < c.d; ++t) {
            dot += double(q[qi(b, h, i, t)]) * k[ki(b, h, j, t)];
          }
          s[j] = dot * c.scale + mask_at(b, h, i, j);
          mx = std::max(mx, s[j]);
        }
        for (double& e : s) sum += (e = std::exp(e - mx));
        for (int64_t t = 0; t < c.dv; ++t) {
          double want = 0;
          for (int64_t j = 0; j < c.sk; ++j) want += s[j] / sum * v[vi(b, h, j, t)];
          const double got = y[yi(b, h, i, t)];
          worst = std::max(worst, std::abs(got - want));
        }
      }
    }
  }
  return worst;
}

TEST(FusedAttentionTest, MatchesTheReferenceInEveryAxisOrder) {
  EXPECT_LT(MaxError(Case{}), 1e-5);
  // The heads split and merged as exporters write them: [B, S, H, D].
  Case bshd{.b = 2, .h = 3, .sq = 7, .sk = 7, .d = 8, .dv = 8};
  bshd.q_perm = bshd.k_perm = bshd.v_perm = bshd.y_perm = {0, 2, 1, 3};
  EXPECT_LT(MaxError(bshd), 1e-5);
  // K given as K^T [B, H, D, Sk] (its strides make sgemm's 'N'), V with Dv != D.
  Case kt{.sk = 9, .dv = 6};
  kt.k_perm = {0, 1, 3, 2};
  EXPECT_LT(MaxError(kt), 1e-5);
  // Q with its rows contiguous (sgemm's 'T'), Y written with its rows contiguous too
  // (neither stride 1 along Dv: staged, then scattered).
  Case odd{.sq = 4, .d = 3, .dv = 2};
  odd.q_perm = {0, 1, 3, 2};
  odd.y_perm = {0, 1, 3, 2};
  odd.v_perm = {1, 0, 3, 2};
  EXPECT_LT(MaxError(odd), 1e-5);
}

TEST(FusedAttentionTest, MasksBroadcastFromAnyRank) {
  for (const Shape& mask :
       {Shape{1, 1, 1, 5}, Shape{2, 1, 1, 5}, Shape{3, 5}, Shape{5}, Shape{1, 2, 3, 5}, Shape{1}}) {
    Case c{.b = 2, .mask = mask};
    EXPECT_LT(MaxError(c), 1e-5) << ShapeToString(mask);
  }
  // A causal mask with -1e9 (a decoder step: 3 queries at the end of 5 keys).
  Case causal{.mask = {3, 5}, .causal_mask = true};
  EXPECT_LT(MaxError(causal), 1e-5);
}

TEST(FusedAttentionTest, LongQueriesAndKeysSplitIntoBlocksOverTheThreads) {
  // 150 queries: three blocks of at most 64 rows; 4 x 150 x 130 x 64 x 2 multiply-adds,
  // above the size that runs on one thread.
  Case big{.b = 1, .h = 4, .sq = 150, .sk = 130, .d = 64, .dv = 64, .scale = 0.125f, .mask = {1, 1, 1, 130}};
  big.q_perm = big.k_perm = big.v_perm = big.y_perm = {0, 2, 1, 3};
  EXPECT_LT(MaxError(big), 1e-4);
  // 40000 keys: blocks of 26 rows keep the scores' scratch within 4 MiB (30 rows: 26 + 4).
  Case long_keys{.b = 1, .h = 1, .sq = 30, .sk = 40000, .d = 2, .dv = 3};
  EXPECT_LT(MaxError(long_keys), 1e-5);
}

TEST(FusedAttentionTest, OneQueryRowAsInADecoderStep) {
  // One query against a cache of 257 keys, heads merged as exporters write them, a mask
  // over the keys: dot products and a weighted sum of V's rows.
  Case step{.b = 1, .h = 4, .sq = 1, .sk = 257, .d = 64, .dv = 64, .scale = 0.125f, .mask = {1, 1, 1, 257}};
  step.q_perm = step.y_perm = {0, 2, 1, 3};
  EXPECT_LT(MaxError(step), 1e-5);
  // Dv != D, Y's Dv strided, and K given as K^T (its D strided: the sgemm path).
  Case odd{.b = 2, .h = 3, .sq = 1, .sk = 33, .d = 5, .dv = 7};
  odd.y_perm = {0, 1, 3, 2};
  EXPECT_LT(MaxError(odd), 1e-5);
  odd.k_perm = {0, 1, 3, 2};
  EXPECT_LT(MaxError(odd), 1e-5);
  // Q with its D strided (packed first), V with its Dv strided (the sgemm path).
  Case q_strided{.b = 1, .h = 2, .sq = 1, .sk = 20, .d = 6, .dv = 3};
  q_strided.q_perm = {0, 1, 3, 2};
  EXPECT_LT(MaxError(q_strided), 1e-5);
  q_strided.v_perm = {0, 1, 3, 2};
  EXPECT_LT(MaxError(q_strided), 1e-5);
}

TEST(FusedAttentionTest, RankThreeAndNoKeys) {
  OpRunner r;
  const std::vector<float> q = Random(2 * 3 * 4, 5), k = Random(2 * 6 * 4, 6), v = Random(2 * 6 * 4, 7);
  auto out = r.Run("FusedAttention", Attrs({}),
                   {HostTensor::Of<float>({2, 3, 4}, q), HostTensor::Of<float>({2, 6, 4}, k),
                    HostTensor::Of<float>({2, 6, 4}, v)});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].shape, (Shape{2, 3, 4}));
  // The rows of a softmax sum to 1: with V all ones every output is 1.
  auto ones = r.Run("FusedAttention", Attrs({}),
                    {HostTensor::Of<float>({2, 3, 4}, q), HostTensor::Of<float>({2, 6, 4}, k),
                     HostTensor::Of<float>({2, 6, 4}, std::vector<float>(48, 1.0f))});
  ASSERT_TRUE(ones.ok());
  for (float y : (*ones)[0].Values<float>()) EXPECT_NEAR(y, 1.0f, 1e-6f);
  // No keys: the empty sum, zeros.
  auto empty = r.Run("FusedAttention", Attrs({}),
                     {HostTensor::Of<float>({2, 3, 4}, q), HostTensor::Of<float>({2, 0, 4}, {}),
                      HostTensor::Of<float>({2, 0, 4}, {})});
  ASSERT_TRUE(empty.ok()) << empty.status().ToString();
  for (float y : (*empty)[0].Values<float>()) EXPECT_EQ(y, 0.0f);
}

TEST(FusedAttentionTest, InputsThatDoNotAgreeAreErrors) {
  OpRunner r;
  auto f = [](Shape s) {
    return HostTensor::Of<float>(s, std::vector<float>(static_cast<size_t>(*NumElements(s))));
  };
  auto error = [&](std::vector<HostTensor> in, const Attributes& attrs = Attrs({})) {
    auto out = r.Run("FusedAttention", attrs, std::move(in));
    EXPECT_FALSE(out.ok());
    return out.ok() ? std::string() : std::string(out.status().message());
  };
  EXPECT_NE(error({f({1, 2, 3, 4}), f({1, 2, 5, 3}), f({1, 2, 5, 4})}).find("do not agree"),
            std::string::npos);
  EXPECT_NE(error({f({1, 2, 3, 4}), f({1, 3, 5, 4}), f({1, 3, 5, 4})}).find("do not agree"),
            std::string::npos);
  EXPECT_NE(error({f({1, 2, 3, 4}), f({1, 2, 5, 4}), f({1, 2, 6, 4})}).find("do not agree"),
            std::string::npos);
  EXPECT_NE(
      error({f({1, 2, 3, 4}), f({1, 2, 5, 4}), f({1, 2, 5, 4}), f({1, 2, 4, 5})}).find("does not broadcast"),
      std::string::npos);
  EXPECT_NE(
      error({f({1, 2, 3, 4}), f({1, 2, 5, 4}), f({1, 2, 5, 4}), f({1, 1, 2, 3, 5})}).find("higher rank"),
      std::string::npos);
  EXPECT_NE(error({f({2, 3}), f({2, 3}), f({2, 3})}).find("rank"), std::string::npos);
  EXPECT_NE(error({f({1, 2, 3, 4}), f({1, 2, 5, 4}), f({1, 2, 5, 4})},
                  Attrs({{"q_perm", std::vector<int64_t>{0, 1, 1, 3}}}))
                .find("q_perm must be a permutation"),
            std::string::npos);
  EXPECT_NE(
      error({HostTensor::Of<double>({1, 1, 1, 1}, {1.0}), f({1, 1, 1, 1}), f({1, 1, 1, 1})}).find("float32"),
      std::string::npos);
}

}  // namespace attention_test
}  // namespace remex::kernels
