// A connection's byte stream (TCP, or TLS over it), the TLS contexts, and helpers the
// server and client sides of the transport share (internal to rpc/: see transport.h).
#pragma once

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <exception>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <sys/socket.h>
#include <sys/uio.h>

#include <climits>

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <openssl/ssl.h>

#include "base/status.h"
#include "rpc/frame.h"
#include "rpc/tls.h"

namespace remex::rpc::detail {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using boost::system::error_code;

// Gather-write buffers over an encoded frame's pieces (of several frames, in order).
std::vector<asio::const_buffer> ToBuffers(const EncodedFrame& frame);
std::vector<asio::const_buffer> ToBuffers(const std::vector<EncodedFrame>& frames);

// What an exception caught by `catch (...)` says.
std::string ExceptionMessage(std::exception_ptr e);

// ---------------------------------------------------------------------------------------
// TLS.

// The first byte of a TLS handshake record (RFC 8446, ContentType handshake(22)).
constexpr unsigned char kTlsHandshakeRecord = 0x16;

// The contexts of the server's and the client's connections (rpc/tls.h): INVALID_ARGUMENT
// naming a file that cannot be used.
StatusOr<std::unique_ptr<asio::ssl::context>> MakeServerContext(const TlsServerConfig& config);
StatusOr<std::unique_ptr<asio::ssl::context>> MakeClientContext(const TlsClientConfig& config);

// Bytes read from a stream ahead of what its reader asked for: a small read (a frame
// header, a message) takes whatever else has arrived too, up to kBytes, so that a small
// frame costs one receive rather than one per piece. Used by both ends of a connection.
class ReadAhead {
 public:
  static constexpr size_t kBytes = 64 * 1024;
  // Reads of fewer bytes than this go through the read-ahead; larger ones straight to
  // their destination.
  static bool Small(size_t bytes) { return bytes < kBytes; }

  bool empty() const { return pos_ == len_; }
  // The read-ahead bytes not taken yet, left in place.
  std::span<const std::byte> Peek() const { return {data_.get() + pos_, len_ - pos_}; }
  // Moves up to buf.size() read-ahead bytes into the front of `buf`; returns how many.
  size_t Take(std::span<std::byte> buf) {
    const size_t k = std::min(buf.size(), len_ - pos_);
    if (k != 0) std::memcpy(buf.data(), data_.get() + pos_, k);
    pos_ += k;
    return k;
  }
  // The whole buffer, to read into when empty(); then Filled(bytes read).
  asio::mutable_buffer Space() {
    if (data_ == nullptr) data_.reset(new std::byte[kBytes]);  // not cleared: written before read
    pos_ = len_ = 0;
    return asio::buffer(data_.get(), kBytes);
  }
  void Filled(size_t n) {
    pos_ = 0;
    len_ = n;
  }

 private:
  std::unique_ptr<std::byte[]> data_;
  size_t pos_ = 0;
  size_t len_ = 0;
};

// The unwritten rest of gather-write buffers, as the iovecs of a sendmsg: the plaintext
// paths of both ends write with their own sendmsg calls (client.cc, the server's
// Connection::WriteNow).
class IovCursor {
 public:
  explicit IovCursor(const std::vector<asio::const_buffer>& buffers) : iov_(buffers.size()) {
    for (size_t i = 0; i < buffers.size(); ++i) {
      iov_[i].iov_base = const_cast<void*>(buffers[i].data());
      iov_[i].iov_len = buffers[i].size();
    }
    SkipEmpty();
  }
  bool done() const { return next_ == iov_.size(); }
  // A message over the rest, at most IOV_MAX pieces of it.
  msghdr Message() {
    msghdr msg{};
    msg.msg_iov = &iov_[next_];
    msg.msg_iovlen = std::min<size_t>(iov_.size() - next_, IOV_MAX);
    return msg;
  }
  // A sendmsg wrote `n` more bytes (at most what is left).
  void Advance(size_t n) {
    while (n > 0 && next_ < iov_.size()) {
      const size_t step = std::min(n, iov_[next_].iov_len);
      iov_[next_].iov_base = static_cast<char*>(iov_[next_].iov_base) + step;
      iov_[next_].iov_len -= step;
      n -= step;
      SkipEmpty();
    }
  }

 private:
  void SkipEmpty() {
    while (next_ < iov_.size() && iov_[next_].iov_len == 0) ++next_;
  }
  std::vector<iovec> iov_;
  size_t next_ = 0;
};

// `buffers` without their first `n` bytes.
inline std::vector<asio::const_buffer> SkipBytes(const std::vector<asio::const_buffer>& buffers, size_t n) {
  std::vector<asio::const_buffer> rest;
  for (const asio::const_buffer& b : buffers) {
    if (n >= b.size()) {
      n -= b.size();
      continue;
    }
    rest.push_back(b + n);
    n = 0;
  }
  return rest;
}

// Writes what the plaintext socket `fd` takes now of `buffers`, without blocking
// (sendmsg with MSG_DONTWAIT, IOV_MAX pieces a call, so a many-frame gather write is one
// system call, where Asio's async_write takes 16 buffers a call and goes through the
// io_context for the rest). Returns the bytes written; `ec` is set on an error other
// than a full socket buffer. Both ends' plaintext paths write this way first (client.cc,
// the server's Connection::WriteNow) and leave only the rest to an async write.
inline size_t WriteAvailable(int fd, const std::vector<asio::const_buffer>& buffers, error_code& ec) {
  IovCursor rest(buffers);
  size_t sent = 0;
  while (!rest.done()) {
    msghdr msg = rest.Message();
    ssize_t k = ::sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (k < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) ec = error_code(errno, boost::system::system_category());
      break;
    }
    sent += static_cast<size_t>(k);
    rest.Advance(static_cast<size_t>(k));
  }
  return sent;
}

// A connection's byte stream: the TCP socket, or TLS over it. Reads and writes go
// through TLS once it is enabled; socket() is always the TCP socket (readiness waits,
// cancel, shutdown and close act on it).
class Stream {
 public:
  explicit Stream(tcp::socket socket) : socket_(std::move(socket)) {}
  template <typename ExecutionContext>
  explicit Stream(ExecutionContext& io) : socket_(io) {}

  tcp::socket& socket() { return socket_; }
  const tcp::socket& socket() const { return socket_; }
  void EnableTls(asio::ssl::context& context) { tls_.emplace(socket_, context); }
  // Later reads and writes bypass TLS (a plaintext answer to a plaintext peer).
  void DropTls() { tls_.reset(); }
  bool tls() const { return tls_.has_value(); }
  SSL* ssl() { return tls_ ? tls_->native_handle() : nullptr; }

  template <typename Handler>
  void AsyncHandshake(asio::ssl::stream_base::handshake_type type, Handler&& handler) {
    tls_->async_handshake(type, std::forward<Handler>(handler));
  }
  template <typename Buffers, typename Handler>
  void AsyncRead(const Buffers& buffers, Handler&& handler) {
    if (tls_) {
      asio::async_read(*tls_, buffers, std::forward<Handler>(handler));
    } else {
      asio::async_read(socket_, buffers, std::forward<Handler>(handler));
    }
  }
  // Reads at least `at_least` bytes into `buffers`, and more where they have arrived.
  template <typename Buffers, typename Handler>
  void AsyncReadAtLeast(const Buffers& buffers, size_t at_least, Handler&& handler) {
    if (tls_) {
      asio::async_read(*tls_, buffers, asio::transfer_at_least(at_least), std::forward<Handler>(handler));
    } else {
      asio::async_read(socket_, buffers, asio::transfer_at_least(at_least), std::forward<Handler>(handler));
    }
  }
  template <typename Buffers, typename Handler>
  void AsyncReadSome(const Buffers& buffers, Handler&& handler) {
    if (tls_) {
      tls_->async_read_some(buffers, std::forward<Handler>(handler));
    } else {
      socket_.async_read_some(buffers, std::forward<Handler>(handler));
    }
  }
  template <typename Buffers, typename Handler>
  void AsyncWrite(const Buffers& buffers, Handler&& handler) {
    if (tls_) {
      asio::async_write(*tls_, buffers, std::forward<Handler>(handler));
    } else {
      asio::async_write(socket_, buffers, std::forward<Handler>(handler));
    }
  }
  // One write step of AsyncWrite with progress: at most this many bytes per system
  // call. The socket takes what fits in its send buffer (a few MiB on loopback), so a
  // step this large costs no extra wait, while a small one (64 KiB) cost a system call
  // and a completion per 64 KiB: a 256 MiB tensorRead reply ran at about 0.65 of raw TCP.
  static constexpr size_t kWriteStepBytes = size_t{4} << 20;

  // AsyncWrite that calls `progress()` before each write step (so at every step of
  // progress the peer lets the write make).
  template <typename Buffers, typename Progress, typename Handler>
  void AsyncWrite(const Buffers& buffers, Progress progress, Handler&& handler) {
    auto condition = [progress](const error_code& ec, size_t) -> size_t {
      progress();
      return ec ? 0 : kWriteStepBytes;
    };
    if (tls_) {
      asio::async_write(*tls_, buffers, condition, std::forward<Handler>(handler));
    } else {
      asio::async_write(socket_, buffers, condition, std::forward<Handler>(handler));
    }
  }

 private:
  tcp::socket socket_;
  std::optional<asio::ssl::stream<tcp::socket&>> tls_;
};

// Why a TLS handshake failed, as OpenSSL says it: the certificate check's reason when
// that is what failed.
std::string TlsFailure(Stream& stream, const error_code& ec);

}  // namespace remex::rpc::detail
