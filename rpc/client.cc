// Client: one blocking connection to a Server.
#include "rpc/transport.h"

#include <chrono>
#include <cstring>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <sys/socket.h>

#include <cerrno>

#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "rpc/stream.h"

namespace remex::rpc {

namespace asio = boost::asio;
using boost::asio::ip::tcp;
using boost::system::error_code;
using detail::MakeClientContext;
using detail::ReadAhead;
using detail::Stream;
using detail::TlsFailure;
using detail::ToBuffers;

class Client::Impl {
 public:
  Impl() : stream_(io_), socket_(stream_.socket()) { encode_.peer_minor = 0; }  // until the server speaks

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
    REMEX_ASSIGN_OR_RETURN(EncodedFrame e, EncodeFrame(frame, encode_));
    std::vector<EncodedFrame> encoded = TakeDeferred();
    encoded.push_back(std::move(e));
    awaiting_reply_ = true;
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
    std::vector<EncodedFrame> all = TakeDeferred();
    all.insert(all.end(), std::make_move_iterator(encoded.begin()), std::make_move_iterator(encoded.end()));
    awaiting_reply_ = true;
    return Write(all, /*read_meanwhile=*/true);
  }

  Status SendUnanswered(OutFrame& frame) {
    if (!broken_.ok()) return Unavailable("connection is closed: " + broken_.ToString());
    // Bounded: unread replies would otherwise pile up in the socket buffers until the
    // server's writes, then its reads of this connection, then this client's writes block.
    if (unanswered_.size() >= kMaxUnanswered) REMEX_RETURN_IF_ERROR(DrainUnanswered());
    if (frame.request_id == 0) frame.request_id = next_request_id_++;
    MarkFlags(frame);
    REMEX_ASSIGN_OR_RETURN(EncodedFrame e, EncodeFrame(frame, encode_));
    // Written with the next request, in the same write: the server reads it first,
    // and neither side pays a system call or a wake-up for it alone.
    deferred_.push_back(std::move(e));
    unanswered_.push_back(frame.request_id);
    return OkStatus();
  }

  // Frames of SendUnanswered not written yet, to go before the next request's.
  std::vector<EncodedFrame> TakeDeferred() {
    std::vector<EncodedFrame> frames = std::move(deferred_);
    deferred_.clear();
    return frames;
  }

  StatusOr<Frame> Receive(const Client::ReceiveDestination& destination = nullptr) {
    if (awaiting_reply_) {  // the first reply read after a request: one round trip
      awaiting_reply_ = false;
      ++round_trips_;
    }
    REMEX_RETURN_IF_ERROR(DrainUnanswered());
    if (!broken_.ok()) return Unavailable("connection is closed: " + broken_.ToString());
    Arm();
    StatusOr<Frame> frame = ReceiveFrame(destination);
    Disarm();
    if (!frame.ok()) return Break(frame.status());
    return frame;
  }

  // Reads and drops the replies of SendUnanswered's requests, which come before any
  // later request's (the server answers in order).
  Status DrainUnanswered() {
    if (!deferred_.empty()) {  // their replies come only once they are written
      if (!broken_.ok()) return Unavailable("connection is closed: " + broken_.ToString());
      std::vector<EncodedFrame> frames = TakeDeferred();
      REMEX_RETURN_IF_ERROR(Write(frames, /*read_meanwhile=*/false));
    }
    while (!unanswered_.empty()) {
      if (!broken_.ok()) return Unavailable("connection is closed: " + broken_.ToString());
      Arm();
      StatusOr<Frame> frame = ReceiveFrame(nullptr);
      Disarm();
      if (!frame.ok()) return Break(frame.status());
      if (frame->request_id != unanswered_.front()) {
        return Break(Internal("reply request_id " + std::to_string(frame->request_id) +
                              " does not answer request " + std::to_string(unanswered_.front())));
      }
      unanswered_.pop_front();
    }
    return OkStatus();
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
  // When the operation in progress must end (Arm); max: none.
  std::chrono::steady_clock::time_point deadline_ = std::chrono::steady_clock::time_point::max();
  std::chrono::milliseconds timeout_{0};
  EncodeOptions encode_;
  Limits limits_;
  uint64_t next_request_id_ = 1;
  // Requests sent by SendUnanswered whose replies are not read yet, oldest first.
  static constexpr size_t kMaxUnanswered = 64;
  std::deque<uint64_t> unanswered_;
  // Of those, the ones not written yet (encoded; at most kMaxUnanswered).
  std::vector<EncodedFrame> deferred_;
  bool awaiting_reply_ = false;  // a request was written since the last Receive
  uint64_t round_trips_ = 0;
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
    if (!read_meanwhile && !stream_.tls()) {
      Status status = WritePlain(buffers);
      Disarm();
      if (!status.ok()) return Break(status);
      CountSent(frames);
      return OkStatus();
    }
    size_t sent = 0;
    if (!stream_.tls()) {
      // Plaintext: what the socket takes now goes in one sendmsg (a pipeline of any
      // number of frames, where Asio's write takes 16 buffers a call and goes through
      // the io_context for the rest: a second write, after the server had answered
      // the first part). Only what the socket buffer cannot take waits below, with the
      // replies read meanwhile.
      error_code ec;
      sent = detail::WriteAvailable(socket_.native_handle(), buffers, ec);
      bytes_sent_ += sent;
      if (ec) {
        Disarm();
        return Break(Unavailable("sending frame: " + ec.message()));
      }
      if (sent == asio::buffer_size(buffers)) {
        Disarm();
        CountSent(frames);
        return OkStatus();
      }
      buffers = detail::SkipBytes(buffers, sent);
    }
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
    CountSent(frames);
    return OkStatus();
  }

  void CountSent(const std::vector<EncodedFrame>& frames) {
    for (const EncodedFrame& frame : frames) {
      attachment_stats_.raw_sent += frame.attachment_raw_bytes();
      attachment_stats_.wire_sent += frame.attachment_wire_bytes();
    }
  }

  // Plaintext connections: the client blocks anyway, so it makes blocking system calls
  // itself rather than going through the io_context. A small call then costs a sendmsg
  // and a recv, as a plain socket's ping-pong does; through Asio it cost five (a
  // speculative recv that finds nothing, and an epoll_wait for each completion besides
  // the one it waits in), over a microsecond each.
  //
  // The socket is in blocking mode for these calls (Asio puts it back to non-blocking
  // for its own operations: the connect, SendMany's write-while-reading), and the
  // deadline is the socket's send or receive timeout (SO_SNDTIMEO, SO_RCVTIMEO).

  // Writes the buffers with sendmsg, as much as the socket takes per call.
  Status WritePlain(const std::vector<asio::const_buffer>& buffers) {
    detail::IovCursor rest(buffers);
    while (!rest.done()) {
      REMEX_RETURN_IF_ERROR(PrepareBlocking(SO_SNDTIMEO, send_timeout_, "sending frame"));
      msghdr msg = rest.Message();
      ssize_t k = ::sendmsg(socket_.native_handle(), &msg, MSG_NOSIGNAL);
      if (k < 0) {
        if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;  // the deadline: checked above
        return Unavailable(std::string("sending frame: ") + std::strerror(errno));
      }
      bytes_sent_ += static_cast<size_t>(k);
      rest.Advance(static_cast<size_t>(k));
    }
    return OkStatus();
  }

  // Reads at least `at_least` bytes into `buf` (at most buf.size()); returns how many.
  StatusOr<size_t> ReadPlain(std::span<std::byte> buf, size_t at_least) {
    size_t got = 0;
    while (got < at_least) {
      REMEX_RETURN_IF_ERROR(PrepareBlocking(SO_RCVTIMEO, receive_timeout_, "receiving frame"));
      // Filling the whole buffer (a large read, straight into its destination): one
      // call that returns when it is full, not at every segment that arrives.
      const int flags = at_least == buf.size() ? MSG_WAITALL : 0;
      ssize_t k = ::recv(socket_.native_handle(), buf.data() + got, buf.size() - got, flags);
      if (k > 0) {
        got += static_cast<size_t>(k);
        bytes_received_ += static_cast<size_t>(k);
        continue;
      }
      if (k == 0) return Unavailable("connection closed by the server");
      if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;  // the deadline: checked above
      return Unavailable(std::string("receiving frame: ") + std::strerror(errno));
    }
    return got;
  }

  // Before a blocking send or receive: the socket is in blocking mode, and its timeout
  // `option` (SO_SNDTIMEO, SO_RCVTIMEO; `set` is its current value, zero: none) ends the
  // call at the operation's deadline. DEADLINE_EXCEEDED (and the socket closed) once the
  // deadline has passed.
  //
  // The option is set only when it differs from the time left by more than a small
  // slack, not before every call: a call then costs no setsockopt, and a wait ends at
  // most the slack after the deadline (one that ends early is simply made again).
  Status PrepareBlocking(int option, std::chrono::microseconds& set, const char* what) {
    error_code ec;
    if (socket_.native_non_blocking()) {
      socket_.native_non_blocking(false, ec);
      if (ec) return Unavailable(std::string(what) + ": " + ec.message());
    }
    using std::chrono::microseconds;
    microseconds want{0};
    microseconds slack{0};
    if (deadline_ != std::chrono::steady_clock::time_point::max()) {
      auto left = std::chrono::ceil<microseconds>(deadline_ - std::chrono::steady_clock::now());
      if (left <= microseconds::zero()) {
        timed_out_ = true;
        socket_.close(ec);
        return DeadlineExceeded(std::string(what) + ": " + DeadlineText());
      }
      want = left;
      slack = std::min<microseconds>(std::chrono::milliseconds(10), timeout_ / 10);
    }
    const bool none_wanted = want == microseconds::zero();
    const bool none_set = set == microseconds::zero();
    if (none_wanted == none_set && (none_wanted || (set - want <= slack && want - set <= slack))) return OkStatus();
    timeval tv{};
    tv.tv_sec = static_cast<time_t>(want.count() / 1000000);
    tv.tv_usec = static_cast<suseconds_t>(want.count() % 1000000);
    if (::setsockopt(socket_.native_handle(), SOL_SOCKET, option, &tv, sizeof tv) != 0) {
      return Unavailable(std::string(what) + ": setsockopt: " + std::strerror(errno));
    }
    set = want;
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
    // Bytes a small read took ahead come first: SendMany's read-meanwhile only appends
    // to inbound_ after them, and a small read fills ahead_ only when both are empty.
    buf = buf.subspan(ahead_.Take(buf));
    if (!buf.empty() && inbound_pos_ < inbound_.size()) {  // bytes read during SendMany
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
    if (!ReadAhead::Small(buf.size())) return ReadAtLeast(buf, buf.size()).status();  // straight in
    asio::mutable_buffer space = ahead_.Space();
    StatusOr<size_t> n = ReadAtLeast({static_cast<std::byte*>(space.data()), space.size()}, buf.size());
    if (!n.ok()) return n.status();
    ahead_.Filled(*n);
    ahead_.Take(buf);
    return OkStatus();
  }

  // Reads at least `at_least` bytes into `buf` (at most buf.size()); returns how many.
  // Plaintext: ReadPlain; TLS: through Asio, under the deadline.
  StatusOr<size_t> ReadAtLeast(std::span<std::byte> buf, size_t at_least) {
    if (!stream_.tls()) return ReadPlain(buf, at_least);
    bool done = false;
    error_code ec;
    size_t n = 0;
    stream_.AsyncReadAtLeast(asio::buffer(buf.data(), buf.size()), at_least, [&](error_code e, size_t k) {
      ec = e;
      n = k;
      done = true;
    });
    Await(done);
    bytes_received_ += n;
    if (timed_out_) return DeadlineExceeded("receiving frame: " + DeadlineText());
    if (ec == asio::error::eof) return Unavailable("connection closed by the server");
    if (ec) return Unavailable("receiving frame: " + ec.message());
    return n;
  }

  // Starts the deadline of one operation. Await checks it between events: no timer
  // is armed, so a call costs no timer system calls (two per Arm and Disarm with an
  // Asio timer, a measurable share of a small call's round trip).
  void Arm() {
    timed_out_ = false;
    deadline_ = timeout_.count() > 0 ? std::chrono::steady_clock::now() + timeout_
                                     : std::chrono::steady_clock::time_point::max();
  }

  void Disarm() { deadline_ = std::chrono::steady_clock::time_point::max(); }

  // Runs the io_context on this thread until `done`. Handlers here never throw. When
  // the deadline passes first, the socket (and a pending resolve) is closed, which
  // completes the pending operation with operation_aborted, and timed_out_ is set.
  void Await(const bool& done) {
    io_.restart();
    while (!done) {
      if (deadline_ == std::chrono::steady_clock::time_point::max() || timed_out_) {
        if (io_.run_one() == 0) io_.restart();
        continue;
      }
      if (std::chrono::steady_clock::now() >= deadline_) {
        timed_out_ = true;
        if (resolver_ != nullptr) resolver_->cancel();
        error_code ignored;
        socket_.close(ignored);
        continue;
      }
      if (io_.run_one_until(deadline_) == 0) io_.restart();
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
  ReadAhead ahead_;  // what a small read took beyond its own bytes
  // Bytes from the server read during SendMany and not yet consumed by Receive, from
  // inbound_pos_ on.
  std::vector<std::byte> inbound_;
  size_t inbound_pos_ = 0;
  tcp::resolver* resolver_ = nullptr;
  bool timed_out_ = false;
  // The socket's SO_SNDTIMEO and SO_RCVTIMEO as last set (zero: none).
  std::chrono::microseconds send_timeout_{0};
  std::chrono::microseconds receive_timeout_{0};
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
Status Client::SendUnanswered(OutFrame& frame) { return impl_->SendUnanswered(frame); }
StatusOr<Frame> Client::Receive() { return impl_->Receive(); }
uint64_t Client::round_trips() const { return impl_->round_trips_; }
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
bool Client::loopback() const {
  error_code ec;
  const tcp::endpoint peer = impl_->socket_.remote_endpoint(ec);
  return !ec && peer.address().is_loopback();
}
void Client::Close() { impl_->Close(); }
uint64_t Client::bytes_sent() const { return impl_->bytes_sent_; }
uint64_t Client::bytes_received() const { return impl_->bytes_received_; }
AttachmentStats Client::attachment_stats() const { return impl_->attachment_stats_; }
uint64_t Client::writes() const { return impl_->writes_; }

}  // namespace remex::rpc
