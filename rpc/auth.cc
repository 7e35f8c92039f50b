#include "rpc/auth.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <fstream>
#include <iterator>
#include <memory>

namespace remex::rpc {

StatusOr<std::string> ReadTokenFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return InvalidArgument("cannot read the token file '" + path + "'");
  std::string token((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  while (!token.empty() && (token.back() == '\n' || token.back() == '\r' || token.back() == ' ' ||
                            token.back() == '\t')) {
    token.pop_back();
  }
  if (token.size() < kMinTokenBytes) {
    return InvalidArgument("the token in '" + path + "' has " + std::to_string(token.size()) +
                           " bytes; at least " + std::to_string(kMinTokenBytes) +
                           " are needed (for example: head -c 32 /dev/urandom | base64 > " + path + ")");
  }
  return token;
}

StatusOr<std::string> RandomBytes(size_t n) {
  std::string out(n, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(out.data()), static_cast<int>(n)) != 1) {
    return Internal("OpenSSL RAND_bytes failed");
  }
  return out;
}

std::string AuthProof(const std::string& token, const std::string& role, const std::string& challenge,
                      const std::string& client_nonce) {
  const std::string message = "remex-auth-v1 " + role + challenge + client_nonce;
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), token.data(), static_cast<int>(token.size()),
       reinterpret_cast<const unsigned char*>(message.data()), message.size(), mac, &len);
  return std::string(reinterpret_cast<const char*>(mac), len);
}

bool ProofsEqual(const std::string& a, const std::string& b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

bool BearerTokenMatches(std::string_view authorization, const std::string& token) {
  if (token.empty()) return false;
  constexpr std::string_view kScheme = "bearer ";
  if (authorization.size() < kScheme.size()) return false;
  for (size_t i = 0; i < kScheme.size(); ++i) {
    const char c = authorization[i];
    if ((c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c) != kScheme[i]) return false;
  }
  std::string_view given = authorization.substr(kScheme.size());
  while (!given.empty() && given.front() == ' ') given.remove_prefix(1);
  while (!given.empty() && given.back() == ' ') given.remove_suffix(1);
  return ProofsEqual(std::string(given), token);
}

std::string ToHex(std::string_view bytes) {
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char b : bytes) {
    out.push_back(kHex[b >> 4]);
    out.push_back(kHex[b & 15]);
  }
  return out;
}

std::optional<std::string> FromHex(std::string_view hex) {
  if (hex.size() % 2 != 0) return std::nullopt;
  auto digit = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string out;
  out.reserve(hex.size() / 2);
  for (size_t i = 0; i < hex.size(); i += 2) {
    const int hi = digit(hex[i]), lo = digit(hex[i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out.push_back(static_cast<char>(hi * 16 + lo));
  }
  return out;
}

namespace {

constexpr size_t kLeaseSeedBytes = 32;

struct PkeyDeleter {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
struct MdCtxDeleter {
  void operator()(EVP_MD_CTX* c) const { EVP_MD_CTX_free(c); }
};
using PkeyPtr = std::unique_ptr<EVP_PKEY, PkeyDeleter>;
using MdCtxPtr = std::unique_ptr<EVP_MD_CTX, MdCtxDeleter>;

// The private key of a lease's secret; INVALID_ARGUMENT when malformed.
StatusOr<PkeyPtr> LeasePrivateKey(std::string_view secret) {
  if (!IsLeaseSecret(secret) || secret.size() != kLeaseSecretPrefix.size() + 2 * kLeaseSeedBytes) {
    return InvalidArgument("a lease's secret is '" + std::string(kLeaseSecretPrefix) + "' and " +
                           std::to_string(2 * kLeaseSeedBytes) + " hex digits");
  }
  auto seed = FromHex(secret.substr(kLeaseSecretPrefix.size()));
  if (!seed) return InvalidArgument("a lease's secret has a character that is no hex digit");
  PkeyPtr key(EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, nullptr,
                                           reinterpret_cast<const unsigned char*>(seed->data()), seed->size()));
  OPENSSL_cleanse(seed->data(), seed->size());
  if (!key) return Internal("OpenSSL cannot make an Ed25519 key of a lease's secret");
  return key;
}

std::string LeaseMessage(const std::string& challenge, const std::string& client_nonce) {
  return std::string(kLeaseSignatureDomain) + challenge + client_nonce;
}

}  // namespace

bool IsLeaseSecret(std::string_view token) { return token.substr(0, kLeaseSecretPrefix.size()) == kLeaseSecretPrefix; }

StatusOr<LeaseKeyPair> NewLeaseKeyPair() {
  REMEX_ASSIGN_OR_RETURN(std::string seed, RandomBytes(kLeaseSeedBytes));
  LeaseKeyPair pair;
  pair.secret = std::string(kLeaseSecretPrefix) + ToHex(seed);
  OPENSSL_cleanse(seed.data(), seed.size());
  REMEX_ASSIGN_OR_RETURN(pair.public_key, LeasePublicKey(pair.secret));
  return pair;
}

StatusOr<std::string> LeasePublicKey(std::string_view secret) {
  REMEX_ASSIGN_OR_RETURN(PkeyPtr key, LeasePrivateKey(secret));
  std::string out(kLeasePublicKeyBytes, '\0');
  size_t len = out.size();
  if (EVP_PKEY_get_raw_public_key(key.get(), reinterpret_cast<unsigned char*>(out.data()), &len) != 1 ||
      len != kLeasePublicKeyBytes) {
    return Internal("OpenSSL cannot derive a lease's public key");
  }
  return out;
}

StatusOr<std::string> LeaseSignature(std::string_view secret, const std::string& challenge,
                                     const std::string& client_nonce) {
  REMEX_ASSIGN_OR_RETURN(PkeyPtr key, LeasePrivateKey(secret));
  MdCtxPtr ctx(EVP_MD_CTX_new());
  const std::string message = LeaseMessage(challenge, client_nonce);
  std::string signature(kLeaseSignatureBytes, '\0');
  size_t len = signature.size();
  if (!ctx || EVP_DigestSignInit(ctx.get(), nullptr, nullptr, nullptr, key.get()) != 1 ||
      EVP_DigestSign(ctx.get(), reinterpret_cast<unsigned char*>(signature.data()), &len,
                     reinterpret_cast<const unsigned char*>(message.data()), message.size()) != 1 ||
      len != kLeaseSignatureBytes) {
    return Internal("OpenSSL cannot sign with a lease's key");
  }
  return signature;
}

bool VerifyLeaseSignature(const std::string& public_key, const std::string& challenge,
                          const std::string& client_nonce, const std::string& signature) {
  if (public_key.size() != kLeasePublicKeyBytes || signature.size() != kLeaseSignatureBytes) return false;
  PkeyPtr key(EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nullptr,
                                          reinterpret_cast<const unsigned char*>(public_key.data()), public_key.size()));
  MdCtxPtr ctx(EVP_MD_CTX_new());
  if (!key || !ctx || EVP_DigestVerifyInit(ctx.get(), nullptr, nullptr, nullptr, key.get()) != 1) return false;
  const std::string message = LeaseMessage(challenge, client_nonce);
  return EVP_DigestVerify(ctx.get(), reinterpret_cast<const unsigned char*>(signature.data()), signature.size(),
                          reinterpret_cast<const unsigned char*>(message.data()), message.size()) == 1;
}

}  // namespace remex::rpc
