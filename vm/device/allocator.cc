#include "vm/device/allocator.h"

#include <algorithm>

namespace remex::vm {
namespace {

size_t SizeClass(size_t bytes) {
  if (bytes == 0) bytes = 1;
  constexpr size_t kSmallStep = 512;
  constexpr size_t kSmallLimit = 64 << 10;
  if (bytes <= kSmallLimit) return (bytes + kSmallStep - 1) / kSmallStep * kSmallStep;
  // Quarter steps between powers of two: at most 25% waste, and a tensor that grows a
  // little each call (a decoder's KV cache: 1 KiB a step) keeps its class for many
  // calls, so its freed block serves the next one. In 512 B steps every call wanted a
  // new block: fresh pages, each zeroed by the kernel at its first touch.
  size_t p = size_t{1} << (63 - __builtin_clzll(bytes - 1));
  size_t step = p / 4;
  return (bytes + step - 1) / step * step;
}

}  // namespace

Buffer::~Buffer() { owner_->Release(data_, size_class_); }

Device& Buffer::device() const { return owner_->device(); }

std::shared_ptr<Allocator> Allocator::Create(Device& device, uint64_t max_cached_bytes) {
  return std::shared_ptr<Allocator>(new Allocator(device, max_cached_bytes));
}

std::shared_ptr<Allocator> Allocator::CreateWithQuota(std::shared_ptr<Allocator> parent, uint64_t quota_bytes,
                                                      std::string owner, std::string quota_name) {
  auto a = std::shared_ptr<Allocator>(new Allocator(parent->device(), 0));
  a->parent_ = std::move(parent);
  a->quota_bytes_ = quota_bytes;
  a->owner_ = std::move(owner);
  a->quota_name_ = std::move(quota_name);
  return a;
}

StatusOr<std::shared_ptr<Allocator>> Allocator::CreateForQueue(std::shared_ptr<Allocator> parent, Device& queue) {
  if (&queue.memory_space() != &parent->device().memory_space()) {
    return InvalidArgument("an allocator for " + queue.name() + " cannot draw on memory of " +
                           parent->device().name());
  }
  auto a = std::shared_ptr<Allocator>(new Allocator(queue, 0));
  a->parent_ = std::move(parent);
  a->queue_ = true;
  return a;
}

Allocator::~Allocator() {
  for (const CachedBlock& b : lru_) device_.Deallocate(b.data, b.size_class);
  if (queue_) {
    // The queue's work on the freed blocks must be done before another queue may reuse
    // them; an error (a faulted device) leaves nothing more to wait for.
    (void)device_.Synchronize();
    queue_free_.clear();  // back to the parent
  }
}

StatusOr<void*> Allocator::AllocateBlock(size_t size_class, bool* from_device) {
  *from_device = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = cache_.find(size_class);
    if (it != cache_.end()) {
      void* block = it->second->data;
      lru_.erase(it->second);
      cache_.erase(it);
      cached_bytes_ -= size_class;
      stats_.allocated_bytes += size_class;
      stats_.live_buffers++;
      stats_.peak_allocated_bytes = std::max(stats_.peak_allocated_bytes, stats_.allocated_bytes);
      return block;
    }
  }
  // The device's memory bounds everything this allocator holds, live and cached:
  // running out is RESOURCE_EXHAUSTED, never the kernel's OOM killer. The capacity is
  // checked and reserved under one lock, so two threads cannot both take the last of it.
  const uint64_t capacity = device_.memory_bytes();
  auto reserve = [&] {
    std::lock_guard<std::mutex> lock(mu_);
    if (stats_.reserved_bytes + size_class > capacity) return false;
    stats_.reserved_bytes += size_class;
    return true;
  };
  if (!reserve()) {
    Trim();
    if (!reserve()) {
      std::lock_guard<std::mutex> lock(mu_);
      return ResourceExhausted(device_.name() + ": " + std::to_string(size_class) + " bytes requested, " +
                               std::to_string(stats_.allocated_bytes) + " of " + std::to_string(capacity) +
                               " bytes in use");
    }
  }
  auto fresh = device_.Allocate(size_class);
  if (!fresh.ok()) {
    Trim();
    fresh = device_.Allocate(size_class);
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (!fresh.ok()) {
    stats_.reserved_bytes -= size_class;
    return fresh.status();
  }
  *from_device = true;
  stats_.device_allocations++;
  stats_.allocated_bytes += size_class;
  stats_.live_buffers++;
  stats_.peak_allocated_bytes = std::max(stats_.peak_allocated_bytes, stats_.allocated_bytes);
  return *fresh;
}

namespace {
thread_local AllocationHold* t_hold = nullptr;  // the innermost on this thread
}  // namespace

AllocationHold::AllocationHold(std::shared_ptr<Allocator> charge_to)
    : outer_(t_hold), charge_to_(std::move(charge_to)) {
  t_hold = this;
}

AllocationHold::~AllocationHold() { t_hold = outer_; }

StatusOr<std::shared_ptr<Buffer>> Allocator::Allocate(size_t bytes) {
  if (!t_hold) return AllocateUnheld(bytes);
  AllocationHold& hold = *t_hold;
  Allocator* from = this;
  if (hold.charge_to_ && hold.charge_to_.get() != this &&
      &hold.charge_to_->device().memory_space() == &device().memory_space()) {
    from = hold.charge_to_.get();
  }
  StatusOr<std::shared_ptr<Buffer>> buffer = from->AllocateUnheld(bytes);
  if (buffer.ok()) hold.held_.push_back(*buffer);
  return buffer;
}

StatusOr<std::shared_ptr<Buffer>> Allocator::AllocateUnheld(size_t bytes) {
  const size_t size_class = SizeClass(bytes);
  if (queue_) {
    std::shared_ptr<Buffer> block;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = queue_free_.find(size_class);
      if (it != queue_free_.end()) {
        block = std::move(it->second);
        queue_free_.erase(it);
      }
    }
    const bool fresh = !block;
    if (fresh) {
      REMEX_ASSIGN_OR_RETURN(block, parent_->AllocateUnheld(size_class));
      // A block new to this queue may come from the device's stream-ordered pool on the
      // parent's queue: complete there before this queue uses it.
      REMEX_RETURN_IF_ERROR(parent_->device().Synchronize());
    }
    void* data = block->data();
    std::lock_guard<std::mutex> lock(mu_);
    if (fresh) stats_.reserved_bytes += size_class;  // held until the allocator goes
    queue_held_.emplace(data, std::move(block));
    stats_.allocated_bytes += size_class;
    stats_.live_buffers++;
    stats_.peak_allocated_bytes = std::max(stats_.peak_allocated_bytes, stats_.allocated_bytes);
    return std::shared_ptr<Buffer>(new Buffer(shared_from_this(), data, bytes, size_class));
  }
  if (!parent_) {
    bool from_device = false;
    REMEX_ASSIGN_OR_RETURN(void* block, AllocateBlock(size_class, &from_device));
    return std::shared_ptr<Buffer>(new Buffer(shared_from_this(), block, bytes, size_class));
  }
  {
    // Charged before the parent is asked, so that concurrent requests cannot overshoot.
    std::lock_guard<std::mutex> lock(mu_);
    if (stats_.allocated_bytes + size_class > quota_bytes_) {
      return ResourceExhausted(owner_ + ": " + std::to_string(size_class) +
                               " bytes requested, over its memory quota of " + std::to_string(quota_bytes_) +
                               " bytes (" + (quota_name_.empty() ? "" : quota_name_ + "; ") +
                               std::to_string(stats_.allocated_bytes) + " in use)");
    }
    stats_.allocated_bytes += size_class;
    stats_.reserved_bytes = stats_.allocated_bytes;
  }
  bool from_device = false;
  auto block = parent_->AllocateBlock(size_class, &from_device);
  std::lock_guard<std::mutex> lock(mu_);
  if (!block.ok()) {
    stats_.allocated_bytes -= size_class;
    stats_.reserved_bytes = stats_.allocated_bytes;
    return block.status();
  }
  if (from_device) stats_.device_allocations++;
  stats_.live_buffers++;
  stats_.peak_allocated_bytes = std::max(stats_.peak_allocated_bytes, stats_.allocated_bytes);
  return std::shared_ptr<Buffer>(new Buffer(shared_from_this(), *block, bytes, size_class));
}

void Allocator::Release(void* data, size_t size_class) {
  if (queue_) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = queue_held_.find(data);
    if (it == queue_held_.end()) return;  // never handed out: nothing to release
    queue_free_.emplace(size_class, std::move(it->second));
    queue_held_.erase(it);
    stats_.allocated_bytes -= size_class;
    stats_.live_buffers--;
    return;
  }
  if (parent_) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stats_.allocated_bytes -= size_class;
      stats_.reserved_bytes = stats_.allocated_bytes;
      stats_.live_buffers--;
    }
    parent_->Release(data, size_class);
    return;
  }
  std::lock_guard<std::mutex> lock(mu_);
  stats_.allocated_bytes -= size_class;
  stats_.live_buffers--;
  lru_.push_back({size_class, data});
  cache_.emplace(size_class, std::prev(lru_.end()));
  cached_bytes_ += size_class;
  if (cached_bytes_ > max_cached_bytes_) EvictLocked(max_cached_bytes_);
}

void Allocator::EvictLocked(uint64_t keep_bytes) {
  while (cached_bytes_ > keep_bytes && !lru_.empty()) {
    const CachedBlock oldest = lru_.front();
    auto [first, last] = cache_.equal_range(oldest.size_class);
    for (auto it = first; it != last; ++it) {
      if (it->second == lru_.begin()) {
        cache_.erase(it);
        break;
      }
    }
    lru_.pop_front();
    device_.Deallocate(oldest.data, oldest.size_class);
    stats_.reserved_bytes -= oldest.size_class;
    cached_bytes_ -= oldest.size_class;
  }
}

void Allocator::TrimLocked() { EvictLocked(0); }

void Allocator::Trim() {
  if (parent_) {
    // A queue allocator keeps its blocks (see CreateForQueue); the parent's cache goes.
    parent_->Trim();
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    TrimLocked();
  }
  device_.ReleaseFreedMemory();
}

AllocatorStats Allocator::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void Allocator::ResetPeak() {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.peak_allocated_bytes = stats_.allocated_bytes;
}

size_t Tensor::nbytes() const {
  auto n = NumElements(shape);
  return n ? static_cast<size_t>(*n) * DTypeSize(dtype) : 0;
}

StatusOr<TensorPtr> AllocateTensor(Allocator& allocator, DType dtype, const Shape& shape) {
  auto n = NumElements(shape);
  size_t elem = DTypeSize(dtype);
  uint64_t bytes = 0;
  if (elem == 0) return InvalidArgument("cannot allocate a tensor of dtype " + std::string(DTypeName(dtype)));
  if (!n || __builtin_mul_overflow(static_cast<uint64_t>(*n), elem, &bytes) ||
      bytes > (uint64_t{1} << 40)) {
    return InvalidArgument("cannot allocate a tensor of shape " + ShapeToString(shape));
  }
  REMEX_ASSIGN_OR_RETURN(auto buffer, allocator.Allocate(bytes));
  auto t = std::make_shared<Tensor>();
  t->buffer = std::move(buffer);
  t->dtype = dtype;
  t->shape = shape;
  return t;
}

Status CopyBox(Device& device, const Tensor& src, const Tensor& dst, int axis, int64_t at) {
  const size_t rank = src.shape.size();
  const size_t elem = DTypeSize(src.dtype);
  if (NumElements(src.shape).value_or(0) == 0) return OkStatus();
  // Runs: the dims from `axis` on are contiguous in both where each is dense past it
  // (a view's rows along its axis are strided, its inner dims dense). One run copies
  // src's whole extent at and after `axis`, unless src or dst is a view along an axis
  // past `axis`: then one run per index of the dims up to that one.
  int split = axis;
  for (const Tensor* t : {&src, &dst}) {
    if (t->view()) split = std::max(split, t->axis);
  }
  int64_t run = 1;
  for (size_t i = static_cast<size_t>(split); i < rank; ++i) run *= src.shape[i];
  int64_t runs = 1;
  for (size_t i = 0; i < static_cast<size_t>(split); ++i) runs *= src.shape[i];
  const std::vector<int64_t> ss = src.Ref().StoredStrides(), ds = dst.Ref().StoredStrides();
  const auto* s = static_cast<const std::byte*>(src.data());
  auto* d = static_cast<std::byte*>(dst.data());
  for (int64_t r = 0; r < runs; ++r) {
    // r's index over dims [0, split), innermost first.
    int64_t rem = r, so = 0, doff = 0;
    for (size_t i = static_cast<size_t>(split); i-- > 0;) {
      const int64_t idx = rem % src.shape[i];
      rem /= src.shape[i];
      so += idx * ss[i];
      doff += (idx + (static_cast<int>(i) == axis ? at : 0)) * ds[i];
    }
    if (split == axis && at != 0) doff += at * ds[static_cast<size_t>(axis)];  // (a scalar has no axis 0)
    REMEX_RETURN_IF_ERROR(device.CopyOnDevice(d + static_cast<size_t>(doff) * elem,
                                              s + static_cast<size_t>(so) * elem,
                                              static_cast<size_t>(run) * elem));
  }
  return OkStatus();
}

StatusOr<TensorPtr> DenseTensor(Allocator& allocator, const TensorPtr& t) {
  if (!t || !t->view()) return t;
  REMEX_ASSIGN_OR_RETURN(TensorPtr dense, AllocateTensor(allocator, t->dtype, t->shape));
  REMEX_RETURN_IF_ERROR(CopyBox(allocator.device(), *t, *dense, 0, 0));
  return dense;
}

}  // namespace remex::vm
