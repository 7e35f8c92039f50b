#include "base/fiber.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

namespace remex {
namespace fiber_test {

TEST(FiberTest, TakesTurnsAtEachSuspend) {
  std::vector<std::string> log;
  Fiber a([&] {
    log.push_back("a1");
    Fiber::Suspend();
    log.push_back("a2");
  });
  Fiber b([&] {
    log.push_back("b1");
    Fiber::Suspend();
    log.push_back("b2");
    Fiber::Suspend();
    log.push_back("b3");
  });
  EXPECT_EQ(Fiber::Current(), nullptr);
  EXPECT_FALSE(a.Resume());
  EXPECT_FALSE(b.Resume());
  EXPECT_TRUE(a.Resume());
  EXPECT_FALSE(b.Resume());
  EXPECT_TRUE(b.Resume());
  EXPECT_TRUE(a.finished());
  EXPECT_TRUE(a.Resume());  // a finished fiber stays finished
  EXPECT_EQ(log, (std::vector<std::string>{"a1", "b1", "a2", "b2", "b3"}));
}

TEST(FiberTest, KnowsWhichFiberRunsAndSuspendOutsideIsANoOp) {
  Fiber* seen = nullptr;
  Fiber f([&] { seen = Fiber::Current(); });
  Fiber::Suspend();  // not in a fiber: returns at once
  EXPECT_TRUE(f.Resume());
  EXPECT_EQ(seen, &f);
  EXPECT_EQ(Fiber::Current(), nullptr);
}

TEST(FiberTest, ExceptionReachesTheResumer) {
  Fiber f([] { throw std::runtime_error("from the fiber"); });
  EXPECT_THROW(
      {
        try {
          f.Resume();
        } catch (const std::runtime_error& e) {
          EXPECT_STREQ(e.what(), "from the fiber");
          throw;
        }
      },
      std::runtime_error);
  EXPECT_TRUE(f.finished());
}

// Deep recursion uses the fiber's own stack (8 MiB by default), not the caller's.
int Depth(int n) {
  volatile char pad[1024];
  pad[0] = static_cast<char>(n);
  return n == 0 ? pad[0] : 1 + Depth(n - 1);
}

TEST(FiberTest, RunsDeepCallsOnItsOwnStack) {
  int depth = 0;
  Fiber f([&] { depth = Depth(2000); });  // about 2 MiB of frames
  EXPECT_TRUE(f.Resume());
  EXPECT_EQ(depth, 2000);
}

}  // namespace fiber_test
}  // namespace remex
