// Float16 tensors computed through float32 copies, for CPU kernels whose float32 path
// is the fast one (oneDNN's): a CPU without float16 arithmetic runs a float16
// executable's convolutions, products and pooling this way, one rounding per output.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>
#include <span>
#include <unordered_map>
#include <vector>

#include "base/huge_pages.h"
#include "kernels/float16_cpu.h"
#include "kernels/internal.h"

namespace remex::kernels::internal {

// Float32 buffers left uninitialised (no zero fill: every float is written before it is
// read), 64-byte aligned, and on transparent huge pages from kHugePageMinBytes
// (base/huge_pages.h), so that a large one costs few page faults.
struct FreeFloats {
  void operator()(float* p) const { std::free(p); }
};
using FloatBuffer = std::unique_ptr<float, FreeFloats>;
inline FloatBuffer AllocateFloats(size_t n) {
  const size_t bytes = (n > 0 ? n : 1) * sizeof(float);
  const size_t align = bytes >= kHugePageMinBytes ? kHugePageBytes : 64;
  const size_t rounded = (bytes + align - 1) / align * align;
  FloatBuffer b(static_cast<float*>(std::aligned_alloc(align, rounded)));
  if (!b) throw std::bad_alloc();
  AdviseHugePages(b.get(), rounded);
  return b;
}

// The float32 copies of float16 constants (TensorRef::constant) one kernel instance
// keeps across calls for RunAsFloat32, by the constant's address; at most kMax of
// them (all dropped when full). Made at the model's load when the kernel is a
// ConstantPrepacker (kernels/prepack.h) that calls Prepack, else on first use.
class Float32Constants {
 public:
  // The float32 copy of constant float16 `t` (its element count), made on first use.
  const float* Get(const TensorRef& t) {
    const int64_t n = NumElements(t.shape).value_or(0);
    auto it = kept_.find(t.data);
    if (it == kept_.end() || it->second.n != n) {
      if (kept_.size() >= kMax) kept_.clear();
      Copy& c = kept_[t.data];
      c.data = AllocateFloats(static_cast<size_t>(n));
      c.n = n;
      HalfToFloatN(static_cast<const Half*>(t.data), c.data.get(), n);
      Widened().fetch_add(1, std::memory_order_relaxed);
      return c.data.get();
    }
    return it->second.data.get();
  }

  // For ConstantPrepacker::Prepack: a float16 constant's float32 copy made now, and the
  // constant as RunAsFloat32 will pass it on (the float32 copy); any other tensor as
  // it is.
  TensorRef Prepack(const TensorRef& t) {
    if (t.dtype != DType::kFloat16 || !t.constant || !t.present()) return t;
    return TensorRef{const_cast<float*>(Get(t)), DType::kFloat32, t.shape, true};
  }

  // Float32 copies made so far, by every instance in the process (tests check when
  // they are made).
  static uint64_t widened_total() { return Widened().load(std::memory_order_relaxed); }

 private:
  static std::atomic<uint64_t>& Widened() {
    static std::atomic<uint64_t> count{0};
    return count;
  }
  struct Copy {
    FloatBuffer data;
    int64_t n = 0;
  };
  static constexpr size_t kMax = 8;
  std::unordered_map<const void*, Copy> kept_;
};

// Float32 buffers for RunAsFloat32, per thread and kept from call to call, so that a
// float16 kernel's copies are neither zeroed nor faulted in again on every call (each
// call took fresh, zeroed vectors: memset and page faults were a quarter of a float16
// ResNet-50's time, docs/benchmarks.md). A stack: a scope hands back what it took, so
// nested scopes (a kernel running another through RunAsFloat32) take their own.
// Buffers above kMaxKeptFloats are freed when their scope ends. Memory a thread keeps:
// the largest inputs and outputs of one call, in float32.
class Float32Scratch {
 public:
  Float32Scratch() : base_(Stack().used) {}
  ~Float32Scratch() {
    Pool& p = Stack();
    for (size_t k = base_; k < p.used; ++k) {
      if (p.buffers[k].size > kMaxKeptFloats) p.buffers[k] = Buffer{};
    }
    p.used = base_;
  }
  Float32Scratch(const Float32Scratch&) = delete;
  Float32Scratch& operator=(const Float32Scratch&) = delete;

  // `n` floats, uninitialised, valid until this scope ends.
  float* Take(int64_t n) {
    Pool& p = Stack();
    if (p.used == p.buffers.size()) p.buffers.emplace_back();
    Buffer& b = p.buffers[p.used++];
    const size_t want = n > 0 ? static_cast<size_t>(n) : 1;
    if (b.size < want) {
      // Large buffers on huge pages: one that is not kept (over kMaxKeptFloats) is
      // touched afresh on every call.
      b.data = AllocateFloats(want);
      b.size = want;
    }
    return b.data.get();
  }

 private:
  static constexpr size_t kMaxKeptFloats = size_t{16} << 20;  // 64 MiB
  struct Buffer {
    FloatBuffer data;
    size_t size = 0;
  };
  struct Pool {
    std::vector<Buffer> buffers;
    size_t used = 0;
  };
  static Pool& Stack() {
    thread_local Pool pool;
    return pool;
  }
  size_t base_;
};

// Runs `run` on float32 copies of float16 inputs and outputs: the inputs are widened,
// the float32 path computes, and each output is rounded to float16 once, on store
// (float16_cpu.h's bulk conversions). An output in an input's buffer computes in that
// input's copy. Float32 tensors and absent inputs pass through
// untouched. With `constants`, constant float16 inputs are widened once and their
// copies passed on as constants.
template <typename Run>
Status RunAsFloat32(std::span<const TensorRef> in, std::span<const TensorRef> out, Run run,
                    Float32Constants* constants = nullptr) {
  Float32Scratch scratch;
  auto widen = [&](const TensorRef& t, bool copy) {
    if (!t.present() || t.dtype != DType::kFloat16) return t;
    if (copy && t.constant && constants) {
      return TensorRef{const_cast<float*>(constants->Get(t)), DType::kFloat32, t.shape, true};
    }
    const int64_t n = NumElements(t.shape).value_or(0);
    float* b = scratch.Take(n);
    if (copy) HalfToFloatN(static_cast<const Half*>(t.data), b, n);
    return TensorRef{b, DType::kFloat32, t.shape};
  };
  std::vector<TensorRef> in32, out32;
  for (const TensorRef& t : in) in32.push_back(widen(t, true));
  for (const TensorRef& t : out) {
    // An output given an input's buffer (OpTraits::output_overwrites_input: FusedConv's
    // Y over its residual Z) is given that input's float32 copy, so the float32 run
    // sees the same aliasing and the input is neither copied again nor widened twice.
    const TensorRef* alias = nullptr;
    for (size_t j = 0; j < in.size() && t.dtype == DType::kFloat16; ++j) {
      if (in[j].present() && in[j].data == t.data && in[j].dtype == DType::kFloat16 && !in32[j].constant &&
          NumElements(in[j].shape) == NumElements(t.shape)) {
        alias = &in32[j];
        break;
      }
    }
    out32.push_back(alias ? TensorRef{alias->data, DType::kFloat32, t.shape} : widen(t, false));
  }
  REMEX_RETURN_IF_ERROR(run(std::span<const TensorRef>(in32), std::span<const TensorRef>(out32)));
  for (size_t k = 0; k < out.size(); ++k) {
    if (out[k].dtype != DType::kFloat16) continue;
    const int64_t n = NumElements(out[k].shape).value_or(0);
    FloatToHalfN(static_cast<const float*>(out32[k].data), static_cast<Half*>(out[k].data), n);
  }
  return OkStatus();
}

}  // namespace remex::kernels::internal
