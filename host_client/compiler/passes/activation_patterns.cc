// Activations recognised from their decomposition (see activation_patterns.h).
#include "host_client/compiler/passes/activation_patterns.h"

#include <cmath>
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

// Makes `last` the recognised activation `op` of x (no attributes yet), named after
// every node it runs: `merged` (the removed steps, in order) then itself, joined by "+"
// (what profiles and errors show).
void BecomeActivation(Node& last, const char* op, int x, const std::vector<const Node*>& merged) {
  std::string name;
  for (const Node* n : merged) name += n->name + "+";
  last.name = name + last.name;
  last.op = op;
  last.attrs = kernels::Attributes();
  last.inputs = {x};
  last.version = kernels::kNewestVersion;
}

}  // namespace

int RecognizeHardSwish(Graph& graph) {
  Graph& g = graph;
  const SingleUse single_use(g);
  auto single_use_producer = [&](int v) { return single_use.Producer(g, v); };
  // For a binary node: the operand that is not the scalar constant `k` (the other one
  // is), or -1.
  auto other_than = [&](const Node& n, float k, size_t rank) -> int {
    for (int s = 0; s < 2; ++s) {
      const std::optional<float> c = ScalarConstant(g, n.inputs[s], rank);
      if (c && *c == k) return n.inputs[1 - s];
    }
    return -1;
  };
  std::vector<bool> removed(g.nodes.size(), false);
  int made = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node& last = g.nodes[i];
    const bool is_div = Plain(last, "Div", 2);
    if (!is_div && !Plain(last, "Mul", 2)) continue;
    if (g.values[last.outputs[0]].dtype != DType::kFloat32) continue;
    // Either (x * c) / 6, (x * c) * (1/6), or x * (c / 6), x * (c * (1/6)).
    for (int form = 0; form < 2; ++form) {
      int x = -1;
      Node* clip = nullptr;
      std::vector<Node*> steps;
      if (form == 0) {  // last scales the product by 1/6
        const int prod_v = is_div ? (ScalarConstant(g, last.inputs[1], 8) == 6.0f ? last.inputs[0] : -1)
                                  : other_than(last, 1.0f / 6.0f, 8);
        Node* prod = single_use_producer(prod_v);
        if (!prod || !Plain(*prod, "Mul", 2)) continue;
        for (int s = 0; s < 2 && !clip; ++s) {
          Node* c = single_use_producer(prod->inputs[s]);
          if (c && Plain(*c, "Clip", 3)) {
            clip = c;
            x = prod->inputs[1 - s];
          }
        }
        steps = {prod};
      } else {  // last multiplies x by the scaled clip
        if (is_div) continue;
        for (int s = 0; s < 2 && !clip; ++s) {
          Node* scaled = single_use_producer(last.inputs[s]);
          if (!scaled) continue;
          int c_v = -1;
          if (Plain(*scaled, "Div", 2)) {
            if (ScalarConstant(g, scaled->inputs[1], 8) == 6.0f) c_v = scaled->inputs[0];
          } else if (Plain(*scaled, "Mul", 2)) {
            c_v = other_than(*scaled, 1.0f / 6.0f, 8);
          }
          Node* c = single_use_producer(c_v);
          if (c && Plain(*c, "Clip", 3)) {
            clip = c;
            x = last.inputs[1 - s];
            steps = {scaled};
          }
        }
      }
      if (!clip || x < 0 || !g.values[x].rank_known || g.values[x].dtype != DType::kFloat32) continue;
      const size_t rank = g.values[x].shape.size();
      if (ScalarConstant(g, clip->inputs[1], rank) != 0.0f || ScalarConstant(g, clip->inputs[2], rank) != 6.0f) continue;
      Node* add = single_use_producer(clip->inputs[0]);
      if (!add || !Plain(*add, "Add", 2) || other_than(*add, 3.0f, rank) != x) continue;
      // Every constant's rank was bounded by x's only for the Clip and Add: bound the
      // scaling constants too, so that no step broadcasts x to a higher rank.
      bool ranks_ok = true;
      for (const Node* n : {steps[0], &last}) {
        for (int in : n->inputs) {
          if (in >= 0 && g.values[in].constant && g.constants[*g.values[in].constant].shape.size() > rank) {
            ranks_ok = false;
          }
        }
      }
      if (!ranks_ok) continue;
      for (Node* n : {add, clip, steps[0]}) removed[n - g.nodes.data()] = true;
      BecomeActivation(last, "HardSwish", x, {add, clip, steps[0]});
      ++made;
      break;
    }
  }
  if (made > 0) RemoveNodes(g, removed);
  return made;
}

int RecognizeSwish(Graph& graph) {
  Graph& g = graph;
  const SingleUse single_use(g);
  auto single_use_producer = [&](int v) { return single_use.Producer(g, v); };
  std::vector<bool> removed(g.nodes.size(), false);
  int made = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node& last = g.nodes[i];
    if (!Plain(last, "Mul", 2)) continue;
    const DType dtype = g.values[last.outputs[0]].dtype;
    if (dtype != DType::kFloat32 && dtype != DType::kFloat16) continue;
    for (int s = 0; s < 2; ++s) {
      const int x = last.inputs[1 - s];
      Node* sigmoid = single_use_producer(last.inputs[s]);
      if (x < 0 || !sigmoid || !Plain(*sigmoid, "Sigmoid", 1) || g.values[x].dtype != dtype) continue;
      float alpha = 1.0f;
      Node* scale = nullptr;
      if (sigmoid->inputs[0] != x) {  // the `alpha` form: Sigmoid(Mul(x, alpha))
        scale = single_use_producer(sigmoid->inputs[0]);
        if (!scale || !Plain(*scale, "Mul", 2) || dtype != DType::kFloat32 || !g.values[x].rank_known) continue;
        const int k = scale->inputs[0] == x ? 1 : 0;
        if (scale->inputs[1 - k] != x) continue;
        const std::optional<float> a = ScalarConstant(g, scale->inputs[k], g.values[x].shape.size());
        if (!a) continue;
        alpha = *a;
      }
      std::vector<const Node*> merged;
      if (scale) {
        removed[scale - g.nodes.data()] = true;
        merged.push_back(scale);
      }
      removed[sigmoid - g.nodes.data()] = true;
      merged.push_back(sigmoid);
      BecomeActivation(last, "Swish", x, merged);
      last.attrs.Set("alpha", alpha);
      ++made;
      break;
    }
  }
  if (made > 0) RemoveNodes(g, removed);
  return made;
}

int RecognizeGelu(Graph& graph) {
  Graph& g = graph;
  const SingleUse single_use(g);
  auto single_use_producer = [&](int v) { return single_use.Producer(g, v); };
  auto float32_of_rank = [&](int v) {
    return v >= 0 && g.values[v].dtype == DType::kFloat32 && g.values[v].rank_known;
  };
  constexpr double kSqrt2 = 1.41421356237309504880;
  // The GELU's core Add(Erf(x / sqrt(2)), 1) producing `v`, read once: its nodes (the
  // scaling, the Erf, the Add), and x in `x`; or an empty list.
  auto core = [&](int v, int* x) -> std::vector<Node*> {
    Node* add = single_use_producer(v);
    if (!add || !Plain(*add, "Add", 2)) return {};
    for (int s = 0; s < 2; ++s) {
      Node* erf = single_use_producer(add->inputs[s]);
      if (!erf || !Plain(*erf, "Erf", 1)) continue;
      Node* scale = single_use_producer(erf->inputs[0]);
      if (!scale) continue;
      int in = -1;
      if (Plain(*scale, "Div", 2) && float32_of_rank(scale->inputs[0])) {
        const std::optional<float> c = ScalarConstant(g, scale->inputs[1], g.values[scale->inputs[0]].shape.size());
        if (c && std::fabs(*c - kSqrt2) <= 2e-6) in = scale->inputs[0];
      } else if (Plain(*scale, "Mul", 2)) {
        for (int t = 0; t < 2 && in < 0; ++t) {
          const int cand = scale->inputs[1 - t];
          if (!float32_of_rank(cand)) continue;
          const std::optional<float> c = ScalarConstant(g, scale->inputs[t], g.values[cand].shape.size());
          if (c && std::fabs(*c - 1 / kSqrt2) <= 2e-6) in = cand;
        }
      }
      if (in < 0) continue;
      const size_t rank = g.values[in].shape.size();
      const std::optional<float> one = ScalarConstant(g, add->inputs[1 - s], rank);
      if (one != 1.0f) continue;
      *x = in;
      return {scale, erf, add};
    }
    return {};
  };
  std::vector<bool> removed(g.nodes.size(), false);
  int made = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node& last = g.nodes[i];
    const bool is_div = Plain(last, "Div", 2);
    if (!is_div && !Plain(last, "Mul", 2)) continue;
    if (g.values[last.outputs[0]].dtype != DType::kFloat32) continue;
    int x = -1;
    std::vector<Node*> steps;  // The nodes before `last`, in order.
    // Whether `v` is x times 0.5 (`half`) or x times the core (not `half`), read once:
    // appends that Mul (and the core's nodes) to `steps`.
    auto product = [&](int v, bool half, int want_x) -> bool {
      Node* m = single_use_producer(v);
      if (!m || !Plain(*m, "Mul", 2)) return false;
      for (int s = 0; s < 2; ++s) {
        const int px = m->inputs[1 - s];
        if (!float32_of_rank(px) || (want_x >= 0 && px != want_x)) continue;
        if (half) {
          if (ScalarConstant(g, m->inputs[s], g.values[px].shape.size()) != 0.5f) continue;
          steps.push_back(m);
          x = px;
          return true;
        }
        int cx = -1;
        std::vector<Node*> c = core(m->inputs[s], &cx);
        if (c.empty() || cx != px) continue;
        steps.insert(steps.end(), c.begin(), c.end());
        steps.push_back(m);
        x = px;
        return true;
      }
      return false;
    };
    if (is_div) {  // Div(Mul(x, e), 2)
      if (float32_of_rank(last.inputs[0]) &&
          ScalarConstant(g, last.inputs[1], g.values[last.inputs[0]].shape.size()) == 2.0f) {
        product(last.inputs[0], false, -1);
      }
    } else {
      for (int s = 0; s < 2 && x < 0; ++s) {
        steps.clear();
        const int here = last.inputs[s], there = last.inputs[1 - s];
        // Mul(Mul(x, e), 0.5)
        if (float32_of_rank(here) && ScalarConstant(g, there, g.values[here].shape.size()) == 0.5f &&
            product(here, false, -1)) {
          break;
        }
        steps.clear();
        x = -1;
        // Mul(Mul(x, 0.5), e): the core's x must be the scaled one.
        int cx = -1;
        std::vector<Node*> c = core(there, &cx);
        if (!c.empty() && product(here, true, cx)) {
          steps.insert(steps.begin(), c.begin(), c.end());
          break;
        }
        steps.clear();
        x = -1;
        // Mul(x, Mul(e, 0.5))
        Node* m = single_use_producer(there);
        if (m && Plain(*m, "Mul", 2) && float32_of_rank(here)) {
          for (int t = 0; t < 2 && x < 0; ++t) {
            if (ScalarConstant(g, m->inputs[t], g.values[here].shape.size()) != 0.5f) continue;
            c = core(m->inputs[1 - t], &cx);
            if (!c.empty() && cx == here) {
              steps = c;
              steps.push_back(m);
              x = here;
            }
          }
        }
      }
    }
    if (x < 0 || steps.empty()) continue;
    for (Node* n : steps) removed[n - g.nodes.data()] = true;
    BecomeActivation(last, "Gelu", x, std::vector<const Node*>(steps.begin(), steps.end()));
    ++made;
  }
  if (made > 0) RemoveNodes(g, removed);
  return made;
}

}  // namespace remex::compiler
