// CUDA emulation: the cuDNN (v9 legacy API) subset Remex calls
// (kernels/ops/nn/cuda/conv.cc), computed on the host by reference loops
// (cudnn.cc). Names, values and signatures follow cuDNN 9's cudnn_graph.h, cudnn_ops.h
// and cudnn_cnn.h. The emulation checks what a caller controls: descriptors (dims,
// strides, group count, pads), that every tensor lies inside device memory, that the
// workspace is device memory of the size asked for, and the one algorithm constraint
// Remex relies on (identity activation in cudnnConvolutionBiasActivationForward needs
// IMPLICIT_PRECOMP_GEMM). It cannot check cuDNN's algorithm choice, its accumulation
// order (float32 here, in filter order) or its tensor-core rounding.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/emulation/runtime.h"

enum cudnnStatus_t {
  CUDNN_STATUS_SUCCESS = 0,
  CUDNN_STATUS_NOT_INITIALIZED = 1001,
  CUDNN_STATUS_BAD_PARAM = 2000,
  CUDNN_STATUS_BAD_PARAM_NULL_POINTER = 2002,
  CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH = 2008,
  CUDNN_STATUS_NOT_SUPPORTED = 3000,
  CUDNN_STATUS_NOT_SUPPORTED_SHAPE = 3002,
  CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE = 3003,
  CUDNN_STATUS_INTERNAL_ERROR = 4000,
  CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED = 4003,
  CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED = 4004,
  CUDNN_STATUS_EXECUTION_FAILED = 5000,
};
#define CUDNN_STATUS_CATEGORY(full_error_code) ((full_error_code) / 1000 * 1000)

enum cudnnDataType_t { CUDNN_DATA_FLOAT = 0, CUDNN_DATA_HALF = 2 };
enum cudnnMathType_t {
  CUDNN_DEFAULT_MATH = 0,
  CUDNN_TENSOR_OP_MATH = 1,
  CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION = 2,
  CUDNN_FMA_MATH = 3,
};
enum cudnnTensorFormat_t { CUDNN_TENSOR_NCHW = 0, CUDNN_TENSOR_NHWC = 1 };
enum cudnnConvolutionMode_t { CUDNN_CONVOLUTION = 0, CUDNN_CROSS_CORRELATION = 1 };
enum cudnnActivationMode_t { CUDNN_ACTIVATION_RELU = 1, CUDNN_ACTIVATION_IDENTITY = 5 };
enum cudnnNanPropagation_t { CUDNN_NOT_PROPAGATE_NAN = 0, CUDNN_PROPAGATE_NAN = 1 };
enum cudnnDeterminism_t { CUDNN_NON_DETERMINISTIC = 0, CUDNN_DETERMINISTIC = 1 };
enum cudnnConvolutionFwdAlgo_t {
  CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM = 0,
  CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM = 1,
  CUDNN_CONVOLUTION_FWD_ALGO_GEMM = 2,
  CUDNN_CONVOLUTION_FWD_ALGO_DIRECT = 3,
  CUDNN_CONVOLUTION_FWD_ALGO_FFT = 4,
  CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING = 5,
  CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD = 6,
  CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED = 7,
  CUDNN_CONVOLUTION_FWD_ALGO_COUNT = 8,
};
enum cudnnConvolutionBwdDataAlgo_t {
  CUDNN_CONVOLUTION_BWD_DATA_ALGO_0 = 0,
  CUDNN_CONVOLUTION_BWD_DATA_ALGO_1 = 1,
  CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT = 2,
  CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING = 3,
  CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD = 4,
  CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED = 5,
  CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT = 6,
};
struct cudnnConvolutionFwdAlgoPerf_t {
  cudnnConvolutionFwdAlgo_t algo;
  cudnnStatus_t status;
  float time;
  size_t memory;
  cudnnDeterminism_t determinism;
  cudnnMathType_t mathType;
  int reserved[3];
};
struct cudnnConvolutionBwdDataAlgoPerf_t {
  cudnnConvolutionBwdDataAlgo_t algo;
  cudnnStatus_t status;
  float time;
  size_t memory;
  cudnnDeterminism_t determinism;
  cudnnMathType_t mathType;
  int reserved[3];
};

constexpr int kCudnnEmulationMaxDims = 8;
struct cudnnContext;
struct cudnnTensorStruct {
  cudnnDataType_t type = CUDNN_DATA_FLOAT;
  int rank = 0;
  int dims[kCudnnEmulationMaxDims] = {};
  int strides[kCudnnEmulationMaxDims] = {};
};
struct cudnnFilterStruct {
  cudnnDataType_t type = CUDNN_DATA_FLOAT;
  int rank = 0;
  int dims[kCudnnEmulationMaxDims] = {};
};
struct cudnnConvolutionStruct {
  int spatial = 0;
  int pads[kCudnnEmulationMaxDims] = {};
  int strides[kCudnnEmulationMaxDims] = {};
  int dilations[kCudnnEmulationMaxDims] = {};
  cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  int groups = 1;
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
};
struct cudnnActivationStruct {
  cudnnActivationMode_t mode = CUDNN_ACTIVATION_IDENTITY;
  cudnnNanPropagation_t nan = CUDNN_PROPAGATE_NAN;
  double coef = 0.0;
};
using cudnnHandle_t = cudnnContext*;
using cudnnTensorDescriptor_t = cudnnTensorStruct*;
using cudnnFilterDescriptor_t = cudnnFilterStruct*;
using cudnnConvolutionDescriptor_t = cudnnConvolutionStruct*;
using cudnnActivationDescriptor_t = cudnnActivationStruct*;

const char* cudnnGetErrorString(cudnnStatus_t status);
cudnnStatus_t cudnnCreate(cudnnHandle_t* handle);
cudnnStatus_t cudnnDestroy(cudnnHandle_t handle);
cudnnStatus_t cudnnSetStream(cudnnHandle_t handle, cudaStream_t stream);

cudnnStatus_t cudnnCreateTensorDescriptor(cudnnTensorDescriptor_t* desc);
cudnnStatus_t cudnnDestroyTensorDescriptor(cudnnTensorDescriptor_t desc);
cudnnStatus_t cudnnSetTensorNdDescriptor(cudnnTensorDescriptor_t desc, cudnnDataType_t type, int rank,
                                         const int dims[], const int strides[]);
cudnnStatus_t cudnnCreateFilterDescriptor(cudnnFilterDescriptor_t* desc);
cudnnStatus_t cudnnDestroyFilterDescriptor(cudnnFilterDescriptor_t desc);
cudnnStatus_t cudnnSetFilterNdDescriptor(cudnnFilterDescriptor_t desc, cudnnDataType_t type,
                                         cudnnTensorFormat_t format, int rank, const int dims[]);
cudnnStatus_t cudnnCreateConvolutionDescriptor(cudnnConvolutionDescriptor_t* desc);
cudnnStatus_t cudnnDestroyConvolutionDescriptor(cudnnConvolutionDescriptor_t desc);
cudnnStatus_t cudnnSetConvolutionNdDescriptor(cudnnConvolutionDescriptor_t desc, int spatial,
                                              const int pads[], const int strides[], const int dilations[],
                                              cudnnConvolutionMode_t mode, cudnnDataType_t compute);
cudnnStatus_t cudnnSetConvolutionGroupCount(cudnnConvolutionDescriptor_t desc, int groups);
cudnnStatus_t cudnnSetConvolutionMathType(cudnnConvolutionDescriptor_t desc, cudnnMathType_t math);
cudnnStatus_t cudnnCreateActivationDescriptor(cudnnActivationDescriptor_t* desc);
cudnnStatus_t cudnnDestroyActivationDescriptor(cudnnActivationDescriptor_t desc);
cudnnStatus_t cudnnSetActivationDescriptor(cudnnActivationDescriptor_t desc, cudnnActivationMode_t mode,
                                           cudnnNanPropagation_t nan, double coef);

cudnnStatus_t cudnnGetConvolutionForwardAlgorithm_v7(cudnnHandle_t handle, cudnnTensorDescriptor_t x,
                                                     cudnnFilterDescriptor_t w,
                                                     cudnnConvolutionDescriptor_t conv,
                                                     cudnnTensorDescriptor_t y, int requested, int* returned,
                                                     cudnnConvolutionFwdAlgoPerf_t* perf);
cudnnStatus_t cudnnFindConvolutionForwardAlgorithm(cudnnHandle_t handle, cudnnTensorDescriptor_t x,
                                                   cudnnFilterDescriptor_t w,
                                                   cudnnConvolutionDescriptor_t conv,
                                                   cudnnTensorDescriptor_t y, int requested, int* returned,
                                                   cudnnConvolutionFwdAlgoPerf_t* perf);
cudnnStatus_t cudnnGetConvolutionForwardWorkspaceSize(cudnnHandle_t handle, cudnnTensorDescriptor_t x,
                                                      cudnnFilterDescriptor_t w,
                                                      cudnnConvolutionDescriptor_t conv,
                                                      cudnnTensorDescriptor_t y,
                                                      cudnnConvolutionFwdAlgo_t algo, size_t* bytes);
cudnnStatus_t cudnnConvolutionForward(cudnnHandle_t handle, const void* alpha, cudnnTensorDescriptor_t x_desc,
                                      const void* x, cudnnFilterDescriptor_t w_desc, const void* w,
                                      cudnnConvolutionDescriptor_t conv, cudnnConvolutionFwdAlgo_t algo,
                                      void* workspace, size_t workspace_bytes, const void* beta,
                                      cudnnTensorDescriptor_t y_desc, void* y);
cudnnStatus_t cudnnConvolutionBiasActivationForward(
    cudnnHandle_t handle, const void* alpha1, cudnnTensorDescriptor_t x_desc, const void* x,
    cudnnFilterDescriptor_t w_desc, const void* w, cudnnConvolutionDescriptor_t conv,
    cudnnConvolutionFwdAlgo_t algo, void* workspace, size_t workspace_bytes, const void* alpha2,
    cudnnTensorDescriptor_t z_desc, const void* z, cudnnTensorDescriptor_t bias_desc, const void* bias,
    cudnnActivationDescriptor_t activation, cudnnTensorDescriptor_t y_desc, void* y);
cudnnStatus_t cudnnGetConvolutionBackwardDataAlgorithm_v7(cudnnHandle_t handle, cudnnFilterDescriptor_t w,
                                                          cudnnTensorDescriptor_t dy,
                                                          cudnnConvolutionDescriptor_t conv,
                                                          cudnnTensorDescriptor_t dx, int requested,
                                                          int* returned,
                                                          cudnnConvolutionBwdDataAlgoPerf_t* perf);
cudnnStatus_t cudnnFindConvolutionBackwardDataAlgorithm(cudnnHandle_t handle, cudnnFilterDescriptor_t w,
                                                        cudnnTensorDescriptor_t dy,
                                                        cudnnConvolutionDescriptor_t conv,
                                                        cudnnTensorDescriptor_t dx, int requested,
                                                        int* returned,
                                                        cudnnConvolutionBwdDataAlgoPerf_t* perf);
cudnnStatus_t cudnnGetConvolutionBackwardDataWorkspaceSize(cudnnHandle_t handle, cudnnFilterDescriptor_t w,
                                                           cudnnTensorDescriptor_t dy,
                                                           cudnnConvolutionDescriptor_t conv,
                                                           cudnnTensorDescriptor_t dx,
                                                           cudnnConvolutionBwdDataAlgo_t algo, size_t* bytes);
cudnnStatus_t cudnnConvolutionBackwardData(cudnnHandle_t handle, const void* alpha,
                                           cudnnFilterDescriptor_t w_desc, const void* w,
                                           cudnnTensorDescriptor_t dy_desc, const void* dy,
                                           cudnnConvolutionDescriptor_t conv,
                                           cudnnConvolutionBwdDataAlgo_t algo, void* workspace,
                                           size_t workspace_bytes, const void* beta,
                                           cudnnTensorDescriptor_t dx_desc, void* dx);

cudnnStatus_t cudnnSetTensor(cudnnHandle_t handle, cudnnTensorDescriptor_t desc, void* data,
                             const void* value);
cudnnStatus_t cudnnAddTensor(cudnnHandle_t handle, const void* alpha, cudnnTensorDescriptor_t a_desc,
                             const void* a, const void* beta, cudnnTensorDescriptor_t c_desc, void* c);
cudnnStatus_t cudnnTransformTensor(cudnnHandle_t handle, const void* alpha, cudnnTensorDescriptor_t x_desc,
                                   const void* x, const void* beta, cudnnTensorDescriptor_t y_desc, void* y);
