// Scaled dot-product attention fused into FusedAttention (see attention_fusion.h).
#include "host_client/compiler/passes/attention_fusion.h"

#include <optional>
#include <string>
#include <vector>

#include "host_client/compiler/passes/patterns.h"

namespace remex::compiler {
namespace {

using patterns::Plain;
using patterns::RemoveNodes;
using patterns::ScalarConstant;
using patterns::SingleUse;

using Perm = std::vector<int64_t>;

Perm Identity(size_t rank) {
  Perm p(rank);
  for (size_t i = 0; i < rank; ++i) p[i] = static_cast<int64_t>(i);
  return p;
}

// Transpose node n's permutation for rank `rank` (its `perm`, or the axes reversed, as
// ONNX defaults it); nullopt when it is no permutation of [0, rank).
std::optional<Perm> PermOf(const Node& n, size_t rank) {
  Perm p(rank);
  if (n.attrs.Has("perm")) {
    StatusOr<std::vector<int64_t>> v = n.attrs.Ints("perm");
    if (!v.ok()) return std::nullopt;
    p = *v;
  } else {
    for (size_t i = 0; i < rank; ++i) p[i] = static_cast<int64_t>(rank - 1 - i);
  }
  if (p.size() != rank) return std::nullopt;
  std::vector<bool> seen(rank, false);
  for (int64_t a : p) {
    if (a < 0 || a >= static_cast<int64_t>(rank) || seen[a]) return std::nullopt;
    seen[a] = true;
  }
  return p;
}

// Transpose(Transpose(x, inner), outer) = Transpose(x, Compose(inner, outer)): output
// axis i is x's axis inner[outer[i]].
Perm Compose(const Perm& inner, const Perm& outer) {
  Perm c(outer.size());
  for (size_t i = 0; i < outer.size(); ++i) c[i] = inner[outer[i]];
  return c;
}

bool Float32OfRank(const Value& v, size_t rank) {
  return v.dtype == DType::kFloat32 && v.kind == vm::ValueKind::kTensor && v.rank_known &&
         v.shape.size() == rank;
}

// Whether dim i of a and dim j of b are the same: static and equal, or both dynamic with
// one known symbolic expression, or (where inference found no expression, "?": a
// cache's past + new length) equal in every sample shape inference evaluated. The
// FusedAttention kernel checks the dims again at run time, with a clear error.
bool SameDim(const Value& a, size_t i, const Value& b, size_t j) {
  if (a.shape[i] >= 0 || b.shape[j] >= 0) return a.shape[i] == b.shape[j];
  if (a.dims.size() == a.shape.size() && b.dims.size() == b.shape.size()) {
    const std::string& s = a.dims[i];
    if (!s.empty() && s != "?" && s == b.dims[j]) return true;
  }
  if (a.samples.empty() || a.samples.size() != b.samples.size()) return false;
  for (size_t k = 0; k < a.samples.size(); ++k) {
    const Shape &sa = a.samples[k], &sb = b.samples[k];
    if (sa.size() != a.shape.size() || sb.size() != b.shape.size() || sa[i] != sb[j]) return false;
  }
  return true;
}

// Whether a and b have one dtype and shape, dim by dim (SameDim).
bool SameShape(const Value& a, const Value& b) {
  if (a.dtype != b.dtype || !a.rank_known || !b.rank_known || a.shape.size() != b.shape.size()) return false;
  for (size_t i = 0; i < a.shape.size(); ++i) {
    if (!SameDim(a, i, b, i)) return false;
  }
  return true;
}

// An operand followed back through the single-use Transposes producing it: value =
// Transpose(base, perm), the Transposes in `steps`.
struct Source {
  int base;
  Perm perm;
  std::vector<Node*> steps;
};

Source FollowBack(Graph& g, const SingleUse& single_use, int v, size_t rank) {
  Source s{v, Identity(rank), {}};
  for (;;) {
    Node* t = single_use.Producer(g, s.base);
    if (!t || !Plain(*t, "Transpose", 1) || t->inputs[0] < 0) break;
    const std::optional<Perm> p = PermOf(*t, rank);
    if (!p || !Float32OfRank(g.values[t->inputs[0]], rank)) break;
    s.perm = Compose(*p, s.perm);
    s.steps.push_back(t);
    s.base = t->inputs[0];
  }
  return s;
}

// The scores before the mask: MatMul(Q, Kt), then optionally scaled by a one-element
// constant.
struct Scores {
  Node* matmul = nullptr;
  Node* scale_node = nullptr;
  float scale = 1.0f;
};

std::optional<Scores> ScoresOf(Graph& g, const SingleUse& single_use, int v, size_t rank) {
  Scores s;
  Node* n = single_use.Producer(g, v);
  if (!n || !Float32OfRank(g.values[v], rank)) return std::nullopt;
  const bool div = Plain(*n, "Div", 2);
  if (div || Plain(*n, "Mul", 2)) {
    int scores = -1;
    for (int side = 0; side < (div ? 1 : 2) && scores < 0; ++side) {
      const std::optional<float> c = ScalarConstant(g, n->inputs[1 - side], rank);
      if (c && (!div || *c != 0.0f)) {
        s.scale = div ? 1.0f / *c : *c;
        scores = n->inputs[side];
      }
    }
    if (scores < 0 || !Float32OfRank(g.values[scores], rank)) return std::nullopt;
    s.scale_node = n;
    n = single_use.Producer(g, scores);
    if (!n) return std::nullopt;
  }
  if (!Plain(*n, "MatMul", 2)) return std::nullopt;
  s.matmul = n;
  return s;
}

// Whether Softmax node n normalises along the last of `rank` axes.
bool AlongLastAxis(const Node& n, size_t rank) {
  StatusOr<int64_t> axis = n.attrs.Int("axis", n.version >= 13 ? -1 : 1);
  return axis.ok() && (*axis == -1 || *axis == static_cast<int64_t>(rank) - 1);
}

}  // namespace

int FuseAttention(Graph& graph) {
  Graph& g = graph;
  const SingleUse single_use(g);
  std::vector<bool> removed(g.nodes.size(), false);
  auto index_of = [&](const Node* n) { return static_cast<size_t>(n - g.nodes.data()); };
  int made = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node& softmax = g.nodes[i];
    if (removed[i] || !Plain(softmax, "Softmax", 1) || softmax.inputs[0] < 0) continue;
    const Value& p = g.values[softmax.outputs[0]];
    const size_t rank = p.rank_known ? p.shape.size() : 0;
    if ((rank != 3 && rank != 4) || !Float32OfRank(p, rank) || !AlongLastAxis(softmax, rank)) continue;
    Node* mm2 = single_use.Reader(g, softmax.outputs[0]);
    if (!mm2 || !Plain(*mm2, "MatMul", 2) || mm2->inputs[0] != softmax.outputs[0]) continue;
    if (!Float32OfRank(g.values[mm2->outputs[0]], rank)) continue;
    // The mask Add, if any, and the scores before it.
    std::optional<Scores> scores;
    Node* add = single_use.Producer(g, softmax.inputs[0]);
    int mask = -1;
    if (add && Plain(*add, "Add", 2)) {
      for (int side = 0; side < 2 && !scores; ++side) {
        scores = ScoresOf(g, single_use, add->inputs[side], rank);
        if (scores) mask = add->inputs[1 - side];
      }
      if (!scores || mask < 0) continue;
      const Value& m = g.values[mask];
      // The mask broadcasts into the scores without growing them.
      if (m.dtype != DType::kFloat32 || m.kind != vm::ValueKind::kTensor || !m.rank_known ||
          m.shape.size() > rank ||
          !SameShape(g.values[add->outputs[0]], g.values[add->inputs[mask == add->inputs[0] ? 1 : 0]])) {
        continue;
      }
    } else {
      add = nullptr;
      scores = ScoresOf(g, single_use, softmax.inputs[0], rank);
      if (!scores) continue;
    }
    Node* mm1 = scores->matmul;
    const int q = mm1->inputs[0], kt = mm1->inputs[1], v = mm2->inputs[1];
    if (q < 0 || kt < 0 || v < 0) continue;
    const Value &qv = g.values[q], &ktv = g.values[kt], &vv = g.values[v];
    if (!Float32OfRank(qv, rank) || !Float32OfRank(ktv, rank) || !Float32OfRank(vv, rank) ||
        !Float32OfRank(g.values[mm1->outputs[0]], rank)) {
      continue;
    }
    // No MatMul broadcasts: one batch, D of Q and Kt, Sk of Kt and V.
    bool same = SameDim(qv, rank - 1, ktv, rank - 2) && SameDim(ktv, rank - 1, vv, rank - 2);
    for (size_t a = 0; a + 2 < rank && same; ++a) same = SameDim(qv, a, ktv, a) && SameDim(qv, a, vv, a);
    if (!same) continue;
    // The Transposes around it.
    const Source qs = FollowBack(g, single_use, q, rank);
    const Source ks = FollowBack(g, single_use, kt, rank);
    const Source vs = FollowBack(g, single_use, v, rank);
    Perm swap_last = Identity(rank);
    std::swap(swap_last[rank - 1], swap_last[rank - 2]);
    const Perm k_perm = Compose(ks.perm, swap_last);  // K = Transpose(Kt, swap_last)
    Perm y_perm = Identity(rank);
    std::vector<Node*> after;
    Node* last = mm2;
    for (;;) {
      Node* t = single_use.Reader(g, last->outputs[0]);
      if (!t || !Plain(*t, "Transpose", 1) || !Float32OfRank(g.values[t->outputs[0]], rank)) break;
      const std::optional<Perm> tp = PermOf(*t, rank);
      if (!tp) break;
      y_perm = Compose(y_perm, *tp);
      after.push_back(t);
      last = t;
    }
    // The steps, in the graph's order, for the node's name and removal.
    std::vector<Node*> merged;
    for (const Source* s : {&qs, &ks, &vs}) merged.insert(merged.end(), s->steps.rbegin(), s->steps.rend());
    merged.push_back(mm1);
    if (scores->scale_node) merged.push_back(scores->scale_node);
    if (add) merged.push_back(add);
    merged.push_back(&softmax);
    merged.push_back(mm2);
    merged.insert(merged.end(), after.begin(), after.end());
    std::string name;
    for (Node* n : merged) {
      if (n == last) continue;
      name += n->name + "+";
      removed[index_of(n)] = true;
    }
    last->name = name + last->name;
    last->op = "FusedAttention";
    last->inputs = {qs.base, ks.base, vs.base};
    if (mask >= 0) last->inputs.push_back(mask);
    last->attrs = kernels::Attributes();
    last->attrs.Set("scale", scores->scale);
    last->attrs.Set("q_perm", qs.perm);
    last->attrs.Set("k_perm", k_perm);
    last->attrs.Set("v_perm", vs.perm);
    last->attrs.Set("y_perm", y_perm);
    last->version = kernels::kNewestVersion;
    ++made;
  }
  if (made > 0) RemoveNodes(g, removed);
  return made;
}

}  // namespace remex::compiler
