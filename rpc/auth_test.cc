#include "rpc/auth.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

namespace remex::rpc {
namespace {

TEST(AuthTest, ProofDependsOnTokenRoleChallengeAndNonce) {
  const std::string a = AuthProof("0123456789abcdef", "client", "challenge", "nonce");
  EXPECT_NE(a, AuthProof("0123456789abcdef", "server", "challenge", "nonce"));
  EXPECT_NE(a, AuthProof("0123456789abcdef", "client", "challengf", "nonce"));
  EXPECT_NE(a, AuthProof("0123456789abcdef", "client", "challenge", "noncf"));
  EXPECT_NE(a, AuthProof("0123456789abcdeg", "client", "challenge", "nonce"));
  EXPECT_EQ(a, AuthProof("0123456789abcdef", "client", "challenge", "nonce"));
}

TEST(AuthTest, KnownAnswer) {
  // HMAC-SHA256(key "Jefe", "remex-auth-v1 clientwhat do ya want for nothing?") as
  // Python's hmac module computes it, independently of OpenSSL:
  //   hmac.new(b"Jefe", b"remex-auth-v1 client" + b"what do ya want " + b"for nothing?",
  //            hashlib.sha256).hexdigest()
  const std::string mac = AuthProof("Jefe", "client", "what do ya want ", "for nothing?");
  static const char kHex[] = "0123456789abcdef";
  std::string hex;
  for (unsigned char c : mac) {
    hex += kHex[c >> 4];
    hex += kHex[c & 15];
  }
  EXPECT_EQ(hex, "d60d8fb5183cb576dc698afc5f51b7a406643038a1a8e73c4df00caa629e7735");
}

TEST(AuthTest, RandomBytesDiffer) {
  auto a = RandomBytes(kAuthNonceBytes);
  auto b = RandomBytes(kAuthNonceBytes);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->size(), kAuthNonceBytes);
  EXPECT_NE(*a, *b);
}

TEST(AuthTest, ProofsCompareWhole) {
  EXPECT_TRUE(ProofsEqual("abc", "abc"));
  EXPECT_FALSE(ProofsEqual("abc", "abd"));
  EXPECT_FALSE(ProofsEqual("abc", "ab"));
}

TEST(AuthTest, TokenFileIsTrimmedAndMustBeLongEnough) {
  auto dir = std::filesystem::temp_directory_path();
  auto path = (dir / ("remex_token_" + std::to_string(::getpid()))).string();
  {
    std::ofstream(path) << "0123456789abcdefXYZ\n";
  }
  auto token = ReadTokenFile(path);
  ASSERT_TRUE(token.ok()) << token.status().ToString();
  EXPECT_EQ(*token, "0123456789abcdefXYZ");
  {
    std::ofstream(path) << "short\n";
  }
  auto short_token = ReadTokenFile(path);
  EXPECT_EQ(short_token.status().code(), StatusCode::kInvalidArgument);
  std::filesystem::remove(path);
  EXPECT_FALSE(ReadTokenFile(path).ok());
}

}  // namespace
}  // namespace remex::rpc
