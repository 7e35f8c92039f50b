// The server side of one accepted connection: reading and checking request frames,
// handing them to the ConnectionHandler, writing the replies, and the connection's
// deadlines (internal to rpc/: see transport.h).
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "rpc/compression.h"
#include "rpc/frame.h"
#include "rpc/stream.h"
#include "rpc/transport.h"

namespace remex::rpc::detail {

// One line of the server's connection log (ServerOptions::log; stderr when unset).
void LogLine(const ServerOptions& options, const std::string& line);

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
             asio::ssl::context* tls, asio::thread_pool* encode_pool);

  // The peer's address without its port ("" when unknown).
  const std::string& address() const { return address_; }
  bool closed() const { return closed_.load(); }
  // The handler is Authenticated() (see ServerOptions::auth_timeout); false from the
  // accept until then.
  bool authenticated() const { return authenticated_.load(); }

  // Answers with `status` (request_id 0) and closes, without a handler.
  void Refuse(const Status& status);

  ~Connection() {
    ReleaseReceiving();
    handler_.reset();  // explicitly first: the handler may read stats_
  }

  const ConnectionInfo& info() const { return info_; }

  void Start(std::unique_ptr<ConnectionHandler> handler);

  // Thread-safe: closes the socket on the connection's strand.
  void PostClose();

 private:
  void CloseNow();
  void CountRead(size_t n);
  void CountWritten(size_t n);

  // (Re)arms the connection's deadline: `after` from now the socket is closed, unless
  // the deadline is armed again or cancelled first. Zero: none.
  //
  // Arming only writes the due time. One timer per connection wakes at most every
  // check_period_ (the smallest of the idle, read and write timeouts; and the auth
  // timeout until authenticated) and compares the
  // clock with the due time: no due time set later can be earlier than its wake-up, so
  // none fires late, and a request costs no timer system call (it cost three, about a
  // tenth of a small request's time on the server).
  void ArmDeadline(std::chrono::milliseconds after, const char* what);
  void CancelDeadline() { due_ = std::chrono::steady_clock::time_point::max(); }
  void EnsureDeadlineWait();
  void OnDeadlineTimer(const error_code& ec);

  // Reading a request frame: header, message, then each attachment, chunk by chunk.

  // TLS connections: the first byte tells a TLS handshake from a plaintext Remex frame,
  // which is answered in plaintext (its client would not understand TLS alerts).
  void DetectTls();
  void ReadHeader();
  // Fills `buf`, from bytes read ahead first, then calls `then()` on the connection's
  // executor; on a read error the connection just ends (as every read here). A read of
  // ReadAhead::Small size takes what else has arrived into ahead_.
  template <typename Then>
  void ReadFull(std::span<std::byte> buf, Then then);

  // Every read of a frame in progress must complete within the read timeout.
  void FrameProgress() { ArmDeadline(options_.read_timeout, "no progress on a frame past the read timeout"); }

  void OnHeader();
  void OnMessage();
  void ReadAttachmentHeader();
  void OnAttachmentHeader();
  void ReadAttachmentChunk();
  // A chunk read into the attachment reader was committed (decoded) with `status`.
  void OnAttachmentChunk(const Status& status);
  void Dispatch();

  // While a request is handled, waits for the socket to turn readable: either the next
  // (pipelined) frame, left unread, or the end of the connection, which the handler is
  // told about so that it can cancel the request's work.
  void WatchPeer();

  // Replying.

  // Writes the reply to the request being handled, then reads the next frame.
  void Finish(OutFrame reply, uint64_t id, uint16_t peer_minor, bool uncompressed);

  // "<kind> request <id> refused", for a frame whose message has been validated.
  std::string Refused() const;

  // Answers with an error and closes the connection; logs one line naming the peer,
  // `what` was refused, and the status.
  void Fail(uint64_t request_id, const Status& status, const std::string& what);
  void Write(OutFrame reply, uint64_t request_id, uint16_t peer_minor, bool close_after,
             bool uncompressed = false);
  // Adds the reply to corked_, then holds it there (CanCork) and reads the next frame,
  // or writes every held reply (WriteCorked). Plaintext clients that pipeline (a
  // decoder step's frees, uploads, bindings, invoke and download in one write) thus get
  // their replies in one write, not one each: each cost a system call on both sides
  // and a wake-up of the client.
  void WriteEncoded(StatusOr<EncodedFrame> encoded, const EncodeOptions& encode, uint64_t request_id,
                    bool close_after);
  // Whether the reply just added to corked_ may wait there: plaintext, no attachment,
  // within kMaxCorkedReplies and kMaxCorkedBytes, and the peer's next frame already
  // read ahead whole (its header and message, with no attachment).
  bool CanCork();
  // After a reply: reads the next frame (after Dispatch returns, when it is running).
  void ReadNext();
  // Writes corked_ (moved to out_) with one gather write.
  void WriteCorked();
  // Plaintext: writes what the socket takes of out_buffers_ now, without waiting;
  // returns the bytes written. `ec`: the error that ended the write (none for a full
  // socket buffer).
  size_t WriteNow(error_code& ec);
  // The replies in out_ are written, `n` bytes of them, or failed with `ec`: counts
  // them, then closes, lingers (close_after_), writes the replies added meanwhile, or
  // reads the next frame.
  void OnWritten(const error_code& ec, size_t n);

  // Closes the connection once the peer has taken no byte of the reply being written
  // for options_.write_timeout (a client that stops reading holds no connection).
  void ArmWriteDeadline();
  void LingeringClose();
  void Drain();

  Stream stream_;
  tcp::socket& socket_;          // stream_'s TCP socket
  // The socket's executor as the strand the Server gives each connection (nullptr if
  // it is some other executor).
  const asio::strand<asio::io_context::executor_type>* strand_ = nullptr;
  asio::steady_timer timer_;     // lingering close
  asio::steady_timer deadline_;  // idle and read deadlines
  const ServerOptions& options_;  // owned by the Server, which outlives its connections
  ConnectionStats& totals_;       // the Server's, likewise
  asio::ssl::context* tls_context_;  // the Server's, likewise; nullptr: plaintext
  asio::thread_pool* encode_pool_;   // the Server's, likewise; nullptr: none
  std::chrono::steady_clock::time_point write_progress_at_;  // the reply's last write step
  // The deadline (ArmDeadline): when it passes, what to log, and the timeout it came
  // from. With due_is_write_, the due time is write_progress_at_ + the write timeout.
  std::chrono::steady_clock::time_point due_ = std::chrono::steady_clock::time_point::max();
  const char* due_what_ = "";
  std::chrono::milliseconds due_after_{0};
  bool due_is_write_ = false;
  bool deadline_waiting_ = false;  // deadline_ has a wait pending
  std::chrono::milliseconds check_period_{0};  // 0: no timeouts at all
  std::string address_;
  std::atomic<bool> closed_{false};
  std::atomic<bool> authenticated_{false};
  // Until authenticated_, every read deadline is at most this (the accept plus
  // options_.auth_timeout; max: none).
  std::chrono::steady_clock::time_point auth_due_ = std::chrono::steady_clock::time_point::max();
  bool handling_ = false;  // a request of this connection is with the handler
  bool dispatching_ = false;  // Dispatch is in the handler's HandleAsync
  bool read_after_dispatch_ = false;  // the reply was written during it: read on after
  uint64_t frame_raw_bytes_ = 0;  // attachment bytes of the frame being read
  // Of frame_raw_bytes_, what is charged to totals_.receiving_bytes.
  uint64_t receiving_charged_ = 0;
  void ReleaseReceiving() { totals_.receiving_bytes -= std::exchange(receiving_charged_, 0); }
  ConnectionStats stats_;
  ConnectionInfo info_;

  std::array<std::byte, kFrameHeaderSize> header_buf_{};
  std::array<std::byte, kAttachmentHeaderSize> attachment_header_buf_{};
  FrameHeader header_;
  Frame request_;
  uint32_t next_attachment_ = 0;
  AttachmentHeader attachment_;  // of attachment next_attachment_
  AttachmentReader reader_;

  // Replies being written (empty: none), the gather buffers of their unwritten rest.
  std::vector<EncodedFrame> out_;
  std::vector<asio::const_buffer> out_buffers_;
  // Replies not written yet, in order (WriteEncoded), and their bytes.
  std::vector<EncodedFrame> corked_;
  uint64_t corked_bytes_ = 0;
  static constexpr size_t kMaxCorkedReplies = 64;
  static constexpr uint64_t kMaxCorkedBytes = 64 * 1024;
  bool close_after_ = false;  // a reply that closes the connection is in corked_ or out_

  std::vector<std::byte> drain_buf_;
  ReadAhead ahead_;  // bytes read ahead of the frame being parsed
  static constexpr int kMaxAheadDepth = 16;
  int ahead_depth_ = 0;  // ReadFull calls nested in one another, served from ahead_
  size_t drained_ = 0;

  // Last member: destroyed before the stats it may read.
  std::unique_ptr<ConnectionHandler> handler_;
};

}  // namespace remex::rpc::detail
