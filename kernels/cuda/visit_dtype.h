// The one host-side dispatch from a tensor's DType to a CUDA launcher's element type.
// Host code only (.cc files).
#pragma once

#include <optional>
#include <tuple>
#include <type_traits>
#include <utility>

#include "base/dtype.h"
#include "kernels/cuda/dtype.h"

namespace remex::kernels::cuda {

// Calls f(T{}) for the T among Ts whose kDTypeOf<T> is `dtype` and returns its result;
// nullopt when none of Ts is `dtype`'s element type. f takes each of Ts and returns the
// same type for all of them, e.g. a launcher's cudaError_t:
//
//   VisitDType<float, Half, double>(dtype, [&](auto tag) {
//     using T = decltype(tag);
//     return LaunchDft<T>(plan, static_cast<const T*>(x), static_cast<T*>(y), stream);
//   });
template <typename... Ts, typename F>
auto VisitDType(DType dtype, F&& f) {
  static_assert(sizeof...(Ts) > 0, "VisitDType needs at least one element type");
  static_assert(((kDTypeOf<Ts> != DType::kUndefined) && ...), "every element type must have a DType");
  using R = std::invoke_result_t<F&, std::tuple_element_t<0, std::tuple<Ts...>>>;
  std::optional<R> result;
  (void)((dtype == kDTypeOf<Ts> && (result.emplace(f(Ts{})), true)) || ...);
  return result;
}

}  // namespace remex::kernels::cuda
