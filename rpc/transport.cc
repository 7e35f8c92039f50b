#include "rpc/transport.h"

#include <array>
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <exception>
#include <future>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <kj/exception.h>

#include "rpc/wire_util.h"

namespace remex::rpc {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using boost::system::error_code;

static_assert(static_cast<int>(wire::ErrorCode::OK) == static_cast<int>(StatusCode::kOk));
static_assert(static_cast<int>(wire::ErrorCode::INVALID_ARGUMENT) ==
              static_cast<int>(StatusCode::kInvalidArgument));
static_assert(static_cast<int>(wire::ErrorCode::FAILED_PRECONDITION) ==
              static_cast<int>(StatusCode::kFailedPrecondition));
static_assert(static_cast<int>(wire::ErrorCode::INTERNAL) ==
              static_cast<int>(StatusCode::kInternal));
static_assert(static_cast<int>(wire::ErrorCode::DATA_LOSS) ==
              static_cast<int>(StatusCode::kDataLoss));
constexpr int kMaxStatusCode = static_cast<int>(StatusCode::kDataLoss);

// After an error reply the server stops sending, then reads and discards what the peer
// still sends (so the reply is not lost to a TCP reset) for at most this long / much.
constexpr auto kLingerTime = std::chrono::seconds(2);
constexpr size_t kMaxLingerBytes = 4u << 20;
// Replies whose compressible attachments reach this many bytes are encoded on the
// server's encode threads (ServerOptions::encode_threads), not on the I/O thread.
constexpr uint64_t kOffThreadEncodeBytes = uint64_t{1} << 20;

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

// One line of the server's connection log (ServerOptions::log; stderr when unset).
void LogLine(const ServerOptions& options, const std::string& line) {
  if (options.log) {
    try {
      options.log(line);
    } catch (...) {
      std::fprintf(stderr, "remex rpc server: %s (the log sink threw)\n", line.c_str());
    }
    return;
  }
  std::fprintf(stderr, "remex rpc server: %s\n", line.c_str());
}

}  // namespace

// ---------------------------------------------------------------------------------------
// Errors on the wire.

Status ErrorFromReply(const wire::Reply::Reader& reply) {
  if (!reply.isError()) return OkStatus();
  wire::Error::Reader error = reply.getError();
  int code = static_cast<int>(error.getCode());
  StatusCode status_code = (code > 0 && code <= kMaxStatusCode) ? static_cast<StatusCode>(code)
                                                                : StatusCode::kUnknown;
  capnp::Text::Reader message = error.getMessage();
  return Status(status_code, std::string(message.begin(), message.size()));
}

void FillError(const Status& status, wire::Error::Builder error) {
  error.setCode(static_cast<wire::ErrorCode>(static_cast<uint16_t>(status.code())));
  error.setMessage(status.message());
}

OutFrame MakeErrorReply(uint64_t request_id, const Status& status) {
  OutFrame frame;
  frame.request_id = request_id;
  frame.message = std::make_unique<capnp::MallocMessageBuilder>();
  FillError(status, frame.message->initRoot<wire::Reply>().initError());
  return frame;
}

// ---------------------------------------------------------------------------------------
// Server.

ConnectionHandler::~ConnectionHandler() = default;

void ConnectionHandler::HandleAsync(Frame& request, ReplyFn reply) { reply(Handle(request)); }

void ConnectionHandler::OnPeerClosed() {}

void ConnectionHandler::OnRequestFailed(const Frame& /*request_so_far*/, const Status& /*why*/) {}

Status ConnectionHandler::AdmitAttachment(const Frame& /*request_so_far*/, size_t /*index*/,
                                          uint64_t /*frame_raw_bytes*/) {
  return OkStatus();
}

std::span<std::byte> ConnectionHandler::AttachmentDestination(const Frame& /*request_so_far*/,
                                                             size_t /*index*/,
                                                             uint64_t /*raw_size*/) {
  return {};
}

namespace {

// ---------------------------------------------------------------------------------------
// TLS.

// The first byte of a TLS handshake record (RFC 8446, ContentType handshake(22)).
constexpr unsigned char kTlsHandshakeRecord = 0x16;

// Applies what every Remex TLS context shares: TLS 1.2 or later, no compression.
void HardenContext(asio::ssl::context& context) {
  context.set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                      asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 |
                      asio::ssl::context::no_tlsv1_1 | asio::ssl::context::no_compression);
  SSL_CTX_set_min_proto_version(context.native_handle(), TLS1_2_VERSION);
}

Status TlsFileError(const char* what, const std::string& file, const error_code& ec) {
  return InvalidArgument("TLS " + std::string(what) + " '" + file + "': " + ec.message());
}

// A key that cannot be read, or that is not the certificate's (OpenSSL checks the key
// against the certificate loaded before it).
Status TlsKeyError(const std::string& key_file, const std::string& cert_file, const error_code& ec) {
  return InvalidArgument("TLS key '" + key_file + "' cannot be used with certificate '" + cert_file +
                         "': " + ec.message());
}

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
  // AsyncWrite that calls `progress()` before each write step (so at every step of
  // progress the peer lets the write make).
  template <typename Buffers, typename Progress, typename Handler>
  void AsyncWrite(const Buffers& buffers, Progress progress, Handler&& handler) {
    auto condition = [progress](const error_code& ec, size_t) -> size_t {
      progress();
      return ec ? 0 : 65536;
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
std::string TlsFailure(Stream& stream, const error_code& ec) {
  std::string reason = ec.message();
  if (SSL* ssl = stream.ssl()) {
    long verify = SSL_get_verify_result(ssl);
    if (verify != X509_V_OK) reason += " (" + std::string(X509_verify_cert_error_string(verify)) + ")";
  }
  return reason;
}

// One accepted connection. All its work runs on its strand (the socket's executor): a
// single chain of reads, the handler call and the reply write, so frames are handled
// one at a time in order. The chain's handlers hold the shared_ptr; when the chain ends
// the Connection, and with it the ConnectionHandler, is destroyed.
class Connection : public std::enable_shared_from_this<Connection> {
 public:
  // `tls` (the server's context, which outlives its connections): the connection
  // speaks TLS; nullptr: plaintext.
  // `encode_pool` (the server's, likewise; nullptr: none) encodes large replies.
  Connection(tcp::socket socket, uint64_t id, const ServerOptions& options, ConnectionStats& totals,
             asio::ssl::context* tls, asio::thread_pool* encode_pool)
      : stream_(std::move(socket)), socket_(stream_.socket()), timer_(socket_.get_executor()),
        deadline_(socket_.get_executor()), options_(options), totals_(totals), tls_context_(tls),
        encode_pool_(encode_pool) {
    info_.id = id;
    info_.stats = &stats_;
    error_code ec;
    tcp::endpoint peer = socket_.remote_endpoint(ec);
    if (!ec) {
      address_ = peer.address().to_string();
      info_.peer = address_ + ":" + std::to_string(peer.port());
    }
    socket_.set_option(tcp::no_delay(true), ec);
  }

  // The peer's address without its port ("" when unknown).
  const std::string& address() const { return address_; }
  bool closed() const { return closed_.load(); }

  // Answers with `status` (request_id 0) and closes, without a handler.
  void Refuse(const Status& status) {
    asio::dispatch(socket_.get_executor(),
                   [self = shared_from_this(), status] { self->Fail(0, status, "connection refused"); });
  }

  ~Connection() { handler_.reset(); }  // explicitly first: the handler may read stats_

  const ConnectionInfo& info() const { return info_; }

  void Start(std::unique_ptr<ConnectionHandler> handler) {
    handler_ = std::move(handler);
    asio::dispatch(socket_.get_executor(), [self = shared_from_this()] {
      if (self->tls_context_ != nullptr) return self->DetectTls();
      self->ReadHeader();
    });
  }

  // Thread-safe: closes the socket on the connection's strand.
  void PostClose() {
    asio::post(socket_.get_executor(), [self = shared_from_this()] { self->CloseNow(); });
  }

 private:
  void CloseNow() {
    error_code ec;
    socket_.shutdown(tcp::socket::shutdown_both, ec);
    socket_.close(ec);
    timer_.cancel();
    deadline_.cancel();
    closed_ = true;
  }

  void CountRead(size_t n) {
    stats_.bytes_read += n;
    totals_.bytes_read += n;
  }
  void CountWritten(size_t n) {
    stats_.bytes_written += n;
    totals_.bytes_written += n;
  }

  // (Re)arms the connection's deadline: `after` from now the socket is closed, unless
  // the deadline is armed again or cancelled first. Zero: none.
  void ArmDeadline(std::chrono::milliseconds after, const char* what) {
    deadline_.cancel();
    if (after.count() <= 0) return;
    deadline_.expires_after(after);
    // A weak reference: a pending deadline must not keep an ended connection (and its
    // session) alive.
    deadline_.async_wait([weak = weak_from_this(), what, after](error_code ec) {
      auto self = weak.lock();
      if (ec || !self) return;  // cancelled, re-armed, or the connection is gone
      LogLine(self->options_, "closing connection " + self->info_.peer + ": " + what + " (" +
                                  std::to_string(after.count()) + " ms)");
      self->CloseNow();
    });
  }

  // TLS connections: the first byte tells a TLS handshake from a plaintext Remex frame,
  // which is answered in plaintext (its client would not understand TLS alerts).
  void DetectTls() {
    ArmDeadline(options_.read_timeout, "no TLS handshake past the read timeout");
    socket_.async_wait(tcp::socket::wait_read, [self = shared_from_this()](error_code ec) {
      if (ec) return self->CloseNow();
      unsigned char first = 0;
      error_code peek_ec;
      size_t n = self->socket_.receive(asio::buffer(&first, 1), tcp::socket::message_peek, peek_ec);
      if (peek_ec || n == 0) return self->CloseNow();
      if (first != kTlsHandshakeRecord) {
        return self->Fail(0,
                          FailedPrecondition("this server accepts TLS connections only: connect with "
                                             "--tls-ca CA.pem (a plaintext Remex frame arrived)"),
                          "plaintext frame refused");
      }
      self->stream_.EnableTls(*self->tls_context_);
      self->stream_.AsyncHandshake(asio::ssl::stream_base::server, [self](error_code ec) {
        if (ec) {
          LogLine(self->options_,
                  "TLS handshake with " + self->info_.peer + " failed: " + TlsFailure(self->stream_, ec));
          return self->CloseNow();
        }
        self->ReadHeader();
      });
    });
  }

  void ReadHeader() {
    ArmDeadline(options_.idle_timeout, "idle past the idle timeout");
    stream_.AsyncRead(asio::buffer(header_buf_),
                     [self = shared_from_this()](error_code ec, size_t n) {
                       self->CountRead(n);
                       if (!ec) self->OnHeader();
                     });
  }

  // Every read of a frame in progress must complete within the read timeout.
  void FrameProgress() { ArmDeadline(options_.read_timeout, "no progress on a frame past the read timeout"); }

  void OnHeader() {
    FrameProgress();
    StatusOr<FrameHeader> header = DecodeFrameHeader(header_buf_);
    if (!header.ok()) return Fail(0, header.status(), "frame header refused");
    header_ = *header;
    Status status = CheckFrameHeader(header_, options_.limits);
    if (!status.ok()) {
      return Fail(header_.request_id, status,
                  "frame header of request " + std::to_string(header_.request_id) + " refused");
    }
    request_ = Frame();
    request_.request_id = header_.request_id;
    request_.flags = header_.flags;
    request_.major = header_.major;
    request_.minor = header_.minor;
    request_.message = kj::heapArray<capnp::word>(header_.message_bytes / sizeof(capnp::word));
    stream_.AsyncRead(asio::buffer(request_.message.begin(), header_.message_bytes),
                     [self = shared_from_this()](error_code ec, size_t n) {
                       self->CountRead(n);
                       if (!ec) self->OnMessage();
                     });
  }

  void OnMessage() {
    Status status = ValidateMessage(request_.message.asPtr());
    if (!status.ok()) {
      return Fail(header_.request_id, status, "message of request " + std::to_string(header_.request_id) + " refused");
    }
    request_.attachments.resize(header_.attachment_count);
    request_.attachment_in_place.assign(header_.attachment_count, false);
    next_attachment_ = 0;
    frame_raw_bytes_ = 0;
    ReadAttachmentHeader();
  }

  void ReadAttachmentHeader() {
    if (next_attachment_ == header_.attachment_count) return Dispatch();
    stream_.AsyncRead(asio::buffer(attachment_header_buf_),
                     [self = shared_from_this()](error_code ec, size_t n) {
                       self->CountRead(n);
                       if (!ec) self->OnAttachmentHeader();
                     });
  }

  void OnAttachmentHeader() {
    FrameProgress();
    std::string context = "attachment " + std::to_string(next_attachment_);
    StatusOr<AttachmentHeader> header =
        DecodeAttachmentHeader(attachment_header_buf_, options_.limits);
    if (!header.ok()) return Fail(header_.request_id, header.status().WithContext(context), Refused());
    attachment_ = *header;
    // Before anything is allocated for it: the frame's attachments together stay bounded.
    frame_raw_bytes_ += attachment_.raw_size;
    Status total = CheckFrameAttachmentBytes(frame_raw_bytes_, options_.limits);
    if (!total.ok()) return Fail(header_.request_id, total.WithContext(context), Refused());
    std::span<std::byte> destination;
    try {
      Status admitted = handler_->AdmitAttachment(request_, next_attachment_, frame_raw_bytes_);
      if (!admitted.ok()) return Fail(header_.request_id, admitted.WithContext(context), Refused());
      destination = handler_->AttachmentDestination(request_, next_attachment_, attachment_.raw_size);
    } catch (...) {
      return Fail(header_.request_id,
                  Internal("choosing the destination of " + context + ": " +
                           ExceptionMessage(std::current_exception())),
                  Refused());
    }
    Status status;
    if (destination.empty()) {
      status = reader_.Begin(attachment_, &request_.attachments[next_attachment_]);
    } else if (destination.size() != attachment_.raw_size) {
      status = Internal("the handler chose a destination of " +
                        std::to_string(destination.size()) + " bytes for " +
                        std::to_string(attachment_.raw_size));
    } else {
      request_.attachment_in_place[next_attachment_] = true;
      status = reader_.Begin(attachment_, destination);
    }
    if (!status.ok()) return Fail(header_.request_id, status.WithContext(context), Refused());
    ReadAttachmentChunk();
  }

  void ReadAttachmentChunk() {
    if (reader_.done()) {
      stats_.attachment_raw_received += attachment_.raw_size;
      stats_.attachment_wire_received += attachment_.wire_size;
      totals_.attachment_raw_received += attachment_.raw_size;
      totals_.attachment_wire_received += attachment_.wire_size;
      ++next_attachment_;
      return ReadAttachmentHeader();
    }
    std::span<std::byte> buf = reader_.NextBuffer();
    stream_.AsyncRead(asio::buffer(buf.data(), buf.size()),
                     [self = shared_from_this()](error_code ec, size_t n) {
                       self->CountRead(n);
                       if (ec) return;
                       self->FrameProgress();
                       Status status = self->reader_.Commit();
                       if (!status.ok()) {
                         return self->Fail(self->header_.request_id,
                                           status.WithContext("attachment " +
                                                              std::to_string(self->next_attachment_)),
                                           self->Refused());
                       }
                       self->ReadAttachmentChunk();
                     });
  }

  void Dispatch() {
    uint64_t id = request_.request_id;
    uint16_t peer_minor = request_.minor;
    bool uncompressed = (request_.flags & kFlagUncompressedReply) != 0;
    auto replied = std::make_shared<std::atomic<bool>>(false);
    auto self = shared_from_this();
    auto reply_fn = [self, id, peer_minor, uncompressed, replied](OutFrame reply) {
      if (replied->exchange(true)) return;  // one reply per request
      auto frame = std::make_shared<OutFrame>(std::move(reply));
      asio::dispatch(self->socket_.get_executor(), [self, id, peer_minor, uncompressed, frame] {
        self->Finish(std::move(*frame), id, peer_minor, uncompressed);
      });
    };
    // No deadline while the server works; the peer hanging up meanwhile is noticed.
    deadline_.cancel();
    handling_ = true;
    WatchPeer();
    try {
      handler_->HandleAsync(request_, reply_fn);
    } catch (...) {
      reply_fn(MakeErrorReply(id, Internal("request handler failed: " +
                                           ExceptionMessage(std::current_exception()))));
    }
  }

  // While a request is handled, waits for the socket to turn readable: either the next
  // (pipelined) frame, left unread, or the end of the connection, which the handler is
  // told about so that it can cancel the request's work.
  void WatchPeer() {
    socket_.async_wait(tcp::socket::wait_read, [weak = weak_from_this()](error_code ec) {
      auto self = weak.lock();
      if (ec || !self || !self->handling_) return;
      // Readable with nothing to read: the peer closed (or reset) the connection.
      error_code available_ec;
      size_t n = self->socket_.available(available_ec);
      if ((n == 0 || available_ec) && self->handler_) self->handler_->OnPeerClosed();
      // Data (a pipelined frame): stop watching; it is read after the reply.
    });
  }

  // Writes the reply to the request being handled, then reads the next frame.
  void Finish(OutFrame reply, uint64_t id, uint16_t peer_minor, bool uncompressed) {
    if (reply.message == nullptr) {
      reply = MakeErrorReply(id, Internal("request handler returned no reply message"));
    }
    ++stats_.frames_handled;
    ++totals_.frames_handled;
    handling_ = false;
    error_code ignored;
    socket_.cancel(ignored);  // ends WatchPeer's wait
    request_ = Frame();  // the request's memory is not needed while replying
    Write(std::move(reply), id, peer_minor, /*close_after=*/false, uncompressed);
  }

  // "<kind> request <id> refused", for a frame whose message has been validated.
  std::string Refused() const {
    std::string kind = "unreadable";
    try {
      auto reader = request_.Reader();
      kind = RequestKindName(reader.getRoot<wire::Request>());
    } catch (...) {
    }
    return kind + " request " + std::to_string(header_.request_id) + " refused";
  }

  // Answers with an error and closes the connection; logs one line naming the peer,
  // `what` was refused, and the status.
  void Fail(uint64_t request_id, const Status& status, const std::string& what) {
    LogLine(options_, info_.peer + ": " + what + ": " + status.ToString() + "; closing the connection");
    const auto& in_place = request_.attachment_in_place;
    if (handler_ && std::find(in_place.begin(), in_place.end(), true) != in_place.end()) {
      try {
        handler_->OnRequestFailed(request_, status);
      } catch (...) {
        LogLine(options_, "OnRequestFailed threw: " + ExceptionMessage(std::current_exception()));
      }
    }
    Write(MakeErrorReply(request_id, status), request_id, /*peer_minor=*/0,
          /*close_after=*/true);
  }

  void Write(OutFrame reply, uint64_t request_id, uint16_t peer_minor, bool close_after,
             bool uncompressed = false) {
    reply.request_id = request_id;
    EncodeOptions encode;
    encode.compression = uncompressed ? CompressionSetting(CompressionMode::kNone) : options_.compression;
    encode.compression_level = options_.compression_level;
    encode.peer_minor = peer_minor;
    encode.limits = options_.limits;
    uint64_t compressible = 0;
    for (const OutAttachment& a : reply.attachments) compressible += a.compress ? a.size : 0;
    const bool compresses = static_cast<bool>(encode.compression);
    if (encode_pool_ != nullptr && compresses && compressible >= kOffThreadEncodeBytes) {
      // Off the I/O thread: the connection reads nothing until this reply is written, so
      // nothing else of it runs meanwhile; the write itself goes back to its strand.
      auto frame = std::make_shared<OutFrame>(std::move(reply));
      asio::post(*encode_pool_, [self = shared_from_this(), frame, encode, request_id, close_after] {
        auto encoded = std::make_shared<StatusOr<EncodedFrame>>(EncodeFrame(*frame, encode));
        asio::dispatch(self->socket_.get_executor(), [self, encoded, encode, request_id, close_after] {
          self->WriteEncoded(std::move(*encoded), encode, request_id, close_after);
        });
      });
      return;
    }
    WriteEncoded(EncodeFrame(reply, encode), encode, request_id, close_after);
  }

  void WriteEncoded(StatusOr<EncodedFrame> encoded, const EncodeOptions& encode, uint64_t request_id,
                    bool close_after) {
    if (!encoded.ok()) {
      LogLine(options_, info_.peer + ": the reply to request " + std::to_string(request_id) +
                            " could not be encoded: " + encoded.status().ToString());
      OutFrame error = MakeErrorReply(request_id, encoded.status().WithContext("encoding reply"));
      encoded = EncodeFrame(error, encode);
      if (!encoded.ok()) return CloseNow();
    }
    out_.emplace(std::move(encoded).value());
    out_buffers_ = ToBuffers(*out_);
    ArmWriteDeadline();
    stream_.AsyncWrite(out_buffers_,
                      [weak = weak_from_this()] {
                        if (auto self = weak.lock()) self->write_progress_at_ = std::chrono::steady_clock::now();
                      },
                      [self = shared_from_this(), close_after](error_code ec, size_t n) {
                        self->deadline_.cancel();
                        self->CountWritten(n);
                        if (!ec) {
                          self->stats_.attachment_raw_sent += self->out_->attachment_raw_bytes();
                          self->stats_.attachment_wire_sent += self->out_->attachment_wire_bytes();
                          self->totals_.attachment_raw_sent += self->out_->attachment_raw_bytes();
                          self->totals_.attachment_wire_sent += self->out_->attachment_wire_bytes();
                        }
                        self->out_.reset();
                        self->out_buffers_.clear();
                        if (ec) return;
                        if (close_after) {
                          self->LingeringClose();
                        } else {
                          self->ReadHeader();
                        }
                      });
  }

  // Closes the connection once the peer has taken no byte of the reply being written
  // for options_.write_timeout (a client that stops reading holds no connection).
  void ArmWriteDeadline() {
    deadline_.cancel();
    if (options_.write_timeout.count() <= 0) return;
    write_progress_at_ = std::chrono::steady_clock::now();
    deadline_.expires_after(options_.write_timeout);
    deadline_.async_wait([weak = weak_from_this()](error_code ec) {
      if (auto self = weak.lock(); self && !ec) self->OnWriteDeadline();
    });
  }

  void OnWriteDeadline() {
    if (!out_) return;  // the write has ended
    const auto due = write_progress_at_ + options_.write_timeout;
    if (std::chrono::steady_clock::now() < due) {  // progress since: wait for the rest
      deadline_.expires_at(due);
      deadline_.async_wait([weak = weak_from_this()](error_code ec) {
        if (auto self = weak.lock(); self && !ec) self->OnWriteDeadline();
      });
      return;
    }
    LogLine(options_, "closing connection " + info_.peer + ": the peer read nothing of a reply past the write timeout (" +
                          std::to_string(options_.write_timeout.count()) + " ms)");
    CloseNow();
  }

  void LingeringClose() {
    error_code ec;
    socket_.shutdown(tcp::socket::shutdown_send, ec);
    if (ec) return CloseNow();
    timer_.expires_after(kLingerTime);
    timer_.async_wait([self = shared_from_this()](error_code ec) {
      if (!ec) self->CloseNow();
    });
    drain_buf_.resize(64 * 1024);
    drained_ = 0;
    Drain();
  }

  void Drain() {
    socket_.async_read_some(asio::buffer(drain_buf_),
                            [self = shared_from_this()](error_code ec, size_t n) {
                              self->CountRead(n);
                              self->drained_ += n;
                              if (ec || self->drained_ > kMaxLingerBytes) return self->CloseNow();
                              self->Drain();
                            });
  }

  Stream stream_;
  tcp::socket& socket_;          // stream_'s TCP socket
  asio::steady_timer timer_;     // lingering close
  asio::steady_timer deadline_;  // idle and read deadlines
  const ServerOptions& options_;  // owned by the Server, which outlives its connections
  ConnectionStats& totals_;       // the Server's, likewise
  asio::ssl::context* tls_context_;  // the Server's, likewise; nullptr: plaintext
  asio::thread_pool* encode_pool_;   // the Server's, likewise; nullptr: none
  std::chrono::steady_clock::time_point write_progress_at_;  // the reply's last write step
  std::string address_;
  std::atomic<bool> closed_{false};
  bool handling_ = false;  // a request of this connection is with the handler
  uint64_t frame_raw_bytes_ = 0;  // attachment bytes of the frame being read
  ConnectionStats stats_;
  ConnectionInfo info_;

  std::array<std::byte, kFrameHeaderSize> header_buf_{};
  std::array<std::byte, kAttachmentHeaderSize> attachment_header_buf_{};
  FrameHeader header_;
  Frame request_;
  uint32_t next_attachment_ = 0;
  AttachmentHeader attachment_;  // of attachment next_attachment_
  AttachmentReader reader_;

  std::optional<EncodedFrame> out_;
  std::vector<asio::const_buffer> out_buffers_;

  std::vector<std::byte> drain_buf_;
  size_t drained_ = 0;

  // Last member: destroyed before the stats it may read.
  std::unique_ptr<ConnectionHandler> handler_;
};

}  // namespace

class Server::Impl {
 public:
  Impl(ServerOptions options, HandlerFactory factory)
      : options_(std::move(options)),
        factory_(std::move(factory)),
        acceptor_(asio::make_strand(io_)),
        retry_timer_(acceptor_.get_executor()) {}

  ~Impl() { Stop(); }

  Status Start() {
    if (started_) return FailedPrecondition("server already started");
    if (options_.tls) {
      REMEX_ASSIGN_OR_RETURN(tls_context_, MakeServerContext(*options_.tls));
    }
    if (options_.encode_threads > 0) {
      encode_pool_ = std::make_unique<asio::thread_pool>(static_cast<size_t>(options_.encode_threads));
    }
    std::string where = options_.host + ":" + std::to_string(options_.port);
    error_code ec;
    tcp::resolver resolver(io_);
    tcp::resolver::results_type results =
        resolver.resolve(options_.host, std::to_string(options_.port),
                         tcp::resolver::passive | tcp::resolver::numeric_service, ec);
    if (ec) return Unavailable("resolving " + where + ": " + ec.message());
    if (results.empty()) return Unavailable("resolving " + where + ": no address");
    tcp::endpoint endpoint = results.begin()->endpoint();
    acceptor_.open(endpoint.protocol(), ec);
    if (!ec) acceptor_.set_option(tcp::acceptor::reuse_address(true), ec);
    if (!ec) acceptor_.bind(endpoint, ec);
    if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) {
      error_code ignored;
      acceptor_.close(ignored);
      return Unavailable("listening on " + where + ": " + ec.message());
    }
    port_ = acceptor_.local_endpoint(ec).port();
    started_ = true;
    Accept();
    int threads = options_.threads > 0 ? options_.threads : 1;
    for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { Run(); });
    return OkStatus();
  }

  void Stop() {
    if (!started_ || stopped_) return;
    stopped_ = true;
    asio::post(acceptor_.get_executor(), [this] {
      error_code ec;
      acceptor_.close(ec);
      retry_timer_.cancel();
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
      for (std::weak_ptr<Connection>& weak : connections_) {
        if (std::shared_ptr<Connection> connection = weak.lock()) connection->PostClose();
      }
      connections_.clear();
    });
    // Replies being encoded finish first; their writes then fail on the closed sockets.
    if (encode_pool_) encode_pool_->join();
    for (std::thread& thread : threads_) thread.join();
    threads_.clear();
  }

  uint16_t port() const { return port_.load(); }

  void StopAccepting() {
    if (!started_ || stopped_) return;
    std::promise<void> closed;
    auto done = closed.get_future();
    asio::post(acceptor_.get_executor(), [this, &closed] {
      error_code ec;
      acceptor_.close(ec);
      retry_timer_.cancel();
      closed.set_value();
    });
    done.wait();
  }

 private:
  void Run() {
    for (;;) {
      try {
        io_.run();
        return;
      } catch (...) {
        // Handlers catch everything; this is a last resort that keeps the thread alive.
        LogLine(options_, "unexpected exception: " + ExceptionMessage(std::current_exception()));
      }
    }
  }

  // Runs on the acceptor's strand.
  void Accept() {
    acceptor_.async_accept(asio::make_strand(io_), [this](error_code ec, tcp::socket socket) {
      if (ec) {
        if (ec == asio::error::operation_aborted || !acceptor_.is_open()) return;
        // Out of descriptors and the like: try again a little later.
        retry_timer_.expires_after(std::chrono::milliseconds(50));
        retry_timer_.async_wait([this](error_code ec) {
          if (!ec && acceptor_.is_open()) Accept();
        });
        return;
      }
      OnAccept(std::move(socket));
      Accept();
    });
  }

  void OnAccept(tcp::socket socket) {
    uint64_t id;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;
      id = next_id_++;
    }
    auto connection =
        std::make_shared<Connection>(std::move(socket), id, options_, totals_, tls_context_.get(), encode_pool_.get());
    {
      // Connection caps: counted over the connections still open.
      std::lock_guard<std::mutex> lock(mu_);
      std::erase_if(connections_, [](const std::weak_ptr<Connection>& w) {
        auto c = w.lock();
        return !c || c->closed();
      });
      size_t from_address = 0;
      for (const std::weak_ptr<Connection>& w : connections_) {
        if (auto c = w.lock(); c && c->address() == connection->address()) ++from_address;
      }
      Status refused;
      if (options_.max_connections && connections_.size() >= options_.max_connections) {
        refused = ResourceExhausted("the server serves at most " + std::to_string(options_.max_connections) +
                                    " connections at once (max_connections)");
      } else if (options_.max_connections_per_address && from_address >= options_.max_connections_per_address) {
        refused = ResourceExhausted("the server serves at most " +
                                    std::to_string(options_.max_connections_per_address) +
                                    " connections at once from one address (max_connections_per_address; " +
                                    connection->address() + " has " + std::to_string(from_address) + ")");
      }
      if (!refused.ok()) {
        // Tracked until it is closed, so that Stop() still closes it.
        connections_.push_back(connection);
        connection->Refuse(refused);
        return;
      }
    }
    std::unique_ptr<ConnectionHandler> handler;
    try {
      handler = factory_(connection->info());
    } catch (...) {
      LogLine(options_, "connection handler factory failed: " + ExceptionMessage(std::current_exception()));
    }
    if (handler == nullptr) return;  // dropping the connection closes it
    {
      std::lock_guard<std::mutex> lock(mu_);
      connections_.push_back(connection);
    }
    connection->Start(std::move(handler));
  }

  const ServerOptions options_;
  std::unique_ptr<asio::ssl::context> tls_context_;  // set by Start() with options_.tls
  HandlerFactory factory_;
  asio::io_context io_;
  // Declared after io_, so destroyed (joined) before it.
  std::unique_ptr<asio::thread_pool> encode_pool_;
  tcp::acceptor acceptor_;
  asio::steady_timer retry_timer_;
  std::vector<std::thread> threads_;
  std::atomic<uint16_t> port_{0};
  bool started_ = false;
  bool stopped_ = false;

  std::mutex mu_;
  bool stopping_ = false;
  uint64_t next_id_ = 1;
  std::vector<std::weak_ptr<Connection>> connections_;

 public:
  ConnectionStats totals_;
};

Server::Server(ServerOptions options, HandlerFactory factory)
    : impl_(std::make_unique<Impl>(std::move(options), std::move(factory))) {}
Server::~Server() = default;
Status Server::Start() { return impl_->Start(); }
void Server::Stop() { impl_->Stop(); }
void Server::StopAccepting() { impl_->StopAccepting(); }
const ConnectionStats& Server::totals() const { return impl_->totals_; }
uint16_t Server::port() const { return impl_->port(); }

// ---------------------------------------------------------------------------------------
// Client.

class Client::Impl {
 public:
  Impl() : stream_(io_), socket_(stream_.socket()), timer_(io_) { encode_.peer_minor = 0; }  // until the server speaks

  Status Connect(const std::string& host, uint16_t port, const std::optional<TlsClientConfig>& tls) {
    if (tls) {
      REMEX_ASSIGN_OR_RETURN(tls_context_, MakeClientContext(*tls));
      tls_server_name_ = tls->server_name;
    }
    std::string where = host + ":" + std::to_string(port);
    tcp::resolver resolver(io_);
    resolver_ = &resolver;
    Arm();
    bool done = false;
    error_code ec;
    tcp::resolver::results_type results;
    resolver.async_resolve(host, std::to_string(port), tcp::resolver::numeric_service,
                           [&](error_code e, tcp::resolver::results_type r) {
                             ec = e;
                             results = std::move(r);
                             done = true;
                           });
    Await(done);
    resolver_ = nullptr;
    if (!timed_out_ && !ec) {
      done = false;
      asio::async_connect(socket_, results, [&](error_code e, const tcp::endpoint&) {
        ec = e;
        done = true;
      });
      Await(done);
    }
    Disarm();
    if (timed_out_) {
      return Break(DeadlineExceeded("connecting to " + where + ": no connection within " +
                                    std::to_string(timeout_.count()) + " ms"));
    }
    if (ec) return Break(Unavailable("connecting to " + where + ": " + ec.message()));
    socket_.set_option(tcp::no_delay(true), ec);
    if (tls_context_ != nullptr) return Handshake(tls_server_name_.empty() ? host : tls_server_name_, where);
    return OkStatus();
  }

  // The client's TLS handshake, under the connect deadline: the server's certificate
  // must chain to the CA and name `host` (a DNS name or an IP address: the host
  // connected to, or TlsClientConfig::server_name).
  Status Handshake(const std::string& host, const std::string& where) {
    stream_.EnableTls(*tls_context_);
    error_code address_ec;
    asio::ip::make_address(host, address_ec);
    if (address_ec) SSL_set_tlsext_host_name(stream_.ssl(), host.c_str());  // SNI, for names only
    X509_VERIFY_PARAM* param = SSL_get0_param(stream_.ssl());
    if (address_ec) {
      X509_VERIFY_PARAM_set1_host(param, host.c_str(), host.size());
    } else {
      X509_VERIFY_PARAM_set1_ip_asc(param, host.c_str());
    }
    Arm();
    bool done = false;
    error_code ec;
    stream_.AsyncHandshake(asio::ssl::stream_base::client, [&](error_code e) {
      ec = e;
      done = true;
    });
    Await(done);
    Disarm();
    if (timed_out_) {
      return Break(DeadlineExceeded("TLS handshake with " + where + ": not done within " +
                                    std::to_string(timeout_.count()) + " ms"));
    }
    if (ec) {
      std::string reason = TlsFailure(stream_, ec);
      if (reason.find("wrong version number") != std::string::npos ||
          reason.find("packet length too long") != std::string::npos) {
        reason += " (the server does not speak TLS: is it listening with --tls-cert?)";
      }
      return Break(Unavailable("TLS handshake with " + where + " failed: " + reason));
    }
    return OkStatus();
  }

  // A client that sends uncompressed asks for uncompressed replies too.
  void MarkFlags(OutFrame& frame) const {
    if (encode_.compression == CompressionMode::kNone) frame.flags |= kFlagUncompressedReply;
  }

  Status Send(OutFrame& frame) {
    if (!broken_.ok()) return Unavailable("connection is closed: " + broken_.ToString());
    if (frame.request_id == 0) frame.request_id = next_request_id_++;
    MarkFlags(frame);
    std::vector<EncodedFrame> encoded;
    REMEX_ASSIGN_OR_RETURN(EncodedFrame e, EncodeFrame(frame, encode_));
    encoded.push_back(std::move(e));
    return Write(encoded, /*read_meanwhile=*/false);
  }

  Status SendMany(std::vector<OutFrame>& frames) {
    if (!broken_.ok()) return Unavailable("connection is closed: " + broken_.ToString());
    std::vector<EncodedFrame> encoded;
    encoded.reserve(frames.size());
    for (size_t i = 0; i < frames.size(); ++i) {
      OutFrame& frame = frames[i];
      if (frame.request_id == 0) frame.request_id = next_request_id_++;
      MarkFlags(frame);
      StatusOr<EncodedFrame> e = EncodeFrame(frame, encode_);
      if (!e.ok()) return e.status().WithContext("frame " + std::to_string(i));
      encoded.push_back(std::move(e).value());
    }
    if (encoded.empty()) return OkStatus();
    return Write(encoded, /*read_meanwhile=*/true);
  }

  StatusOr<Frame> Receive(const Client::ReceiveDestination& destination = nullptr) {
    if (!broken_.ok()) return Unavailable("connection is closed: " + broken_.ToString());
    Arm();
    StatusOr<Frame> frame = ReceiveFrame(destination);
    Disarm();
    if (!frame.ok()) return Break(frame.status());
    return frame;
  }

  StatusOr<Frame> Call(OutFrame& frame) {
    REMEX_RETURN_IF_ERROR(Send(frame));
    REMEX_ASSIGN_OR_RETURN(Frame reply, Receive());
    if (reply.request_id != frame.request_id) {
      Status error;
      try {
        capnp::FlatArrayMessageReader reader = reply.Reader();
        error = ErrorFromReply(reader.getRoot<wire::Reply>());
      } catch (...) {
      }
      Status mismatch = Internal("reply request_id " + std::to_string(reply.request_id) +
                                 " does not match request " + std::to_string(frame.request_id));
      // The stream is out of step; the connection cannot be used further.
      (void)Break(mismatch);
      if (!error.ok()) return error.WithContext("server");
      return mismatch;
    }
    return reply;
  }

  void Close() {
    error_code ec;
    socket_.shutdown(tcp::socket::shutdown_both, ec);
    socket_.close(ec);
    if (broken_.ok()) broken_ = Unavailable("closed by the client");
  }

  asio::io_context io_;
  std::unique_ptr<asio::ssl::context> tls_context_;  // with TLS; outlives stream_
  std::string tls_server_name_;                      // TlsClientConfig::server_name
  Stream stream_;
  tcp::socket& socket_;  // stream_'s TCP socket
  asio::steady_timer timer_;
  std::chrono::milliseconds timeout_{0};
  EncodeOptions encode_;
  Limits limits_;
  uint64_t next_request_id_ = 1;
  uint64_t bytes_sent_ = 0;
  uint64_t bytes_received_ = 0;
  uint64_t writes_ = 0;
  AttachmentStats attachment_stats_;
  Status broken_;  // not OK once the connection is unusable

 private:
  // Writes the frames with one gather write. With `read_meanwhile`, bytes that arrive
  // while the write is in progress are appended to inbound_.
  Status Write(const std::vector<EncodedFrame>& frames, bool read_meanwhile) {
    std::vector<asio::const_buffer> buffers = ToBuffers(frames);
    ++writes_;
    Arm();
    bool done = false;
    error_code ec;
    size_t n = 0;
    stream_.AsyncWrite(buffers, [&](error_code e, size_t k) {
      ec = e;
      n = k;
      done = true;
    });
    bool read_idle = true;
    std::array<std::byte, 64 * 1024> read_buf;
    std::function<void()> read_some = [&] {
      read_idle = false;
      stream_.AsyncReadSome(asio::buffer(read_buf), [&](error_code e, size_t k) {
        read_idle = true;
        bytes_received_ += k;
        inbound_.insert(inbound_.end(), read_buf.begin(), read_buf.begin() + k);
        // A read error is left for Receive to find on the socket again.
        if (!e && !done) read_some();
      });
    };
    if (read_meanwhile) read_some();
    Await(done);
    if (!read_idle) {
      error_code ignored;
      socket_.cancel(ignored);  // completes the read (with operation_aborted, or its data)
      Await(read_idle);
    }
    Disarm();
    bytes_sent_ += n;
    if (timed_out_) return Break(DeadlineExceeded("sending frame: " + DeadlineText()));
    if (ec) return Break(Unavailable("sending frame: " + ec.message()));
    for (const EncodedFrame& frame : frames) {
      attachment_stats_.raw_sent += frame.attachment_raw_bytes();
      attachment_stats_.wire_sent += frame.attachment_wire_bytes();
    }
    return OkStatus();
  }

  StatusOr<Frame> ReceiveFrame(const Client::ReceiveDestination& destination) {
    std::array<std::byte, kFrameHeaderSize> header_buf;
    REMEX_RETURN_IF_ERROR(ReadExact(header_buf));
    StatusOr<FrameHeader> decoded = DecodeFrameHeader(header_buf);
    if (!decoded.ok()) return decoded.status().WithContext("frame from server");
    const FrameHeader& header = *decoded;
    REMEX_RETURN_IF_ERROR(CheckFrameHeader(header, limits_).WithContext("frame from server"));
    encode_.peer_minor = std::min(header.minor, kProtocolMinor);
    Frame frame;
    frame.request_id = header.request_id;
    frame.flags = header.flags;
    frame.major = header.major;
    frame.minor = header.minor;
    frame.message = kj::heapArray<capnp::word>(header.message_bytes / sizeof(capnp::word));
    REMEX_RETURN_IF_ERROR(ReadExact(std::span<std::byte>(
        reinterpret_cast<std::byte*>(frame.message.begin()), header.message_bytes)));
    REMEX_RETURN_IF_ERROR(
        ValidateMessage(frame.message.asPtr()).WithContext("frame from server"));
    frame.attachments.resize(header.attachment_count);
    frame.attachment_in_place.assign(header.attachment_count, false);
    uint64_t frame_raw_bytes = 0;
    for (uint32_t i = 0; i < header.attachment_count; ++i) {
      std::string context = "frame from server: attachment " + std::to_string(i);
      std::array<std::byte, kAttachmentHeaderSize> attachment_buf;
      REMEX_RETURN_IF_ERROR(ReadExact(attachment_buf));
      StatusOr<AttachmentHeader> attachment = DecodeAttachmentHeader(attachment_buf, limits_);
      if (!attachment.ok()) return attachment.status().WithContext(context);
      frame_raw_bytes += attachment->raw_size;
      REMEX_RETURN_IF_ERROR(CheckFrameAttachmentBytes(frame_raw_bytes, limits_).WithContext(context));
      std::span<std::byte> in_place;
      if (destination) in_place = destination(frame, i, attachment->raw_size);
      if (!in_place.empty() && in_place.size() == attachment->raw_size) {
        REMEX_RETURN_IF_ERROR(reader_.Begin(*attachment, in_place).WithContext(context));
        frame.attachment_in_place[i] = true;
      } else {
        REMEX_RETURN_IF_ERROR(reader_.Begin(*attachment, &frame.attachments[i]).WithContext(context));
      }
      while (!reader_.done()) {
        REMEX_RETURN_IF_ERROR(ReadExact(reader_.NextBuffer()));
        REMEX_RETURN_IF_ERROR(reader_.Commit().WithContext(context));
      }
      attachment_stats_.raw_received += attachment->raw_size;
      attachment_stats_.wire_received += attachment->wire_size;
    }
    return frame;
  }

  Status ReadExact(std::span<std::byte> buf) {
    if (inbound_pos_ < inbound_.size()) {  // bytes read ahead by SendMany first
      size_t k = std::min(buf.size(), inbound_.size() - inbound_pos_);
      std::memcpy(buf.data(), inbound_.data() + inbound_pos_, k);
      inbound_pos_ += k;
      if (inbound_pos_ == inbound_.size()) {
        inbound_.clear();
        inbound_.shrink_to_fit();
        inbound_pos_ = 0;
      }
      buf = buf.subspan(k);
    }
    if (buf.empty()) return OkStatus();
    bool done = false;
    error_code ec;
    size_t n = 0;
    stream_.AsyncRead(asio::buffer(buf.data(), buf.size()), [&](error_code e, size_t k) {
      ec = e;
      n = k;
      done = true;
    });
    Await(done);
    bytes_received_ += n;
    if (timed_out_) return DeadlineExceeded("receiving frame: " + DeadlineText());
    if (ec == asio::error::eof) return Unavailable("connection closed by the server");
    if (ec) return Unavailable("receiving frame: " + ec.message());
    return OkStatus();
  }

  // Starts the deadline of one operation: on expiry the socket (and a pending resolve)
  // is closed, which completes the pending operation with operation_aborted.
  void Arm() {
    timed_out_ = false;
    if (timeout_.count() <= 0) return;
    uint64_t generation = ++timer_generation_;
    timer_.expires_after(timeout_);
    timer_.async_wait([this, generation](error_code ec) {
      if (ec || generation != timer_generation_) return;
      timed_out_ = true;
      if (resolver_ != nullptr) resolver_->cancel();
      error_code ignored;
      socket_.close(ignored);
    });
  }

  void Disarm() {
    ++timer_generation_;  // a wait already completed but not yet run is ignored
    timer_.cancel();
  }

  // Runs the io_context on this thread until `done`. Handlers here never throw.
  void Await(const bool& done) {
    io_.restart();
    while (!done) {
      if (io_.run_one() == 0) io_.restart();
    }
  }

  Status Break(Status status) {
    error_code ec;
    socket_.close(ec);
    if (broken_.ok()) broken_ = status;
    return status;
  }

  std::string DeadlineText() const {
    return "deadline of " + std::to_string(timeout_.count()) + " ms exceeded";
  }

  AttachmentReader reader_;
  // Bytes from the server read during SendMany and not yet consumed by Receive, from
  // inbound_pos_ on.
  std::vector<std::byte> inbound_;
  size_t inbound_pos_ = 0;
  tcp::resolver* resolver_ = nullptr;
  bool timed_out_ = false;
  uint64_t timer_generation_ = 0;
};

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Client::~Client() = default;

StatusOr<std::unique_ptr<Client>> Client::Connect(std::string host, uint16_t port,
                                                  std::chrono::milliseconds timeout,
                                                  const std::optional<TlsClientConfig>& tls) {
  auto impl = std::make_unique<Impl>();
  impl->timeout_ = timeout;
  REMEX_RETURN_IF_ERROR(impl->Connect(host, port, tls));
  return std::unique_ptr<Client>(new Client(std::move(impl)));
}

Status Client::Send(OutFrame& frame) { return impl_->Send(frame); }
Status Client::SendMany(std::vector<OutFrame>& frames) { return impl_->SendMany(frames); }
StatusOr<Frame> Client::Receive() { return impl_->Receive(); }
StatusOr<Frame> Client::Receive(const ReceiveDestination& destination) { return impl_->Receive(destination); }
StatusOr<Frame> Client::Call(OutFrame& frame) { return impl_->Call(frame); }

void Client::SetCompression(CompressionMode mode, int level) {
  impl_->encode_.compression = mode;
  impl_->encode_.compression_level = level;
}
void Client::SetCompression(bool enabled, int level) {
  SetCompression(enabled ? CompressionMode::kAuto : CompressionMode::kNone, level);
}
void Client::SetTimeout(std::chrono::milliseconds timeout) { impl_->timeout_ = timeout; }
void Client::SetLimits(const Limits& limits) {
  impl_->limits_ = limits;
  impl_->encode_.limits = limits;
}
bool Client::connected() const { return impl_->broken_.ok() && impl_->socket_.is_open(); }
void Client::Close() { impl_->Close(); }
uint64_t Client::bytes_sent() const { return impl_->bytes_sent_; }
uint64_t Client::bytes_received() const { return impl_->bytes_received_; }
AttachmentStats Client::attachment_stats() const { return impl_->attachment_stats_; }
uint64_t Client::writes() const { return impl_->writes_; }

}  // namespace remex::rpc
