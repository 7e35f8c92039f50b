// The update rules of the training domain's optimizers (ONNX ai.onnx.preview.training
// opset 1: Adagrad, Adam, Momentum; https://onnx.ai/onnx/operators/#ai-onnx-preview-training),
// written once for the CPU kernels (kernels/ops/training/optimizer.cc) and the CUDA kernels
// (training/cuda/optimizer_impl.cu). A plain header: no CUDA, no Remex headers.
//
// Every rule runs in double per element: x is the tensor being optimised, g its
// gradient, and the state (h, v) its accumulators; the kernels round the new values to
// the tensor's dtype when they store them. R (the learning rate) and T (the update
// count) stay where they are: each kernel (each CUDA thread) derives the step's
// factors from them with FactorsOf.
#pragma once

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define REMEX_OPTIMIZER_FN __host__ __device__ __forceinline__
#else
#define REMEX_OPTIMIZER_FN inline
#endif

namespace remex::kernels::optimizer {

// Which rule: the op, and for Momentum its `mode`.
enum class Rule : uint8_t { kAdagrad, kAdam, kMomentum, kNesterov };

// A rule's attributes as the kernels hold them. ONNX's defaults: Adagrad decay_factor
// 0, epsilon 1e-6, norm_coefficient 0; Adam alpha 0.9, beta 0.999, epsilon 1e-6,
// norm_coefficient 0, norm_coefficient_post 0; Momentum's are all required.
struct Params {
  Rule rule = Rule::kAdagrad;
  double norm_coefficient = 0;       // The L2 regularisation's coefficient: g' = norm * x + g.
  double decay_factor = 0;           // Adagrad: the rate's decay over T.
  double epsilon = 0;                // Adagrad, Adam: added to the square root of h.
  double alpha = 0;                  // Adam: v's decay; Momentum: v's decay.
  double beta = 0;                   // Adam: h's decay; Momentum: g's weight.
  double norm_coefficient_post = 0;  // Adam: x's decay after the update.
};

// What every element of one call shares: the learning rate adjusted by the update
// count, and Momentum's weight of the gradient.
struct Factors {
  double rate = 0;
  double beta = 0;
};

// base^n for n >= 0 by binary powering: the same products, so the same bits, on the
// host and the device (where pow's last bit may differ).
REMEX_OPTIMIZER_FN double PowInt(double base, int64_t n) {
  double result = 1.0;
  while (n > 0) {
    if (n & 1) result *= base;
    base *= base;
    n >>= 1;
  }
  return result;
}

// The factors of a step from R (the learning rate) and T (the update count):
//   Adagrad:  rate = r / (1 + t * decay_factor)
//   Adam:     rate = r * sqrt(1 - beta^t) / (1 - alpha^t) for t > 0 (bias correction),
//             r for t <= 0
//   Momentum: rate = r; beta as given for t > 0, 1 at t <= 0 (the first update)
REMEX_OPTIMIZER_FN Factors FactorsOf(const Params& p, double r, int64_t t) {
  Factors f;
  f.rate = r;
  f.beta = p.beta;
  switch (p.rule) {
    case Rule::kAdagrad:
      f.rate = r / (1.0 + static_cast<double>(t) * p.decay_factor);
      break;
    case Rule::kAdam:
      if (t > 0) f.rate = r * sqrt(1.0 - PowInt(p.beta, t)) / (1.0 - PowInt(p.alpha, t));
      break;
    case Rule::kMomentum:
    case Rule::kNesterov:
      if (t <= 0) f.beta = 1.0;
      break;
  }
  return f;
}

// One element's update. `s1` and `s2` are the state in and `s1_new` and `s2_new` the
// state out: Adagrad h (s1); Adam v (s1) and h (s2); Momentum v (s1). Unused ones are
// left alone. Returns x's new value.
//   Adagrad:  g' = norm * x + g; h' = h + g'^2; x' = x - rate * g' / (sqrt(h') + eps)
//   Adam:     g' = norm * x + g; v' = alpha * v + (1 - alpha) * g';
//             h' = beta * h + (1 - beta) * g'^2;
//             x' = (1 - norm_post) * (x - rate * v' / (sqrt(h') + eps))
//   Momentum: g' = norm * x + g; v' = alpha * v + beta * g'; x' = x - rate * v'
//             (rate and beta: the Factors of the call)
//   Nesterov: g' and v' as Momentum; x' = x - rate * (g' + alpha * v')
REMEX_OPTIMIZER_FN double Update(const Params& p, const Factors& f, double x, double g, double s1, double s2,
                                 double* s1_new, double* s2_new) {
  const double gr = p.norm_coefficient * x + g;
  switch (p.rule) {
    case Rule::kAdagrad: {
      const double h = s1 + gr * gr;
      *s1_new = h;
      return x - f.rate * gr / (sqrt(h) + p.epsilon);
    }
    case Rule::kAdam: {
      const double v = p.alpha * s1 + (1.0 - p.alpha) * gr;
      const double h = p.beta * s2 + (1.0 - p.beta) * (gr * gr);
      *s1_new = v;
      *s2_new = h;
      return (1.0 - p.norm_coefficient_post) * (x - f.rate * (v / (sqrt(h) + p.epsilon)));
    }
    case Rule::kMomentum:
    case Rule::kNesterov: {
      const double v = p.alpha * s1 + f.beta * gr;
      *s1_new = v;
      return p.rule == Rule::kMomentum ? x - f.rate * v : x - f.rate * (gr + p.alpha * v);
    }
  }
  return x;
}

}  // namespace remex::kernels::optimizer
