// Token authentication of remex-server (--token-file), tested as an attacker would
// against a real server process on loopback: no token, a wrong token, requests and
// uploads before authenticating, a replayed proof, the refusal to serve a non-loopback
// address without a token, and the metrics endpoint's bearer token (and the refusal to
// serve /metrics on a non-loopback address without one).
#include <gtest/gtest.h>

#include <boost/asio.hpp>
#include <capnp/message.h>
#include <capnp/serialize.h>

#include <sys/socket.h>
#include <sys/time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include "host_client/client/client.h"
#include "rpc/auth.h"
#include "rpc/frame.h"
#include "rpc/transport.h"
#include "tests/model_util.h"
#include "tests/process_util.h"
#include "tests/raw_connection.h"

namespace remex {
namespace {

using client::Session;
using remex::testing::AddReluModel;
using remex::testing::Compile;
using remex::testing::Floats;
using remex::testing::RunCommand;
using remex::testing::RawConnection;
using remex::testing::ServerProcess;
namespace asio = boost::asio;

constexpr char kToken[] = "s3cret-token-of-the-farm-0123456789";

class AuthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    token_file_ = (std::filesystem::temp_directory_path() / ("remex_auth_" + std::to_string(::getpid()))).string();
    std::ofstream(token_file_) << kToken << "\n";
    server_ = std::make_unique<ServerProcess>(std::vector<std::string>{"--token-file", token_file_});
    ASSERT_NE(server_->port(), 0) << "remex-server did not start";
  }
  void TearDown() override {
    server_.reset();
    std::filesystem::remove(token_file_);
  }

  StatusOr<std::unique_ptr<Session>> Connect(const std::string& token) {
    client::ConnectOptions options;
    options.token = token;
    return Session::Connect("127.0.0.1", server_->port(), options);
  }

  std::string token_file_;
  std::unique_ptr<ServerProcess> server_;
};

// A raw connection for hand-written requests; Call sends one and returns the reply's
// status and, for hello, the challenge.
class Raw {
 public:
  explicit Raw(uint16_t port) : sock_(io_) { sock_.connect({asio::ip::make_address("127.0.0.1"), port}); }

  Status Call(capnp::MessageBuilder& msg, std::string* challenge = nullptr, std::string* server_proof = nullptr) {
    auto words = capnp::messageToFlatArray(msg);
    rpc::FrameHeader fh;
    fh.request_id = ++id_;
    fh.message_bytes = static_cast<uint32_t>(words.asBytes().size());
    asio::write(sock_, asio::buffer(rpc::EncodeFrameHeader(fh)));
    asio::write(sock_, asio::buffer(words.asBytes().begin(), words.asBytes().size()));
    std::array<std::byte, rpc::kFrameHeaderSize> hb;
    boost::system::error_code ec;
    asio::read(sock_, asio::buffer(hb), ec);
    if (ec) return Unavailable(ec.message());
    auto rh = rpc::DecodeFrameHeader(hb);
    if (!rh.ok()) return rh.status();
    std::vector<capnp::word> reply(rh->message_bytes / sizeof(capnp::word));
    asio::read(sock_, asio::buffer(reply.data(), rh->message_bytes), ec);
    if (ec) return Unavailable(ec.message());
    capnp::FlatArrayMessageReader reader(kj::arrayPtr(reply.data(), reply.size()));
    auto root = reader.getRoot<rpc::wire::Reply>();
    if (challenge && root.isHello()) {
      auto c = root.getHello().getAuthChallenge();
      challenge->assign(reinterpret_cast<const char*>(c.begin()), c.size());
    }
    if (server_proof && root.isAuthenticate()) {
      auto p = root.getAuthenticate().getServerProof();
      server_proof->assign(reinterpret_cast<const char*>(p.begin()), p.size());
    }
    return rpc::ErrorFromReply(root);
  }

  Status Hello(std::string* challenge) {
    capnp::MallocMessageBuilder msg;
    msg.initRoot<rpc::wire::Request>().initHello().setProtocolMajor(rpc::kProtocolMajor);
    return Call(msg, challenge);
  }

  Status Authenticate(const std::string& nonce, const std::string& proof, std::string* server_proof = nullptr) {
    capnp::MallocMessageBuilder msg;
    auto a = msg.initRoot<rpc::wire::Request>().initAuthenticate();
    a.setClientNonce(capnp::Data::Reader(reinterpret_cast<const capnp::byte*>(nonce.data()), nonce.size()));
    a.setProof(capnp::Data::Reader(reinterpret_cast<const capnp::byte*>(proof.data()), proof.size()));
    return Call(msg, nullptr, server_proof);
  }

  Status Alloc() {
    capnp::MallocMessageBuilder msg;
    auto t = msg.initRoot<rpc::wire::Request>().initTensorAlloc();
    t.initDesc().setDtype(1);
    t.getDesc().initShape(1).set(0, 4);
    return Call(msg);
  }

 private:
  asio::io_context io_;
  asio::ip::tcp::socket sock_;
  uint64_t id_ = 0;
};

TEST_F(AuthTest, TheRightTokenServesAsBefore) {
  auto s = Connect(kToken);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_TRUE((*s)->server_info().requires_token);
  auto module = (*s)->LoadModule(Compile(AddReluModel()), "add_relu");
  ASSERT_TRUE(module.ok()) << module.status().ToString();
  EXPECT_TRUE((*s)->Upload(Floats({1, 4}, {1, 2, 3, 4})).ok());
  EXPECT_TRUE((*s)->Ping().ok());
}

TEST_F(AuthTest, NoTokenOrAWrongOneIsPermissionDenied) {
  auto none = Connect("");
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(none.status().message().find("requires a token"), std::string::npos) << none.status().ToString();
  auto wrong = Connect("not-the-token-of-this-server");
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(wrong.status().message().find("authentication failed"), std::string::npos) << wrong.status().ToString();
}

TEST_F(AuthTest, NothingIsServedBeforeAuthenticationAndAFailureIsFinal) {
  Raw raw(server_->port());
  std::string challenge;
  ASSERT_TRUE(raw.Hello(&challenge).ok());
  EXPECT_EQ(challenge.size(), rpc::kAuthNonceBytes);
  Status alloc = raw.Alloc();
  EXPECT_EQ(alloc.code(), StatusCode::kPermissionDenied) << alloc.ToString();
  // A wrong proof, then the right one: the session stays refused.
  std::string nonce(rpc::kAuthNonceBytes, 'n');
  EXPECT_EQ(raw.Authenticate(nonce, std::string(32, 'x')).code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(raw.Authenticate(nonce, rpc::AuthProof(kToken, "client", challenge, nonce)).code(),
            StatusCode::kPermissionDenied);
  EXPECT_EQ(raw.Alloc().code(), StatusCode::kPermissionDenied);
}

TEST_F(AuthTest, AProofIsGoodForItsOwnChallengeOnly) {
  Raw first(server_->port());
  std::string challenge;
  ASSERT_TRUE(first.Hello(&challenge).ok());
  const std::string nonce(rpc::kAuthNonceBytes, 'a');
  const std::string proof = rpc::AuthProof(kToken, "client", challenge, nonce);
  std::string server_proof;
  ASSERT_TRUE(first.Authenticate(nonce, proof, &server_proof).ok());
  // The server proved the token in return.
  EXPECT_TRUE(rpc::ProofsEqual(server_proof, rpc::AuthProof(kToken, "server", challenge, nonce)));
  EXPECT_TRUE(first.Alloc().ok());
  // Replayed on another session (another challenge): refused.
  Raw second(server_->port());
  std::string other;
  ASSERT_TRUE(second.Hello(&other).ok());
  EXPECT_NE(other, challenge);
  EXPECT_EQ(second.Authenticate(nonce, proof).code(), StatusCode::kPermissionDenied);
}

TEST_F(AuthTest, AnUploadBeforeAuthenticationIsRefusedAtItsHeader) {
  asio::io_context io;
  asio::ip::tcp::socket sock(io);
  sock.connect({asio::ip::make_address("127.0.0.1"), server_->port()});
  capnp::MallocMessageBuilder hello;
  hello.initRoot<rpc::wire::Request>().initHello().setProtocolMajor(rpc::kProtocolMajor);
  capnp::MallocMessageBuilder write;
  auto w = write.initRoot<rpc::wire::Request>().initTensorWrite();
  w.initDesc().setDtype(1);
  w.getDesc().initShape(1).set(0, 64 << 20);
  uint64_t id = 0;
  for (auto* msg : {static_cast<capnp::MessageBuilder*>(&hello), static_cast<capnp::MessageBuilder*>(&write)}) {
    auto words = capnp::messageToFlatArray(*msg);
    rpc::FrameHeader fh;
    fh.request_id = ++id;
    fh.message_bytes = static_cast<uint32_t>(words.asBytes().size());
    fh.attachment_count = id == 2 ? 1 : 0;
    asio::write(sock, asio::buffer(rpc::EncodeFrameHeader(fh)));
    asio::write(sock, asio::buffer(words.asBytes().begin(), words.asBytes().size()));
  }
  rpc::AttachmentHeader ah;
  ah.raw_size = ah.wire_size = uint64_t{256} << 20;  // declared, never sent
  asio::write(sock, asio::buffer(rpc::EncodeAttachmentHeader(ah)));
  // Replies: hello's, then the refusal, then the connection closes.
  std::vector<char> all;
  std::array<char, 4096> buf;
  boost::system::error_code ec;
  while (!ec) {
    size_t n = sock.read_some(asio::buffer(buf), ec);
    all.insert(all.end(), buf.begin(), buf.begin() + n);
  }
  const std::string text(all.begin(), all.end());
  EXPECT_NE(text.find("before authentication a request may carry at most 4096 message bytes and no attachment"),
            std::string::npos)
      << text;
}

// A plain socket from `local` (a loopback address: 127.0.0.1, 127.0.0.2, ...) to the
// server, for connections that never say hello.
std::unique_ptr<asio::ip::tcp::socket> ConnectFrom(asio::io_context& io, const std::string& local, uint16_t port) {
  auto sock = std::make_unique<asio::ip::tcp::socket>(io);
  sock->open(asio::ip::tcp::v4());
  sock->bind({asio::ip::make_address(local), 0});
  sock->connect({asio::ip::make_address("127.0.0.1"), port});
  return sock;
}

// Reads one reply frame (no attachments) from `sock`; the status it carries.
Status ReadReplyFrom(asio::ip::tcp::socket& sock) {
  std::array<std::byte, rpc::kFrameHeaderSize> hb;
  boost::system::error_code ec;
  asio::read(sock, asio::buffer(hb), ec);
  if (ec) return Unavailable("reading the reply: " + ec.message());
  auto rh = rpc::DecodeFrameHeader(hb);
  if (!rh.ok()) return rh.status();
  std::vector<capnp::word> body(rh->message_bytes / sizeof(capnp::word));
  asio::read(sock, asio::buffer(body.data(), rh->message_bytes), ec);
  if (ec) return Unavailable("reading the reply: " + ec.message());
  capnp::FlatArrayMessageReader reader(kj::arrayPtr(body.data(), body.size()));
  return rpc::ErrorFromReply(reader.getRoot<rpc::wire::Reply>());
}

// Everything `sock` reads until the server closes it or `limit` passes.
std::string ReadUntilClosed(asio::ip::tcp::socket& sock, std::chrono::milliseconds limit) {
  timeval tv{static_cast<time_t>(limit.count() / 1000), static_cast<suseconds_t>(limit.count() % 1000 * 1000)};
  setsockopt(sock.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  std::string all;
  char buf[4096];
  for (;;) {
    ssize_t n = ::recv(sock.native_handle(), buf, sizeof buf, 0);
    if (n <= 0) return n == 0 ? all : all + "<not closed>";
    all.append(buf, static_cast<size_t>(n));
  }
}

// The probe's attack: 40 connections that never authenticate each send a 64 MiB
// message. Before authentication a frame may carry 4 KiB of message, so each is
// refused at its header and costs the server nothing it keeps.
TEST_F(AuthTest, UnauthenticatedConnectionsSendingHugeMessagesCostNoMemory) {
  ASSERT_TRUE(Connect(kToken).ok());  // warm: code paths, threads
  const uint64_t idle = remex::testing::ResidentBytes(server_->pid());
  ASSERT_GT(idle, 0u);
  constexpr int kConnections = 40;
  constexpr uint32_t kMessageBytes = (64u << 20) - 8;
  std::vector<std::thread> attackers;
  std::vector<std::string> replies(kConnections);
  std::vector<size_t> sent(kConnections);
  for (int i = 0; i < kConnections; ++i) {
    attackers.emplace_back([&, i] {
      asio::io_context io;
      // Two addresses, so that none is refused by --max-unauthenticated-per-address.
      auto sock = ConnectFrom(io, i % 2 ? "127.0.0.2" : "127.0.0.3", server_->port());
      rpc::FrameHeader fh;
      fh.request_id = 1;
      fh.message_bytes = kMessageBytes;
      boost::system::error_code ec;
      asio::write(*sock, asio::buffer(rpc::EncodeFrameHeader(fh)), ec);
      // The refusal comes at the header; read it before the server's close can reset
      // the connection, then send the message all the same.
      replies[i] = ReadReplyFrom(*sock).ToString();
      std::vector<char> chunk(1 << 20, 'x');
      ec = {};
      for (uint32_t off = 0; !ec && off < kMessageBytes; off += chunk.size()) {
        sent[i] += asio::write(*sock, asio::buffer(chunk.data(), std::min<size_t>(chunk.size(), kMessageBytes - off)),
                               ec);
      }
    });
  }
  for (auto& t : attackers) t.join();
  const uint64_t after = remex::testing::ResidentBytes(server_->pid());
  for (int i = 0; i < kConnections; ++i) {
    EXPECT_NE(replies[i].find("before authentication a request may carry at most 4096 message bytes"),
              std::string::npos)
        << "connection " << i << " (sent " << sent[i] << " bytes): " << replies[i];
  }
  std::printf("resident: %llu MiB idle, %llu MiB after %d connections each sending a %u-byte message\n",
              static_cast<unsigned long long>(idle >> 20), static_cast<unsigned long long>(after >> 20), kConnections,
              kMessageBytes);
  EXPECT_LT(after, idle + (50u << 20)) << "resident " << (after >> 20) << " MiB, idle " << (idle >> 20) << " MiB";
  auto s = Connect(kToken);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_TRUE((*s)->Ping().ok());
}

// Before authentication even hello is bounded: one a byte over 4 KiB is refused.
TEST_F(AuthTest, AnOversizedHelloIsRefused) {
  asio::io_context io;
  auto sock = ConnectFrom(io, "127.0.0.1", server_->port());
  capnp::MallocMessageBuilder msg;
  auto hello = msg.initRoot<rpc::wire::Request>().initHello();
  hello.setProtocolMajor(rpc::kProtocolMajor);
  hello.setClientName(std::string(8192, 'n'));
  auto words = capnp::messageToFlatArray(msg);
  rpc::FrameHeader fh;
  fh.request_id = 1;
  fh.message_bytes = static_cast<uint32_t>(words.asBytes().size());
  asio::write(*sock, asio::buffer(rpc::EncodeFrameHeader(fh)));
  boost::system::error_code ec;
  asio::write(*sock, asio::buffer(words.asBytes().begin(), words.asBytes().size()), ec);
  const std::string reply = ReadUntilClosed(*sock, std::chrono::seconds(10));
  EXPECT_NE(reply.find("before authentication a request may carry at most 4096"), std::string::npos) << reply;
}

// A hello that does not say who the client is: the reply carries the challenge and
// nothing a stranger could use (no session id, cancel key, version or device); the
// client that authenticates learns them.
TEST_F(AuthTest, HelloTellsAStrangerOnlyTheChallenge) {
  auto stranger = Connect("");
  ASSERT_FALSE(stranger.ok());
  asio::io_context io;
  auto sock = ConnectFrom(io, "127.0.0.1", server_->port());
  capnp::MallocMessageBuilder msg;
  msg.initRoot<rpc::wire::Request>().initHello().setProtocolMajor(rpc::kProtocolMajor);
  auto words = capnp::messageToFlatArray(msg);
  rpc::FrameHeader fh;
  fh.request_id = 1;
  fh.message_bytes = static_cast<uint32_t>(words.asBytes().size());
  asio::write(*sock, asio::buffer(rpc::EncodeFrameHeader(fh)));
  asio::write(*sock, asio::buffer(words.asBytes().begin(), words.asBytes().size()));
  std::array<std::byte, rpc::kFrameHeaderSize> hb;
  asio::read(*sock, asio::buffer(hb));
  auto rh = rpc::DecodeFrameHeader(hb);
  ASSERT_TRUE(rh.ok());
  std::vector<capnp::word> body(rh->message_bytes / sizeof(capnp::word));
  asio::read(*sock, asio::buffer(body.data(), rh->message_bytes));
  capnp::FlatArrayMessageReader reader(kj::arrayPtr(body.data(), body.size()));
  auto reply = reader.getRoot<rpc::wire::Reply>();
  ASSERT_TRUE(reply.isHello());
  auto hello = reply.getHello();
  EXPECT_EQ(hello.getAuthChallenge().size(), rpc::kAuthNonceBytes);
  EXPECT_EQ(hello.getSessionId(), 0u);
  EXPECT_EQ(hello.getCancelKey().size(), 0u);
  EXPECT_EQ(hello.getDevices().size(), 0u);
  EXPECT_EQ(hello.getServerVersion().size(), 0u);
  EXPECT_FALSE(hello.hasEnvironment());  // no command line, host or GPU facts either
  auto s = Connect(kToken);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_NE((*s)->server_info().session_id, 0u);
  const auto& env = (*s)->server_info().environment;
  EXPECT_TRUE(env.known);
  EXPECT_GE(env.logical_cpus, 1u);
  EXPECT_NE(std::find(env.server_args.begin(), env.server_args.end(), "--token-file"), env.server_args.end());
  EXPECT_EQ((*s)->server_info().devices.size(), 1u);
  EXPECT_EQ((*s)->server_info().cancel_key.size(), 16u);
  EXPECT_TRUE((*s)->server_info().requires_token);
}

// Silent connections: a connection must authenticate within --auth-timeout-s, one
// address may hold --max-unauthenticated-per-address of them, and past
// --max-unauthenticated-connections the oldest makes room, so that a flood of silent
// connections from many addresses never locks an honest client out.
class SilentConnectionTest : public AuthTest {
 protected:
  void SetUp() override {
    token_file_ = (std::filesystem::temp_directory_path() / ("remex_silent_" + std::to_string(::getpid()))).string();
    std::ofstream(token_file_) << kToken << "\n";
  }
  void Start(const std::vector<std::string>& flags) {
    std::vector<std::string> args = {"--token-file", token_file_};
    args.insert(args.end(), flags.begin(), flags.end());
    server_ = std::make_unique<ServerProcess>(args);
    ASSERT_NE(server_->port(), 0) << "remex-server did not start";
  }
};

TEST_F(SilentConnectionTest, ASilentConnectionIsClosedAtTheAuthTimeout) {
  Start({"--auth-timeout-s", "1"});
  asio::io_context io;
  auto silent = ConnectFrom(io, "127.0.0.1", server_->port());
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(ReadUntilClosed(*silent, std::chrono::seconds(20)), "");
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_GE(waited, std::chrono::milliseconds(900));
  EXPECT_LT(waited, std::chrono::seconds(10));
  // One that said hello but never authenticated is closed too.
  RawConnection half(server_->port());
  EXPECT_TRUE(half.ClosedWithin(std::chrono::seconds(20)));
  // An authenticated session is not bound by it.
  auto s = Connect(kToken);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  EXPECT_TRUE((*s)->Ping().ok());
}

TEST_F(SilentConnectionTest, OneAddressMayHoldOnlySoManyAndTheOldestMakesRoom) {
  Start({"--auth-timeout-s", "60", "--max-unauthenticated-per-address", "4", "--max-unauthenticated-connections",
         "8"});
  asio::io_context io;
  std::vector<std::unique_ptr<asio::ip::tcp::socket>> silent;
  for (int i = 0; i < 4; ++i) silent.push_back(ConnectFrom(io, "127.0.0.2", server_->port()));
  // The fifth from that address is refused, naming the limit.
  auto fifth = ConnectFrom(io, "127.0.0.2", server_->port());
  const std::string refused = ReadUntilClosed(*fifth, std::chrono::seconds(10));
  EXPECT_NE(refused.find("max_unauthenticated_per_address"), std::string::npos) << refused;
  // Another address fills the server-wide cap; an honest client (a third address) is
  // still served: the oldest silent connection was closed for it.
  for (int i = 0; i < 4; ++i) silent.push_back(ConnectFrom(io, "127.0.0.3", server_->port()));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // all accepted
  auto s = Connect(kToken);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_TRUE((*s)->Ping().ok());
  EXPECT_EQ(ReadUntilClosed(*silent.front(), std::chrono::seconds(10)), "") << "the oldest was not closed";
}

// /metrics of a server with a token wants it as a bearer token; health and readiness
// say nothing secret and stay open. Failed authentications are counted server-wide,
// with no detail of who failed.
TEST_F(AuthTest, MetricsNeedTheTokenHealthAndReadinessDoNot) {
  auto [status, body] = server_->HttpGet("/metrics");
  EXPECT_EQ(status, 401) << body;
  EXPECT_NE(body.find("Authorization: Bearer"), std::string::npos) << body;
  EXPECT_EQ(server_->HttpGet("/metrics", "Authorization: Bearer not-the-token-of-this-server\r\n").first, 401);
  EXPECT_EQ(server_->HttpGet("/metrics", "Authorization: Bearer " + std::string(kToken) + "x\r\n").first, 401);
  EXPECT_EQ(server_->HttpGet("/metrics", "Authorization: Basic " + std::string(kToken) + "\r\n").first, 401);
  EXPECT_EQ(server_->HttpGet("/metrics", "Authorization: Bearer\r\n").first, 401);
  EXPECT_EQ(server_->HttpGet("/healthz"), (std::pair<int, std::string>{200, "ok\n"}));
  EXPECT_EQ(server_->HttpGet("/readyz"), (std::pair<int, std::string>{200, "ready\n"}));

  ASSERT_FALSE(Connect("not-the-token-of-this-server").ok());
  ASSERT_FALSE(Connect("another-wrong-token-0123456789").ok());
  auto [ok_status, metrics] = server_->HttpGet("/metrics", "Authorization: Bearer " + std::string(kToken) + "\r\n");
  ASSERT_EQ(ok_status, 200) << metrics;
  EXPECT_NE(metrics.find("remex_requests_total{kind=\"authenticate\",code=\"PERMISSION_DENIED\"} 2\n"),
            std::string::npos)
      << metrics;
  EXPECT_EQ(metrics.find("127.0.0.1"), std::string::npos) << "per-peer detail on /metrics:\n" << metrics;
  // The scheme is case-insensitive (RFC 7235).
  EXPECT_EQ(server_->HttpGet("/metrics", "authorization: bearer " + std::string(kToken) + "\r\n").first, 200);
}

// --metrics-token-file: /metrics wants that token, not the one that opens sessions.
TEST(MetricsTokenTest, AMetricsTokenOfItsOwnReplacesTheServerToken) {
  const std::string dir = std::filesystem::temp_directory_path().string() + "/remex_metrics_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/server.token") << kToken << "\n";
  std::ofstream(dir + "/metrics.token") << "metrics-scraper-token-0123456789\n";
  {
    ServerProcess server({"--token-file", dir + "/server.token", "--metrics-token-file", dir + "/metrics.token"});
    ASSERT_NE(server.metrics_port(), 0) << server.banner();
    EXPECT_EQ(server.HttpGet("/metrics", "Authorization: Bearer " + std::string(kToken) + "\r\n").first, 401);
    EXPECT_EQ(server.HttpGet("/metrics", "Authorization: Bearer metrics-scraper-token-0123456789\r\n").first, 200);
    EXPECT_EQ(server.HttpGet("/readyz").first, 200);
  }
  {
    // Without --token-file the sessions need no token, /metrics still its own.
    ServerProcess server({"--metrics-token-file", dir + "/metrics.token"});
    ASSERT_NE(server.metrics_port(), 0) << server.banner();
    EXPECT_EQ(server.HttpGet("/metrics").first, 401);
    EXPECT_EQ(server.HttpGet("/metrics", "Authorization: Bearer metrics-scraper-token-0123456789\r\n").first, 200);
    EXPECT_TRUE(Session::Connect("127.0.0.1", server.port(), client::ConnectOptions{}).ok());
  }
  // A server without any token serves /metrics on loopback to anyone, as before.
  ServerProcess open;
  EXPECT_EQ(open.HttpGet("/metrics").first, 200);
  std::filesystem::remove_all(dir);
}

TEST(MetricsTokenTest, ANonLoopbackMetricsAddressNeedsATokenOrInsecure) {
  const std::string server = std::string(REMEX_SERVER_BIN) + " --listen 127.0.0.1:0 --quiet --metrics 0.0.0.0:0";
  auto refused = RunCommand(server + " 2>&1");
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_NE(refused.output.find("refusing to serve /metrics on 0.0.0.0 without a token"), std::string::npos)
      << refused.output;
  EXPECT_NE(refused.output.find("--metrics-token-file"), std::string::npos) << refused.output;
  const std::string token_file =
      std::filesystem::temp_directory_path().string() + "/remex_metrics_token_" + std::to_string(::getpid());
  std::ofstream(token_file) << "metrics-scraper-token-0123456789\n";
  for (const std::string& way_out : {" --metrics-token-file " + token_file, " --token-file " + token_file,
                                     std::string(" --insecure")}) {
    auto served = RunCommand("timeout -s TERM 2 " + server + way_out);
    EXPECT_NE(served.output.find("metrics on 0.0.0.0:"), std::string::npos) << way_out << ": " << served.output;
    EXPECT_EQ(served.exit_code, 124) << way_out << ": " << served.output;
  }
  auto alone = RunCommand(std::string(REMEX_SERVER_BIN) + " --listen 127.0.0.1:0 --quiet --metrics-token-file " +
                          token_file + " 2>&1");
  EXPECT_EQ(alone.exit_code, 2);
  EXPECT_NE(alone.output.find("--metrics-token-file needs --metrics"), std::string::npos) << alone.output;
  auto short_token = RunCommand(server + " --metrics-token-file /nonexistent-metrics.token 2>&1");
  EXPECT_EQ(short_token.exit_code, 2);
  EXPECT_NE(short_token.output.find("/nonexistent-metrics.token"), std::string::npos) << short_token.output;
  std::filesystem::remove(token_file);
}

TEST(AuthListenTest, ANonLoopbackAddressNeedsATokenOrInsecure) {
  const std::string server = REMEX_SERVER_BIN;
  auto refused = RunCommand(server + " --listen 0.0.0.0:0 --quiet 2>&1");
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_NE(refused.output.find("refusing to serve 0.0.0.0 without authentication"), std::string::npos)
      << refused.output;
  // With --insecure it serves (until `timeout` stops it with SIGTERM).
  auto insecure = RunCommand("timeout -s TERM 2 " + server + " --listen 0.0.0.0:0 --insecure --quiet");
  EXPECT_NE(insecure.output.find("remex-server listening on 0.0.0.0:"), std::string::npos) << insecure.output;
  EXPECT_EQ(insecure.exit_code, 124);  // timeout's status: the server ran until it was stopped
}

}  // namespace
}  // namespace remex
