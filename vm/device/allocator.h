// Memory on a device: the caching allocator, its reference-counted buffers, and the
// dense tensors the VM keeps in them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "base/status.h"
#include "kernels/kernels.h"
#include "vm/device/device.h"

namespace remex::vm {

struct AllocatorStats {
  uint64_t allocated_bytes = 0;  // held by live buffers (rounded to size classes)
  uint64_t reserved_bytes = 0;   // allocated + cached for reuse
  uint64_t peak_allocated_bytes = 0;
  uint64_t device_allocations = 0;  // calls that reached Device::Allocate
  uint64_t live_buffers = 0;
};

class Allocator;

// A block of device memory. Returned to its allocator's cache when the last
// shared_ptr to it goes away.
class Buffer {
 public:
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  void* data() const { return data_; }
  size_t size() const { return size_; }
  // The bytes it holds of its allocator: size() rounded up to the allocator's size
  // class, as AllocatorStats counts it.
  size_t size_class() const { return size_class_; }
  Device& device() const;
  // The allocator it came from (and goes back to), whose stats count it.
  const Allocator* owner() const { return owner_.get(); }

 private:
  friend class Allocator;
  Buffer(std::shared_ptr<Allocator> owner, void* data, size_t size, size_t size_class)
      : owner_(std::move(owner)), data_(data), size_(size), size_class_(size_class) {}
  std::shared_ptr<Allocator> owner_;
  void* data_;
  size_t size_;
  size_t size_class_;
};

// Caching allocator over one device: blocks are rounded up to size classes (512 B
// steps up to 64 KiB, then quarter-powers of two) and freed blocks are kept for reuse,
// up to `max_cached_bytes`: past it the blocks freed longest ago go back to the device
// until the cache fits again, so a working set near the bound keeps most of its
// blocks (each block back on the device costs a fresh allocation, and on the CPU a
// page fault per page of its first touch). Thread-safe.
//
// An allocator made with CreateWithQuota takes its blocks from a parent allocator (its
// cache and the device's capacity) and charges each block's size class to its own
// quota: a session's allocator, so that one session cannot take the memory of all.
// Its stats() count its own blocks only (reserved_bytes = allocated_bytes there).
class Allocator : public std::enable_shared_from_this<Allocator> {
 public:
  static std::shared_ptr<Allocator> Create(Device& device, uint64_t max_cached_bytes = 1ull << 30);
  // An allocator drawing on `parent` whose live blocks may total at most `quota_bytes`
  // (size classes). `owner` names it in errors ("session 7"), and `quota_name` what set
  // the quota ("--session-memory-bytes"), when given.
  static std::shared_ptr<Allocator> CreateWithQuota(std::shared_ptr<Allocator> parent, uint64_t quota_bytes,
                                                    std::string owner, std::string quota_name = {});
  // An allocator for the work of one queue, `queue` (a stream of parent's device,
  // Device::CreateStream; `queue.memory_space()` must be parent's device's, else
  // INVALID_ARGUMENT): its buffers report `queue` as their device, so the VM and the
  // CUDA kernels queue their work on it. Its blocks come from `parent` (charged to
  // parent's quota, counted in its stats) and, once freed, are kept for this
  // allocator's reuse only, never handed to another queue: work of `queue` still pending
  // on a freed block runs before anything queued after on the same queue (stream
  // order, PyTorch's caching allocator rule for one stream), but not before another
  // queue's. They go back to `parent` when the allocator goes away, after waiting for
  // `queue` (which must outlive it). A block new to it is taken once parent's queue has
  // drained (parent's device Synchronize: on a GPU the block may come from the stream-
  // ordered pool on that queue), so take blocks while parent's queue is idle, as the
  // load generator does after its reference call. RESOURCE_EXHAUSTED as parent's
  // Allocate, errors of that Synchronize; Trim keeps the blocks held (they are this
  // queue's until it is gone).
  static StatusOr<std::shared_ptr<Allocator>> CreateForQueue(std::shared_ptr<Allocator> parent, Device& queue);
  ~Allocator();

  // A buffer of at least `bytes` (0 is allowed and yields a 1-byte-class block).
  // RESOURCE_EXHAUSTED when the device is out of memory even after dropping the cache,
  // or when the block would take a quota past its bound (the message names the quota,
  // its bound and what is in use).
  StatusOr<std::shared_ptr<Buffer>> Allocate(size_t bytes);
  AllocatorStats stats() const;
  // Starts a new high-water mark: peak_allocated_bytes becomes allocated_bytes (the
  // benchmark requests measure a run's peak on the session's allocator with it).
  void ResetPeak();
  // Returns every cached block to the device (the parent's cache, for a quota).
  void Trim();
  Device& device() const { return device_; }
  // The bound of a quota allocator; 0 for a root one.
  uint64_t quota_bytes() const { return quota_bytes_; }
  // The nearest quota over this allocator's blocks: its own, else its parent's (a
  // queue's allocator on a session's); 0 where none bounds them.
  uint64_t bounding_quota_bytes() const {
    return quota_bytes_ ? quota_bytes_ : parent_ ? parent_->bounding_quota_bytes() : 0;
  }

 private:
  friend class Buffer;
  Allocator(Device& device, uint64_t max_cached_bytes)
      : device_(device), max_cached_bytes_(max_cached_bytes) {}
  // A block of `size_class` bytes from the cache or the device, counted in stats_.
  // `from_device` tells which.
  StatusOr<void*> AllocateBlock(size_t size_class, bool* from_device);
  // Allocate without the calling thread's AllocationHold.
  StatusOr<std::shared_ptr<Buffer>> AllocateUnheld(size_t bytes);
  void Release(void* data, size_t size_class);
  void TrimLocked();
  // Returns cached blocks, oldest first, until at most `keep_bytes` stay cached.
  void EvictLocked(uint64_t keep_bytes);

  Device& device_;
  const uint64_t max_cached_bytes_;
  std::shared_ptr<Allocator> parent_;  // quota and queue allocators only
  // Queue allocators (CreateForQueue): parent's buffers held by live buffers of this
  // one (by address) and those freed, kept for reuse (by size class).
  bool queue_ = false;
  std::map<void*, std::shared_ptr<Buffer>> queue_held_;
  std::multimap<size_t, std::shared_ptr<Buffer>> queue_free_;
  uint64_t quota_bytes_ = 0;
  std::string owner_;
  std::string quota_name_;
  mutable std::mutex mu_;
  // Cached blocks in the order they were freed (oldest first), and by size class.
  struct CachedBlock {
    size_t size_class;
    void* data;
  };
  std::list<CachedBlock> lru_;
  std::multimap<size_t, std::list<CachedBlock>::iterator> cache_;
  uint64_t cached_bytes_ = 0;
  AllocatorStats stats_;
};

// While one lives, every buffer any Allocator hands out on the constructing thread is
// also kept here, so that none returns to a cache before the holder lets go: a device
// graph's recording (DeviceGraph) takes the buffers its recorded work used, workspaces
// the kernels released at once included, because every launch of the graph uses them
// again. With `charge_to`, a buffer asked of another allocator of the same memory
// space (the server's, which the kernels take their workspaces from) comes from
// `charge_to` instead (a session's quota allocator), so that what the holder keeps is
// charged to it. Holds nest: an inner one keeps its own and shadows the outer one. Not
// movable; destroyed on the thread that made it.
class AllocationHold {
 public:
  explicit AllocationHold(std::shared_ptr<Allocator> charge_to = nullptr);
  ~AllocationHold();
  AllocationHold(const AllocationHold&) = delete;
  AllocationHold& operator=(const AllocationHold&) = delete;
  // The buffers held so far (the hold keeps them too until it goes).
  const std::vector<std::shared_ptr<Buffer>>& buffers() const { return held_; }

 private:
  friend class Allocator;
  AllocationHold* outer_;
  std::shared_ptr<Allocator> charge_to_;
  std::vector<std::shared_ptr<Buffer>> held_;
};

// A row-major tensor in device memory: its own buffer, or a slot of a larger one (a
// function's planned arena) at byte `offset`. Dense, unless it is a view that grows in
// place (`physical`).
struct Tensor {
  std::shared_ptr<Buffer> buffer;
  DType dtype = DType::kUndefined;
  Shape shape;
  size_t offset = 0;
  // An executable constant, loaded once by VirtualMachine::Create and never written
  // (see kernels::TensorRef::constant).
  bool constant = false;
  // A view that grows along `axis` in place (the VM's ConcatAppend: a KV cache growing
  // by a token a step): `shape` is the leading box of a dense row-major array of dims
  // `physical` at `offset` (physical[axis] >= shape[axis], every other dim equal to
  // shape's), so that its rows along `axis` are strided. Empty: dense. Only kernels
  // that read views (kernels::OpKernel::ReadsViews) see one; the VM and the server give
  // everything else a dense copy (DenseTensor).
  Shape physical;
  int axis = -1;
  // Of a view: the rows along `axis` that hold data in the buffer, shared by every view
  // of the buffer. An append goes in place only where the view it extends holds all of
  // them: a view of fewer (an earlier step's cache, run again) gets a copy.
  std::shared_ptr<int64_t> filled;

  bool view() const { return !physical.empty(); }
  void* data() const { return buffer ? static_cast<std::byte*>(buffer->data()) + offset : nullptr; }
  // The bytes of its elements (of `shape`, not `physical`).
  size_t nbytes() const;
  kernels::TensorRef Ref() const { return {data(), dtype, shape, constant, physical}; }
};
using TensorPtr = std::shared_ptr<Tensor>;

// Allocates a tensor of `dtype` and `shape`; INVALID_ARGUMENT for a negative or
// overflowing shape, RESOURCE_EXHAUSTED when out of memory.
StatusOr<TensorPtr> AllocateTensor(Allocator& allocator, DType dtype, const Shape& shape);

// `t` itself when dense; else a dense copy of the view, from `allocator` (in the memory
// space of t's buffer), copied a row at a time on allocator.device(). Errors of the
// allocation and copies.
StatusOr<TensorPtr> DenseTensor(Allocator& allocator, const TensorPtr& t);

// Copies the elements of `src` (dense or a view) into `dst` (dense or a view) of the
// same dtype, both of `dst_box`'s rank, at dst's index `at` along `axis` (every other
// dim equal, src fitting inside dst), one contiguous run at a time on `device`. The
// caller has checked the shapes.
Status CopyBox(Device& device, const Tensor& src, const Tensor& dst, int axis, int64_t at);

}  // namespace remex::vm
