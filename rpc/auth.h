// Token authentication of sessions (remex-server --token-file, client --token-file or
// REMEX_TOKEN): a challenge-response over a shared secret, so that the token itself
// never crosses the wire (see Authenticate in rpc/remex.capnp); and the signature
// credential of farm leases (below). HMAC-SHA256, Ed25519 and the random bytes come from
// OpenSSL (libcrypto).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"

namespace remex::rpc {

inline constexpr size_t kAuthNonceBytes = 32;
// Tokens shorter than this are refused: 16 bytes of randomness at least.
inline constexpr size_t kMinTokenBytes = 16;

// The token in `path`: the file's bytes less trailing whitespace. INVALID_ARGUMENT when
// it cannot be read or is shorter than kMinTokenBytes.
StatusOr<std::string> ReadTokenFile(const std::string& path);

// `n` bytes from OpenSSL's CSPRNG. INTERNAL when it fails.
StatusOr<std::string> RandomBytes(size_t n);

// HMAC-SHA256(token, "remex-auth-v1 " + role + challenge + client_nonce), 32 bytes;
// `role` is "client" or "server".
std::string AuthProof(const std::string& token, const std::string& role, const std::string& challenge,
                      const std::string& client_nonce);

// Compares in time independent of where the bytes differ.
bool ProofsEqual(const std::string& a, const std::string& b);

// Whether `authorization` (an HTTP Authorization header's value) is "Bearer TOKEN" for
// `token` (scheme case-insensitive, RFC 7235; spaces around the token ignored), compared
// with ProofsEqual. False for an empty `token`. The metrics endpoint and the dashboard
// check their tokens with it.
bool BearerTokenMatches(std::string_view authorization, const std::string& token);

// Farm leases (docs/farm.md, "The lease credential"): an Ed25519 key pair made afresh by
// the lessee for each lease. Redis holds only the public key; the lease's secret (the
// client's token, REMEX_TOKEN under `remex farm lease`) is
//   kLeaseSecretPrefix + the private key's 32-byte seed as 64 lowercase hex digits,
// and a session proves it by signing
//   kLeaseSignatureDomain || challenge || clientNonce
// (Authenticate.signature in rpc/remex.capnp). Whoever reads the public key cannot sign.
inline constexpr std::string_view kLeaseSecretPrefix = "remex-lease-v1:";
inline constexpr std::string_view kLeaseSignatureDomain = "remex-lease-auth-v1 client";
inline constexpr size_t kLeasePublicKeyBytes = 32;
inline constexpr size_t kLeaseSignatureBytes = 64;

struct LeaseKeyPair {
  std::string secret;      // kLeaseSecretPrefix + 64 hex digits: the lessee's only.
  std::string public_key;  // 32 raw bytes: what Redis holds (as hex, LeasePublicKeyHex).
};
// A fresh key pair from OpenSSL's CSPRNG. INTERNAL when OpenSSL fails.
StatusOr<LeaseKeyPair> NewLeaseKeyPair();
// Whether `token` has the form of a lease's secret (its prefix); such a token is proven
// by signature, any other by rpc::AuthProof.
bool IsLeaseSecret(std::string_view token);
// The 32-byte public key of a lease's secret. INVALID_ARGUMENT when `secret` is not
// kLeaseSecretPrefix + 64 hex digits.
StatusOr<std::string> LeasePublicKey(std::string_view secret);
// The 64-byte Ed25519 signature of kLeaseSignatureDomain || challenge || client_nonce
// with the lease's secret. INVALID_ARGUMENT for a malformed secret.
StatusOr<std::string> LeaseSignature(std::string_view secret, const std::string& challenge,
                                     const std::string& client_nonce);
// Whether `signature` is that of kLeaseSignatureDomain || challenge || client_nonce by
// the key whose 32-byte public key is `public_key`. False for any malformed input.
bool VerifyLeaseSignature(const std::string& public_key, const std::string& challenge,
                          const std::string& client_nonce, const std::string& signature);
// Lowercase hex and back; FromHex: nullopt unless `hex` is an even number of hex digits.
std::string ToHex(std::string_view bytes);
std::optional<std::string> FromHex(std::string_view hex);

}  // namespace remex::rpc
