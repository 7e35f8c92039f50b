// Remex TCP transport: a Server that hands each connection's frames to a per-connection
// handler, and a blocking Client. Both run on Boost.Asio; no exception crosses an Asio
// handler, and every frame read from a socket is checked (rpc/frame.h) before use.
//
// Messages are remex::rpc::wire::Request (client -> server) and wire::Reply
// (server -> client), see rpc/remex.capnp; the transport itself only checks that each
// message is a well-formed Cap'n Proto message.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "rpc/compression.h"
#include "rpc/frame.h"
#include "rpc/remex.capnp.h"
#include "rpc/tls.h"

namespace remex::rpc {

// ---------------------------------------------------------------------------------------
// Errors on the wire.

// The Status carried by `reply`: OK unless it is an `error` reply. An error code the
// enum does not know maps to UNKNOWN; bytes of the message that are not valid UTF-8 are
// escaped (EscapeInvalidUtf8).
Status ErrorFromReply(const wire::Reply::Reader& reply);

// Writes `status` (code and message) into `error`; the message as valid UTF-8, other
// bytes escaped (EscapeInvalidUtf8).
void FillError(const Status& status, wire::Error::Builder error);

// A frame holding a wire::Reply with `error` set from `status`.
OutFrame MakeErrorReply(uint64_t request_id, const Status& status);

// ---------------------------------------------------------------------------------------
// Server.

// Attachment payload bytes of one side of a connection, each direction: `raw` before
// coding (the sum of raw_size), `wire` as sent or received (the sum of wire_size, chunk
// tables included, attachment headers not). Counted per attachment, when it has been
// encoded for a write that succeeded / received whole.
struct AttachmentStats {
  uint64_t raw_sent = 0;
  uint64_t wire_sent = 0;
  uint64_t raw_received = 0;
  uint64_t wire_received = 0;
};

// Byte counts of one connection, updated by the server as it reads and writes. The
// fields are atomics: any thread may read them at any time.
struct ConnectionStats {
  std::atomic<uint64_t> bytes_read{0};     // every byte read from the socket
  std::atomic<uint64_t> bytes_written{0};  // every byte written to the socket
  std::atomic<uint64_t> frames_handled{0};
  // Writes of replies: each one gather write of one reply, or of several held while the
  // peer's next requests were already read (a pipelining client's; the server's
  // Connection::CanCork), which may take more than one system call when the socket
  // buffer is full. frames_handled / writes: the replies a write carries.
  std::atomic<uint64_t> writes{0};
  // AttachmentStats, `sent` being replies and `received` requests.
  std::atomic<uint64_t> attachment_raw_sent{0};
  std::atomic<uint64_t> attachment_wire_sent{0};
  std::atomic<uint64_t> attachment_raw_received{0};
  std::atomic<uint64_t> attachment_wire_received{0};
  // Server totals only: raw bytes of the attachments of frames being received now (their
  // declared sizes, from each attachment's header until the frame is handed to its
  // handler or fails); see ServerOptions::max_receiving_bytes.
  std::atomic<uint64_t> receiving_bytes{0};

  // A snapshot of the four attachment counters (each read on its own).
  AttachmentStats attachment_stats() const {
    return {attachment_raw_sent.load(), attachment_wire_sent.load(),
            attachment_raw_received.load(), attachment_wire_received.load()};
  }
};

struct ConnectionInfo {
  uint64_t id = 0;        // unique per Server, from 1
  std::string peer;       // "address:port"
  // Owned by the connection; valid for the whole life of its handler (including the
  // handler's destructor).
  const ConnectionStats* stats = nullptr;
};

// The server side of one connection. Handle() is called for each frame, one at a time
// and in order, on one of the server's threads; handlers of different connections run
// concurrently. The destructor runs when the connection ends, however it ends (peer
// close or reset, protocol error, Server::Stop): release the session there.
class ConnectionHandler {
 public:
  virtual ~ConnectionHandler();

  // Returns the reply to `request`; the server sets its request_id to the request's.
  // `request`'s attachments may be moved out. An exception, or a reply without a
  // message, is answered with an INTERNAL error reply (the connection stays open).
  virtual OutFrame Handle(Frame& request) = 0;

  // The asynchronous form, which the server calls: the handler calls `reply` exactly
  // once, from any thread, when the reply is ready; the connection reads nothing more
  // until then, and `request` stays valid until then. The default calls Handle() and
  // replies at once. A handler that moves work to another thread (a device worker)
  // keeps the server's I/O threads free for other connections meanwhile. An exception
  // thrown before `reply` is called is answered with an INTERNAL error reply; none may
  // be thrown after.
  using ReplyFn = std::function<void(OutFrame)>;
  virtual void HandleAsync(Frame& request, ReplyFn reply);

  // Called on the connection's thread when the peer closes or resets the connection
  // while a request of it is being handled (the reply cannot be delivered): a handler
  // cancels the work it still runs for the peer. Not called when the peer had sent
  // further frames (pipelining) before closing. The default does nothing.
  virtual void OnPeerClosed();

  // Called before attachment `index` of a request is read, to choose where its
  // `raw_size` decoded bytes land. `request_so_far` holds the frame's header fields
  // and validated message; its attachments before `index` are complete (in
  // `attachments`, or in place), the others still empty.
  //
  // Return an empty span (the default) to let the transport receive the attachment into
  // request.attachments[index] as usual, or a span of exactly `raw_size` bytes (say, a
  // tensor's memory or a staging buffer) that the transport fills directly: raw chunks
  // are read from the socket into it, compressed ones decompressed into it. The span is
  // borrowed; it must stay valid until Handle() is called for this request or the
  // connection ends. Handle() then sees an empty attachments[index] and
  // attachment_in_place[index] set.
  //
  // If the frame fails after this (a corrupt payload), OnRequestFailed says so (a
  // disconnect ends the handler instead): the destination may be partly written, and
  // Handle() is not called for the frame. Runs on the connection's thread like Handle(). A span of another size, or an
  // exception, answers the frame with an INTERNAL error and closes the connection.
  virtual std::span<std::byte> AttachmentDestination(const Frame& request_so_far, size_t index,
                                                     uint64_t raw_size);

  // Called on the connection's thread when a request frame fails after this handler
  // chose the destination of one of its attachments (a corrupt or truncated payload, a
  // limit): the destination may be partly written, so a handler that received into an
  // object of its own (a tensor) must no longer trust it. Handle() is not called for the
  // frame, and the connection then closes. The default does nothing.
  virtual void OnRequestFailed(const Frame& request_so_far, const Status& why);

  // Called before attachment `index` is read (and before AttachmentDestination), with
  // `frame_raw_bytes`, the raw bytes of the frame's attachments up to and including
  // this one: a handler refuses what it will not hold (a session's memory quota). An
  // error answers the frame with it and closes the connection, before any of the
  // attachment's bytes are read or decompressed. The default admits everything.
  virtual Status AdmitAttachment(const Frame& request_so_far, size_t index, uint64_t frame_raw_bytes);

  // Whether the peer has completed the protocol's opening (Remex: `hello`, and
  // `authenticate` when the server requires a token). Asked when the connection starts
  // and after each reply, on the connection's thread. Until it is true the transport
  // admits only frames of at most ServerOptions::max_unauthenticated_message_bytes
  // with no attachments, the connection counts against the unauthenticated caps, and
  // it must be true within ServerOptions::auth_timeout of the connection's start. The
  // default is true: no opening to wait for.
  virtual bool Authenticated() const;
};

// Called once per accepted connection, on a server thread; may be called concurrently
// for different connections. Returning nullptr (or throwing) closes the connection.
using HandlerFactory = std::function<std::unique_ptr<ConnectionHandler>(const ConnectionInfo&)>;

struct ServerOptions {
  std::string host = "127.0.0.1";
  uint16_t port = kDefaultPort;  // 0: an ephemeral port, see Server::port()
  int threads = 4;
  Limits limits;
  // What happens to reply attachments marked `compress` (CompressionMode, or a bool:
  // true = kAuto, false = kNone), and the zstd level. Replies to a client of protocol
  // minor 0 use that minor's encoding (see EncodeOptions::peer_minor).
  CompressionSetting compression = CompressionMode::kAuto;
  int compression_level = kDefaultCompressionLevel;
  // Connections served at once, in all and from one peer address; one more is answered
  // with a RESOURCE_EXHAUSTED error reply (request_id 0) naming the limit, then closed.
  // 0: no limit.
  uint32_t max_connections = 1024;
  uint32_t max_connections_per_address = 64;
  // Connections whose handler is not yet Authenticated(): each may hold at most
  // `max_unauthenticated_message_bytes` of request message (frames with attachments
  // are refused) plus the read-ahead buffer (ReadAhead::kBytes), and is closed when it
  // is not authenticated `auth_timeout` after it was accepted. Past
  // `max_unauthenticated_connections` a new connection closes the oldest
  // unauthenticated one (an honest client authenticates within milliseconds; a flood
  // of silent connections cannot lock it out); past
  // `max_unauthenticated_per_address` from one address the new one is refused
  // (RESOURCE_EXHAUSTED naming the limit). 0: no limit / no deadline.
  std::chrono::milliseconds auth_timeout{std::chrono::seconds(5)};
  uint32_t max_unauthenticated_message_bytes = 4096;
  uint32_t max_unauthenticated_connections = 256;
  uint32_t max_unauthenticated_per_address = 32;
  // Raw bytes of attachments being received at once over all connections, charged at
  // each attachment's header (its declared raw size) and released when its frame is
  // handed to the handler or fails: what incomplete uploads may make the server hold.
  // Past it the frame is refused (RESOURCE_EXHAUSTED naming max_receiving_bytes) before
  // its payload is read, and the connection closed. 0: no limit.
  uint64_t max_receiving_bytes = 0;
  // A connection that starts no frame for `idle_timeout` while none of its requests is
  // being handled is closed; so is one whose frame, once started, makes no progress
  // (a read step of at most 4 MiB) for `read_timeout`. Zero: no deadline.
  std::chrono::milliseconds idle_timeout{std::chrono::minutes(15)};
  std::chrono::milliseconds read_timeout{std::chrono::seconds(60)};
  // A reply the peer does not read (no byte of it taken for `write_timeout`) closes the
  // connection. Zero: no deadline.
  std::chrono::milliseconds write_timeout{std::chrono::seconds(60)};
  // Threads that encode (compress) replies whose compressible attachments add up to at
  // least 1 MiB, so that a large tensorRead does not hold an I/O thread that other
  // connections share; smaller replies are encoded on the I/O thread. 0: every reply
  // is encoded on its I/O thread.
  int encode_threads = 2;
  // Set: every connection speaks TLS. A client that sends a plaintext frame instead of a
  // TLS handshake is answered, in plaintext, with FAILED_PRECONDITION ("this server
  // accepts TLS connections only") and closed; a failed handshake (a wrong or missing
  // client certificate under mutual TLS) closes the connection. The handshake must
  // finish within read_timeout.
  std::optional<TlsServerConfig> tls;
  // Where the transport's connection events go, one line each, naming the peer: a
  // connection refused (the caps above), a frame refused (a protocol error: what was
  // being read, the request it belonged to when known, the status code and message),
  // after which the connection is closed, and connections closed by a timeout or a
  // failed TLS handshake. Called on I/O threads; must not throw. Unset: stderr, each
  // line prefixed "remex rpc server: ".
  std::function<void(const std::string& line)> log;
};

// A TCP server on its own io_context and thread pool.
//
// A frame with bad magic, an unsupported major version (FAILED_PRECONDITION naming both
// versions), lengths over `limits` (RESOURCE_EXHAUSTED), a malformed message or a
// corrupt attachment (INVALID_ARGUMENT) is answered with a wire::Reply error, carrying
// the frame's request_id when its header was readable (else 0), and the connection is
// then closed. A peer that disconnects mid-frame just ends its connection.
//
// Start() and Stop() are not thread-safe with each other; port() is.
class Server {
 public:
  Server(ServerOptions options, HandlerFactory factory);
  // Stops the server.
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds, listens and starts the threads. UNAVAILABLE (with the system message) when
  // the address cannot be resolved or bound; FAILED_PRECONDITION when already started;
  // INVALID_ARGUMENT naming the file when a TLS certificate, key or CA file cannot be
  // read or the key does not match the certificate.
  Status Start();

  // Closes the listener (no new connections); the connections open go on being
  // served. Thread-safe with Stop(); idempotent.
  void StopAccepting();

  // Closes the listener and every connection, waits for running handlers to return,
  // destroys every handler and joins the threads. Idempotent. A stopped server cannot
  // be started again.
  void Stop();

  // The bound port (the ephemeral one when options.port was 0); 0 before Start().
  uint16_t port() const;
  // Byte and frame counts of all the server's connections together, since Start().
  const ConnectionStats& totals() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

// ---------------------------------------------------------------------------------------
// Client.

// A blocking client over one connection. Each operation runs the client's own
// io_context on the calling thread until it completes or its deadline passes.
// Not thread-safe: one caller at a time.
//
// After any error on the connection (I/O error, deadline, malformed frame from the
// server) the connection is closed and every later call returns UNAVAILABLE.
class Client {
 public:
  // Resolves and connects within `timeout`, which also becomes the deadline of each
  // later Send / Receive (see SetTimeout). UNAVAILABLE with the system message when the
  // connection fails; DEADLINE_EXCEEDED when `timeout` passes. With `tls`, the TLS
  // handshake is part of connecting: INVALID_ARGUMENT naming the file when a CA,
  // certificate or key file cannot be read; UNAVAILABLE naming the reason when the
  // handshake fails (the server's certificate does not chain to the CA or does not name
  // `host`, or the server does not speak TLS).
  static StatusOr<std::unique_ptr<Client>> Connect(std::string host, uint16_t port,
                                                   std::chrono::milliseconds timeout,
                                                   const std::optional<TlsClientConfig>& tls = std::nullopt);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // Writes one frame (header, message and attachment payloads gathered, raw payloads
  // not copied). A request_id of 0 is replaced with the next id of this client and
  // written back to frame.request_id. The attachments' bytes are no longer used when
  // Send returns. Errors as in EncodeFrame (nothing is written then, the connection
  // stays open), UNAVAILABLE on an I/O error, DEADLINE_EXCEEDED.
  Status Send(OutFrame& frame);

  // Pipelining: encodes every frame (ids assigned as in Send, in order), then writes
  // them all with one gather write, so that N requests cost one round trip. The caller
  // then calls Receive() once per frame; the server answers in order. While the write
  // is in progress, bytes the server already sends back are read and kept for the
  // following Receive() calls, so large requests and large replies cannot deadlock
  // each other. When an encoding fails nothing is written (ids already assigned stay
  // assigned). The deadline (SetTimeout) covers the whole write. Errors as in Send.
  Status SendMany(std::vector<OutFrame>& frames);

  // Send, for a request whose reply nobody waits for (a free of handles whose owners
  // went away): the frame is encoded now (its id assigned) and written with the next
  // Send or SendMany, ahead of their frames in the same write (or by the next Receive,
  // when nothing else is sent first); the next Receive reads its reply first and drops
  // it, whatever it says. Nothing is written when the connection closes first. At most
  // 64 such replies wait unread: the 65th call writes and reads them first. Errors: of
  // the encoding, and those of the drained replies' writing and reading.
  Status SendUnanswered(OutFrame& frame);

  // Reads one frame (after the replies SendUnanswered left unread, dropped). Errors as
  // in DecodeFrame, with "frame from server" context; INTERNAL when a reply left unread
  // answers another request.
  StatusOr<Frame> Receive();

  // Where an attachment of a received frame lands: called with the frame's header and
  // message (no attachments yet), the attachment's index and its raw size. A span of
  // exactly raw_size receives the bytes in place (Frame::attachment_in_place); an empty
  // span lets the client allocate as usual.
  using ReceiveDestination =
      std::function<std::span<std::byte>(const Frame& so_far, size_t index, uint64_t raw_size)>;
  // Receive() with attachments read straight into caller memory (e.g. a reused buffer
  // for repeated downloads).
  StatusOr<Frame> Receive(const ReceiveDestination& destination);

  // Send + Receive. INTERNAL when the reply's request_id differs from the request's
  // (or that reply's own error, when it is an error reply). A wire error reply with the
  // right request_id is returned as a Frame: see ErrorFromReply.
  StatusOr<Frame> Call(OutFrame& frame);

  // What happens to attachments marked `compress`, and the zstd level (default: kAuto,
  // level 1). Until the first frame from the server has been received, attachments are
  // sent in the encoding of protocol minor 0 (whole, unshuffled); afterwards in that
  // of the server's minor.
  void SetCompression(CompressionMode mode, int level);
  // The first API: true = kAuto, false = kNone.
  void SetCompression(bool enabled, int level);
  // Deadline of each Send and each Receive (a whole frame, not a single read). Zero or
  // negative: none.
  void SetTimeout(std::chrono::milliseconds timeout);
  void SetLimits(const Limits& limits);

  bool connected() const;
  // Whether the peer is this machine: a loopback address (127.0.0.0/8, ::1). False when
  // the connection is closed.
  bool loopback() const;
  // Closes the connection. Idempotent.
  void Close();

  // Every byte written to / read from the socket, headers included.
  uint64_t bytes_sent() const;
  uint64_t bytes_received() const;
  // Attachment payload bytes sent and received on this connection (see AttachmentStats).
  AttachmentStats attachment_stats() const;
  // Socket writes issued: one per Send, one per non-empty SendMany (each a gather
  // write of all its frames, SendUnanswered's waiting ones first, which Asio may split
  // into several system calls only when the socket buffer is full), and one per
  // Receive that writes SendUnanswered's frames alone.
  uint64_t writes() const;
  // Round trips: the times a reply was read after requests were written (a Call, or a
  // SendMany and the Receives of its replies, count one; SendUnanswered counts none).
  uint64_t round_trips() const;

 private:
  class Impl;
  explicit Client(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace remex::rpc
