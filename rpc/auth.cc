#include "rpc/auth.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <fstream>
#include <iterator>

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

}  // namespace remex::rpc
