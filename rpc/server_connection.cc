#include "rpc/server_connection.h"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <cstdio>
#include <utility>

#include "rpc/wire_util.h"

namespace remex::rpc::detail {

namespace {

// After an error reply the server stops sending, then reads and discards what the peer
// still sends (so the reply is not lost to a TCP reset) for at most this long / much.
constexpr auto kLingerTime = std::chrono::seconds(2);
constexpr size_t kMaxLingerBytes = 4u << 20;
// Replies whose compressible attachments reach this many bytes are encoded on the
// server's encode threads (ServerOptions::encode_threads), not on the I/O thread.
constexpr uint64_t kOffThreadEncodeBytes = uint64_t{1} << 20;

}  // namespace

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

Connection::Connection(tcp::socket socket, uint64_t id, const ServerOptions& options, ConnectionStats& totals,
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
  strand_ = socket_.get_executor().target<asio::strand<asio::io_context::executor_type>>();
  reader_.SetLimits(options.limits);
  // A decompression in progress (on the codec threads) stops when the connection
  // closes: a timeout, the server's shutdown.
  reader_.SetCancel(&closed_);
  if (options.auth_timeout.count() > 0) auth_due_ = std::chrono::steady_clock::now() + options.auth_timeout;
  for (std::chrono::milliseconds t : {options.idle_timeout, options.read_timeout, options.write_timeout}) {
    if (t.count() > 0 && (check_period_.count() == 0 || t < check_period_)) check_period_ = t;
  }
}

void Connection::Refuse(const Status& status) {
  asio::dispatch(socket_.get_executor(),
                 [self = shared_from_this(), status] { self->Fail(0, status, "connection refused"); });
}

void Connection::Start(std::unique_ptr<ConnectionHandler> handler) {
  handler_ = std::move(handler);
  if (handler_->Authenticated()) authenticated_ = true;
  asio::dispatch(socket_.get_executor(), [self = shared_from_this()] {
    if (self->tls_context_ != nullptr) return self->DetectTls();
    self->ReadHeader();
  });
}

void Connection::PostClose() {
  closed_ = true;  // counted as closed at once (the server's caps); CloseNow follows on the strand
  asio::post(socket_.get_executor(), [self = shared_from_this()] { self->CloseNow(); });
}

void Connection::CloseNow() {
  error_code ec;
  socket_.shutdown(tcp::socket::shutdown_both, ec);
  socket_.close(ec);
  timer_.cancel();
  deadline_.cancel();
  closed_ = true;
}

void Connection::CountRead(size_t n) {
  stats_.bytes_read += n;
  totals_.bytes_read += n;
}

void Connection::CountWritten(size_t n) {
  stats_.bytes_written += n;
  totals_.bytes_written += n;
}

void Connection::ArmDeadline(std::chrono::milliseconds after, const char* what) {
  const auto now = std::chrono::steady_clock::now();
  const auto none = std::chrono::steady_clock::time_point::max();
  const auto auth_due = authenticated_ ? none : auth_due_;
  if (after.count() <= 0 && auth_due == none) return CancelDeadline();
  if (after.count() > 0 && now + after <= auth_due) {
    due_ = now + after;
    due_what_ = what;
    due_after_ = after;
  } else {
    due_ = auth_due;
    due_what_ = "not authenticated within the auth timeout";
    due_after_ = options_.auth_timeout;
  }
  due_is_write_ = false;
  EnsureDeadlineWait();
}

void Connection::EnsureDeadlineWait() {
  // Until authenticated, the auth timeout is checked too; afterwards its shorter period
  // costs an authenticated connection no wake-ups.
  std::chrono::milliseconds period = check_period_;
  const auto auth = options_.auth_timeout;
  if (!authenticated_ && auth.count() > 0 && (period.count() == 0 || auth < period)) period = auth;
  if (deadline_waiting_ || closed_ || period.count() == 0) return;
  deadline_waiting_ = true;
  deadline_.expires_at(std::min(due_, std::chrono::steady_clock::now() + period));
  // A weak reference: a pending deadline must not keep an ended connection (and its
  // session) alive.
  deadline_.async_wait([weak = weak_from_this()](error_code ec) {
    if (auto self = weak.lock()) self->OnDeadlineTimer(ec);
  });
}

void Connection::OnDeadlineTimer(const error_code& ec) {
  deadline_waiting_ = false;
  if (ec || closed_) return;  // cancelled by CloseNow
  const auto none = std::chrono::steady_clock::time_point::max();
  if (due_ == none) return;  // no deadline now; the next ArmDeadline waits again
  const auto due = due_is_write_ ? write_progress_at_ + options_.write_timeout : due_;
  if (std::chrono::steady_clock::now() < due) {
    if (due_is_write_) due_ = due;
    return EnsureDeadlineWait();
  }
  if (due_is_write_) {
    LogLine(options_, "closing connection " + info_.peer +
                          ": the peer read nothing of a reply past the write timeout (" +
                          std::to_string(options_.write_timeout.count()) + " ms)");
  } else {
    LogLine(options_, "closing connection " + info_.peer + ": " + due_what_ + " (" +
                          std::to_string(due_after_.count()) + " ms)");
  }
  CloseNow();
}

void Connection::DetectTls() {
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

template <typename Then>
void Connection::ReadFull(std::span<std::byte> buf, Then then) {
  buf = buf.subspan(ahead_.Take(buf));
  if (buf.empty()) {
    // Served from what was read ahead. Many small pieces in a row (tiny compressed
    // chunks) would nest these calls deeply: past a few, continue from the executor.
    if (ahead_depth_ >= kMaxAheadDepth) {
      return asio::post(socket_.get_executor(), [self = shared_from_this(), then = std::move(then)]() mutable {
        then();
      });
    }
    ++ahead_depth_;
    then();
    --ahead_depth_;
    return;
  }
  if (ReadAhead::Small(buf.size())) {
    // Plaintext: try a receive now. When the bytes are there (on one CPU the client
    // has usually sent its next request by the time its reply is written) the frame
    // is read without a round through the io_context: Asio completes even a read that
    // succeeds at once through its queue, behind an epoll_wait. When nothing is there
    // the try costs one receive while the server would be waiting anyway.
    if (!stream_.tls() && ahead_depth_ < kMaxAheadDepth) {
      asio::mutable_buffer space = ahead_.Space();
      const ssize_t k = ::recv(socket_.native_handle(), space.data(), space.size(), MSG_DONTWAIT);
      if (k > 0) {
        CountRead(static_cast<size_t>(k));
        ahead_.Filled(static_cast<size_t>(k));
        ++ahead_depth_;
        ReadFull(buf, std::move(then));  // takes what arrived, reads on for the rest
        --ahead_depth_;
        return;
      }
      if (k == 0) return;  // the peer closed: the chain ends, as on a read error
      // Nothing yet (or an error, which Asio's read meets again): wait as usual.
    }
    stream_.AsyncReadAtLeast(ahead_.Space(), buf.size(),
                             [self = shared_from_this(), buf, then = std::move(then)](error_code ec,
                                                                                      size_t n) mutable {
                               self->CountRead(n);
                               if (ec) return;
                               self->ahead_.Filled(n);
                               self->ahead_.Take(buf);
                               then();
                             });
    return;
  }
  stream_.AsyncRead(asio::buffer(buf.data(), buf.size()),
                    [self = shared_from_this(), then = std::move(then)](error_code ec, size_t n) mutable {
                      self->CountRead(n);
                      if (!ec) then();
                    });
}

void Connection::ReadHeader() {
  ArmDeadline(options_.idle_timeout, "idle past the idle timeout");
  ReadFull(header_buf_, [self = shared_from_this()] { self->OnHeader(); });
}

void Connection::OnHeader() {
  FrameProgress();
  StatusOr<FrameHeader> header = DecodeFrameHeader(header_buf_);
  if (!header.ok()) return Fail(0, header.status(), "frame header refused");
  header_ = *header;
  Status status = CheckFrameHeader(header_, options_.limits);
  if (status.ok() && !authenticated_) {
    // Before authentication nothing larger than hello and authenticate is taken in: a
    // stranger's frame costs the server at most this many bytes.
    const uint32_t cap = options_.max_unauthenticated_message_bytes;
    if ((cap != 0 && header_.message_bytes > cap) || header_.attachment_count != 0) {
      status = PermissionDenied("before authentication a request may carry at most " + std::to_string(cap) +
                                " message bytes and no attachment (this one: " +
                                std::to_string(header_.message_bytes) + " bytes, " +
                                std::to_string(header_.attachment_count) +
                                " attachments): say hello and authenticate first");
    }
  }
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
  ReadFull({reinterpret_cast<std::byte*>(request_.message.begin()), header_.message_bytes},
           [self = shared_from_this()] { self->OnMessage(); });
}

void Connection::OnMessage() {
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

void Connection::ReadAttachmentHeader() {
  if (next_attachment_ == header_.attachment_count) return Dispatch();
  ReadFull(attachment_header_buf_, [self = shared_from_this()] { self->OnAttachmentHeader(); });
}

void Connection::OnAttachmentHeader() {
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
  // What all connections' incomplete uploads may hold, server-wide.
  const uint64_t before = totals_.receiving_bytes.fetch_add(attachment_.raw_size);
  receiving_charged_ += attachment_.raw_size;
  if (options_.max_receiving_bytes != 0 && before + attachment_.raw_size > options_.max_receiving_bytes) {
    return Fail(header_.request_id,
                ResourceExhausted("the server is receiving " + std::to_string(before) +
                                  " bytes of other requests' attachments; " + std::to_string(attachment_.raw_size) +
                                  " more would pass its limit of " + std::to_string(options_.max_receiving_bytes) +
                                  " (max_receiving_bytes): retry shortly")
                    .WithContext(context),
                Refused());
  }
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

void Connection::ReadAttachmentChunk() {
  if (reader_.done()) {
    stats_.attachment_raw_received += attachment_.raw_size;
    stats_.attachment_wire_received += attachment_.wire_size;
    totals_.attachment_raw_received += attachment_.raw_size;
    totals_.attachment_wire_received += attachment_.wire_size;
    ++next_attachment_;
    return ReadAttachmentHeader();
  }
  std::span<std::byte> buf;
  try {
    buf = reader_.NextBuffer();
  } catch (const std::bad_alloc&) {
    return Fail(header_.request_id,
                ResourceExhausted("no memory to receive an attachment of " + std::to_string(attachment_.raw_size) +
                                  " bytes")
                    .WithContext("attachment " + std::to_string(next_attachment_)),
                Refused());
  }
  ReadFull(buf, [self = shared_from_this()] {
    self->FrameProgress();
    if (self->encode_pool_ != nullptr && self->reader_.HeavyCommit()) {
      // Decompression off the I/O thread, on the codec threads that also encode large
      // replies: the connections this thread serves are not held by it. Nothing else
      // of this connection runs meanwhile (it reads nothing until the frame is done).
      asio::post(*self->encode_pool_, [self] {
        auto status = std::make_shared<Status>(self->reader_.Commit());
        if (status->code() == StatusCode::kCancelled) {
          // Said here: at the server's shutdown the I/O threads may be gone already, and
          // the strand's handler below never runs.
          LogLine(self->options_, self->info_.peer + ": attachment " + std::to_string(self->next_attachment_) +
                                      " of request " + std::to_string(self->header_.request_id) + ": " +
                                      status->message());
        }
        asio::dispatch(self->socket_.get_executor(), [self, status] { self->OnAttachmentChunk(*status); });
      });
      return;
    }
    self->OnAttachmentChunk(self->reader_.Commit());
  });
}

void Connection::OnAttachmentChunk(const Status& status) {
  if (closed_) return;  // closed while decompressing: the chain ends
  if (!status.ok()) {
    return Fail(header_.request_id, status.WithContext("attachment " + std::to_string(next_attachment_)), Refused());
  }
  FrameProgress();
  ReadAttachmentChunk();
}

void Connection::Dispatch() {
  ReleaseReceiving();  // the frame is whole: the handler's own budget holds it now
  uint64_t id = request_.request_id;
  uint16_t peer_minor = request_.minor;
  bool uncompressed = (request_.flags & kFlagUncompressedReply) != 0;
  auto replied = std::make_shared<std::atomic<bool>>(false);
  auto self = shared_from_this();
  auto reply_fn = [self, id, peer_minor, uncompressed, replied](OutFrame reply) {
    if (replied->exchange(true)) return;  // one reply per request
    // On the connection's strand already (a reply during Dispatch): no wrapping.
    if (self->strand_ != nullptr && self->strand_->running_in_this_thread()) {
      return self->Finish(std::move(reply), id, peer_minor, uncompressed);
    }
    auto frame = std::make_shared<OutFrame>(std::move(reply));
    asio::dispatch(self->socket_.get_executor(), [self, id, peer_minor, uncompressed, frame] {
      self->Finish(std::move(*frame), id, peer_minor, uncompressed);
    });
  };
  // No deadline while the server works; the peer hanging up meanwhile is noticed.
  CancelDeadline();
  handling_ = true;
  dispatching_ = true;
  try {
    handler_->HandleAsync(request_, reply_fn);
  } catch (...) {
    reply_fn(MakeErrorReply(id, Internal("request handler failed: " +
                                         ExceptionMessage(std::current_exception()))));
  }
  dispatching_ = false;
  // A request answered at once (a ping, a read of a CPU tensor) has been replied to by
  // now: reply_fn ran Finish on this strand. Only one that went to another thread is
  // watched; its reply is posted to this strand and cannot run before this returns.
  // The replies held for it (CanCork) go now: it may take long.
  if (handling_) {
    // Watched once nothing is being written (OnWritten starts the watch when the held
    // replies are written): Finish's cancel of the watch must not cut a write short.
    if (!corked_.empty()) return WriteCorked();
    return WatchPeer();
  }
  if (read_after_dispatch_) {
    read_after_dispatch_ = false;
    ReadHeader();
  }
}

void Connection::WatchPeer() {
  // Bytes of a further frame were read ahead: the peer pipelines, and a close after
  // them is not a hang-up on this request.
  if (!ahead_.empty()) return;
  socket_.async_wait(tcp::socket::wait_read, [weak = weak_from_this()](error_code ec) {
    auto self = weak.lock();
    if (ec || !self || !self->handling_) return;
    // What is there decides, not the wake-up: a readiness event may be stale (it was
    // taken from epoll before a receive consumed the bytes it announced).
    char byte = 0;
    const ssize_t k = ::recv(self->socket_.native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return self->WatchPeer();
    // The end of the stream, or an error (a reset): the peer has gone.
    if (k <= 0 && self->handler_) self->handler_->OnPeerClosed();
    // Data (a pipelined frame): stop watching; it is read after the reply.
  });
}

void Connection::Finish(OutFrame reply, uint64_t id, uint16_t peer_minor, bool uncompressed) {
  if (reply.message == nullptr) {
    reply = MakeErrorReply(id, Internal("request handler returned no reply message"));
  }
  ++stats_.frames_handled;
  ++totals_.frames_handled;
  handling_ = false;
  if (!authenticated_ && handler_ && handler_->Authenticated()) authenticated_ = true;
  error_code ignored;
  if (out_.empty()) socket_.cancel(ignored);  // ends WatchPeer's wait (none while writing)
  request_ = Frame();  // the request's memory is not needed while replying
  Write(std::move(reply), id, peer_minor, /*close_after=*/false, uncompressed);
}

std::string Connection::Refused() const {
  std::string kind = "unreadable";
  try {
    auto reader = request_.Reader();
    kind = RequestKindName(reader.getRoot<wire::Request>());
  } catch (...) {
  }
  return kind + " request " + std::to_string(header_.request_id) + " refused";
}

void Connection::Fail(uint64_t request_id, const Status& status, const std::string& what) {
  ReleaseReceiving();
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

void Connection::Write(OutFrame reply, uint64_t request_id, uint16_t peer_minor, bool close_after,
                       bool uncompressed) {
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

void Connection::WriteEncoded(StatusOr<EncodedFrame> encoded, const EncodeOptions& encode,
                              uint64_t request_id, bool close_after) {
  if (!encoded.ok()) {
    LogLine(options_, info_.peer + ": the reply to request " + std::to_string(request_id) +
                          " could not be encoded: " + encoded.status().ToString());
    OutFrame error = MakeErrorReply(request_id, encoded.status().WithContext("encoding reply"));
    encoded = EncodeFrame(error, encode);
    if (!encoded.ok()) return CloseNow();
  }
  corked_bytes_ += encoded->size();
  corked_.push_back(std::move(encoded).value());
  close_after_ = close_after_ || close_after;
  if (!out_.empty()) return;  // a flush is being written: OnWritten goes on with this
  if (!close_after_ && CanCork()) return ReadNext();
  WriteCorked();
}

bool Connection::CanCork() {
  // Held only while the peer's next request is here whole, attachments included, so that
  // it is served without waiting on the socket (a reply is never held while the server
  // waits for its peer; a request with attachments larger than the read-ahead is never
  // whole there); only replies whose bytes are all their own (no attachment: a tensor's
  // bytes are sent from its memory, which a later request of the batch may change).
  if (stream_.tls() || closed_ || corked_.size() >= kMaxCorkedReplies || corked_bytes_ > kMaxCorkedBytes) return false;
  if (corked_.back().attachment_raw_bytes() != 0 || corked_.back().attachment_wire_bytes() != 0) return false;
  const std::span<const std::byte> ahead = ahead_.Peek();
  if (ahead.size() < kFrameHeaderSize) return false;
  StatusOr<FrameHeader> next = DecodeFrameHeader(ahead.first<kFrameHeaderSize>());
  if (!next.ok() || ahead.size() - kFrameHeaderSize < next->message_bytes) return false;
  // Each attachment: its header, then its wire bytes. A header that does not decode is
  // the request's error to report when it is read, not here.
  size_t at = kFrameHeaderSize + next->message_bytes;
  for (uint32_t i = 0; i < next->attachment_count; ++i) {
    if (ahead.size() - at < kAttachmentHeaderSize) return false;
    StatusOr<AttachmentHeader> a = DecodeAttachmentHeader(ahead.subspan(at, kAttachmentHeaderSize), options_.limits);
    if (!a.ok() || ahead.size() - at - kAttachmentHeaderSize < a->wire_size) return false;
    at += kAttachmentHeaderSize + a->wire_size;
  }
  return true;
}

void Connection::ReadNext() {
  // A reply written while the request is still being dispatched (answered at once):
  // Dispatch reads the next frame once the handler has returned.
  if (dispatching_) {
    read_after_dispatch_ = true;
    return;
  }
  ReadHeader();
}

void Connection::WriteCorked() {
  out_ = std::move(corked_);
  corked_.clear();
  corked_bytes_ = 0;
  ++stats_.writes;
  ++totals_.writes;
  out_buffers_ = ToBuffers(out_);
  ArmWriteDeadline();
  size_t sent = 0;
  if (!stream_.tls()) {
    // Plaintext: what the socket takes now is written at once, and a reply it takes
    // whole (every small one) completes here, without a round through the io_context
    // (which cost an epoll_wait per reply). The rest, if any, goes to the async write.
    error_code ec;
    sent = WriteNow(ec);
    if (ec || sent == asio::buffer_size(out_buffers_)) return OnWritten(ec, sent);
    write_progress_at_ = std::chrono::steady_clock::now();
    out_buffers_ = SkipBytes(out_buffers_, sent);
  }
  stream_.AsyncWrite(out_buffers_,
                    [weak = weak_from_this()] {
                      if (auto self = weak.lock()) self->write_progress_at_ = std::chrono::steady_clock::now();
                    },
                    [self = shared_from_this(), sent](error_code ec, size_t n) { self->OnWritten(ec, sent + n); });
}

size_t Connection::WriteNow(error_code& ec) { return WriteAvailable(socket_.native_handle(), out_buffers_, ec); }

void Connection::OnWritten(const error_code& ec, size_t n) {
  CancelDeadline();
  CountWritten(n);
  if (!ec) {
    for (const EncodedFrame& frame : out_) {
      stats_.attachment_raw_sent += frame.attachment_raw_bytes();
      stats_.attachment_wire_sent += frame.attachment_wire_bytes();
      totals_.attachment_raw_sent += frame.attachment_raw_bytes();
      totals_.attachment_wire_sent += frame.attachment_wire_bytes();
    }
  }
  out_.clear();
  out_buffers_.clear();
  if (ec) return CloseNow();
  // Held replies written while a request went to another thread (Dispatch): its reply
  // comes later (or came meanwhile, and is in corked_ now); the peer is watched meanwhile.
  if (handling_) return WatchPeer();
  if (!corked_.empty()) {
    if (!close_after_ && CanCork()) return ReadNext();
    return WriteCorked();
  }
  if (close_after_) return LingeringClose();
  ReadNext();
}

void Connection::ArmWriteDeadline() {
  if (options_.write_timeout.count() <= 0) return CancelDeadline();
  write_progress_at_ = std::chrono::steady_clock::now();
  due_ = write_progress_at_ + options_.write_timeout;
  due_is_write_ = true;
  EnsureDeadlineWait();
}

void Connection::LingeringClose() {
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

void Connection::Drain() {
  socket_.async_read_some(asio::buffer(drain_buf_),
                          [self = shared_from_this()](error_code ec, size_t n) {
                            self->CountRead(n);
                            self->drained_ += n;
                            if (ec || self->drained_ > kMaxLingerBytes) return self->CloseNow();
                            self->Drain();
                          });
}

}  // namespace remex::rpc::detail
