// Token authentication of sessions (remex-server --token-file, client --token-file or
// REMEX_TOKEN): a challenge-response over a shared secret, so that the token itself
// never crosses the wire (see Authenticate in rpc/remex.capnp). HMAC-SHA256 and the
// random bytes come from OpenSSL (libcrypto).
#pragma once

#include <cstddef>
#include <string>

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

}  // namespace remex::rpc
