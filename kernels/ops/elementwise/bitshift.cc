// BitShift: shape function and CPU kernel (ONNX BitShift-11;
// https://onnx.ai/onnx/operators/onnx__BitShift.html).
//
// BitShift(X, Y) -> Z: X shifted left or right by Y bits, elementwise with numpy
// (multidirectional) broadcasting. X and Y share one dtype, uint8, uint16, uint32 or
// uint64, which Z has. Attribute `direction` (required): "LEFT" or "RIGHT". A shift by
// the bit width or more gives 0 (kernels/ops/tensor/index_ops.h, shared with the CUDA kernel).
// INVALID_ARGUMENT "BitShift: ..." for other dtypes, unequal dtypes, shapes that do not
// broadcast or a missing or unknown direction.

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/ops/elementwise/elementwise_common.h"
#include "kernels/ops/tensor/index_ops.h"
#include "kernels/internal.h"
#include "kernels/op_attrs.h"
#include "kernels/transform_common.h"

namespace remex::kernels::internal {

StatusOr<bool> BitShiftLeftOf(const Attributes& attrs) {
  StatusOr<std::string> direction = attrs.String("direction");
  if (!direction.ok()) return OpError("BitShift", direction.status().message());
  if (*direction == "LEFT") return true;
  if (*direction == "RIGHT") return false;
  return OpError("BitShift", "unknown direction '" + *direction + "' (LEFT or RIGHT)");
}

namespace {

bool IsBitShiftType(DType dt) {
  return dt == DType::kUint8 || dt == DType::kUint16 || dt == DType::kUint32 || dt == DType::kUint64;
}

StatusOr<std::vector<TensorInfo>> InferBitShift(const Attributes& attrs, std::span<const ShapeFnArg> in) {
  constexpr std::string_view op = "BitShift";
  if (in.size() != 2) return OpError(op, "expects X and Y");
  REMEX_RETURN_IF_ERROR(BitShiftLeftOf(attrs).status());
  const DType dt = in[0].dtype;
  if (in[1].dtype != dt)
    return OpError(op, "input dtypes differ: " + DTypeStr(dt) + " and " + DTypeStr(in[1].dtype));
  if (!IsBitShiftType(dt))
    return OpError(op, "unsupported dtype " + DTypeStr(dt) + " (uint8, uint16, uint32, uint64)");
  REMEX_ASSIGN_OR_RETURN(Shape out, BroadcastShapes(op, in[0].shape, in[1].shape));
  return std::vector<TensorInfo>{{dt, std::move(out)}};
}

OpDef BitShiftDef() {
  OpDef def;
  def.name = "BitShift";
  def.since_version = 11;
  def.min_inputs = def.max_inputs = 2;
  def.infer = InferBitShift;
  return def;
}

class BitShiftKernel final : public ValidatedKernel {
 public:
  static StatusOr<std::unique_ptr<BitShiftKernel>> Create(const OpDef& def, const Attributes& attrs) {
    REMEX_ASSIGN_OR_RETURN(bool parsed, BitShiftLeftOf(attrs));
    return std::make_unique<BitShiftKernel>(def, attrs, std::move(parsed));
  }
  BitShiftKernel(const OpDef& def, const Attributes& attrs, bool parsed)
      : ValidatedKernel(def, attrs), left_(std::move(parsed)) {}

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    return DispatchBySize(op(), in[0].dtype, [&](auto tag) -> Status {
      using U = typename decltype(tag)::type;
      const bool left = left_;
      BroadcastBinary(DataAs<const U>(in[0]), in[0].shape, DataAs<const U>(in[1]), in[1].shape,
                      DataAs<U>(out[0]), out[0].shape,
                      [left](U x, U y) { return index::BitShift<U>(x, y, left); });
      return OkStatus();
    });
  }

 private:
  const bool left_;
};

}  // namespace

Status AddBitShiftOpDefs(KernelRegistry& registry) { return registry.AddOp(BitShiftDef()); }

Status AddBitShiftCpuKernels(KernelRegistry& registry) {
  return AddCpuKernel<BitShiftKernel>(registry, "BitShift");
}

}  // namespace remex::kernels::internal
