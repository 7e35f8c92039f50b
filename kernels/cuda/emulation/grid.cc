// The emulated grid (grid.h): blocks in order on the calling host thread; a block's
// threads run on fibers (Boost.Context) scheduled cooperatively in thread order.
//
// A fiber ("worker") runs device threads one after another until one of them waits at
// a barrier (__syncthreads) or a warp exchange (shuffle, vote, __syncwarp); then the
// scheduler starts another worker for the next thread. So a kernel without barriers
// costs one fiber per block, and one with barriers one fiber per thread. When every
// thread has started and the threads a barrier waits for have all arrived, the
// scheduler releases them, in thread order. A barrier that can never complete (a
// thread exited, or waits at another barrier) fails the launch.
#include "kernels/cuda/emulation/grid.h"

#include "kernels/cuda/emulation/capture.h"

#include <sys/mman.h>
#include <unistd.h>

#include <boost/context/fiber.hpp>
#include <boost/context/preallocated.hpp>
#include <boost/context/stack_context.hpp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "base/sanitizers.h"
#if REMEX_ASAN
#include <sanitizer/common_interface_defs.h>
#define REMEX_EMULATION_ASAN 1
#endif

thread_local uint3 threadIdx;
thread_local uint3 blockIdx;
thread_local dim3 blockDim;
thread_local dim3 gridDim;

namespace remex::cuda_emulation {
namespace {

namespace ctx = boost::context;

constexpr size_t kStackBytes = size_t{512} << 10;  // Per fiber; ASan's frames are large.
constexpr unsigned kMaxThreadsPerBlock = 1024;
constexpr unsigned kMaxBlockDim[3] = {1024, 1024, 64};
constexpr unsigned kMaxGridDim[3] = {0x7fffffffu, 65535, 65535};
constexpr size_t kMaxSharedBytes = 48 << 10;

size_t PageSize() {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return page;
}

// A fiber stack from mmap, with an inaccessible guard page below it, so that an
// overflow faults instead of corrupting a neighbour.
struct Stack {
  void* base = nullptr;  // Lowest address (the guard page).
  size_t bytes = 0;      // Including the guard page.
  void* top() const { return static_cast<char*>(base) + bytes; }
  size_t usable() const { return bytes - PageSize(); }
  void* bottom() const { return static_cast<char*>(base) + PageSize(); }
};

// Stacks are reused by later blocks of the same host thread.
class StackPool {
 public:
  ~StackPool() {
    for (Stack& s : free_) munmap(s.base, s.bytes);
  }
  Stack Get() {
    if (!free_.empty()) {
      Stack s = free_.back();
      free_.pop_back();
      return s;
    }
    Stack s;
    s.bytes = kStackBytes;
    s.base =
        mmap(nullptr, s.bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (s.base == MAP_FAILED) {
      std::fprintf(stderr, "remex cuda emulation: mmap of a %zu-byte fiber stack failed\n", s.bytes);
      std::abort();
    }
    mprotect(s.base, PageSize(), PROT_NONE);
    return s;
  }
  void Put(Stack s) { free_.push_back(s); }

 private:
  std::vector<Stack> free_;
};

thread_local StackPool t_stacks;

// Boost.Context's stack allocator interface over a Stack the pool owns.
struct PoolStackAllocator {
  ctx::stack_context allocate() { return {}; }
  void deallocate(ctx::stack_context&) noexcept {}
};

enum class Wait : uint8_t { kNone, kBlock, kWarp, kDone };

struct AbortBlock {};  // Unwinds a waiting thread when its block fails.

struct Block;

struct Worker {
  ctx::fiber fiber;      // The worker while suspended (empty while running or done).
  ctx::fiber scheduler;  // The scheduler while the worker runs.
  Stack stack;
  uint32_t tid = 0;  // Linear index of the device thread it runs.
  Wait wait = Wait::kNone;
#if defined(REMEX_EMULATION_ASAN)
  void* fake_stack = nullptr;
  const void* scheduler_bottom = nullptr;
  size_t scheduler_size = 0;
#endif
};

struct Block {
  void (*body)(const void* params) = nullptr;
  const void* params = nullptr;
  uint32_t threads = 0;
  uint32_t next_tid = 0;  // Threads [0, next_tid) have started.
  uint32_t exited = 0;
  uint32_t at_block_barrier = 0;
  std::vector<uint32_t> warp_arrived;  // Lanes of each warp waiting at an exchange.
  std::vector<uint32_t> warp_exited;   // Lanes of each warp that exited.
  std::vector<unsigned> warp_mask;     // The mask the first arriving lane named.
  std::vector<uint64_t> slots[2];      // Exchange values by (parity, linear tid).
  std::vector<uint8_t> parity;         // Each thread's next exchange parity.
  std::deque<Worker> workers;
  bool aborting = false;
  std::string fault;
};

thread_local Block* t_block = nullptr;
thread_local Worker* t_worker = nullptr;

void SetThreadIndex(uint32_t tid) {
  threadIdx.x = tid % blockDim.x;
  threadIdx.y = (tid / blockDim.x) % blockDim.y;
  threadIdx.z = tid / (blockDim.x * blockDim.y);
}

uint32_t LanesInWarp(const Block& b, uint32_t warp) { return std::min<uint32_t>(32, b.threads - warp * 32); }

// Switches from the running worker to the scheduler, and back when it is resumed.
void Yield() {
  Worker& w = *t_worker;
  Block& b = *t_block;
#if defined(REMEX_EMULATION_ASAN)
  __sanitizer_start_switch_fiber(&w.fake_stack, w.scheduler_bottom, w.scheduler_size);
#endif
  w.scheduler = std::move(w.scheduler).resume();
#if defined(REMEX_EMULATION_ASAN)
  __sanitizer_finish_switch_fiber(w.fake_stack, &w.scheduler_bottom, &w.scheduler_size);
#endif
  t_worker = &w;
  t_block = &b;
  SetThreadIndex(w.tid);
  if (b.aborting) throw AbortBlock{};
}

void StartWorker(Block& b) {
  b.workers.emplace_back();
  Worker& w = b.workers.back();
  w.stack = t_stacks.Get();
  ctx::stack_context sc;
  sc.size = w.stack.usable();
  sc.sp = w.stack.top();
  w.fiber = ctx::fiber(std::allocator_arg, ctx::preallocated(w.stack.top(), w.stack.usable(), sc),
                       PoolStackAllocator{}, [&b, &w](ctx::fiber&& scheduler) {
#if defined(REMEX_EMULATION_ASAN)
                         __sanitizer_finish_switch_fiber(nullptr, &w.scheduler_bottom, &w.scheduler_size);
#endif
                         w.scheduler = std::move(scheduler);
                         try {
                           while (b.next_tid < b.threads && !b.aborting) {
                             w.tid = b.next_tid++;
                             SetThreadIndex(w.tid);
                             b.body(b.params);
                             ++b.exited;
                             ++b.warp_exited[w.tid / 32];
                           }
                         } catch (const AbortBlock&) {
                         }
                         w.wait = Wait::kDone;
#if defined(REMEX_EMULATION_ASAN)
                         __sanitizer_start_switch_fiber(nullptr, w.scheduler_bottom, w.scheduler_size);
#endif
                         return std::move(w.scheduler);
                       });
}

void Resume(Block& b, Worker& w) {
  t_worker = &w;
  t_block = &b;
  w.wait = Wait::kNone;
#if defined(REMEX_EMULATION_ASAN)
  void* fake = nullptr;
  __sanitizer_start_switch_fiber(&fake, w.stack.bottom(), w.stack.usable());
#endif
  w.fiber = std::move(w.fiber).resume();
#if defined(REMEX_EMULATION_ASAN)
  __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#endif
  t_worker = nullptr;
}

// Releases the barriers whose threads have all arrived; sets b.fault for one that
// never can complete. Returns whether a thread was released.
bool Release(Block& b) {
  bool released = false;
  const bool all_started = b.next_tid == b.threads;
  if (b.at_block_barrier > 0 && all_started && b.at_block_barrier + b.exited == b.threads) {
    if (b.exited > 0) {
      b.fault = "__syncthreads is waited at by " + std::to_string(b.at_block_barrier) + " threads while " +
                std::to_string(b.exited) + " have exited (a barrier in divergent code: undefined on a GPU)";
      return false;
    }
    for (Worker& w : b.workers) {
      if (w.wait == Wait::kBlock) w.wait = Wait::kNone;
    }
    b.at_block_barrier = 0;
    released = true;
  }
  for (uint32_t warp = 0; warp < b.warp_arrived.size(); ++warp) {
    if (b.warp_arrived[warp] == 0) continue;
    const uint32_t lanes = LanesInWarp(b, warp);
    const uint32_t started = std::min<uint32_t>(lanes, b.next_tid > warp * 32 ? b.next_tid - warp * 32 : 0);
    if (started < lanes || b.warp_arrived[warp] + b.warp_exited[warp] < lanes) continue;
    const unsigned present = lanes == 32 ? 0xffffffffu : ((1u << lanes) - 1);
    if (b.warp_exited[warp] > 0 && (b.warp_mask[warp] & present) != 0 &&
        b.warp_arrived[warp] < static_cast<uint32_t>(__builtin_popcount(b.warp_mask[warp] & present))) {
      b.fault = "a warp exchange (shuffle, vote or __syncwarp) of warp " + std::to_string(warp) + " names " +
                std::to_string(__builtin_popcount(b.warp_mask[warp] & present)) + " lanes but " +
                std::to_string(b.warp_exited[warp]) + " of them exited (undefined on a GPU)";
      return false;
    }
    for (Worker& w : b.workers) {
      if (w.wait == Wait::kWarp && w.tid / 32 == warp) w.wait = Wait::kNone;
    }
    b.warp_arrived[warp] = 0;
    released = true;
  }
  return released;
}

// Runs one block to completion or failure; returns the fault ("" when none).
std::string RunBlock(Block& b) {
  for (;;) {
    bool ran = false;
    for (Worker& w : b.workers) {
      if (w.wait == Wait::kNone && w.fiber) {
        Resume(b, w);
        ran = true;
      }
    }
    if (b.next_tid < b.threads) {
      StartWorker(b);
      Resume(b, b.workers.back());
      continue;
    }
    bool all_done = true;
    for (const Worker& w : b.workers) all_done = all_done && w.wait == Wait::kDone;
    if (all_done) break;
    if (Release(b) || ran) continue;
    if (b.fault.empty()) {
      b.fault = std::to_string(b.at_block_barrier) +
                " threads wait at __syncthreads while others wait at a warp "
                "exchange: the barriers can never complete (a deadlock on a GPU)";
    }
    break;
  }
  if (!b.fault.empty()) {
    // Unwind the waiting threads (AbortBlock is thrown where each waits).
    b.aborting = true;
    for (Worker& w : b.workers) {
      if (w.fiber) Resume(b, w);
    }
  }
  for (Worker& w : b.workers) t_stacks.Put(w.stack);
  b.workers.clear();
  return b.fault;
}

// "K = <name>]" of KernelName's pretty function, as "<name>".
std::string ShortName(const char* pretty) {
  std::string s = pretty;
  const size_t at = s.find("K = ");
  if (at != std::string::npos) s = s.substr(at + 4);
  if (!s.empty() && s.back() == ']') s.pop_back();
  return s;
}

// The kernel's unqualified template name: "remex::...::UnaryKernel<float, ...>" ->
// "UnaryKernel".
std::string BaseName(const std::string& name) {
  std::string s = name.substr(0, name.find('<'));
  const size_t colon = s.rfind("::");
  return colon == std::string::npos ? s : s.substr(colon + 2);
}

// The kernels this process launched, written to $REMEX_CUDA_EMULATION_TRACE at exit.
class Trace {
 public:
  static Trace& Get() {
    static Trace* trace = new Trace();
    return *trace;
  }
  void Add(const char* pretty) {
    if (!path_) return;
    std::lock_guard<std::mutex> lock(mu_);
    if (seen_.insert(pretty).second) names_.insert(BaseName(ShortName(pretty)));
  }

 private:
  Trace() : path_(std::getenv("REMEX_CUDA_EMULATION_TRACE")) {
    if (path_ && *path_)
      std::atexit([] { Get().Write(); });
    else
      path_ = nullptr;
  }
  void Write() {
    std::lock_guard<std::mutex> lock(mu_);
    FILE* f = std::fopen(path_, "a");
    if (!f) return;
    for (const std::string& n : names_) std::fprintf(f, "%s\n", n.c_str());
    std::fclose(f);
  }
  const char* path_;
  std::mutex mu_;
  std::set<const char*> seen_;
  std::set<std::string> names_;
};

}  // namespace

int LaneId() {
  if (!t_worker) return 0;
  return static_cast<int>(t_worker->tid % 32);
}

void BlockBarrier() {
  if (!t_worker || !t_block) {
    std::fprintf(stderr, "remex cuda emulation: __syncthreads called outside a kernel\n");
    std::abort();
  }
  t_worker->wait = Wait::kBlock;
  ++t_block->at_block_barrier;
  Yield();
}

namespace {
// Publishes `bits` for the calling lane, waits for the warp, and returns the parity of
// the slots this exchange used.
int WarpArrive(unsigned mask, uint64_t bits, const char* op) {
  if (!t_worker || !t_block) {
    std::fprintf(stderr, "remex cuda emulation: %s called outside a kernel\n", op);
    std::abort();
  }
  Block& b = *t_block;
  Worker& w = *t_worker;
  const uint32_t warp = w.tid / 32;
  const int parity = b.parity[w.tid];
  b.parity[w.tid] ^= 1;
  b.slots[parity][w.tid] = bits;
  if (b.warp_arrived[warp] == 0) b.warp_mask[warp] = mask;
  ++b.warp_arrived[warp];
  w.wait = Wait::kWarp;
  Yield();
  return parity;
}
}  // namespace

uint64_t WarpExchange(unsigned mask, uint64_t bits, int src_lane, const char* op) {
  const int parity = WarpArrive(mask, bits, op);
  Block& b = *t_block;
  const uint32_t warp_base = t_worker->tid / 32 * 32;
  const uint32_t lanes = LanesInWarp(b, warp_base / 32);
  if (src_lane < 0 || static_cast<uint32_t>(src_lane) >= lanes) return bits;
  return b.slots[parity][warp_base + static_cast<uint32_t>(src_lane)];
}

unsigned WarpBallot(unsigned mask, bool predicate) {
  const int parity = WarpArrive(mask, predicate ? 1 : 0, "__ballot_sync");
  Block& b = *t_block;
  const uint32_t warp_base = t_worker->tid / 32 * 32;
  const uint32_t lanes = LanesInWarp(b, warp_base / 32);
  unsigned out = 0;
  for (uint32_t lane = 0; lane < lanes; ++lane) {
    if ((mask >> lane) & 1u && b.slots[parity][warp_base + lane]) out |= 1u << lane;
  }
  return out;
}

cudaError_t CheckPointerParameter(const char* kernel, int index, const void* ptr) {
  if (!ptr || KindOf(ptr) != MemoryKind::kUnknown) return cudaSuccess;
  char detail[160];
  std::snprintf(detail, sizeof(detail), "parameter %d (%p) is not device or pinned memory", index, ptr);
  return Fail(cudaErrorIllegalAddress, ShortName(kernel).c_str(), detail);
}

cudaError_t RunGrid(const char* kernel, dim3 grid, dim3 block, size_t shared_bytes, cudaStream_t stream,
                    void (*thread)(const void* params), const LaunchParams& params) {
  // The kernel's readable name is worked out only for a failure's message.
  auto fail = [kernel](cudaError_t error, const char* detail) {
    return Fail(error, ShortName(kernel).c_str(), detail);
  };
  char detail[200];
  const unsigned g[3] = {grid.x, grid.y, grid.z};
  const unsigned k[3] = {block.x, block.y, block.z};
  for (int d = 0; d < 3; ++d) {
    if (g[d] == 0 || g[d] > kMaxGridDim[d] || k[d] == 0 || k[d] > kMaxBlockDim[d]) {
      std::snprintf(detail, sizeof(detail),
                    "grid (%u, %u, %u) x block (%u, %u, %u) is out of the device's limits", g[0], g[1], g[2],
                    k[0], k[1], k[2]);
      return fail(cudaErrorInvalidConfiguration, detail);
    }
  }
  const uint64_t threads = uint64_t{block.x} * block.y * block.z;
  if (threads > kMaxThreadsPerBlock) {
    std::snprintf(detail, sizeof(detail), "%llu threads per block (at most %u)",
                  static_cast<unsigned long long>(threads), kMaxThreadsPerBlock);
    return fail(cudaErrorInvalidConfiguration, detail);
  }
  if (shared_bytes > kMaxSharedBytes) {
    std::snprintf(detail, sizeof(detail), "%zu bytes of dynamic shared memory (at most %zu)", shared_bytes,
                  kMaxSharedBytes);
    return fail(cudaErrorInvalidConfiguration, detail);
  }
  if (!IsValidStream(stream)) {
    return fail(cudaErrorInvalidResourceHandle, "stream was destroyed or never created");
  }
  if (AnyCapture()) {
    // The graph's launch runs the grid on no stream of its own: its nodes run in order.
    // The recorded launch owns a copy of the parameters; each launch of the graph runs
    // the grid on that copy.
    std::shared_ptr<void> copy(params.clone(params.data), params.destroy);
    std::function<cudaError_t()> launch = [kernel, grid, block, shared_bytes, thread, copy,
                                           clone = params.clone, destroy = params.destroy] {
      return RunGrid(kernel, grid, block, shared_bytes, nullptr, thread, LaunchParams{copy.get(), clone, destroy});
    };
    cudaError_t result;
    if (RecordIfCapturing(stream, kernel, launch, &result)) return result;
  }
  Trace::Get().Add(kernel);

  // Launches nest only through host code; keep the caller's view (none, normally).
  Block* const outer_block = t_block;
  Worker* const outer_worker = t_worker;
  const uint3 saved_thread = threadIdx, saved_block = blockIdx;
  const dim3 saved_block_dim = blockDim, saved_grid_dim = gridDim;
  blockDim = block;
  gridDim = grid;
  const uint32_t warps = static_cast<uint32_t>((threads + 31) / 32);
  Block b;
  b.body = thread;
  b.params = params.data;
  b.threads = static_cast<uint32_t>(threads);
  std::string fault;
  for (unsigned z = 0; z < grid.z && fault.empty(); ++z) {
    for (unsigned y = 0; y < grid.y && fault.empty(); ++y) {
      for (unsigned x = 0; x < grid.x && fault.empty(); ++x) {
        blockIdx = uint3{x, y, z};
        b.next_tid = 0;
        b.exited = 0;
        b.at_block_barrier = 0;
        b.aborting = false;
        b.fault.clear();
        b.warp_arrived.assign(warps, 0);
        b.warp_exited.assign(warps, 0);
        b.warp_mask.assign(warps, 0);
        b.slots[0].assign(threads, 0);
        b.slots[1].assign(threads, 0);
        b.parity.assign(threads, 0);
        fault = RunBlock(b);
        if (!fault.empty()) {
          std::snprintf(detail, sizeof(detail), "block (%u, %u, %u): ", x, y, z);
          fault = detail + fault;
        }
      }
    }
  }
  t_block = outer_block;
  t_worker = outer_worker;
  threadIdx = saved_thread;
  blockIdx = saved_block;
  blockDim = saved_block_dim;
  gridDim = saved_grid_dim;
  if (!fault.empty()) return fail(cudaErrorLaunchFailure, fault.c_str());
  return cudaSuccess;
}

}  // namespace remex::cuda_emulation
