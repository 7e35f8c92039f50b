#include "base/status.h"

#include <gtest/gtest.h>

namespace remex {
namespace status_test {

TEST(StatusTest, WithContextPrependsTheContext) {
  Status s = NotFound("no tensor %3").WithContext("fetching 'y'");
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "fetching 'y': no tensor %3");
  EXPECT_TRUE(OkStatus().WithContext("anything").ok());
}

TEST(StatusTest, WithContextSaysAPrefixOnce) {
  // The server's "benchmark: ..." labelled "benchmark" again by the client.
  Status s = DeadlineExceeded("benchmark: the run would take about 31.0 s").WithContext("benchmark");
  EXPECT_EQ(s.message(), "benchmark: the run would take about 31.0 s");
  Status c =
      Unavailable("connecting to 127.0.0.1:9: Connection refused").WithContext("connecting to 127.0.0.1:9");
  EXPECT_EQ(c.ToString(), "UNAVAILABLE: connecting to 127.0.0.1:9: Connection refused");
  // Only the whole context followed by ": " counts.
  EXPECT_EQ(Internal("benchmarks: x").WithContext("benchmark").message(), "benchmark: benchmarks: x");
  EXPECT_EQ(Internal("benchmark").WithContext("benchmark").message(), "benchmark: benchmark");
  EXPECT_EQ(Internal("benchmark call 3: x").WithContext("benchmark").message(),
            "benchmark: benchmark call 3: x");
}

}  // namespace status_test
}  // namespace remex
