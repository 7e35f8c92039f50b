#include "rpc/auth.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

namespace remex::rpc {
namespace auth_test {

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

TEST(AuthTest, LeasePublicKeyKnownAnswer) {
  // RFC 8032 section 7.1, TEST 1: the public key of this secret seed.
  auto pub = LeasePublicKey(std::string(kLeaseSecretPrefix) +
                            "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60");
  ASSERT_TRUE(pub.ok()) << pub.status().ToString();
  EXPECT_EQ(ToHex(*pub), "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a");
}

TEST(AuthTest, LeaseSignaturesVerifyOnlyWithTheirKeyChallengeAndNonce) {
  auto pair = NewLeaseKeyPair();
  ASSERT_TRUE(pair.ok()) << pair.status().ToString();
  EXPECT_TRUE(IsLeaseSecret(pair->secret));
  EXPECT_EQ(pair->secret.size(), kLeaseSecretPrefix.size() + 64);
  EXPECT_EQ(pair->public_key.size(), kLeasePublicKeyBytes);
  EXPECT_EQ(*LeasePublicKey(pair->secret), pair->public_key);
  const std::string challenge(32, 'c'), nonce(32, 'n');
  auto sig = LeaseSignature(pair->secret, challenge, nonce);
  ASSERT_TRUE(sig.ok()) << sig.status().ToString();
  EXPECT_EQ(sig->size(), kLeaseSignatureBytes);
  EXPECT_TRUE(VerifyLeaseSignature(pair->public_key, challenge, nonce, *sig));
  EXPECT_FALSE(VerifyLeaseSignature(pair->public_key, std::string(32, 'd'), nonce, *sig));
  EXPECT_FALSE(VerifyLeaseSignature(pair->public_key, challenge, std::string(32, 'm'), *sig));
  std::string flipped = *sig;
  flipped[5] ^= 1;
  EXPECT_FALSE(VerifyLeaseSignature(pair->public_key, challenge, nonce, flipped));
  auto other = NewLeaseKeyPair();
  ASSERT_TRUE(other.ok());
  EXPECT_NE(other->public_key, pair->public_key);
  EXPECT_FALSE(VerifyLeaseSignature(other->public_key, challenge, nonce, *sig));
  // Malformed input is refused, never trusted.
  EXPECT_FALSE(VerifyLeaseSignature(pair->public_key.substr(1), challenge, nonce, *sig));
  EXPECT_FALSE(VerifyLeaseSignature(pair->public_key, challenge, nonce, sig->substr(1)));
  EXPECT_FALSE(VerifyLeaseSignature(std::string(32, '\0'), challenge, nonce, *sig));
  EXPECT_EQ(LeasePublicKey("remex-lease-v1:abc").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(LeasePublicKey(std::string(kLeaseSecretPrefix) + std::string(64, 'g')).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(LeaseSignature(std::string(32, 'f'), challenge, nonce).status().code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(IsLeaseSecret(std::string(32, 'f')));
}

TEST(AuthTest, HexRoundTrips) {
  EXPECT_EQ(ToHex(std::string("\x00\xff\x10", 3)), "00ff10");
  EXPECT_EQ(*FromHex("00FF10"), std::string("\x00\xff\x10", 3));
  EXPECT_FALSE(FromHex("0").has_value());
  EXPECT_FALSE(FromHex("zz").has_value());
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

}  // namespace auth_test
}  // namespace remex::rpc
