// The bearer token check of the metrics endpoint and the dashboard (rpc/auth.h).
#include "rpc/auth.h"

#include <gtest/gtest.h>

namespace remex::rpc {
namespace metrics_test {

constexpr char kToken[] = "metrics-scraper-token-0123456789";

TEST(BearerTokenTest, MatchesOnlyTheBearerSchemeWithTheWholeToken) {
  EXPECT_TRUE(BearerTokenMatches(std::string("Bearer ") + kToken, kToken));
  EXPECT_TRUE(BearerTokenMatches(std::string("bearer ") + kToken, kToken));  // scheme case-insensitive
  EXPECT_TRUE(BearerTokenMatches(std::string("BEARER   ") + kToken + "  ", kToken));
  EXPECT_FALSE(BearerTokenMatches("", kToken));
  EXPECT_FALSE(BearerTokenMatches("Bearer", kToken));
  EXPECT_FALSE(BearerTokenMatches("Bearer ", kToken));
  EXPECT_FALSE(BearerTokenMatches(std::string("Basic ") + kToken, kToken));
  EXPECT_FALSE(BearerTokenMatches(std::string("Bearer") + kToken, kToken));
  EXPECT_FALSE(BearerTokenMatches(std::string("Bearer ") + kToken + "x", kToken));
  EXPECT_FALSE(BearerTokenMatches(std::string("Bearer ") + std::string(kToken).substr(1), kToken));
  EXPECT_FALSE(BearerTokenMatches(std::string("Bearer ") + std::string(kToken, sizeof kToken - 2) + "X", kToken));
  // No token configured: nothing matches, not even an empty bearer.
  EXPECT_FALSE(BearerTokenMatches("Bearer ", ""));
}

}  // namespace metrics_test
}  // namespace remex::rpc
