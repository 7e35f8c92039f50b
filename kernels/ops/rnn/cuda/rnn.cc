// CUDA kernels of the recurrent ops LSTM, GRU and RNN (host side). Device code in
// rnn_impl.cu.
//
// Semantics are the CPU kernels' (kernels/ops/rnn/rnn.cc), which follow ONNX LSTM, GRU and RNN,
// opsets 7-17 (opset 14 added `layout`): directions forward / reverse / bidirectional,
// the activations with their alpha / beta, clip, GRU's linear_before_reset, LSTM's
// input_forget and peepholes, the optional inputs B, sequence_lens (int32 or int64),
// initial_h, initial_c, P, and the outputs Y, Y_h, Y_c, any of which may be absent. The
// attributes are read with the CPU kernels' parser (internal::ParseRnnAttrs), so the
// same values are refused with the same errors (output_sequence of opset 1 is
// UNIMPLEMENTED). float32 and float16 (computed in float32, rounded to nearest even on
// store); float64 is UNIMPLEMENTED.
//
// One difference: sequence_lens lives in device memory and is not read back, so a
// value outside [0, seq_length] (INVALID_ARGUMENT on the CPU) is not reported; that
// batch entry's Y rows, Y_h and Y_c are NaN instead.
//
// Scratch memory: seq * batch * D * G * H + 5 * D * batch * H floats (rnn_impl.h),
// held for each call from the context's workspace hook (the device's caching allocator),
// or allocated stream-ordered without one (StreamWorkspace).

#include <cuda_runtime_api.h>

#include <memory>
#include <string>
#include <utility>

#include "kernels/cuda/cuda_internal.h"
#include "kernels/cuda/cuda_kernel.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/workspace.h"
#include "kernels/ops/rnn/cuda/rnn_impl.h"
#include "kernels/internal.h"
#include "kernels/op_attrs.h"

namespace remex::kernels::cuda {
namespace {

using internal::RnnAct;
using internal::RnnAttrs;

constexpr size_t kX = 0, kW = 1, kR = 2, kB = 3, kSeqLens = 4, kInitH = 5, kInitC = 6, kP = 7;

bool Present(std::span<const TensorRef> t, size_t i) { return i < t.size() && t[i].present(); }

class RnnCudaKernel final : public CudaKernel {
 public:
  RnnCudaKernel(const OpDef& def, Attributes attrs, RnnAttrs parsed, CudaKernelContext context)
      : CudaKernel(def, std::move(attrs), context), parsed_(std::move(parsed)) {}

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    const DType dtype = in[kX].dtype;
    if (dtype != DType::kFloat32 && dtype != DType::kFloat16) return Unsupported(dtype, "float32 and float16 are");
    const RnnParams p = ParamsOf(in);
    if (p.batch * p.hidden == 0) return OkStatus();  // Every output is empty.
    const int64_t floats = RnnWorkspaceFloats(p);
    if (floats < 0) return InvalidArgument(op() + " on cuda: X and W are too large");

    RnnTensors t;
    t.x = in[kX].data;
    t.w = in[kW].data;
    t.r = in[kR].data;
    t.b = Present(in, kB) ? in[kB].data : nullptr;
    if (Present(in, kSeqLens)) {
      t.seq_lens = in[kSeqLens].data;
      t.seq_lens_int64 = in[kSeqLens].dtype == DType::kInt64;
    }
    t.init_h = Present(in, kInitH) ? in[kInitH].data : nullptr;
    t.init_c = Present(in, kInitC) ? in[kInitC].data : nullptr;
    t.p = Present(in, kP) ? in[kP].data : nullptr;
    t.y = Present(out, 0) ? out[0].data : nullptr;
    t.y_h = Present(out, 1) ? out[1].data : nullptr;
    t.y_c = Present(out, 2) ? out[2].data : nullptr;

    REMEX_RETURN_IF_ERROR(UseDevice());
    StreamWorkspace workspace(op(), stream(), &context().workspace);
    REMEX_ASSIGN_OR_RETURN(void* scratch, workspace.Allocate(static_cast<size_t>(floats) * sizeof(float)));
    REMEX_RETURN_IF_ERROR((LaunchFor<float, Half>(dtype, "float32 and float16 are", [&](auto tag) {
      return LaunchRnn<decltype(tag)>(p, t, static_cast<float*>(scratch), stream());
    })));
    return workspace.Release();
  }

 private:
  // Sizes from the inputs, which the shape function has checked.
  RnnParams ParamsOf(std::span<const TensorRef> in) const {
    RnnParams p;
    p.cell = parsed_.cell;
    p.gates = parsed_.gates;
    p.num_acts = parsed_.num_acts;
    p.layout1 = parsed_.layout == 1;
    const Shape& xs = in[kX].shape;
    p.seq = p.layout1 ? xs[1] : xs[0];
    p.batch = p.layout1 ? xs[0] : xs[1];
    p.input = xs[2];
    p.hidden = in[kW].shape[1] / parsed_.gates;
    p.dirs = parsed_.num_directions;
    p.reverse = parsed_.reverse;
    p.has_clip = parsed_.has_clip;
    p.clip = parsed_.clip;
    p.linear_before_reset = parsed_.linear_before_reset;
    p.input_forget = parsed_.input_forget;
    for (size_t i = 0; i < parsed_.acts.size() && i < static_cast<size_t>(kRnnMaxActs); ++i) {
      p.acts[i] = {parsed_.acts[i].kind, parsed_.acts[i].alpha, parsed_.acts[i].beta};
    }
    return p;
  }

  const RnnAttrs parsed_;
};

Status AddRnnKernel(KernelRegistry& registry, std::string_view name, CudaKernelContext context) {
  return AddCudaKernel(
      registry, name, [context](const OpDef& def, const Attributes& attrs) -> StatusOr<std::unique_ptr<OpKernel>> {
        REMEX_ASSIGN_OR_RETURN(RnnAttrs parsed, internal::ParseRnnAttrs(def.name, attrs));
        return std::unique_ptr<OpKernel>(std::make_unique<RnnCudaKernel>(def, attrs, std::move(parsed), context));
      });
}

}  // namespace

Status AddRnnCudaKernels(KernelRegistry& registry, CudaKernelContext context) {
  REMEX_RETURN_IF_ERROR(AddRnnKernel(registry, "LSTM", context));
  REMEX_RETURN_IF_ERROR(AddRnnKernel(registry, "GRU", context));
  return AddRnnKernel(registry, "RNN", context);
}

}  // namespace remex::kernels::cuda
