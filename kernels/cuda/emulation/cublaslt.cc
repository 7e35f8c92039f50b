// The emulated cuBLASLt subset (include/cublasLt.h): D = epilogue(alpha * op(A) op(B)
// + beta * C), column-major, strided batches, float32 or float16 storage with float32
// compute, as the cuBLASLt reference defines cublasLtMatmul.
#include <cublasLt.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>

struct cublasLtContext {
  int unused = 0;
};

namespace remex::cuda_emulation {
namespace {

cublasStatus_t Report(cublasStatus_t status, const char* call, const std::string& detail) {
  std::fprintf(stderr, "remex cuda emulation: %s: cuBLAS status %d: %s\n", call, static_cast<int>(status),
               detail.c_str());
  return status;
}

template <typename T>
cublasStatus_t SetValue(T* field, const void* buf, size_t size, const char* call) {
  if (!buf || size != sizeof(T)) return Report(CUBLAS_STATUS_INVALID_VALUE, call, "attribute size mismatch");
  std::memcpy(field, buf, sizeof(T));
  return CUBLAS_STATUS_SUCCESS;
}

size_t ElemBytes(cudaDataType_t t) { return t == CUDA_R_16F ? 2 : 4; }

float LoadAt(const void* base, cudaDataType_t t, int64_t i) { return LoadAsFloat(base, t == CUDA_R_16F, i); }
void StoreAt(void* base, cudaDataType_t t, int64_t i, float v) {
  StoreFromFloat(base, t == CUDA_R_16F, i, v);
}

// The bytes a layout spans: the last batch entry's last element, plus one.
uint64_t SpanBytes(const cublasLtMatrixLayoutOpaque_t& l) {
  if (l.rows == 0 || l.cols == 0) return 0;
  const uint64_t elems = (l.cols - 1) * static_cast<uint64_t>(l.ld) + l.rows +
                         static_cast<uint64_t>(l.batch - 1) * static_cast<uint64_t>(l.stride);
  return elems * ElemBytes(l.type);
}

bool Aligned(const void* p, uint64_t alignment) {
  return alignment == 0 || reinterpret_cast<uintptr_t>(p) % alignment == 0;
}

}  // namespace
}  // namespace remex::cuda_emulation

using namespace remex::cuda_emulation;  // NOLINT: cuBLASLt's API is global.

cublasStatus_t cublasLtCreate(cublasLtHandle_t* handle) {
  if (!handle) return CUBLAS_STATUS_INVALID_VALUE;
  *handle = new cublasLtContext();
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle) {
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* desc, cublasComputeType_t compute,
                                        cudaDataType_t scale) {
  if (!desc) return CUBLAS_STATUS_INVALID_VALUE;
  if (compute != CUBLAS_COMPUTE_32F || scale != CUDA_R_32F) {
    return Report(CUBLAS_STATUS_NOT_SUPPORTED, "cublasLtMatmulDescCreate",
                  "only CUBLAS_COMPUTE_32F / CUDA_R_32F");
  }
  *desc = new cublasLtMatmulDescOpaque_t{compute, scale};
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc) {
  delete desc;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr,
                                              const void* buf, size_t size) {
  constexpr const char* kCall = "cublasLtMatmulDescSetAttribute";
  if (!desc) return CUBLAS_STATUS_INVALID_VALUE;
  switch (attr) {
    case CUBLASLT_MATMUL_DESC_TRANSA:
      return SetValue(&desc->trans_a, buf, size, kCall);
    case CUBLASLT_MATMUL_DESC_TRANSB:
      return SetValue(&desc->trans_b, buf, size, kCall);
    case CUBLASLT_MATMUL_DESC_EPILOGUE:
      return SetValue(&desc->epilogue, buf, size, kCall);
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER:
      return SetValue(&desc->bias, buf, size, kCall);
  }
  return Report(CUBLAS_STATUS_INVALID_VALUE, kCall, "attribute not emulated");
}
cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* layout, cudaDataType_t type, uint64_t rows,
                                          uint64_t cols, int64_t ld) {
  if (!layout) return CUBLAS_STATUS_INVALID_VALUE;
  if (type != CUDA_R_32F && type != CUDA_R_16F) {
    return Report(CUBLAS_STATUS_NOT_SUPPORTED, "cublasLtMatrixLayoutCreate", "type not emulated");
  }
  // cuBLASLt requires ld >= rows for a column-major layout.
  if (ld < 1 || static_cast<uint64_t>(ld) < rows) {
    return Report(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatrixLayoutCreate",
                  "ld " + std::to_string(ld) + " < rows " + std::to_string(rows));
  }
  *layout = new cublasLtMatrixLayoutOpaque_t{type, rows, cols, ld};
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout) {
  delete layout;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t layout,
                                                cublasLtMatrixLayoutAttribute_t attr, const void* buf,
                                                size_t size) {
  constexpr const char* kCall = "cublasLtMatrixLayoutSetAttribute";
  if (!layout) return CUBLAS_STATUS_INVALID_VALUE;
  switch (attr) {
    case CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT: {
      const cublasStatus_t s = SetValue(&layout->batch, buf, size, kCall);
      if (s == CUBLAS_STATUS_SUCCESS && layout->batch < 1)
        return Report(CUBLAS_STATUS_INVALID_VALUE, kCall, "batch < 1");
      return s;
    }
    case CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET:
      return SetValue(&layout->stride, buf, size, kCall);
  }
  return Report(CUBLAS_STATUS_INVALID_VALUE, kCall, "attribute not emulated");
}
cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* pref) {
  if (!pref) return CUBLAS_STATUS_INVALID_VALUE;
  *pref = new cublasLtMatmulPreferenceOpaque_t();
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
  delete pref;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr,
                                                    const void* buf, size_t size) {
  constexpr const char* kCall = "cublasLtMatmulPreferenceSetAttribute";
  if (!pref) return CUBLAS_STATUS_INVALID_VALUE;
  switch (attr) {
    case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES:
      return SetValue(&pref->max_workspace, buf, size, kCall);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES:
      return SetValue(&pref->align[0], buf, size, kCall);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES:
      return SetValue(&pref->align[1], buf, size, kCall);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES:
      return SetValue(&pref->align[2], buf, size, kCall);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES:
      return SetValue(&pref->align[3], buf, size, kCall);
  }
  return Report(CUBLAS_STATUS_INVALID_VALUE, kCall, "attribute not emulated");
}

// Marks an algorithm as one cublasLtMatmulAlgoGetHeuristic returned (its data[6]).
constexpr uint64_t kHeuristicMark = 0x52454d4558414c47ull;

// The emulated algorithm asks for 64 KiB of workspace when the preference allows it,
// so that the caller's workspace path runs; it records the promised alignments.
cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
                                              cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                                              cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
                                              cublasLtMatmulPreference_t pref, int requested,
                                              cublasLtMatmulHeuristicResult_t* results, int* returned) {
  constexpr const char* kCall = "cublasLtMatmulAlgoGetHeuristic";
  if (!handle || !desc || !a || !b || !c || !d || !pref || requested < 1 || !results || !returned) {
    return Report(CUBLAS_STATUS_INVALID_VALUE, kCall, "null argument or requested < 1");
  }
  *returned = 0;
  const uint64_t m = desc->trans_a == CUBLAS_OP_N ? a->rows : a->cols;
  const uint64_t k = desc->trans_a == CUBLAS_OP_N ? a->cols : a->rows;
  const uint64_t kb = desc->trans_b == CUBLAS_OP_N ? b->rows : b->cols;
  const uint64_t n = desc->trans_b == CUBLAS_OP_N ? b->cols : b->rows;
  if (k != kb || d->rows != m || d->cols != n || c->rows != m || c->cols != n) {
    return Report(CUBLAS_STATUS_INVALID_VALUE, kCall,
                  "shapes disagree: op(A) " + std::to_string(m) + "x" + std::to_string(k) + ", op(B) " +
                      std::to_string(kb) + "x" + std::to_string(n) + ", D " + std::to_string(d->rows) + "x" +
                      std::to_string(d->cols));
  }
  if (a->batch != b->batch || a->batch != d->batch || c->batch != d->batch) {
    return Report(CUBLAS_STATUS_INVALID_VALUE, kCall, "batch counts disagree");
  }
  if (a->type != b->type || c->type != d->type || a->type != d->type) {
    return Report(CUBLAS_STATUS_NOT_SUPPORTED, kCall, "mixed storage types are not emulated");
  }
  // Two algorithms, numerically the same (data[5] their index), so that a caller's
  // choice among the results is exercised; data[6] marks an algorithm as this
  // heuristic's.
  for (int i = 0; i < 2 && i < requested; ++i) {
    cublasLtMatmulHeuristicResult_t r{};
    r.workspaceSize = pref->max_workspace >= (64u << 10) ? (64u << 10) : 0;
    r.state = CUBLAS_STATUS_SUCCESS;
    r.wavesCount = 1.0f;
    for (int j = 0; j < 4; ++j) r.algo.data[j] = pref->align[j];
    r.algo.data[4] = r.workspaceSize;
    r.algo.data[5] = static_cast<uint64_t>(i);
    r.algo.data[6] = kHeuristicMark;
    results[i] = r;
    *returned = i + 1;
  }
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void* alpha,
                              const void* a, cublasLtMatrixLayout_t al, const void* b,
                              cublasLtMatrixLayout_t bl, const void* beta, const void* c,
                              cublasLtMatrixLayout_t cl, void* d, cublasLtMatrixLayout_t dl,
                              const cublasLtMatmulAlgo_t* algo, void* workspace, size_t workspace_bytes,
                              cudaStream_t stream) {
  constexpr const char* kCall = "cublasLtMatmul";
  if (!handle || !desc || !alpha || !beta || !al || !bl || !cl || !dl || !algo) {
    return Report(CUBLAS_STATUS_INVALID_VALUE, kCall, "null argument");
  }
  if (!IsValidStream(stream)) return Report(CUBLAS_STATUS_INVALID_VALUE, kCall, "invalid stream");
  // Only an algorithm the heuristic returned, as cuBLASLt requires.
  if (algo->data[6] != kHeuristicMark || algo->data[5] > 1) {
    return Report(CUBLAS_STATUS_INVALID_VALUE, kCall, "the algorithm is none the heuristic returned");
  }
  // The operands must be the device memory the layouts describe, aligned as promised.
  const struct {
    const char* name;
    const void* p;
    const cublasLtMatrixLayoutOpaque_t* l;
    uint64_t align;
  } operands[] = {{"A", a, al, algo->data[0]},
                  {"B", b, bl, algo->data[1]},
                  {"C", c, cl, algo->data[2]},
                  {"D", d, dl, algo->data[3]}};
  for (const auto& o : operands) {
    const uint64_t bytes = SpanBytes(*o.l);
    if (bytes == 0) continue;
    if (!o.p || !IsDeviceRange(o.p, bytes)) {
      return Report(CUBLAS_STATUS_EXECUTION_FAILED, kCall,
                    std::string(o.name) + " does not hold the " + std::to_string(bytes) +
                        " bytes of device memory its layout spans");
    }
    if (!Aligned(o.p, o.align)) {
      return Report(CUBLAS_STATUS_INVALID_VALUE, kCall,
                    std::string(o.name) + " is less aligned than the " + std::to_string(o.align) +
                        " bytes the heuristic was promised");
    }
  }
  if (workspace_bytes < algo->data[4] || (algo->data[4] > 0 && !IsDeviceRange(workspace, algo->data[4]))) {
    return Report(CUBLAS_STATUS_INVALID_VALUE, kCall,
                  "the workspace is not " + std::to_string(algo->data[4]) + " bytes of device memory");
  }
  const bool bias_epilogue =
      desc->epilogue == CUBLASLT_EPILOGUE_BIAS || desc->epilogue == CUBLASLT_EPILOGUE_RELU_BIAS;
  const bool relu = desc->epilogue == CUBLASLT_EPILOGUE_RELU || desc->epilogue == CUBLASLT_EPILOGUE_RELU_BIAS;
  const uint64_t m = dl->rows, n = dl->cols;
  const uint64_t k = desc->trans_a == CUBLAS_OP_N ? al->cols : al->rows;
  if (bias_epilogue && (!desc->bias || !IsDeviceRange(desc->bias, m * ElemBytes(dl->type)))) {
    return Report(CUBLAS_STATUS_EXECUTION_FAILED, kCall,
                  "the bias epilogue's pointer is not " + std::to_string(m) + " elements of device memory");
  }
  const float fa = *static_cast<const float*>(alpha);
  const float fb = *static_cast<const float*>(beta);
  // The reference loop, on copies of the descriptors: a capture replays it later.
  std::function<cudaError_t()> work = [m, n, k, fa, fb, bias_epilogue, relu, desc_v = *desc, al_v = *al,
                                       bl_v = *bl, cl_v = *cl, dl_v = *dl, a, b, c, d] {
  const auto* desc = &desc_v;
  const auto *al = &al_v, *bl = &bl_v, *cl = &cl_v, *dl = &dl_v;
  for (int32_t batch = 0; batch < dl->batch; ++batch) {
    const int64_t ao = batch * al->stride, bo = batch * bl->stride, co = batch * cl->stride,
                  d_off = batch * dl->stride;
    for (uint64_t j = 0; j < n; ++j) {
      for (uint64_t i = 0; i < m; ++i) {
        float acc = 0.0f;
        for (uint64_t q = 0; q < k; ++q) {
          const int64_t ai = desc->trans_a == CUBLAS_OP_N ? static_cast<int64_t>(q * al->ld + i)
                                                          : static_cast<int64_t>(i * al->ld + q);
          const int64_t bi = desc->trans_b == CUBLAS_OP_N ? static_cast<int64_t>(j * bl->ld + q)
                                                          : static_cast<int64_t>(q * bl->ld + j);
          acc += LoadAt(a, al->type, ao + ai) * LoadAt(b, bl->type, bo + bi);
        }
        float v = fa * acc;
        // beta = 0: C is not read (it may hold NaN), as cuBLASLt documents.
        if (fb != 0.0f) v += fb * LoadAt(c, cl->type, co + static_cast<int64_t>(j * cl->ld + i));
        if (bias_epilogue) v += LoadAt(desc->bias, dl->type, static_cast<int64_t>(i));
        if (relu) v = std::fmax(v, 0.0f);
        StoreAt(d, dl->type, d_off + static_cast<int64_t>(j * dl->ld + i), v);
      }
    }
  }
  return cudaSuccess;
  };
  return Enqueue(stream, kCall, std::move(work)) == cudaSuccess ? CUBLAS_STATUS_SUCCESS
                                                                 : CUBLAS_STATUS_EXECUTION_FAILED;
}
