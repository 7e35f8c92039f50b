// What the CPU offers the CPU kernels (as oneDNN sees it: kernels/cpu_threads.cc), for
// the code above them that chooses how to use them (the CPU device's capabilities,
// vm/device/device.h).
#pragma once

namespace remex::kernels {

// Whether this CPU has int8 dot products (VNNI: AVX512-VNNI or AVX-VNNI), on which the
// CPU kernels run ConvInteger, QLinearConv, MatMulInteger and QLinearMatMul with
// constant weights through oneDNN's int8 primitives, whose convolutions take their
// activations channels-last (kernels/ops/quantization/int8_dnnl.h). Elsewhere those
// ops run an int16 GEMM. Cheap after the first call; thread-safe.
bool CpuHasInt8DotProducts();

// Whether oneDNN's float32 convolutions run fastest channels-last on this CPU: AVX2 or
// later, where its convolutions take NHWC activations as they are (brgemm ones on
// AVX-512, jit:avx2 and jit_1x1:avx2 ones on AVX2), where the blocked layouts it picks
// otherwise cost a reorder of X and Y around every call (measured on ResNet-50,
// DenseNet-121 and PP-OCR: docs/benchmarks.md). Cheap after the first call; thread-safe.
bool CpuHasChannelsLastFloatConvolutions();

// Whether oneDNN has Winograd float32 convolutions on this CPU (AVX-512: its F(2x2, 3x3)
// and F(4x4, 3x3) kernels), which the CPU Conv kernel runs for 3x3 stride-1
// convolutions (kernels/ops/nn/conv.cc). Cheap after the first call; thread-safe.
bool CpuHasWinogradConvolutions();

}  // namespace remex::kernels
