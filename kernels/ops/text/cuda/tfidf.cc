// CUDA kernel of TfIdfVectorizer-9 (host side). Device code in text_impl.cu.
//
// Semantics, dtypes and checks are the CPU kernel's (kernels/ops/text/tfidf.cc): the same
// attribute checks and n-gram trie (kernels/ops/text/tfidf_view.h), built once when the kernel is
// made, and the same matching and weighting (kernels/ops/text/tfidf_ops.h), so the outputs are
// the same bits. X (int32 or int64) stays on the device; per call the trie and the
// weights are copied to workspace scratch next to the counts (uint64, one per output
// element) that the matching threads add to.

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda/cuda_internal.h"
#include "kernels/cuda/cuda_kernel.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/workspace.h"
#include "kernels/ops/text/cuda/tfidf_impl.h"
#include "kernels/internal.h"
#include "kernels/ops/text/tfidf_view.h"

namespace remex::kernels::cuda {
namespace {

constexpr size_t kScratchAlign = 256;

size_t AlignUp(size_t n) { return (n + kScratchAlign - 1) / kScratchAlign * kScratchAlign; }

class TfIdfKernel final : public CudaKernel {
 public:
  TfIdfKernel(const OpDef& def, Attributes attrs, CudaKernelContext context, internal::TfIdfTable table)
      : CudaKernel(def, std::move(attrs), context, EmptyOutputs::kSkip), table_(std::move(table)) {}

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    REMEX_ASSIGN_OR_RETURN(internal::TfIdfView v,
                           internal::TfIdfViewOf(table_.attrs, internal::ToShapeArgs(in)));
    const int64_t size = table_.attrs.output_size;
    // Sizes checked by the view and the table's bounds: no overflow.
    const size_t count_bytes = static_cast<size_t>(v.rows * size) * sizeof(unsigned long long);
    const size_t node_bytes = table_.nodes.size() * sizeof(tfidf::Node);
    const size_t weight_bytes = table_.weights.size() * sizeof(float);
    const size_t node_at = AlignUp(count_bytes), weight_at = AlignUp(node_at + node_bytes);
    REMEX_RETURN_IF_ERROR(UseDevice());
    StreamWorkspace workspace(op(), stream(), &context().workspace);
    REMEX_ASSIGN_OR_RETURN(void* scratch, workspace.Allocate(weight_at + weight_bytes));
    auto* base = static_cast<unsigned char*>(scratch);
    REMEX_RETURN_IF_ERROR(Upload(base + node_at, table_.nodes.data(), node_bytes));
    REMEX_RETURN_IF_ERROR(Upload(base + weight_at, table_.weights.data(), weight_bytes));
    const auto* nodes = reinterpret_cast<const tfidf::Node*>(base + node_at);
    const float* weights =
        table_.weights.empty() ? nullptr : reinterpret_cast<const float*>(base + weight_at);
    REMEX_RETURN_IF_ERROR(Launch([&] {
      return LaunchTfIdf(v.params, nodes, weights, in[0].data, in[0].dtype == DType::kInt64, v.rows, v.cols,
                         size, reinterpret_cast<unsigned long long*>(base), static_cast<float*>(out[0].data),
                         stream());
    }));
    return workspace.Release();
  }

 private:
  // Copies `bytes` of host memory to device memory `dst` on stream(). The source is
  // pageable: cudaMemcpyAsync returns once it has been staged.
  Status Upload(void* dst, const void* src, size_t bytes) const {
    if (bytes == 0) return OkStatus();
    return CudaCheck(op(), "cudaMemcpyAsync",
                     cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream()));
  }

  const internal::TfIdfTable table_;
};

}  // namespace

Status AddTfIdfCudaKernels(KernelRegistry& registry, CudaKernelContext context) {
  return AddCudaKernel(
      registry, "TfIdfVectorizer", 9,
      [context](const OpDef& def, const Attributes& attrs) -> StatusOr<std::unique_ptr<OpKernel>> {
        REMEX_ASSIGN_OR_RETURN(internal::TfIdfTable table, internal::TfIdfTableOf(attrs));
        return std::unique_ptr<OpKernel>(
            std::make_unique<TfIdfKernel>(def, attrs, context, std::move(table)));
      });
}

}  // namespace remex::kernels::cuda
