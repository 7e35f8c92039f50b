#include "rpc/stream.h"

#include <openssl/x509.h>
#include <kj/exception.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace remex::rpc::detail {

std::vector<asio::const_buffer> ToBuffers(const EncodedFrame& frame) {
  std::vector<asio::const_buffer> buffers;
  for (std::span<const std::byte> piece : frame.Pieces()) {
    buffers.emplace_back(piece.data(), piece.size());
  }
  return buffers;
}

std::vector<asio::const_buffer> ToBuffers(const std::vector<EncodedFrame>& frames) {
  std::vector<std::span<const std::byte>> pieces;
  for (const EncodedFrame& frame : frames) frame.AppendPieces(pieces);
  std::vector<asio::const_buffer> buffers;
  buffers.reserve(pieces.size());
  for (std::span<const std::byte> piece : pieces) buffers.emplace_back(piece.data(), piece.size());
  return buffers;
}

std::string ExceptionMessage(std::exception_ptr e) {
  try {
    std::rethrow_exception(e);
  } catch (const kj::Exception& k) {
    return k.getDescription().cStr();
  } catch (const std::exception& s) {
    return s.what();
  } catch (...) {
    return "unknown exception";
  }
}

namespace {

// Applies what every Remex TLS context shares: TLS 1.2 or later, no compression.
void HardenContext(asio::ssl::context& context) {
  context.set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                      asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 |
                      asio::ssl::context::no_tlsv1_1 | asio::ssl::context::no_compression);
  SSL_CTX_set_min_proto_version(context.native_handle(), TLS1_2_VERSION);
}

// Why OpenSSL could not use `file`: the system's reason when it cannot be opened (OpenSSL
// says only "asio.ssl error" for a missing file), else OpenSSL's.
std::string TlsFileReason(const std::string& file, const error_code& ec) {
  errno = 0;
  if (std::FILE* f = std::fopen(file.c_str(), "rb")) {
    std::fclose(f);
  } else if (errno != 0) {
    return std::string("cannot be read: ") + std::strerror(errno);
  }
  const std::string reason = ec.message();
  return reason == "asio.ssl error" ? "not a usable PEM file (" + reason + ")" : reason;
}

Status TlsFileError(const char* what, const std::string& file, const error_code& ec) {
  return InvalidArgument("TLS " + std::string(what) + " '" + file + "': " + TlsFileReason(file, ec));
}

// A key that cannot be read, or that is not the certificate's (OpenSSL checks the key
// against the certificate loaded before it).
Status TlsKeyError(const std::string& key_file, const std::string& cert_file, const error_code& ec) {
  return InvalidArgument("TLS key '" + key_file + "' cannot be used with certificate '" + cert_file +
                         "': " + TlsFileReason(key_file, ec));
}

}  // namespace

StatusOr<std::unique_ptr<asio::ssl::context>> MakeServerContext(const TlsServerConfig& config) {
  if (config.cert_file.empty() || config.key_file.empty()) {
    return InvalidArgument("TLS needs both a certificate file and a key file");
  }
  auto context = std::make_unique<asio::ssl::context>(asio::ssl::context::tls_server);
  HardenContext(*context);
  error_code ec;
  context->use_certificate_chain_file(config.cert_file, ec);
  if (ec) return TlsFileError("certificate", config.cert_file, ec);
  context->use_private_key_file(config.key_file, asio::ssl::context::pem, ec);
  if (ec) return TlsKeyError(config.key_file, config.cert_file, ec);
  if (!config.client_ca_file.empty()) {
    context->load_verify_file(config.client_ca_file, ec);
    if (ec) return TlsFileError("client CA file", config.client_ca_file, ec);
    context->set_verify_mode(asio::ssl::verify_peer | asio::ssl::verify_fail_if_no_peer_cert);
  }
  return context;
}

StatusOr<std::unique_ptr<asio::ssl::context>> MakeClientContext(const TlsClientConfig& config) {
  if (config.ca_file.empty()) return InvalidArgument("TLS needs the CA file the server's certificate chains to");
  if (config.cert_file.empty() != config.key_file.empty()) {
    return InvalidArgument("a TLS client certificate needs its key, and a key its certificate");
  }
  auto context = std::make_unique<asio::ssl::context>(asio::ssl::context::tls_client);
  HardenContext(*context);
  error_code ec;
  context->load_verify_file(config.ca_file, ec);
  if (ec) return TlsFileError("CA file", config.ca_file, ec);
  context->set_verify_mode(asio::ssl::verify_peer);
  if (!config.cert_file.empty()) {
    context->use_certificate_chain_file(config.cert_file, ec);
    if (ec) return TlsFileError("client certificate", config.cert_file, ec);
    context->use_private_key_file(config.key_file, asio::ssl::context::pem, ec);
    if (ec) return TlsKeyError(config.key_file, config.cert_file, ec);
  }
  return context;
}

// Why a TLS handshake failed, as OpenSSL says it: the certificate check's reason when
// that is what failed.
std::string TlsFailure(Stream& stream, const error_code& ec) {
  std::string reason = ec.message();
  if (SSL* ssl = stream.ssl()) {
    long verify = SSL_get_verify_result(ssl);
    if (verify != X509_V_OK) reason += " (" + std::string(X509_verify_cert_error_string(verify)) + ")";
  }
  return reason;
}

}  // namespace remex::rpc::detail
