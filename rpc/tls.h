// TLS settings of the transport (rpc/transport.h: ServerOptions::tls and
// Client::Connect). A plain header, so that client code can name them without the
// transport's dependencies.
#pragma once

#include <string>

namespace remex::rpc {

// TLS (OpenSSL through Boost.Asio): TLS 1.2 or later, the peer's certificate checked
// against the given CA file(s) (PEM).

struct TlsServerConfig {
  std::string cert_file;  // PEM: the server's certificate, then any intermediates
  std::string key_file;   // PEM: its private key
  // Non-empty: mutual TLS. A client must present a certificate signed by a CA of this
  // PEM file, else its handshake fails and the connection is closed.
  std::string client_ca_file;
};

struct TlsClientConfig {
  // PEM: the CA(s) the server's certificate must chain to. The certificate must also
  // name the host the client connects to (subjectAltName DNS or IP, RFC 6125).
  std::string ca_file;
  // Optional (mutual TLS): the client's certificate and key, both or neither.
  std::string cert_file;
  std::string key_file;
  // The name the server's certificate must carry (and SNI sends) instead of the host
  // connected to: for reaching a server by an address its certificate does not name
  // (a tunnel, a raw IP). Empty: the host.
  std::string server_name;
};

}  // namespace remex::rpc
