// Fibers: functions run on their own stacks, suspended and resumed cooperatively by the
// thread that resumes them (Boost.Context). Each stack is mmap'd (reserved, committed as
// touched) with an inaccessible guard page below it, so an overflow faults instead of
// corrupting memory, and goes back to a small process-wide pool (64 stacks) for the
// next fiber; under AddressSanitizer every switch is announced to it.
//
// Used by the device server's worker to interleave sessions' runs between kernels.
#pragma once

#include <cstddef>
#include <exception>
#include <functional>
#include <memory>

namespace remex {

class Fiber {
 public:
  static constexpr size_t kDefaultStackBytes = size_t{8} << 20;  // as a thread's default

  // A fiber that will run `body` on a stack of `stack_bytes` (guard page included) when
  // first resumed. Aborts when the stack cannot be mapped.
  explicit Fiber(std::function<void()> body, size_t stack_bytes = kDefaultStackBytes);
  // A fiber must be finished or never started when destroyed (aborts otherwise).
  ~Fiber();
  Fiber(const Fiber&) = delete;
  Fiber& operator=(const Fiber&) = delete;

  // Runs the fiber on the calling thread until it suspends (false) or its body returns
  // (true). An exception escaping the body is rethrown here. Not from inside a fiber.
  bool Resume();
  bool finished() const;

  // From inside a fiber: suspends it and returns to its Resume(), which returns false;
  // returns when the fiber is resumed again. Outside any fiber: does nothing. The fiber
  // may be resumed by another thread than the one it suspended on (the device server
  // moves an invoke that outran its inline budget to its device thread): across a
  // Suspend, a fiber must not keep a thread's identity (thread-local addresses,
  // pthread_self, which compilers may treat as constant).
  static void Suspend();
  // The fiber running on this thread, or nullptr.
  static Fiber* Current();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace remex
