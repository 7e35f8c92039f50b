// FusedAttention: scaled dot-product attention in one kernel, made by the compiler from
// the MatMul, scale, mask Add, Softmax and MatMul an exporter writes
// (host_client/compiler/passes/attention_fusion.h), with the head split and merge
// Transposes around it taken in as strides. The computation is that of ONNX
// Attention-23 without its optional inputs and of "Attention Is All You Need"
// (Vaswani et al., 2017, eq. 1):
//
//   Y = softmax(scale * Q K^T + mask) V
//
// Inputs (float32, each of rank r, 3 or 4, in whatever axis order the model holds it):
//   Q     logical [batch..., Sq, D]  = Transpose(input 0, q_perm)
//   K     logical [batch..., Sk, D]  = Transpose(input 1, k_perm)   (K, not K^T)
//   V     logical [batch..., Sk, Dv] = Transpose(input 2, v_perm)
//   mask  optional (input 3), float32 of rank <= r, broadcasting (right-aligned) to
//         [batch..., Sq, Sk] without growing it: each of its dims is 1 or the target's
// Output: Transpose(logical Y [batch..., Sq, Dv], y_perm), so that y_perm [0, 2, 1, 3]
// writes the heads merged back ([B, Sq, H, Dv]).
// Attributes: scale (float, default 1), q_perm, k_perm, v_perm, y_perm (ints, a
// permutation of [0, r); default the identity). The batch dims of Q, K and V must be
// equal (no broadcasting), D of Q and K and Sk of K and V too.
//
// Softmax along the keys as the Softmax kernel computes it (softmax_cpu.h: max skips
// NaN); Sk = 0 gives Y = 0, as MatMul of the empty product does. The products are
// oneDNN's sgemm, one (batch, block of query rows) at a time, the blocks spread over the
// compute threads (one query row, a decoder step's, as dot products and a weighted sum
// of V's rows instead, where the elements of K's and V's rows are contiguous: sgemm's
// set-up costs more than such a product); the scores live in a per-block scratch of
// 64 x Sk floats, never in a [batch..., Sq, Sk] tensor. INVALID_ARGUMENT for other
// dtypes, ranks or shapes.

#include <algorithm>
#include <atomic>
#include <cstring>
#include <new>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <vector>

#include "kernels/internal.h"
#include "kernels/op_attrs.h"
#include "kernels/ops/math/softmax_cpu.h"

namespace remex::kernels::internal {
namespace {

constexpr std::string_view kFusedAttention = "FusedAttention";
// Query rows per block: the scores scratch of a block is at most kBlockRows x Sk floats,
// and fewer rows where Sk is long, so that a block's scratch stays within
// kScratchFloats (4 MiB) unless one row is longer (then one row, Sk floats: no more
// than K already holds).
constexpr int64_t kBlockRows = 64;
constexpr int64_t kScratchFloats = int64_t{1} << 20;

constexpr const char* kPermNames[4] = {"q_perm", "k_perm", "v_perm", "y_perm"};

}  // namespace

StatusOr<AttentionAttrs> AttentionAttrsOf(const Attributes& attrs) {
  AttentionAttrs a;
  StatusOr<float> scale = attrs.Float("scale", 1.0f);
  if (!scale.ok()) return OpError(kFusedAttention, scale.status().message());
  a.scale = *scale;
  for (int t = 0; t < 4; ++t) {
    StatusOr<std::vector<int64_t>> perm = attrs.Ints(kPermNames[t], {});
    if (!perm.ok()) return OpError(kFusedAttention, perm.status().message());
    a.perm[t] = *std::move(perm);
    const int64_t n = static_cast<int64_t>(a.perm[t].size());
    std::vector<bool> seen(a.perm[t].size(), false);
    for (int64_t p : a.perm[t]) {
      if (p < 0 || p >= n || seen[p]) {
        return OpError(kFusedAttention, std::string(kPermNames[t]) + " must be a permutation of [0, " +
                                            std::to_string(n) + ")");
      }
      seen[p] = true;
    }
  }
  return a;
}

StatusOr<AttentionGeometry> AttentionGeometryOf(const AttentionAttrs& attrs, std::span<const ShapeFnArg> in) {
  if (in.size() < 3 || in.size() > 4 || !in[0].present || !in[1].present || !in[2].present) {
    return OpError(kFusedAttention, "expects Q, K, V and an optional mask");
  }
  const bool has_mask = in.size() == 4 && in[3].present;
  for (size_t i = 0; i < (has_mask ? 4u : 3u); ++i) {
    if (in[i].dtype != DType::kFloat32) {
      return OpError(kFusedAttention, "input " + std::to_string(i) + " must be float32, got " +
                                          std::string(DTypeName(in[i].dtype)));
    }
  }
  const size_t rank = in[0].shape.size();
  if (rank < 3 || rank > 4 || in[1].shape.size() != rank || in[2].shape.size() != rank) {
    return OpError(kFusedAttention, "Q, K and V must have one rank, 3 or 4, got " +
                                        ShapeToString(in[0].shape) + ", " + ShapeToString(in[1].shape) +
                                        " and " + ShapeToString(in[2].shape));
  }
  AttentionGeometry g;
  g.rank = rank;
  g.has_mask = has_mask;
  g.attrs = attrs;
  for (int t = 0; t < 4; ++t) {
    if (g.attrs.perm[t].empty()) {
      for (size_t i = 0; i < rank; ++i) g.attrs.perm[t].push_back(static_cast<int64_t>(i));
    } else if (g.attrs.perm[t].size() != rank) {
      return OpError(kFusedAttention, std::string(kPermNames[t]) + " has " +
                                          std::to_string(g.attrs.perm[t].size()) + " axes, the inputs " +
                                          std::to_string(rank));
    }
  }
  Shape logical[3];
  for (int t = 0; t < 3; ++t) {
    const std::vector<int64_t> stored = RowMajorStrides(in[t].shape);
    logical[t].resize(rank);
    g.stride[t].resize(rank);
    for (size_t i = 0; i < rank; ++i) {
      logical[t][i] = in[t].shape[g.attrs.perm[t][i]];
      g.stride[t][i] = stored[g.attrs.perm[t][i]];
    }
  }
  const Shape& q = logical[0];
  const Shape& k = logical[1];
  const Shape& v = logical[2];
  g.batch.assign(q.begin(), q.end() - 2);
  if (!std::equal(g.batch.begin(), g.batch.end(), k.begin()) ||
      !std::equal(g.batch.begin(), g.batch.end(), v.begin()) || q[rank - 1] != k[rank - 1] ||
      k[rank - 2] != v[rank - 2]) {
    return OpError(kFusedAttention, "Q " + ShapeToString(q) + ", K " + ShapeToString(k) + " and V " +
                                        ShapeToString(v) + " (logical) do not agree");
  }
  for (int64_t b : g.batch) g.batches *= b;
  g.sq = q[rank - 2];
  g.d = q[rank - 1];
  g.sk = k[rank - 2];
  g.dv = v[rank - 1];
  Shape y = g.batch;
  y.push_back(g.sq);
  y.push_back(g.dv);
  REMEX_RETURN_IF_ERROR(CheckedNumElements(kFusedAttention, y).status());
  g.y_shape.resize(rank);
  for (size_t i = 0; i < rank; ++i) g.y_shape[i] = y[g.attrs.perm[3][i]];
  // The output is stored as Transpose(Y, y_perm): logical axis y_perm[i] is stored axis i.
  const std::vector<int64_t> y_stored = RowMajorStrides(g.y_shape);
  g.stride[3].resize(rank);
  for (size_t i = 0; i < rank; ++i) g.stride[3][g.attrs.perm[3][i]] = y_stored[i];
  if (has_mask) {
    const Shape& m = in[3].shape;
    Shape target = g.batch;
    target.push_back(g.sq);
    target.push_back(g.sk);
    if (m.size() > rank) {
      return OpError(kFusedAttention, "mask " + ShapeToString(m) + " has a higher rank than the scores " +
                                          ShapeToString(target));
    }
    const std::vector<int64_t> m_stored = RowMajorStrides(m);
    g.mask_stride.assign(rank, 0);
    for (size_t j = 0; j < m.size(); ++j) {
      const size_t i = rank - m.size() + j;
      if (m[j] != 1 && m[j] != target[i]) {
        return OpError(kFusedAttention, "mask " + ShapeToString(m) + " does not broadcast to the scores " +
                                            ShapeToString(target));
      }
      if (m[j] != 1) g.mask_stride[i] = m_stored[j];
    }
  }
  return g;
}

namespace {

StatusOr<std::vector<TensorInfo>> InferFusedAttention(const Attributes& attrs,
                                                      std::span<const ShapeFnArg> in) {
  REMEX_ASSIGN_OR_RETURN(const AttentionAttrs parsed, AttentionAttrsOf(attrs));
  REMEX_ASSIGN_OR_RETURN(const AttentionGeometry g, AttentionGeometryOf(parsed, in));
  return std::vector<TensorInfo>{{DType::kFloat32, g.y_shape}};
}

OpDef FusedAttentionDef() {
  OpDef def;
  def.name = std::string(kFusedAttention);
  def.min_inputs = 3;
  def.max_inputs = 4;
  def.infer = InferFusedAttention;
  return def;
}

// A [rows x cols] matrix in memory with element strides (rs, cs), as sgemm takes it
// (row-major): 'N' with leading dimension rs when its columns are contiguous, 'T' with
// cs when its rows are (a dim of 1 leaves its stride free). False when neither holds
// (then the caller packs it).
bool AsGemmOperand(int64_t rows, int64_t cols, int64_t rs, int64_t cs, char* trans, int64_t* ld) {
  if ((cs == 1 || cols == 1) && (rows == 1 || rs >= std::max<int64_t>(cols, 1))) {
    *trans = 'N';
    *ld = rows == 1 ? std::max<int64_t>(cols, 1) : rs;
    return true;
  }
  if ((rs == 1 || rows == 1) && (cols == 1 || cs >= std::max<int64_t>(rows, 1))) {
    *trans = 'T';
    *ld = cols == 1 ? std::max<int64_t>(rows, 1) : cs;
    return true;
  }
  return false;
}

// Copies a strided [rows x cols] matrix into dst, row-major.
void Pack(const float* src, int64_t rows, int64_t cols, int64_t rs, int64_t cs, float* dst) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) dst[r * cols + c] = src[r * rs + c * cs];
  }
}

// One operand of a product: where it is and how sgemm reads it, packed into `scratch`
// when its strides need it.
struct GemmOperand {
  const float* p;
  char trans;
  int64_t ld;
};
GemmOperand Operand(const float* p, int64_t rows, int64_t cols, int64_t rs, int64_t cs,
                    std::vector<float>& scratch) {
  GemmOperand o{p, 'N', 0};
  if (AsGemmOperand(rows, cols, rs, cs, &o.trans, &o.ld)) return o;
  scratch.resize(static_cast<size_t>(rows * cols));
  Pack(p, rows, cols, rs, cs, scratch.data());
  return {scratch.data(), 'N', std::max<int64_t>(cols, 1)};
}

// One query row (a decoder step's): scores[j] = scale * (q . K row j), q's D elements
// `qd` apart, K's rows `ks` apart with D contiguous. For one row sgemm's set-up costs
// more than the product (at Sk 256, D 64: about 10 times the dot products).
REMEX_CPU_CLONES void ScoresOfOneRow(const float* q, int64_t qd, const float* k, int64_t ks, int64_t sk, int64_t d,
                                     float scale, float* q_packed, float* scores) {
  for (int64_t t = 0; t < d; ++t) q_packed[t] = q[t * qd];
  for (int64_t j = 0; j < sk; ++j) {
    const float* kr = k + j * ks;
    float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
    for (int64_t t = 0; t < d; ++t) dot += q_packed[t] * kr[t];
    scores[j] = scale * dot;
  }
}

// y [Dv] = sum over j of p[j] * V row j (V's rows `vs` apart, Dv contiguous), summed in
// acc, written with y's stride `yd`.
REMEX_CPU_CLONES void WeightedRowsOfOneRow(const float* p, const float* v, int64_t vs, int64_t sk, int64_t dv,
                                           float* acc, float* y, int64_t yd) {
  std::fill(acc, acc + dv, 0.0f);
  for (int64_t j = 0; j < sk; ++j) {
    const float pj = p[j];
    const float* vr = v + j * vs;
#pragma omp simd
    for (int64_t t = 0; t < dv; ++t) acc[t] += pj * vr[t];
  }
  for (int64_t t = 0; t < dv; ++t) y[t * yd] = acc[t];
}

class FusedAttentionKernel final : public ValidatedKernel {
 public:
  static StatusOr<std::unique_ptr<FusedAttentionKernel>> Create(const OpDef& def, const Attributes& attrs) {
    REMEX_ASSIGN_OR_RETURN(AttentionAttrs parsed, AttentionAttrsOf(attrs));
    return std::make_unique<FusedAttentionKernel>(def, attrs, std::move(parsed));
  }
  FusedAttentionKernel(const OpDef& def, const Attributes& attrs, AttentionAttrs parsed)
      : ValidatedKernel(def, attrs), attrs_(std::move(parsed)) {}
  // Q, K, V and the mask may be views (a KV cache the VM grows in place): each is read
  // through the strides it is stored with.
  bool ReadsViews() const override { return true; }

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    REMEX_ASSIGN_OR_RETURN(AttentionGeometry g, AttentionGeometryOf(attrs_, ToShapeArgs(in)));
    // A view's strides are those of where its elements lie (AttentionGeometryOf took
    // every input as dense).
    for (size_t t = 0; t < 3; ++t) {
      if (in[t].physical.empty()) continue;
      const std::vector<int64_t> stored = in[t].StoredStrides();
      for (size_t i = 0; i < g.rank; ++i) g.stride[t][i] = stored[g.attrs.perm[t][i]];
    }
    if (g.has_mask && !in[3].physical.empty()) {
      const Shape& m = in[3].shape;
      const std::vector<int64_t> stored = in[3].StoredStrides();
      for (size_t j = 0; j < m.size(); ++j) {
        if (m[j] != 1) g.mask_stride[g.rank - m.size() + j] = stored[j];
      }
    }
    float* y = DataAs<float>(out[0]);
    if (g.batches == 0 || g.sq == 0 || g.dv == 0) return OkStatus();
    if (g.sk == 0) {  // softmax over no keys: the empty sum
      std::memset(y, 0, static_cast<size_t>(g.batches * g.sq * g.dv) * sizeof(float));
      return OkStatus();
    }
    const float* q = DataAs<const float>(in[0]);
    const float* k = DataAs<const float>(in[1]);
    const float* v = DataAs<const float>(in[2]);
    const float* mask = g.has_mask ? DataAs<const float>(in[3]) : nullptr;
    const int64_t block_rows = std::clamp<int64_t>(kScratchFloats / g.sk, 1, kBlockRows);
    const int64_t blocks = (g.sq + block_rows - 1) / block_rows;
    const int64_t tasks = g.batches * blocks;
    // Small calls on the calling thread, where forking the team costs more than it saves.
    const double macs = static_cast<double>(g.batches) * static_cast<double>(g.sq) *
                        static_cast<double>(g.sk) * static_cast<double>(g.d + g.dv);
    const int64_t grain = macs < static_cast<double>(kSmallPrimitiveMacs) ? tasks : 1;
    std::atomic<bool> failed{false}, out_of_memory{false};
    ParallelFor(tasks, grain, [&](int64_t t0, int64_t t1, int) {
      try {
        RunBlocks(g, q, k, v, mask, y, t0, t1, blocks, block_rows, failed);
      } catch (const std::bad_alloc&) {  // a scratch: no exception may leave the team
        out_of_memory = true;
      }
    });
    if (out_of_memory)
      return ResourceExhausted(op() + ": out of memory for the scores of " + std::to_string(block_rows) +
                               " x " + std::to_string(g.sk));
    if (failed) return OpError(op(), "oneDNN's sgemm failed");
    return OkStatus();
  }

 private:
  // Tasks [t0, t1): task t is batch t / blocks, query rows from (t % blocks) * block_rows.
  static void RunBlocks(const AttentionGeometry& g, const float* q, const float* k, const float* v,
                        const float* mask, float* y, int64_t t0, int64_t t1, int64_t blocks,
                        int64_t block_rows, std::atomic<bool>& failed) {
    const size_t r = g.rank;
    // The element offset of logical batch index `b` (flattened) in an operand.
    auto batch_offset = [&](const std::vector<int64_t>& stride, int64_t b) {
      int64_t off = 0;
      for (size_t i = r - 2; i-- > 0;) {
        off += (b % g.batch[i]) * stride[i];
        b /= g.batch[i];
      }
      return off;
    };
    {
      std::vector<float> scores, packed_q, packed_k, packed_v, staged_y;
      for (int64_t t = t0; t < t1 && !failed.load(std::memory_order_relaxed); ++t) {
        const int64_t b = t / blocks, row0 = (t % blocks) * block_rows;
        const int64_t rows = std::min(block_rows, g.sq - row0);
        const float* qb = q + batch_offset(g.stride[0], b) + row0 * g.stride[0][r - 2];
        const float* kb = k + batch_offset(g.stride[1], b);
        const float* vb = v + batch_offset(g.stride[2], b);
        float* yb = y + batch_offset(g.stride[3], b) + row0 * g.stride[3][r - 2];
        scores.resize(static_cast<size_t>(rows * g.sk));
        // One query row, the elements of K's and V's rows contiguous: dot products and a
        // weighted sum of V's rows, no sgemm.
        const bool one_row = rows == 1 && g.d > 0 && g.dv > 0 && g.stride[1][r - 1] == 1 && g.stride[2][r - 1] == 1;
        if (one_row) {
          packed_q.resize(static_cast<size_t>(std::max(g.d, g.dv)));
          ScoresOfOneRow(qb, g.stride[0][r - 1], kb, g.stride[1][r - 2], g.sk, g.d, g.attrs.scale, packed_q.data(),
                         scores.data());
        }
        // scores [rows x Sk] = scale * Q [rows x D] . (K [Sk x D])^T
        const GemmOperand a = one_row || g.d == 0
                                  ? GemmOperand{qb, 'N', 1}
                                  : Operand(qb, rows, g.d, g.stride[0][r - 2], g.stride[0][r - 1], packed_q);
        GemmOperand kt = one_row || g.d == 0 ? GemmOperand{kb, 'N', 1}
                                  : Operand(kb, g.sk, g.d, g.stride[1][r - 2], g.stride[1][r - 1], packed_k);
        kt.trans = kt.trans == 'N' ? 'T' : 'N';  // K^T
        if (one_row) {
          // computed above
        } else if (g.d == 0) {
          std::fill(scores.begin(), scores.end(), 0.0f);
        } else if (dnnl::sgemm(a.trans, kt.trans, rows, g.sk, g.d, g.attrs.scale, a.p, a.ld, kt.p, kt.ld,
                               0.0f, scores.data(), g.sk) != dnnl::status::success) {
          failed = true;
          break;
        }
        if (mask) {
          int64_t m_off = row0 * g.mask_stride[r - 2];
          int64_t rest = b;
          for (size_t i = r - 2; i-- > 0;) {
            m_off += (rest % g.batch[i]) * g.mask_stride[i];
            rest /= g.batch[i];
          }
          const int64_t ms = g.mask_stride[r - 1];
          for (int64_t i = 0; i < rows; ++i) {
            const float* mr = mask + m_off + i * g.mask_stride[r - 2];
            float* sr = scores.data() + i * g.sk;
            if (ms == 1) {
              for (int64_t j = 0; j < g.sk; ++j) sr[j] += mr[j];
            } else {
              for (int64_t j = 0; j < g.sk; ++j) sr[j] += mr[j * ms];
            }
          }
        }
        SoftmaxRowsFloat32(scores.data(), scores.data(), rows, g.sk, false);
        if (one_row) {
          WeightedRowsOfOneRow(scores.data(), vb, g.stride[2][r - 2], g.sk, g.dv, packed_q.data(), yb,
                               g.stride[3][r - 1]);
          continue;
        }
        // Y [rows x Dv] = P [rows x Sk] . V [Sk x Dv], into Y's rows in place when its
        // columns are contiguous, else through `staged_y`.
        const GemmOperand vb_op = Operand(vb, g.sk, g.dv, g.stride[2][r - 2], g.stride[2][r - 1], packed_v);
        const int64_t ys = g.stride[3][r - 2], yd = g.stride[3][r - 1];
        const bool direct = (yd == 1 || g.dv == 1) && (rows == 1 || ys >= g.dv);
        float* c = yb;
        int64_t ldc = rows == 1 ? std::max<int64_t>(g.dv, 1) : ys;
        if (!direct) {
          staged_y.resize(static_cast<size_t>(rows * g.dv));
          c = staged_y.data();
          ldc = g.dv;
        }
        if (dnnl::sgemm('N', vb_op.trans, rows, g.dv, g.sk, 1.0f, scores.data(), g.sk, vb_op.p, vb_op.ld,
                        0.0f, c, ldc) != dnnl::status::success) {
          failed = true;
          break;
        }
        if (!direct) {
          for (int64_t i = 0; i < rows; ++i) {
            for (int64_t j = 0; j < g.dv; ++j) yb[i * ys + j * yd] = staged_y[i * g.dv + j];
          }
        }
      }
    }
  }

  const AttentionAttrs attrs_;
};

}  // namespace

Status AddAttentionOpDefs(KernelRegistry& registry) { return registry.AddOp(FusedAttentionDef()); }

Status AddAttentionCpuKernels(KernelRegistry& registry) {
  return AddCpuKernel<FusedAttentionKernel>(registry, kFusedAttention);
}

}  // namespace remex::kernels::internal
