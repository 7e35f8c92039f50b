#include "base/fiber.h"

#include <sys/mman.h>
#include <unistd.h>

#include <boost/context/fiber.hpp>
#include <boost/context/preallocated.hpp>
#include <boost/context/stack_context.hpp>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <utility>
#include <vector>

#include "base/sanitizers.h"
#if REMEX_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#define REMEX_FIBER_ASAN 1
#endif

namespace remex {
namespace {

namespace ctx = boost::context;

size_t PageSize() {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return page;
}

// Boost.Context's stack allocator interface over a stack the Fiber owns.
struct OwnedStackAllocator {
  ctx::stack_context allocate() { return {}; }
  void deallocate(ctx::stack_context&) noexcept {}
};

thread_local Fiber* t_current = nullptr;

// Sets t_current of the thread this runs on. Out of line: a fiber may resume on another
// thread than the one it suspended on, and code inlined around the switch may have kept
// the old thread's address of t_current (with the general-dynamic TLS model of a shared
// library, the result of __tls_get_addr).
[[gnu::noinline]] void SetCurrent(Fiber* fiber) { t_current = fiber; }

// Stacks of finished fibers, kept for the next ones (mapping and unmapping a stack per
// fiber costs more than a small request's whole run). Thread-safe: fibers are often
// made on one thread and destroyed on another.
class StackPool {
 public:
  static constexpr size_t kMaxPooled = 64;

  static StackPool& Get() {
    static StackPool* pool = new StackPool();  // never destroyed: fibers may outlive main
    return *pool;
  }
  // A stack of exactly `bytes` (page multiple, guard page included), reused or mapped.
  void* Take(size_t bytes) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (size_t i = 0; i < free_.size(); ++i) {
        if (free_[i].second == bytes) {
          void* base = free_[i].first;
          free_[i] = free_.back();
          free_.pop_back();
          return base;
        }
      }
    }
    void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (base == MAP_FAILED) {
      std::fprintf(stderr, "remex: mmap of a %zu-byte fiber stack failed\n", bytes);
      std::abort();
    }
    mprotect(base, PageSize(), PROT_NONE);
    return base;
  }
  void Give(void* base, size_t bytes) {
#if defined(REMEX_FIBER_ASAN)
    // The frames a finished fiber switched away from never returned, so their redzones
    // are still poisoned: clear them before another fiber runs on this stack.
    __asan_unpoison_memory_region(static_cast<char*>(base) + PageSize(), bytes - PageSize());
#endif
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (free_.size() < kMaxPooled) {
        free_.emplace_back(base, bytes);
        return;
      }
    }
    munmap(base, bytes);
  }

 private:
  std::mutex mu_;
  std::vector<std::pair<void*, size_t>> free_;
};

}  // namespace

struct Fiber::State {
  std::function<void()> body;
  void* base = nullptr;  // lowest address: the guard page
  size_t bytes = 0;      // guard page included
  ctx::fiber fiber;      // the fiber while suspended (or not started)
  ctx::fiber resumer;    // the thread's context while the fiber runs
  bool started = false;
  bool finished = false;
  std::exception_ptr error;
#if defined(REMEX_FIBER_ASAN)
  void* fake_stack = nullptr;
  const void* resumer_bottom = nullptr;
  size_t resumer_size = 0;
#endif

  void* top() const { return static_cast<char*>(base) + bytes; }
  void* bottom() const { return static_cast<char*>(base) + PageSize(); }
  size_t usable() const { return bytes - PageSize(); }
};

Fiber::Fiber(std::function<void()> body, size_t stack_bytes) : state_(std::make_unique<State>()) {
  State& s = *state_;
  s.body = std::move(body);
  const size_t page = PageSize();
  s.bytes = (std::max(stack_bytes, 4 * page) + page - 1) / page * page;
  s.base = StackPool::Get().Take(s.bytes);
  ctx::stack_context sc;
  sc.size = s.usable();
  sc.sp = s.top();
  s.fiber = ctx::fiber(std::allocator_arg, ctx::preallocated(s.top(), s.usable(), sc), OwnedStackAllocator{},
                       [this](ctx::fiber&& resumer) {
                         State& st = *state_;
#if defined(REMEX_FIBER_ASAN)
                         __sanitizer_finish_switch_fiber(nullptr, &st.resumer_bottom, &st.resumer_size);
#endif
                         st.resumer = std::move(resumer);
                         try {
                           st.body();
                         } catch (...) {
                           st.error = std::current_exception();
                         }
                         st.finished = true;
                         st.body = nullptr;
#if defined(REMEX_FIBER_ASAN)
                         __sanitizer_start_switch_fiber(nullptr, st.resumer_bottom, st.resumer_size);
#endif
                         return std::move(st.resumer);
                       });
}

Fiber::~Fiber() {
  if (state_->started && !state_->finished) {
    std::fprintf(stderr, "remex: a suspended fiber was destroyed\n");
    std::abort();
  }
  state_->fiber = {};
  StackPool::Get().Give(state_->base, state_->bytes);
}

bool Fiber::Resume() {
  State& s = *state_;
  if (s.finished) return true;
  Fiber* outer = t_current;
  t_current = this;
  s.started = true;
#if defined(REMEX_FIBER_ASAN)
  void* fake = nullptr;
  __sanitizer_start_switch_fiber(&fake, s.bottom(), s.usable());
#endif
  s.fiber = std::move(s.fiber).resume();
#if defined(REMEX_FIBER_ASAN)
  __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#endif
  t_current = outer;
  if (s.error) std::rethrow_exception(std::exchange(s.error, nullptr));
  return s.finished;
}

bool Fiber::finished() const { return state_->finished; }

void Fiber::Suspend() {
  Fiber* self = t_current;
  if (self == nullptr) return;
  State& s = *self->state_;
#if defined(REMEX_FIBER_ASAN)
  __sanitizer_start_switch_fiber(&s.fake_stack, s.resumer_bottom, s.resumer_size);
#endif
  s.resumer = std::move(s.resumer).resume();
#if defined(REMEX_FIBER_ASAN)
  __sanitizer_finish_switch_fiber(s.fake_stack, &s.resumer_bottom, &s.resumer_size);
#endif
  SetCurrent(self);
}

Fiber* Fiber::Current() { return t_current; }

}  // namespace remex
