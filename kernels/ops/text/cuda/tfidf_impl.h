// Launcher of the TfIdfVectorizer CUDA kernel (text_impl.cu). Plain C++ and the CUDA
// runtime API only: included by .cu and .cc files alike. The launcher queues its work
// on `stream` and returns the launch error (cudaErrorInvalidValue for arguments it does
// not accept).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/ops/text/tfidf_ops.h"

namespace remex::kernels::cuda {

// TfIdfVectorizer (ONNX TfIdfVectorizer-9): x int32 (x_is_int64 false) or int64
// [rows, cols] -> y float32 [rows, output_size], as on the CPU: a thread per (row,
// start position) runs tfidf::CountFrom over the trie `nodes` (device memory, node 0 the
// root) and adds its matches to `counts` with atomicAdd, then a thread per output
// element applies tfidf::Weigh (`weights`: device memory, nullptr or output_size
// weights). `counts`: rows * output_size uint64 of scratch, zeroed here. rows *
// output_size > 0, cols >= 0.
cudaError_t LaunchTfIdf(const tfidf::Params& params, const tfidf::Node* nodes, const float* weights,
                        const void* x, bool x_is_int64, int64_t rows, int64_t cols, int64_t output_size,
                        unsigned long long* counts, float* y, cudaStream_t stream);

}  // namespace remex::kernels::cuda
