// Server: the listener, its I/O threads and the connection caps; each accepted
// connection is served by a Connection (server_connection.h).
#include "rpc/transport.h"

#include <functional>
#include <future>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "rpc/server_connection.h"
#include "rpc/stream.h"

namespace remex::rpc {

namespace asio = boost::asio;
using boost::asio::ip::tcp;
using boost::system::error_code;
using detail::Connection;
using detail::ExceptionMessage;
using detail::LogLine;
using detail::MakeServerContext;

// ---------------------------------------------------------------------------------------
// ConnectionHandler's defaults.

ConnectionHandler::~ConnectionHandler() = default;

void ConnectionHandler::HandleAsync(Frame& request, ReplyFn reply) { reply(Handle(request)); }

void ConnectionHandler::OnPeerClosed() {}

void ConnectionHandler::OnRequestFailed(const Frame& /*request_so_far*/, const Status& /*why*/) {}

Status ConnectionHandler::AdmitAttachment(const Frame& /*request_so_far*/, size_t /*index*/,
                                          uint64_t /*frame_raw_bytes*/) {
  return OkStatus();
}

bool ConnectionHandler::Authenticated() const { return true; }

std::span<std::byte> ConnectionHandler::AttachmentDestination(const Frame& /*request_so_far*/,
                                                             size_t /*index*/,
                                                             uint64_t /*raw_size*/) {
  return {};
}

// ---------------------------------------------------------------------------------------
// Server.

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
      size_t unauthenticated = 0, unauthenticated_from_address = 0;
      std::shared_ptr<Connection> oldest_unauthenticated;
      for (const std::weak_ptr<Connection>& w : connections_) {
        auto c = w.lock();
        if (!c) continue;
        const bool same = c->address() == connection->address();
        from_address += same;
        if (!c->authenticated()) {
          ++unauthenticated;
          unauthenticated_from_address += same;
          if (!oldest_unauthenticated) oldest_unauthenticated = c;  // connections_ is in accept order
        }
      }
      Status refused;
      if (options_.max_unauthenticated_per_address &&
          unauthenticated_from_address >= options_.max_unauthenticated_per_address) {
        refused = ResourceExhausted("the server holds at most " +
                                    std::to_string(options_.max_unauthenticated_per_address) +
                                    " connections that have not authenticated yet from one address "
                                    "(max_unauthenticated_per_address; " +
                                    connection->address() + " has " +
                                    std::to_string(unauthenticated_from_address) + ")");
      } else if (options_.max_connections && connections_.size() >= options_.max_connections) {
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
      if (options_.max_unauthenticated_connections && unauthenticated >= options_.max_unauthenticated_connections) {
        // A flood of connections that never authenticate must not lock honest clients
        // out: the oldest waiting one makes room.
        LogLine(options_, "closing connection " + oldest_unauthenticated->info().peer + ": the oldest of " +
                              std::to_string(unauthenticated) +
                              " connections not authenticated yet (max_unauthenticated_connections)");
        oldest_unauthenticated->PostClose();
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

}  // namespace remex::rpc
