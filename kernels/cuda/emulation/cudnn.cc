// The emulated cuDNN subset (include/cudnn.h): cross-correlation forward (with bias,
// Z and activation), its data gradient, and the tensor set / add / transform calls, as
// the cuDNN 9 API reference defines them; float32 accumulation, float16 storage
// rounded once.
#include <cuda_fp16.h>
#include <cudnn.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <vector>

struct cudnnContext {
  cudaStream_t stream = nullptr;
};

namespace remex::cuda_emulation {
namespace {

constexpr size_t kPrecompWorkspace = 64 << 10;  // What IMPLICIT_PRECOMP_GEMM asks for.

cudnnStatus_t Report(cudnnStatus_t status, const char* call, const std::string& detail) {
  std::fprintf(stderr, "remex cuda emulation: %s: %s: %s\n", call, cudnnGetErrorString(status),
               detail.c_str());
  return status;
}

size_t ElemBytes(cudnnDataType_t t) { return t == CUDNN_DATA_HALF ? 2 : 4; }
float LoadAt(const void* base, cudnnDataType_t t, int64_t i) {
  return LoadAsFloat(base, t == CUDNN_DATA_HALF, i);
}
void StoreAt(void* base, cudnnDataType_t t, int64_t i, float v) {
  StoreFromFloat(base, t == CUDNN_DATA_HALF, i, v);
}

int64_t Count(const int* dims, int rank) {
  int64_t n = 1;
  for (int d = 0; d < rank; ++d) n *= dims[d];
  return n;
}
// Bytes from the first to one past the last element a strided tensor addresses.
uint64_t SpanBytes(const cudnnTensorStruct& t) {
  if (Count(t.dims, t.rank) == 0) return 0;
  int64_t last = 0;
  for (int d = 0; d < t.rank; ++d) last += static_cast<int64_t>(t.dims[d] - 1) * t.strides[d];
  return static_cast<uint64_t>(last + 1) * ElemBytes(t.type);
}
int64_t Offset(const cudnnTensorStruct& t, const int* idx) {
  int64_t o = 0;
  for (int d = 0; d < t.rank; ++d) o += static_cast<int64_t>(idx[d]) * t.strides[d];
  return o;
}
// Calls f(index) for every index of `dims` (last dim fastest).
void ForEach(const int* dims, int rank, const std::function<void(const int*)>& f) {
  if (Count(dims, rank) == 0) return;
  int idx[kCudnnEmulationMaxDims] = {};
  for (;;) {
    f(idx);
    int d = rank - 1;
    while (d >= 0 && ++idx[d] == dims[d]) idx[d--] = 0;
    if (d < 0) return;
  }
}

cudnnStatus_t CheckMemory(const char* call, const char* name, const void* p, uint64_t bytes) {
  if (bytes == 0) return CUDNN_STATUS_SUCCESS;
  if (!p || !IsDeviceRange(p, bytes)) {
    return Report(CUDNN_STATUS_EXECUTION_FAILED, call,
                  std::string(name) + " does not hold the " + std::to_string(bytes) +
                      " bytes of device memory its descriptor spans");
  }
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t CheckWorkspace(const char* call, void* workspace, size_t bytes, size_t needed) {
  if (bytes < needed || (needed > 0 && !IsDeviceRange(workspace, needed))) {
    return Report(
        CUDNN_STATUS_BAD_PARAM, call,
        "the workspace is not the " + std::to_string(needed) + " bytes of device memory the algorithm needs");
  }
  return CUDNN_STATUS_SUCCESS;
}

// The geometry of y = conv(x, w): x [N, C, X...], w [K, C / groups, F...],
// y [N, K, Y...], Y = (X + 2 pad - (dilation (F - 1) + 1)) / stride + 1.
cudnnStatus_t CheckGeometry(const char* call, const cudnnTensorStruct& x, const cudnnFilterStruct& w,
                            const cudnnConvolutionStruct& c, const cudnnTensorStruct& y) {
  const int spatial = x.rank - 2;
  if (x.rank < 3 || w.rank != x.rank || y.rank != x.rank || c.spatial != spatial) {
    return Report(CUDNN_STATUS_BAD_PARAM, call, "ranks of x, w, y and the convolution disagree");
  }
  if (c.mode != CUDNN_CROSS_CORRELATION)
    return Report(CUDNN_STATUS_NOT_SUPPORTED, call, "only cross-correlation");
  if (x.type != w.type || x.type != y.type)
    return Report(CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE, call, "mixed types");
  const int groups = c.groups;
  if (groups < 1 || x.dims[1] % groups != 0 || w.dims[0] % groups != 0 || w.dims[1] * groups != x.dims[1] ||
      y.dims[1] != w.dims[0] || y.dims[0] != x.dims[0]) {
    return Report(CUDNN_STATUS_BAD_PARAM, call,
                  "channels of x, w and y disagree with group count " + std::to_string(groups));
  }
  for (int d = 0; d < spatial; ++d) {
    const int64_t reach = static_cast<int64_t>(c.dilations[d]) * (w.dims[2 + d] - 1) + 1;
    const int64_t out = (x.dims[2 + d] + 2 * static_cast<int64_t>(c.pads[d]) - reach) / c.strides[d] + 1;
    if (out != y.dims[2 + d]) {
      return Report(CUDNN_STATUS_BAD_PARAM, call,
                    "spatial dim " + std::to_string(d) + " of y is " + std::to_string(y.dims[2 + d]) +
                        ", not " + std::to_string(out));
    }
  }
  return CUDNN_STATUS_SUCCESS;
}

// Filter element offset (dense, NCHW-like).
int64_t FilterOffset(const cudnnFilterStruct& w, int k, int c, const int* f) {
  int64_t o = static_cast<int64_t>(k) * w.dims[1] + c;
  for (int d = 2; d < w.rank; ++d) o = o * w.dims[d] + f[d - 2];
  return o;
}

// The raw cross-correlation at y index `yi` (float32 accumulation, channels then
// filter taps in order). `x_base` / `w_base` are the tensors as float32 (converted once
// per call, so the loop reads plain floats).
float ConvAt(const cudnnTensorStruct& x, const float* x_base, const cudnnFilterStruct& w, const float* w_base,
             const cudnnConvolutionStruct& c, const int* yi) {
  const int spatial = x.rank - 2;
  const int k = yi[1];
  const int cg = w.dims[1];
  const int g = k / (w.dims[0] / c.groups);
  int64_t taps = 1;
  for (int d = 0; d < spatial; ++d) taps *= w.dims[2 + d];
  float acc = 0.0f;
  int f[kCudnnEmulationMaxDims] = {};
  for (int ci = 0; ci < cg; ++ci) {
    const int64_t x_channel =
        static_cast<int64_t>(yi[0]) * x.strides[0] + static_cast<int64_t>(g * cg + ci) * x.strides[1];
    const float* w_row = w_base + (static_cast<int64_t>(k) * cg + ci) * taps;
    for (int64_t t = 0; t < taps; ++t) {
      // f: tap t as a multi-index (last dim fastest).
      int64_t rest = t;
      for (int d = spatial - 1; d >= 0; --d) {
        f[d] = static_cast<int>(rest % w.dims[2 + d]);
        rest /= w.dims[2 + d];
      }
      int64_t xo = x_channel;
      bool inside = true;
      for (int d = 0; d < spatial && inside; ++d) {
        const int p = yi[2 + d] * c.strides[d] - c.pads[d] + f[d] * c.dilations[d];
        inside = p >= 0 && p < x.dims[2 + d];
        xo += static_cast<int64_t>(p) * x.strides[2 + d];
      }
      if (inside) acc += x_base[xo] * w_row[t];
    }
  }
  return acc;
}

// The raw 2-D cross-correlation for every y element, in y's logical order (n, k, h, w).
// Each y element sums its terms in ConvAt's order (channels, then filter rows, then
// filter columns), so the two agree bit for bit; the loops run the other way round, a
// filter tap at a time over a whole output plane, so that the innermost loop walks a row
// of x and of y (PP-OCRv4 rec's 29 Conv calls under the sanitizers: 2.1 s, against 4.7 s
// with a loop over the taps per y element; docs/benchmarks.md).
std::vector<float> Conv2d(const cudnnTensorStruct& x, const float* xb, const cudnnFilterStruct& w,
                          const float* wb, const cudnnConvolutionStruct& c, const cudnnTensorStruct& y) {
  const int n_count = y.dims[0], k_count = y.dims[1], oh_count = y.dims[2], ow_count = y.dims[3];
  const int cg = w.dims[1], rr = w.dims[2], ss = w.dims[3];
  const int kg = w.dims[0] / c.groups;
  const int ih_count = x.dims[2], iw_count = x.dims[3];
  // [lo, hi): the output rows (columns) whose input row (column) under filter row r
  // (column q) lies inside x.
  auto inside = [](int out_count, int in_count, int stride, int pad, int tap_offset, int* lo, int* hi) {
    *lo = out_count;
    *hi = out_count;
    for (int o = 0; o < out_count; ++o) {
      const int i = o * stride - pad + tap_offset;
      if (i >= 0 && i < in_count) {
        if (*lo == out_count) *lo = o;
        *hi = o + 1;
      }
    }
    if (*lo == out_count) *lo = *hi = 0;
  };
  std::vector<int> oh_lo(rr), oh_hi(rr), ow_lo(ss), ow_hi(ss);
  for (int r = 0; r < rr; ++r)
    inside(oh_count, ih_count, c.strides[0], c.pads[0], r * c.dilations[0], &oh_lo[r], &oh_hi[r]);
  for (int q = 0; q < ss; ++q)
    inside(ow_count, iw_count, c.strides[1], c.pads[1], q * c.dilations[1], &ow_lo[q], &ow_hi[q]);
  const int64_t plane = static_cast<int64_t>(oh_count) * ow_count;
  // x elements between the inputs of two neighbouring y columns.
  const int64_t x_step = static_cast<int64_t>(c.strides[1]) * x.strides[3];
  std::vector<float> out(static_cast<size_t>(n_count) * k_count * plane, 0.0f);
  for (int n = 0; n < n_count; ++n) {
    for (int k = 0; k < k_count; ++k) {
      float* y_plane = out.data() + (static_cast<int64_t>(n) * k_count + k) * plane;
      const float* x_group =
          xb + static_cast<int64_t>(n) * x.strides[0] + static_cast<int64_t>(k / kg) * cg * x.strides[1];
      const float* w_k = wb + static_cast<int64_t>(k) * cg * rr * ss;
      for (int ci = 0; ci < cg; ++ci) {
        const float* xc = x_group + static_cast<int64_t>(ci) * x.strides[1];
        const float* wc = w_k + static_cast<int64_t>(ci) * rr * ss;
        for (int r = 0; r < rr; ++r) {
          for (int q = 0; q < ss; ++q) {
            const float wv = wc[r * ss + q];
            const int iw0 = -c.pads[1] + q * c.dilations[1];  // the input column of y column 0
            for (int oh = oh_lo[r]; oh < oh_hi[r]; ++oh) {
              const int ih = oh * c.strides[0] - c.pads[0] + r * c.dilations[0];
              const float* xr = xc + static_cast<int64_t>(ih) * x.strides[2];
              float* yr = y_plane + static_cast<int64_t>(oh) * ow_count;
              for (int ow = ow_lo[q]; ow < ow_hi[q]; ++ow) {
                yr[ow] += xr[static_cast<int64_t>(iw0) * x.strides[3] + ow * x_step] * wv;
              }
            }
          }
        }
      }
    }
  }
  return out;
}

// `count` elements of `t` (float32 or float16) from `p` as float32.
std::vector<float> ToFloats(const void* p, cudnnDataType_t t, int64_t count) {
  std::vector<float> out(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) out[static_cast<size_t>(i)] = LoadAt(p, t, i);
  return out;
}

size_t FwdWorkspace(cudnnConvolutionFwdAlgo_t algo) {
  return algo == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM ? kPrecompWorkspace : 0;
}
// An index cuDNN defines (the emulation checks it, as cuDNN answers CUDNN_STATUS_BAD_PARAM).
bool FwdAlgoValid(cudnnConvolutionFwdAlgo_t algo) {
  return static_cast<int>(algo) >= 0 && static_cast<int>(algo) < CUDNN_CONVOLUTION_FWD_ALGO_COUNT;
}
bool FwdSupported(cudnnConvolutionFwdAlgo_t algo) {
  return algo == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM ||
         algo == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM;
}

template <typename Perf, typename Algo>
cudnnStatus_t ListAlgorithms(int requested, int* returned, Perf* perf, Algo with_workspace, Algo without) {
  if (!returned || !perf || requested < 1) return CUDNN_STATUS_BAD_PARAM;
  const Algo algos[2] = {with_workspace, without};
  const size_t bytes[2] = {kPrecompWorkspace, 0};
  *returned = 0;
  for (int i = 0; i < 2 && i < requested; ++i) {
    Perf p{};
    p.algo = algos[i];
    p.status = CUDNN_STATUS_SUCCESS;
    p.time = 0.0f;
    p.memory = bytes[i];
    p.determinism = CUDNN_DETERMINISTIC;
    perf[i] = p;
    ++*returned;
  }
  return CUDNN_STATUS_SUCCESS;
}

}  // namespace
}  // namespace remex::cuda_emulation

using namespace remex::cuda_emulation;  // NOLINT: cuDNN's API is global.

const char* cudnnGetErrorString(cudnnStatus_t status) {
  switch (status) {
    case CUDNN_STATUS_SUCCESS:
      return "CUDNN_STATUS_SUCCESS";
    case CUDNN_STATUS_NOT_INITIALIZED:
      return "CUDNN_STATUS_NOT_INITIALIZED";
    case CUDNN_STATUS_BAD_PARAM:
      return "CUDNN_STATUS_BAD_PARAM";
    case CUDNN_STATUS_BAD_PARAM_NULL_POINTER:
      return "CUDNN_STATUS_BAD_PARAM_NULL_POINTER";
    case CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH:
      return "CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH";
    case CUDNN_STATUS_NOT_SUPPORTED:
      return "CUDNN_STATUS_NOT_SUPPORTED";
    case CUDNN_STATUS_NOT_SUPPORTED_SHAPE:
      return "CUDNN_STATUS_NOT_SUPPORTED_SHAPE";
    case CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE:
      return "CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE";
    case CUDNN_STATUS_INTERNAL_ERROR:
      return "CUDNN_STATUS_INTERNAL_ERROR";
    case CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED:
      return "CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED";
    case CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED:
      return "CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED";
    case CUDNN_STATUS_EXECUTION_FAILED:
      return "CUDNN_STATUS_EXECUTION_FAILED";
  }
  return "CUDNN_STATUS_UNKNOWN";
}

cudnnStatus_t cudnnCreate(cudnnHandle_t* handle) {
  if (!handle) return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
  *handle = new cudnnContext();
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnDestroy(cudnnHandle_t handle) {
  delete handle;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnSetStream(cudnnHandle_t handle, cudaStream_t stream) {
  if (!handle) return CUDNN_STATUS_NOT_INITIALIZED;
  if (!IsValidStream(stream)) return Report(CUDNN_STATUS_BAD_PARAM, "cudnnSetStream", "invalid stream");
  handle->stream = stream;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnCreateTensorDescriptor(cudnnTensorDescriptor_t* desc) {
  if (!desc) return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
  *desc = new cudnnTensorStruct();
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnDestroyTensorDescriptor(cudnnTensorDescriptor_t desc) {
  delete desc;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnSetTensorNdDescriptor(cudnnTensorDescriptor_t desc, cudnnDataType_t type, int rank,
                                         const int dims[], const int strides[]) {
  constexpr const char* kCall = "cudnnSetTensorNdDescriptor";
  if (!desc || !dims || !strides) return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
  // cuDNN: 3 to 8 dims, each positive, strides positive.
  if (rank < 3 || rank > kCudnnEmulationMaxDims)
    return Report(CUDNN_STATUS_BAD_PARAM, kCall, "rank out of [3, 8]");
  for (int d = 0; d < rank; ++d) {
    if (dims[d] <= 0 || strides[d] <= 0) {
      return Report(CUDNN_STATUS_BAD_PARAM, kCall,
                    "dim " + std::to_string(d) + " or its stride is not positive");
    }
  }
  desc->type = type;
  desc->rank = rank;
  for (int d = 0; d < rank; ++d) {
    desc->dims[d] = dims[d];
    desc->strides[d] = strides[d];
  }
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnCreateFilterDescriptor(cudnnFilterDescriptor_t* desc) {
  if (!desc) return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
  *desc = new cudnnFilterStruct();
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnDestroyFilterDescriptor(cudnnFilterDescriptor_t desc) {
  delete desc;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnSetFilterNdDescriptor(cudnnFilterDescriptor_t desc, cudnnDataType_t type,
                                         cudnnTensorFormat_t format, int rank, const int dims[]) {
  constexpr const char* kCall = "cudnnSetFilterNdDescriptor";
  if (!desc || !dims) return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
  if (format != CUDNN_TENSOR_NCHW)
    return Report(CUDNN_STATUS_NOT_SUPPORTED, kCall, "only NCHW filters are emulated");
  if (rank < 3 || rank > kCudnnEmulationMaxDims)
    return Report(CUDNN_STATUS_BAD_PARAM, kCall, "rank out of [3, 8]");
  for (int d = 0; d < rank; ++d) {
    if (dims[d] <= 0)
      return Report(CUDNN_STATUS_BAD_PARAM, kCall, "dim " + std::to_string(d) + " is not positive");
  }
  desc->type = type;
  desc->rank = rank;
  for (int d = 0; d < rank; ++d) desc->dims[d] = dims[d];
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnCreateConvolutionDescriptor(cudnnConvolutionDescriptor_t* desc) {
  if (!desc) return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
  *desc = new cudnnConvolutionStruct();
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnDestroyConvolutionDescriptor(cudnnConvolutionDescriptor_t desc) {
  delete desc;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnSetConvolutionNdDescriptor(cudnnConvolutionDescriptor_t desc, int spatial,
                                              const int pads[], const int strides[], const int dilations[],
                                              cudnnConvolutionMode_t mode, cudnnDataType_t compute) {
  constexpr const char* kCall = "cudnnSetConvolutionNdDescriptor";
  if (!desc || !pads || !strides || !dilations) return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
  if (spatial < 1 || spatial > kCudnnEmulationMaxDims - 2)
    return Report(CUDNN_STATUS_BAD_PARAM, kCall, "bad rank");
  for (int d = 0; d < spatial; ++d) {
    if (pads[d] < 0 || strides[d] <= 0 || dilations[d] <= 0) {
      return Report(CUDNN_STATUS_BAD_PARAM, kCall, "negative pad or non-positive stride or dilation");
    }
  }
  desc->spatial = spatial;
  desc->mode = mode;
  for (int d = 0; d < spatial; ++d) {
    desc->pads[d] = pads[d];
    desc->strides[d] = strides[d];
    desc->dilations[d] = dilations[d];
  }
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnSetConvolutionGroupCount(cudnnConvolutionDescriptor_t desc, int groups) {
  if (!desc) return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
  if (groups < 1) return Report(CUDNN_STATUS_BAD_PARAM, "cudnnSetConvolutionGroupCount", "group count < 1");
  desc->groups = groups;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnSetConvolutionMathType(cudnnConvolutionDescriptor_t desc, cudnnMathType_t math) {
  if (!desc) return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
  if (static_cast<int>(math) < CUDNN_DEFAULT_MATH || static_cast<int>(math) > CUDNN_FMA_MATH) {
    return Report(CUDNN_STATUS_BAD_PARAM, "cudnnSetConvolutionMathType", "no such math type");
  }
  desc->math = math;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnCreateActivationDescriptor(cudnnActivationDescriptor_t* desc) {
  if (!desc) return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
  *desc = new cudnnActivationStruct();
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnDestroyActivationDescriptor(cudnnActivationDescriptor_t desc) {
  delete desc;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnSetActivationDescriptor(cudnnActivationDescriptor_t desc, cudnnActivationMode_t mode,
                                           cudnnNanPropagation_t nan, double coef) {
  if (!desc) return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
  if (mode != CUDNN_ACTIVATION_RELU && mode != CUDNN_ACTIVATION_IDENTITY) {
    return Report(CUDNN_STATUS_NOT_SUPPORTED, "cudnnSetActivationDescriptor",
                  "only RELU and IDENTITY are emulated");
  }
  desc->mode = mode;
  desc->nan = nan;
  desc->coef = coef;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolutionForwardAlgorithm_v7(cudnnHandle_t handle, cudnnTensorDescriptor_t x,
                                                     cudnnFilterDescriptor_t w,
                                                     cudnnConvolutionDescriptor_t conv,
                                                     cudnnTensorDescriptor_t y, int requested, int* returned,
                                                     cudnnConvolutionFwdAlgoPerf_t* perf) {
  constexpr const char* kCall = "cudnnGetConvolutionForwardAlgorithm_v7";
  if (!handle || !x || !w || !conv || !y) return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
  if (cudnnStatus_t s = CheckGeometry(kCall, *x, *w, *conv, *y); s != CUDNN_STATUS_SUCCESS) return s;
  return ListAlgorithms(requested, returned, perf, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM,
                        CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM);
}
cudnnStatus_t cudnnFindConvolutionForwardAlgorithm(cudnnHandle_t handle, cudnnTensorDescriptor_t x,
                                                   cudnnFilterDescriptor_t w,
                                                   cudnnConvolutionDescriptor_t conv,
                                                   cudnnTensorDescriptor_t y, int requested, int* returned,
                                                   cudnnConvolutionFwdAlgoPerf_t* perf) {
  return cudnnGetConvolutionForwardAlgorithm_v7(handle, x, w, conv, y, requested, returned, perf);
}
cudnnStatus_t cudnnGetConvolutionForwardWorkspaceSize(cudnnHandle_t handle, cudnnTensorDescriptor_t x,
                                                      cudnnFilterDescriptor_t w,
                                                      cudnnConvolutionDescriptor_t conv,
                                                      cudnnTensorDescriptor_t y,
                                                      cudnnConvolutionFwdAlgo_t algo, size_t* bytes) {
  constexpr const char* kCall = "cudnnGetConvolutionForwardWorkspaceSize";
  if (!handle || !x || !w || !conv || !y || !bytes) return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
  if (cudnnStatus_t s = CheckGeometry(kCall, *x, *w, *conv, *y); s != CUDNN_STATUS_SUCCESS) return s;
  if (!FwdAlgoValid(algo)) return Report(CUDNN_STATUS_BAD_PARAM, kCall, "no such algorithm");
  if (!FwdSupported(algo)) return CUDNN_STATUS_NOT_SUPPORTED;
  *bytes = FwdWorkspace(algo);
  return CUDNN_STATUS_SUCCESS;
}

namespace {
// y = act(alpha1 conv(x, w) + alpha2 z + bias) when `bias_desc`, else
// alpha1 conv(x, w) + beta y. A zero alpha2 / beta leaves z / y unread.
cudnnStatus_t Forward(const char* call, cudnnHandle_t handle, float alpha1, const cudnnTensorStruct* x_desc,
                      const void* x, const cudnnFilterStruct* w_desc, const void* w,
                      const cudnnConvolutionStruct* conv, cudnnConvolutionFwdAlgo_t algo, void* workspace,
                      size_t workspace_bytes, float beta, const cudnnTensorStruct* z_desc, const void* z,
                      const cudnnTensorStruct* bias_desc, const void* bias, const cudnnActivationStruct* act,
                      const cudnnTensorStruct* y_desc, void* y) {
  if (!handle || !x_desc || !w_desc || !conv || !y_desc) return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
  if (cudnnStatus_t s = CheckGeometry(call, *x_desc, *w_desc, *conv, *y_desc); s != CUDNN_STATUS_SUCCESS)
    return s;
  if (!FwdAlgoValid(algo)) return Report(CUDNN_STATUS_BAD_PARAM, call, "no such algorithm");
  if (!FwdSupported(algo)) return Report(CUDNN_STATUS_NOT_SUPPORTED, call, "algorithm not emulated");
  if (cudnnStatus_t s = CheckWorkspace(call, workspace, workspace_bytes, FwdWorkspace(algo)); s) return s;
  const uint64_t w_bytes = static_cast<uint64_t>(Count(w_desc->dims, w_desc->rank)) * ElemBytes(w_desc->type);
  if (cudnnStatus_t s = CheckMemory(call, "x", x, SpanBytes(*x_desc)); s) return s;
  if (cudnnStatus_t s = CheckMemory(call, "w", w, w_bytes); s) return s;
  if (cudnnStatus_t s = CheckMemory(call, "y", y, SpanBytes(*y_desc)); s) return s;
  if (z_desc && beta != 0.0f) {
    for (int d = 0; d < y_desc->rank; ++d) {
      if (z_desc->rank != y_desc->rank || z_desc->dims[d] != y_desc->dims[d]) {
        return Report(CUDNN_STATUS_BAD_PARAM, call, "z's dims are not y's");
      }
    }
    if (cudnnStatus_t s = CheckMemory(call, "z", z, SpanBytes(*z_desc)); s) return s;
  }
  if (bias_desc) {
    if (Count(bias_desc->dims, bias_desc->rank) != y_desc->dims[1] || bias_desc->dims[1] != y_desc->dims[1]) {
      return Report(CUDNN_STATUS_BAD_PARAM, call, "the bias is not [1, K, 1, ...]");
    }
    if (cudnnStatus_t s = CheckMemory(call, "bias", bias, SpanBytes(*bias_desc)); s) return s;
    // cuDNN's documented restriction: the identity activation only with this algorithm.
    if (act->mode == CUDNN_ACTIVATION_IDENTITY && algo != CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM) {
      return CUDNN_STATUS_NOT_SUPPORTED;
    }
  }
  // The reference loop, on copies of the descriptors: a capture replays it later.
  std::optional<cudnnTensorStruct> z_copy, bias_copy;
  std::optional<cudnnActivationStruct> act_copy;
  if (z_desc) z_copy = *z_desc;
  if (bias_desc) bias_copy = *bias_desc;
  if (act) act_copy = *act;
  std::function<cudaError_t()> work = [alpha1, beta, x_v = *x_desc, w_v = *w_desc, conv_v = *conv, y_v = *y_desc,
                                       z_copy, bias_copy, act_copy, x, w, z, bias, y] {
  const cudnnTensorStruct *x_desc = &x_v, *y_desc = &y_v;
  const cudnnFilterStruct* w_desc = &w_v;
  const cudnnConvolutionStruct* conv = &conv_v;
  const cudnnTensorStruct* z_desc = z_copy ? &*z_copy : nullptr;
  const cudnnTensorStruct* bias_desc = bias_copy ? &*bias_copy : nullptr;
  const cudnnActivationStruct* act = act_copy ? &*act_copy : nullptr;
  // x as float32 over its whole span (strides kept), w dense.
  const std::vector<float> xf =
      ToFloats(x, x_desc->type, static_cast<int64_t>(SpanBytes(*x_desc) / ElemBytes(x_desc->type)));
  const std::vector<float> wf = ToFloats(w, w_desc->type, Count(w_desc->dims, w_desc->rank));
  // 2-D convolutions (1-D ones arrive as 2-D with an extent-1 dim) take a direct loop;
  // others the generic one. Both accumulate in the same order.
  std::vector<float> direct;
  if (x_desc->rank == 4) direct = Conv2d(*x_desc, xf.data(), *w_desc, wf.data(), *conv, *y_desc);
  size_t next = 0;
  ForEach(y_desc->dims, y_desc->rank, [&](const int* yi) {
    float v = alpha1 * (x_desc->rank == 4 ? direct[next++]
                                          : ConvAt(*x_desc, xf.data(), *w_desc, wf.data(), *conv, yi));
    const int64_t yo = Offset(*y_desc, yi);
    if (bias_desc) {
      if (beta != 0.0f) v += beta * LoadAt(z, z_desc->type, Offset(*z_desc, yi));
      int bi[kCudnnEmulationMaxDims] = {};
      bi[1] = yi[1];
      v += LoadAt(bias, bias_desc->type, Offset(*bias_desc, bi));
      if (act->mode == CUDNN_ACTIVATION_RELU)
        v = std::isnan(v) && act->nan == CUDNN_PROPAGATE_NAN ? v : (v > 0 ? v : 0);
    } else if (beta != 0.0f) {
      v += beta * LoadAt(y, y_desc->type, yo);
    }
    StoreAt(y, y_desc->type, yo, v);
  });
  return cudaSuccess;
  };
  return Enqueue(handle->stream, call, std::move(work)) == cudaSuccess ? CUDNN_STATUS_SUCCESS
                                                                        : CUDNN_STATUS_EXECUTION_FAILED;
}
}  // namespace

cudnnStatus_t cudnnConvolutionForward(cudnnHandle_t handle, const void* alpha, cudnnTensorDescriptor_t x_desc,
                                      const void* x, cudnnFilterDescriptor_t w_desc, const void* w,
                                      cudnnConvolutionDescriptor_t conv, cudnnConvolutionFwdAlgo_t algo,
                                      void* workspace, size_t workspace_bytes, const void* beta,
                                      cudnnTensorDescriptor_t y_desc, void* y) {
  if (!alpha || !beta) return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
  return Forward("cudnnConvolutionForward", handle, *static_cast<const float*>(alpha), x_desc, x, w_desc, w,
                 conv, algo, workspace, workspace_bytes, *static_cast<const float*>(beta), nullptr, nullptr,
                 nullptr, nullptr, nullptr, y_desc, y);
}
cudnnStatus_t cudnnConvolutionBiasActivationForward(
    cudnnHandle_t handle, const void* alpha1, cudnnTensorDescriptor_t x_desc, const void* x,
    cudnnFilterDescriptor_t w_desc, const void* w, cudnnConvolutionDescriptor_t conv,
    cudnnConvolutionFwdAlgo_t algo, void* workspace, size_t workspace_bytes, const void* alpha2,
    cudnnTensorDescriptor_t z_desc, const void* z, cudnnTensorDescriptor_t bias_desc, const void* bias,
    cudnnActivationDescriptor_t activation, cudnnTensorDescriptor_t y_desc, void* y) {
  if (!alpha1 || !alpha2 || !z_desc || !bias_desc || !activation) return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
  return Forward("cudnnConvolutionBiasActivationForward", handle, *static_cast<const float*>(alpha1), x_desc,
                 x, w_desc, w, conv, algo, workspace, workspace_bytes, *static_cast<const float*>(alpha2),
                 z_desc, z, bias_desc, bias, activation, y_desc, y);
}

cudnnStatus_t cudnnGetConvolutionBackwardDataAlgorithm_v7(cudnnHandle_t handle, cudnnFilterDescriptor_t w,
                                                          cudnnTensorDescriptor_t dy,
                                                          cudnnConvolutionDescriptor_t conv,
                                                          cudnnTensorDescriptor_t dx, int requested,
                                                          int* returned,
                                                          cudnnConvolutionBwdDataAlgoPerf_t* perf) {
  constexpr const char* kCall = "cudnnGetConvolutionBackwardDataAlgorithm_v7";
  if (!handle || !w || !dy || !conv || !dx) return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
  if (cudnnStatus_t s = CheckGeometry(kCall, *dx, *w, *conv, *dy); s != CUDNN_STATUS_SUCCESS) return s;
  return ListAlgorithms(requested, returned, perf, CUDNN_CONVOLUTION_BWD_DATA_ALGO_1,
                        CUDNN_CONVOLUTION_BWD_DATA_ALGO_0);
}
cudnnStatus_t cudnnFindConvolutionBackwardDataAlgorithm(cudnnHandle_t handle, cudnnFilterDescriptor_t w,
                                                        cudnnTensorDescriptor_t dy,
                                                        cudnnConvolutionDescriptor_t conv,
                                                        cudnnTensorDescriptor_t dx, int requested,
                                                        int* returned,
                                                        cudnnConvolutionBwdDataAlgoPerf_t* perf) {
  return cudnnGetConvolutionBackwardDataAlgorithm_v7(handle, w, dy, conv, dx, requested, returned, perf);
}
cudnnStatus_t cudnnGetConvolutionBackwardDataWorkspaceSize(cudnnHandle_t handle, cudnnFilterDescriptor_t w,
                                                           cudnnTensorDescriptor_t dy,
                                                           cudnnConvolutionDescriptor_t conv,
                                                           cudnnTensorDescriptor_t dx,
                                                           cudnnConvolutionBwdDataAlgo_t algo,
                                                           size_t* bytes) {
  constexpr const char* kCall = "cudnnGetConvolutionBackwardDataWorkspaceSize";
  if (!handle || !w || !dy || !conv || !dx || !bytes) return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
  if (cudnnStatus_t s = CheckGeometry(kCall, *dx, *w, *conv, *dy); s != CUDNN_STATUS_SUCCESS) return s;
  if (algo != CUDNN_CONVOLUTION_BWD_DATA_ALGO_0 && algo != CUDNN_CONVOLUTION_BWD_DATA_ALGO_1) {
    return CUDNN_STATUS_NOT_SUPPORTED;
  }
  *bytes = algo == CUDNN_CONVOLUTION_BWD_DATA_ALGO_1 ? kPrecompWorkspace : 0;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnConvolutionBackwardData(cudnnHandle_t handle, const void* alpha,
                                           cudnnFilterDescriptor_t w_desc, const void* w,
                                           cudnnTensorDescriptor_t dy_desc, const void* dy,
                                           cudnnConvolutionDescriptor_t conv,
                                           cudnnConvolutionBwdDataAlgo_t algo, void* workspace,
                                           size_t workspace_bytes, const void* beta,
                                           cudnnTensorDescriptor_t dx_desc, void* dx) {
  constexpr const char* kCall = "cudnnConvolutionBackwardData";
  if (!handle || !alpha || !beta || !w_desc || !dy_desc || !conv || !dx_desc)
    return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
  if (cudnnStatus_t s = CheckGeometry(kCall, *dx_desc, *w_desc, *conv, *dy_desc); s != CUDNN_STATUS_SUCCESS)
    return s;
  if (algo != CUDNN_CONVOLUTION_BWD_DATA_ALGO_0 && algo != CUDNN_CONVOLUTION_BWD_DATA_ALGO_1) {
    return Report(CUDNN_STATUS_NOT_SUPPORTED, kCall, "algorithm not emulated");
  }
  const size_t needed = algo == CUDNN_CONVOLUTION_BWD_DATA_ALGO_1 ? kPrecompWorkspace : 0;
  if (cudnnStatus_t s = CheckWorkspace(kCall, workspace, workspace_bytes, needed); s) return s;
  const uint64_t w_bytes = static_cast<uint64_t>(Count(w_desc->dims, w_desc->rank)) * ElemBytes(w_desc->type);
  if (cudnnStatus_t s = CheckMemory(kCall, "w", w, w_bytes); s) return s;
  if (cudnnStatus_t s = CheckMemory(kCall, "dy", dy, SpanBytes(*dy_desc)); s) return s;
  if (cudnnStatus_t s = CheckMemory(kCall, "dx", dx, SpanBytes(*dx_desc)); s) return s;
  const float a = *static_cast<const float*>(alpha), b = *static_cast<const float*>(beta);
  std::function<cudaError_t()> work = [a, b, w_v = *w_desc, dy_v = *dy_desc, conv_v = *conv, dx_v = *dx_desc, w,
                                       dy, dx] {
  const cudnnFilterStruct* w_desc = &w_v;
  const cudnnTensorStruct *dy_desc = &dy_v, *dx_desc = &dx_v;
  const cudnnConvolutionStruct* conv = &conv_v;
  const int spatial = dx_desc->rank - 2;
  // Accumulate dense in float32, in dx's logical order, then blend into dx.
  std::vector<float> acc(static_cast<size_t>(Count(dx_desc->dims, dx_desc->rank)), 0.0f);
  const int cg = w_desc->dims[1];
  const int kg = w_desc->dims[0] / conv->groups;
  ForEach(dy_desc->dims, dy_desc->rank, [&](const int* yi) {
    const float g_y = LoadAt(dy, dy_desc->type, Offset(*dy_desc, yi));
    const int k = yi[1];
    const int g = k / kg;
    for (int ci = 0; ci < cg; ++ci) {
      ForEach(w_desc->dims + 2, spatial, [&](const int* f) {
        int64_t flat = static_cast<int64_t>(yi[0]) * dx_desc->dims[1] + g * cg + ci;
        for (int d = 0; d < spatial; ++d) {
          const int p = yi[2 + d] * conv->strides[d] - conv->pads[d] + f[d] * conv->dilations[d];
          if (p < 0 || p >= dx_desc->dims[2 + d]) return;
          flat = flat * dx_desc->dims[2 + d] + p;
        }
        acc[static_cast<size_t>(flat)] += g_y * LoadAt(w, w_desc->type, FilterOffset(*w_desc, k, ci, f));
      });
    }
  });
  size_t i = 0;
  ForEach(dx_desc->dims, dx_desc->rank, [&](const int* xi) {
    const int64_t o = Offset(*dx_desc, xi);
    float v = a * acc[i++];
    if (b != 0.0f) v += b * LoadAt(dx, dx_desc->type, o);
    StoreAt(dx, dx_desc->type, o, v);
  });
  return cudaSuccess;
  };
  return Enqueue(handle->stream, kCall, std::move(work)) == cudaSuccess ? CUDNN_STATUS_SUCCESS
                                                                         : CUDNN_STATUS_EXECUTION_FAILED;
}

cudnnStatus_t cudnnSetTensor(cudnnHandle_t handle, cudnnTensorDescriptor_t desc, void* data,
                             const void* value) {
  constexpr const char* kCall = "cudnnSetTensor";
  if (!handle || !desc || !value) return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
  if (cudnnStatus_t s = CheckMemory(kCall, "y", data, SpanBytes(*desc)); s) return s;
  const size_t bytes = ElemBytes(desc->type);
  std::array<unsigned char, 8> value_bytes{};
  std::memcpy(value_bytes.data(), value, bytes);
  std::function<cudaError_t()> work = [d = *desc, data, value_bytes, bytes] {
    ForEach(d.dims, d.rank, [&](const int* idx) {
      std::memcpy(static_cast<char*>(data) + Offset(d, idx) * static_cast<int64_t>(bytes), value_bytes.data(),
                  bytes);
    });
    return cudaSuccess;
  };
  return Enqueue(handle->stream, kCall, std::move(work)) == cudaSuccess ? CUDNN_STATUS_SUCCESS
                                                                         : CUDNN_STATUS_EXECUTION_FAILED;
}
cudnnStatus_t cudnnAddTensor(cudnnHandle_t handle, const void* alpha, cudnnTensorDescriptor_t a_desc,
                             const void* a, const void* beta, cudnnTensorDescriptor_t c_desc, void* c) {
  constexpr const char* kCall = "cudnnAddTensor";
  if (!handle || !alpha || !beta || !a_desc || !c_desc) return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
  if (a_desc->rank != c_desc->rank) return Report(CUDNN_STATUS_BAD_PARAM, kCall, "ranks of A and C differ");
  for (int d = 0; d < c_desc->rank; ++d) {
    if (a_desc->dims[d] != 1 && a_desc->dims[d] != c_desc->dims[d]) {
      return Report(CUDNN_STATUS_BAD_PARAM, kCall, "A's dim " + std::to_string(d) + " is neither 1 nor C's");
    }
  }
  if (cudnnStatus_t s = CheckMemory(kCall, "A", a, SpanBytes(*a_desc)); s) return s;
  if (cudnnStatus_t s = CheckMemory(kCall, "C", c, SpanBytes(*c_desc)); s) return s;
  const float fa = *static_cast<const float*>(alpha), fb = *static_cast<const float*>(beta);
  std::function<cudaError_t()> work = [fa, fb, a_v = *a_desc, c_v = *c_desc, a, c] {
    const cudnnTensorStruct *a_desc = &a_v, *c_desc = &c_v;
    ForEach(c_desc->dims, c_desc->rank, [&](const int* ci) {
      int ai[kCudnnEmulationMaxDims];
      for (int d = 0; d < c_desc->rank; ++d) ai[d] = a_desc->dims[d] == 1 ? 0 : ci[d];
      const int64_t co = Offset(*c_desc, ci);
      float v = fa * LoadAt(a, a_desc->type, Offset(*a_desc, ai));
      if (fb != 0.0f) v += fb * LoadAt(c, c_desc->type, co);
      StoreAt(c, c_desc->type, co, v);
    });
    return cudaSuccess;
  };
  return Enqueue(handle->stream, kCall, std::move(work)) == cudaSuccess ? CUDNN_STATUS_SUCCESS
                                                                         : CUDNN_STATUS_EXECUTION_FAILED;
}
cudnnStatus_t cudnnTransformTensor(cudnnHandle_t handle, const void* alpha, cudnnTensorDescriptor_t x_desc,
                                   const void* x, const void* beta, cudnnTensorDescriptor_t y_desc, void* y) {
  constexpr const char* kCall = "cudnnTransformTensor";
  if (!handle || !alpha || !beta || !x_desc || !y_desc) return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
  if (x_desc->rank != y_desc->rank) return Report(CUDNN_STATUS_BAD_PARAM, kCall, "ranks of x and y differ");
  for (int d = 0; d < x_desc->rank; ++d) {
    if (x_desc->dims[d] != y_desc->dims[d])
      return Report(CUDNN_STATUS_BAD_PARAM, kCall, "dims of x and y differ");
  }
  if (cudnnStatus_t s = CheckMemory(kCall, "x", x, SpanBytes(*x_desc)); s) return s;
  if (cudnnStatus_t s = CheckMemory(kCall, "y", y, SpanBytes(*y_desc)); s) return s;
  const float fa = *static_cast<const float*>(alpha), fb = *static_cast<const float*>(beta);
  std::function<cudaError_t()> work = [fa, fb, x_v = *x_desc, y_v = *y_desc, x, y] {
    const cudnnTensorStruct *x_desc = &x_v, *y_desc = &y_v;
    ForEach(x_desc->dims, x_desc->rank, [&](const int* idx) {
      const int64_t yo = Offset(*y_desc, idx);
      float v = fa * LoadAt(x, x_desc->type, Offset(*x_desc, idx));
      if (fb != 0.0f) v += fb * LoadAt(y, y_desc->type, yo);
      StoreAt(y, y_desc->type, yo, v);
    });
    return cudaSuccess;
  };
  return Enqueue(handle->stream, kCall, std::move(work)) == cudaSuccess ? CUDNN_STATUS_SUCCESS
                                                                         : CUDNN_STATUS_EXECUTION_FAILED;
}
