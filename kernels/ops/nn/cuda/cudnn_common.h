// cuDNN helpers of the convolution kernels (libraries_conv.cc): status mapping, RAII
// descriptors, dtype mapping, descriptor builders and the kernel base class that keeps
// one cudnnHandle and the plans per call signature. Host code: not for nvcc.
#pragma once

#include <cudnn.h>

#include <climits>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kernels/conv_epilogue.h"
#include "kernels/cuda/cuda_internal.h"
#include "kernels/cuda/cuda_kernel.h"
#include "kernels/cuda/epilogue_impl.h"
#include "kernels/cuda/workspace.h"
#include "kernels/internal.h"
#include "kernels/op_attrs.h"

namespace remex::kernels::cuda {

inline constexpr size_t kMaxPlans = 16;  // Plans (call signatures) cached per kernel.
inline constexpr float kOne = 1.0f;
inline constexpr float kZero = 0.0f;
inline constexpr uint64_t kZeroBits = 0;  // A zero of any float dtype, for cudnnSetTensor.

// Whether `s` is any of cuDNN 9's NOT_SUPPORTED codes: the category
// CUDNN_STATUS_NOT_SUPPORTED (3000) and its specific codes (3001..., such as
// CUDNN_STATUS_NOT_SUPPORTED_SHAPE), which cuDNN returns in its place.
inline bool IsNotSupported(cudnnStatus_t s) { return CUDNN_STATUS_CATEGORY(s) == CUDNN_STATUS_NOT_SUPPORTED; }

inline Status CudnnCheck(std::string_view op, std::string_view call, cudnnStatus_t s) {
  if (s == CUDNN_STATUS_SUCCESS) return OkStatus();
  std::string message = std::string(op) + " on cuda: " + std::string(call) + " failed: " + cudnnGetErrorString(s);
  if (s == CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED ||
      s == CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED) {
    return ResourceExhausted(std::move(message));
  }
  if (IsNotSupported(s)) return Unimplemented(std::move(message));
  return Internal(std::move(message));
}

struct HandleDeleter {
  void operator()(cudnnContext* h) const { cudnnDestroy(h); }
};
struct TensorDescDeleter {
  void operator()(cudnnTensorStruct* d) const { cudnnDestroyTensorDescriptor(d); }
};
struct FilterDescDeleter {
  void operator()(cudnnFilterStruct* d) const { cudnnDestroyFilterDescriptor(d); }
};
struct ConvDescDeleter {
  void operator()(cudnnConvolutionStruct* d) const { cudnnDestroyConvolutionDescriptor(d); }
};
struct ActivationDescDeleter {
  void operator()(cudnnActivationStruct* d) const { cudnnDestroyActivationDescriptor(d); }
};
using Handle = std::unique_ptr<cudnnContext, HandleDeleter>;
using TensorDesc = std::unique_ptr<cudnnTensorStruct, TensorDescDeleter>;
using FilterDesc = std::unique_ptr<cudnnFilterStruct, FilterDescDeleter>;
using ConvDesc = std::unique_ptr<cudnnConvolutionStruct, ConvDescDeleter>;
using ActivationDesc = std::unique_ptr<cudnnActivationStruct, ActivationDescDeleter>;

struct TypeInfo {
  cudnnDataType_t data;
  cudnnMathType_t math;
  size_t size;
};

inline StatusOr<TypeInfo> TypeOf(std::string_view op, DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return TypeInfo{CUDNN_DATA_FLOAT, CUDNN_FMA_MATH, 4};
    case DType::kFloat16: return TypeInfo{CUDNN_DATA_HALF, CUDNN_TENSOR_OP_MATH, 2};
    default: break;
  }
  return Unimplemented(std::string(op) + " on cuda: dtype " + std::string(DTypeName(dtype)) +
                       " is not implemented (float32 and float16 are)");
}

inline bool ExhaustiveSearch() {
  const char* v = std::getenv("REMEX_CUDNN_EXHAUSTIVE");
  return v != nullptr && std::string_view(v) == "1";
}

// Checks a call against the op's shape function; float16 calls (every input and output
// float16) are checked with their dtypes read as float32, the only one the OpDef takes.
inline Status CheckCall(const OpDef& def, const Attributes& attrs, std::span<const TensorRef> in,
                 std::span<const TensorRef> out) {
  if (in.empty() || in[0].dtype != DType::kFloat16) return internal::CheckAgainstShapeFn(def, attrs, in, out);
  std::vector<TensorRef> in32(in.begin(), in.end()), out32(out.begin(), out.end());
  for (auto* v : {&in32, &out32}) {
    for (TensorRef& t : *v) {
      if (!t.present()) continue;
      if (t.dtype != DType::kFloat16) {
        return internal::OpError(def.name, "mixes float16 and " + std::string(DTypeName(t.dtype)));
      }
      t.dtype = DType::kFloat32;
    }
  }
  return internal::CheckAgainstShapeFn(def, attrs, in32, out32);
}

// ---------------------------------------------------------------------------
// Descriptors.

// A dense tensor's cuDNN dims (channels-first order, at least 4: a 1-D tensor gets a
// spatial dim of 1 in front of its own) and element strides.
struct Layout {
  std::vector<int64_t> dims, strides;
};

// `cf`: channels-first dims [N, C, S...]; the memory is channels-first or -last.
inline Layout DenseLayout(const Shape& cf, bool channels_last) {
  Layout l;
  l.dims = cf;
  if (l.dims.size() == 3) l.dims.insert(l.dims.begin() + 2, 1);
  const size_t r = l.dims.size();
  l.strides.assign(r, 1);
  if (!channels_last) {
    for (size_t i = r - 1; i-- > 0;) l.strides[i] = l.strides[i + 1] * l.dims[i + 1];
  } else {
    int64_t acc = l.dims[1];
    for (size_t i = r; i-- > 2;) {
      l.strides[i] = acc;
      acc *= l.dims[i];
    }
    l.strides[0] = acc;
  }
  return l;
}

// The index in Layout::dims of spatial dim `i` of a tensor with `nsp` spatial dims.
inline size_t SpatialIndex(size_t nsp, size_t i) { return 2 + i + (nsp == 1 ? 1 : 0); }

inline StatusOr<std::vector<int>> ToInts(std::string_view op, const std::vector<int64_t>& v) {
  std::vector<int> out;
  for (int64_t x : v) {
    if (x < INT_MIN || x > INT_MAX) {
      return Unimplemented(std::string(op) + " on cuda: a dim, stride or pad of " + std::to_string(x) +
                           " exceeds cuDNN's 32-bit range");
    }
    out.push_back(static_cast<int>(x));
  }
  return out;
}

inline StatusOr<TensorDesc> MakeTensorDesc(std::string_view op, cudnnDataType_t type, const Layout& l) {
  REMEX_ASSIGN_OR_RETURN(std::vector<int> dims, ToInts(op, l.dims));
  REMEX_ASSIGN_OR_RETURN(std::vector<int> strides, ToInts(op, l.strides));
  cudnnTensorDescriptor_t d = nullptr;
  REMEX_RETURN_IF_ERROR(CudnnCheck(op, "cudnnCreateTensorDescriptor", cudnnCreateTensorDescriptor(&d)));
  TensorDesc desc(d);
  REMEX_RETURN_IF_ERROR(CudnnCheck(op, "cudnnSetTensorNdDescriptor",
                                   cudnnSetTensorNdDescriptor(d, type, static_cast<int>(dims.size()), dims.data(),
                                                              strides.data())));
  return desc;
}

// Filter [K, C / group, k...] in its ONNX (NCHW-like) layout.
inline StatusOr<FilterDesc> MakeFilterDesc(std::string_view op, cudnnDataType_t type, const Shape& w) {
  Shape dims = w;
  if (dims.size() == 3) dims.insert(dims.begin() + 2, 1);
  REMEX_ASSIGN_OR_RETURN(std::vector<int> d32, ToInts(op, dims));
  cudnnFilterDescriptor_t d = nullptr;
  REMEX_RETURN_IF_ERROR(CudnnCheck(op, "cudnnCreateFilterDescriptor", cudnnCreateFilterDescriptor(&d)));
  FilterDesc desc(d);
  REMEX_RETURN_IF_ERROR(CudnnCheck(
      op, "cudnnSetFilterNdDescriptor",
      cudnnSetFilterNdDescriptor(d, type, CUDNN_TENSOR_NCHW, static_cast<int>(d32.size()), d32.data())));
  return desc;
}

// Per spatial dim (in ONNX order) the symmetric pad, stride and dilation.
inline StatusOr<ConvDesc> MakeConvDesc(std::string_view op, const TypeInfo& type, std::vector<int64_t> pads,
                                std::vector<int64_t> strides, std::vector<int64_t> dilations, int64_t group) {
  if (pads.size() == 1) {  // 1-D: the added spatial dim of extent 1 in front.
    pads.insert(pads.begin(), 0);
    strides.insert(strides.begin(), 1);
    dilations.insert(dilations.begin(), 1);
  }
  REMEX_ASSIGN_OR_RETURN(std::vector<int> p, ToInts(op, pads));
  REMEX_ASSIGN_OR_RETURN(std::vector<int> s, ToInts(op, strides));
  REMEX_ASSIGN_OR_RETURN(std::vector<int> d, ToInts(op, dilations));
  cudnnConvolutionDescriptor_t c = nullptr;
  REMEX_RETURN_IF_ERROR(CudnnCheck(op, "cudnnCreateConvolutionDescriptor", cudnnCreateConvolutionDescriptor(&c)));
  ConvDesc desc(c);
  REMEX_RETURN_IF_ERROR(CudnnCheck(op, "cudnnSetConvolutionNdDescriptor",
                                   cudnnSetConvolutionNdDescriptor(c, static_cast<int>(p.size()), p.data(), s.data(),
                                                                   d.data(), CUDNN_CROSS_CORRELATION,
                                                                   CUDNN_DATA_FLOAT)));
  REMEX_RETURN_IF_ERROR(
      CudnnCheck(op, "cudnnSetConvolutionGroupCount", cudnnSetConvolutionGroupCount(c, static_cast<int>(group))));
  REMEX_RETURN_IF_ERROR(CudnnCheck(op, "cudnnSetConvolutionMathType", cudnnSetConvolutionMathType(c, type.math)));
  return desc;
}

// The first algorithm cuDNN reports usable, from heuristics or measurement.
template <typename Perf>
StatusOr<Perf> FirstUsable(std::string_view op, const Perf* perf, int count) {
  for (int i = 0; i < count; ++i) {
    if (perf[i].status == CUDNN_STATUS_SUCCESS) return perf[i];
  }
  return Unimplemented(std::string(op) + " on cuda: cuDNN has no algorithm for this convolution");
}

// Y = bias (0 without bias): the result when no input reaches the output.
inline Status FillBias(std::string_view op, cudnnHandle_t h, cudnnTensorDescriptor_t y_desc, void* y,
                cudnnTensorDescriptor_t bias_desc, const void* bias) {
  REMEX_RETURN_IF_ERROR(CudnnCheck(op, "cudnnSetTensor", cudnnSetTensor(h, y_desc, y, &kZeroBits)));
  if (!bias) return OkStatus();
  return CudnnCheck(op, "cudnnAddTensor", cudnnAddTensor(h, &kOne, bias_desc, bias, &kOne, y_desc, y));
}

// Bias B [M] as a [1, M, 1, ...] tensor of `rank` cuDNN dims.
inline StatusOr<TensorDesc> MakeBiasDesc(std::string_view op, cudnnDataType_t type, int64_t m, size_t rank) {
  Shape dims(rank, 1);
  dims[1] = m;
  Layout l = DenseLayout(dims, false);
  return MakeTensorDesc(op, type, l);
}

// What Conv and ConvTranspose share: the handle, the plans by call signature.
template <typename Plan>
class CudnnKernel : public OpKernel {
 public:
  CudnnKernel(const OpDef& def, Attributes attrs, CudaKernelContext context)
      : def_(def), attrs_(std::move(attrs)), context_(context), exhaustive_(ExhaustiveSearch()) {}

  Status Compute(std::span<const TensorRef> in, std::span<const TensorRef> out) final {
    REMEX_RETURN_IF_ERROR(CheckCall(def_, attrs_, in, out));
    REMEX_ASSIGN_OR_RETURN(TypeInfo type, TypeOf(def_.name, out[0].dtype));
    if (NumElements(out[0].shape).value_or(0) == 0) return OkStatus();
    REMEX_RETURN_IF_ERROR(CudaCheck(def_.name, "cudaSetDevice", cudaSetDevice(context_.device)));
    if (!handle_) {
      cudnnHandle_t h = nullptr;
      REMEX_RETURN_IF_ERROR(CudnnCheck(def_.name, "cudnnCreate", cudnnCreate(&h)));
      Handle handle(h);  // Kept only once bound to the stream; destroyed otherwise.
      REMEX_RETURN_IF_ERROR(CudnnCheck(def_.name, "cudnnSetStream", cudnnSetStream(h, stream())));
      handle_ = std::move(handle);
    }
    const bool has_bias = in.size() > 2 && in[2].present();
    Shape key = in[0].shape;
    key.insert(key.end(), in[1].shape.begin(), in[1].shape.end());
    key.push_back(has_bias ? 1 : 0);
    key.push_back(static_cast<int64_t>(type.data));
    auto it = plans_.find(key);
    if (it == plans_.end()) {
      REMEX_ASSIGN_OR_RETURN(std::unique_ptr<Plan> plan, Build(in, out[0], has_bias, type));
      if (plans_.size() >= kMaxPlans) plans_.clear();
      it = plans_.emplace(std::move(key), std::move(plan)).first;
    }
    return Run(*it->second, in, out[0], has_bias, type);
  }

 protected:
  virtual StatusOr<std::unique_ptr<Plan>> Build(std::span<const TensorRef> in, const TensorRef& out, bool has_bias,
                                                const TypeInfo& type) = 0;
  virtual Status Run(const Plan& plan, std::span<const TensorRef> in, const TensorRef& out, bool has_bias,
                     const TypeInfo& type) = 0;

  std::string_view op() const { return def_.name; }
  cudnnHandle_t handle() const { return handle_.get(); }
  cudaStream_t stream() const { return static_cast<cudaStream_t>(context_.stream); }
  // Where workspaces come from (StreamWorkspace's provider).
  const CudaWorkspaceFn* provider() const { return &context_.workspace; }
  bool exhaustive() const { return exhaustive_; }

 private:
  const OpDef& def_;
  const Attributes attrs_;
  const CudaKernelContext context_;
  const bool exhaustive_;
  Handle handle_;
  std::map<Shape, std::unique_ptr<Plan>> plans_;
};

}  // namespace remex::kernels::cuda
