// What the transport tests share (transport_test.cc, transport_attachment_test.cc): an
// echoing handler, frame helpers and the TransportTest fixture serving it.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <stdexcept>
#include <thread>
#include <vector>

#include <boost/asio.hpp>
#include <gtest/gtest.h>

#include "rpc/transport.h"

namespace remex::rpc::testing {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using namespace std::chrono_literals;

// Ping payloads with a special meaning to EchoHandler.
inline constexpr uint64_t kCompressReply = 1;
inline constexpr uint64_t kCompressFloatReply = 5;  // compressed, element size 4
inline constexpr uint64_t kThrow = 666;
inline constexpr uint64_t kSleep = 777;

struct Counters {
  std::atomic<int> created{0};
  std::atomic<int> destroyed{0};
  std::atomic<uint64_t> last_bytes_read{0};
  std::atomic<uint64_t> last_bytes_written{0};
  AttachmentStats last_attachment_stats;  // written before `destroyed` is incremented
};

// Answers ping with pong(payload) and echoes the attachments back.
class EchoHandler : public ConnectionHandler {
 public:
  EchoHandler(const ConnectionInfo& info, Counters* counters)
      : stats_(info.stats), counters_(counters) {
    ++counters_->created;
  }
  ~EchoHandler() override {
    counters_->last_bytes_read = stats_->bytes_read.load();
    counters_->last_bytes_written = stats_->bytes_written.load();
    counters_->last_attachment_stats = stats_->attachment_stats();
    ++counters_->destroyed;
  }

  OutFrame Handle(Frame& request) override {
    capnp::FlatArrayMessageReader reader = request.Reader();
    wire::Request::Reader r = reader.getRoot<wire::Request>();
    if (!r.isPing()) return MakeErrorReply(0, Unimplemented("only ping"));
    uint64_t payload = r.getPing().getPayload();
    if (payload == kThrow) throw std::runtime_error("handler blew up");
    if (payload == kSleep) std::this_thread::sleep_for(500ms);
    OutFrame reply;
    reply.message = std::make_unique<capnp::MallocMessageBuilder>();
    reply.message->initRoot<wire::Reply>().initPong().setPayload(payload);
    for (std::vector<std::byte>& a : request.attachments) {
      bool compress = payload == kCompressReply || payload == kCompressFloatReply;
      uint8_t element_size = payload == kCompressFloatReply ? 4 : 0;
      reply.attachments.push_back(OwnedAttachment(std::move(a), compress, element_size));
    }
    return reply;
  }

 private:
  const ConnectionStats* stats_;
  Counters* counters_;
};

inline OutFrame Ping(uint64_t payload) {
  OutFrame f;
  f.message = std::make_unique<capnp::MallocMessageBuilder>();
  f.message->initRoot<wire::Request>().initPing().setPayload(payload);
  return f;
}

inline uint64_t PongPayload(const Frame& frame) {
  capnp::FlatArrayMessageReader reader = frame.Reader();
  wire::Reply::Reader reply = reader.getRoot<wire::Reply>();
  EXPECT_TRUE(reply.isPong()) << ErrorFromReply(reply).ToString();
  return reply.isPong() ? reply.getPong().getPayload() : 0;
}

// Pings `first` .. `first + n - 1` in one SendMany and checks that the replies come back
// in order, each answering its request (wrap the call in ASSERT_NO_FATAL_FAILURE).
inline void PingMany(Client& client, uint64_t first, uint64_t n) {
  std::vector<OutFrame> frames;
  for (uint64_t i = 0; i < n; ++i) frames.push_back(Ping(first + i));
  ASSERT_TRUE(client.SendMany(frames).ok());
  for (uint64_t i = 0; i < n; ++i) {
    StatusOr<Frame> reply = client.Receive();
    ASSERT_TRUE(reply.ok()) << i << ": " << reply.status().ToString();
    EXPECT_EQ(reply->request_id, frames[i].request_id);
    EXPECT_EQ(PongPayload(*reply), first + i);
  }
}

inline Status ReplyStatus(const Frame& frame) {
  capnp::FlatArrayMessageReader reader = frame.Reader();
  return ErrorFromReply(reader.getRoot<wire::Reply>());
}

// Writes `bytes` on a fresh raw socket to `port`, then reads until the server closes.
inline std::vector<std::byte> RawExchange(uint16_t port, const std::vector<std::byte>& bytes) {
  asio::io_context io;
  tcp::socket socket(io);
  socket.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
  asio::write(socket, asio::buffer(bytes));
  std::vector<std::byte> received;
  std::array<std::byte, 4096> buf;
  boost::system::error_code ec;
  for (;;) {
    size_t n = socket.read_some(asio::buffer(buf), ec);
    received.insert(received.end(), buf.begin(), buf.begin() + n);
    if (ec) break;
  }
  EXPECT_EQ(ec, asio::error::eof) << ec.message();  // closed cleanly by the server
  return received;
}

inline bool WaitFor(const std::function<bool()>& cond, std::chrono::milliseconds timeout = 5s) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!cond()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(5ms);
  }
  return true;
}

class TransportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ServerOptions options;
    options.host = "127.0.0.1";
    options.port = 0;
    options.threads = 2;
    server_ = std::make_unique<Server>(options, [this](const ConnectionInfo& info) {
      return std::make_unique<EchoHandler>(info, &counters_);
    });
    Status s = server_->Start();
    ASSERT_TRUE(s.ok()) << s.ToString();
    ASSERT_NE(server_->port(), 0);
  }

  void TearDown() override { server_->Stop(); }

  std::unique_ptr<Client> Connect() {
    StatusOr<std::unique_ptr<Client>> c = Client::Connect("127.0.0.1", server_->port(), 5s);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return c.ok() ? std::move(c).value() : nullptr;
  }

  std::vector<std::byte> RawExchange(const std::vector<std::byte>& bytes) {
    return testing::RawExchange(server_->port(), bytes);
  }

  Counters counters_;
  std::unique_ptr<Server> server_;
};

}  // namespace remex::rpc::testing
