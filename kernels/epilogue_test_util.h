// Test helpers for the epilogue of FusedConv and FusedMatMul (kernels/conv_epilogue.h):
// the activations with parameters to test, their node attributes, and the unfused
// reference run through the registry's CPU kernels (Add, then the activation's own
// ONNX op).
#pragma once

#include <string>
#include <vector>

#include "kernels/test_util.h"

namespace remex::kernels::testing {

// An epilogue activation: its ONNX op name ("" for none) and `activation_params`.
struct EpilogueActivation {
  std::string name;
  std::vector<float> params;
};

// Every activation the epilogue takes, with parameters away from the defaults.
inline const std::vector<EpilogueActivation>& AllEpilogueActivations() {
  static const std::vector<EpilogueActivation> kAll = {
      {"", {}},        {"Relu", {}}, {"LeakyRelu", {0.1f}},         {"Clip", {-0.5f, 0.7f}},
      {"Sigmoid", {}}, {"Tanh", {}}, {"HardSigmoid", {0.3f, 0.4f}}, {"HardSwish", {}},
      {"Swish", {1.5f}}, {"Gelu", {}},
  };
  return kAll;
}

// `attrs` with `activation` and `activation_params` set for `act`.
inline Attributes WithEpilogue(Attributes attrs, const EpilogueActivation& act) {
  if (!act.name.empty()) attrs.Set("activation", act.name);
  if (!act.params.empty()) attrs.Set("activation_params", act.params);
  return attrs;
}

// The unfused epilogue of `y` (float32): Add of `addend` when given (broadcasting as
// ONNX Add does), then `act`'s ONNX op (Clip with min and max as inputs).
inline StatusOr<HostTensor> RunUnfusedEpilogue(OpRunner& r, HostTensor y, const HostTensor* addend,
                                               const EpilogueActivation& act) {
  if (addend) {
    REMEX_ASSIGN_OR_RETURN(std::vector<HostTensor> sum, r.Run("Add", {}, {y, *addend}));
    y = std::move(sum[0]);
  }
  if (act.name.empty()) return y;
  Attributes a;
  std::vector<HostTensor> in = {y};
  if (act.name == "LeakyRelu" || act.name == "Swish") a.Set("alpha", act.params[0]);
  if (act.name == "HardSigmoid") {
    a.Set("alpha", act.params[0]);
    a.Set("beta", act.params[1]);
  }
  if (act.name == "Clip") {
    in.push_back(HostTensor::Of<float>({}, {act.params[0]}));
    in.push_back(HostTensor::Of<float>({}, {act.params[1]}));
  }
  REMEX_ASSIGN_OR_RETURN(std::vector<HostTensor> out, r.Run(act.name, a, in));
  return out[0];
}

}  // namespace remex::kernels::testing
