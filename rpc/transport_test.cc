// Transport tests: round trips, refused and corrupt frames, deadlines, concurrent
// clients, errors on the wire.
#include "rpc/transport.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <random>
#include <stdexcept>
#include <thread>

#include <boost/asio.hpp>
#include <gtest/gtest.h>

#include "rpc/test_data.h"
#include "rpc/transport_test_util.h"

namespace remex::rpc {
namespace transport_test {

using testing::Compressible;
using testing::Ping;
using testing::PingMany;
using testing::PongPayload;
using testing::Random;
using testing::RawExchange;
using testing::ReplyStatus;
using testing::TransportTest;
using testing::WaitFor;
using testing::kCompressReply;
using testing::kSleep;
using testing::kThrow;

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using namespace std::chrono_literals;

TEST_F(TransportTest, PingRoundTrip) {
  std::unique_ptr<Client> client = Connect();
  ASSERT_NE(client, nullptr);
  for (uint64_t i = 10; i < 20; ++i) {
    OutFrame ping = Ping(i);
    StatusOr<Frame> reply = client->Call(ping);
    ASSERT_TRUE(reply.ok()) << reply.status().ToString();
    EXPECT_NE(ping.request_id, 0u);
    EXPECT_EQ(reply->request_id, ping.request_id);
    EXPECT_EQ(PongPayload(*reply), i);
  }
  EXPECT_EQ(counters_.created, 1);
}

TEST_F(TransportTest, LargeAttachmentCompressed) {
  std::unique_ptr<Client> client = Connect();
  ASSERT_NE(client, nullptr);
  std::vector<std::byte> data = Compressible(16 << 20);
  OutFrame ping = Ping(kCompressReply);
  ping.attachments.push_back({data.data(), data.size(), true, nullptr});
  StatusOr<Frame> reply = client->Call(ping);
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  ASSERT_EQ(reply->attachments.size(), 1u);
  EXPECT_EQ(reply->attachments[0], data);
  EXPECT_LT(client->bytes_sent(), 2u << 20);
  EXPECT_LT(client->bytes_received(), 2u << 20);
}

TEST_F(TransportTest, LargeAttachmentRaw) {
  std::unique_ptr<Client> client = Connect();
  ASSERT_NE(client, nullptr);
  std::vector<std::byte> data = Random(16 << 20, 1);
  std::vector<std::byte> text = Compressible(100000);
  OutFrame ping = Ping(2);
  ping.attachments.push_back({data.data(), data.size(), true, nullptr});  // incompressible
  ping.attachments.push_back({text.data(), text.size(), false, nullptr});  // not asked
  StatusOr<Frame> reply = client->Call(ping);
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  ASSERT_EQ(reply->attachments.size(), 2u);
  EXPECT_EQ(reply->attachments[0], data);
  EXPECT_EQ(reply->attachments[1], text);
  EXPECT_GE(client->bytes_sent(), data.size() + text.size() + kFrameHeaderSize +
                                      2 * kAttachmentHeaderSize);
  EXPECT_LT(client->bytes_sent(), data.size() + text.size() + 4096);
}

TEST_F(TransportTest, ByteCountersMatchBothSides) {
  std::unique_ptr<Client> client = Connect();
  ASSERT_NE(client, nullptr);
  std::vector<std::byte> data = Compressible(1 << 20);
  for (uint64_t payload : {kCompressReply, uint64_t{2}}) {
    OutFrame ping = Ping(payload);
    ping.attachments.push_back({data.data(), data.size(), true, nullptr});
    ASSERT_TRUE(client->Call(ping).ok());
  }
  client->SetCompression(false, 1);
  OutFrame ping = Ping(3);
  ping.attachments.push_back({data.data(), data.size(), true, nullptr});
  uint64_t before = client->bytes_sent();
  ASSERT_TRUE(client->Call(ping).ok());
  EXPECT_GE(client->bytes_sent() - before, data.size());

  uint64_t sent = client->bytes_sent();
  uint64_t received = client->bytes_received();
  client->Close();
  ASSERT_TRUE(WaitFor([&] { return counters_.destroyed == 1; }));
  EXPECT_EQ(counters_.last_bytes_read, sent);
  EXPECT_EQ(counters_.last_bytes_written, received);
}

TEST_F(TransportTest, GarbageGetsErrorReplyThenClose) {
  std::string junk = "GET / HTTP/1.1\r\nHost: example\r\n\r\n";
  junk.append(5000, 'x');
  std::vector<std::byte> bytes(junk.size());
  std::memcpy(bytes.data(), junk.data(), junk.size());
  std::vector<std::byte> received = RawExchange(bytes);
  StatusOr<Frame> reply = DecodeFrame(received, Limits());
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_EQ(reply->request_id, 0u);
  Status s = ReplyStatus(*reply);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_TRUE(WaitFor([&] { return counters_.destroyed == 1; }));

  // The server still serves.
  std::unique_ptr<Client> client = Connect();
  ASSERT_NE(client, nullptr);
  OutFrame ping = Ping(5);
  StatusOr<Frame> pong = client->Call(ping);
  ASSERT_TRUE(pong.ok()) << pong.status().ToString();
  EXPECT_EQ(PongPayload(*pong), 5u);
}

TEST_F(TransportTest, WrongMajorVersion) {
  OutFrame ping = Ping(1);
  ping.request_id = 77;
  StatusOr<EncodedFrame> encoded = EncodeFrame(ping, EncodeOptions());
  ASSERT_TRUE(encoded.ok());
  std::vector<std::byte> bytes = Flatten(*encoded);
  bytes[4] = std::byte{2};  // major 2
  StatusOr<Frame> reply = DecodeFrame(RawExchange(bytes), Limits());
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_EQ(reply->request_id, 77u);
  Status s = ReplyStatus(*reply);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s.ToString();
  std::string minor = "." + std::to_string(kProtocolMinor);
  EXPECT_NE(s.message().find("peer speaks 2" + minor), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("this side speaks 1" + minor), std::string::npos) << s.message();
}

TEST_F(TransportTest, CorruptZstdAttachment) {
  OutFrame ping = Ping(1);
  ping.request_id = 9;
  StatusOr<EncodedFrame> encoded = EncodeFrame(ping, EncodeOptions());
  ASSERT_TRUE(encoded.ok());
  std::vector<std::byte> bytes = Flatten(*encoded);
  bytes[28] = std::byte{1};  // one attachment
  auto header = EncodeAttachmentHeader({1 << 20, 5000, Codec::kZstd});
  bytes.insert(bytes.end(), header.begin(), header.end());
  std::vector<std::byte> junk = Random(5000, 2);
  bytes.insert(bytes.end(), junk.begin(), junk.end());
  StatusOr<Frame> reply = DecodeFrame(RawExchange(bytes), Limits());
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_EQ(reply->request_id, 9u);
  EXPECT_EQ(ReplyStatus(*reply).code(), StatusCode::kInvalidArgument);
}

TEST_F(TransportTest, OversizeAttachmentRefusedBeforeAllocating) {
  OutFrame ping = Ping(1);
  ping.request_id = 10;
  StatusOr<EncodedFrame> encoded = EncodeFrame(ping, EncodeOptions());
  ASSERT_TRUE(encoded.ok());
  std::vector<std::byte> bytes = Flatten(*encoded);
  bytes[28] = std::byte{1};
  uint64_t huge = uint64_t{1} << 50;
  auto header = EncodeAttachmentHeader({huge, huge, Codec::kRaw});
  bytes.insert(bytes.end(), header.begin(), header.end());
  StatusOr<Frame> reply = DecodeFrame(RawExchange(bytes), Limits());
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_EQ(ReplyStatus(*reply).code(), StatusCode::kResourceExhausted);
}

TEST_F(TransportTest, TruncatedFrameThenDisconnectDestroysHandler) {
  OutFrame ping = Ping(1);
  std::vector<std::byte> payload = Random(100000, 3);
  ping.attachments.push_back({payload.data(), payload.size(), false, nullptr});
  StatusOr<EncodedFrame> encoded = EncodeFrame(ping, EncodeOptions());
  ASSERT_TRUE(encoded.ok());
  std::vector<std::byte> bytes = Flatten(*encoded);
  int expected = 0;
  for (size_t cut : {size_t{10}, size_t{40}, bytes.size() / 2}) {
    asio::io_context io;
    tcp::socket socket(io);
    socket.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), server_->port()));
    asio::write(socket, asio::buffer(bytes.data(), cut));
    socket.close();
    ++expected;
    EXPECT_TRUE(WaitFor([&] { return counters_.destroyed == expected; })) << cut;
  }
  EXPECT_EQ(counters_.created, expected);
}

TEST_F(TransportTest, HandlerExceptionBecomesInternalError) {
  std::unique_ptr<Client> client = Connect();
  ASSERT_NE(client, nullptr);
  OutFrame boom = Ping(kThrow);
  StatusOr<Frame> reply = client->Call(boom);
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  Status s = ReplyStatus(*reply);
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_NE(s.message().find("handler blew up"), std::string::npos) << s.message();
  OutFrame ping = Ping(4);
  reply = client->Call(ping);  // the connection is still usable
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_EQ(PongPayload(*reply), 4u);
}

TEST_F(TransportTest, ReceiveDeadline) {
  std::unique_ptr<Client> client = Connect();
  ASSERT_NE(client, nullptr);
  client->SetTimeout(100ms);
  OutFrame slow = Ping(kSleep);
  StatusOr<Frame> reply = client->Call(slow);
  EXPECT_EQ(reply.status().code(), StatusCode::kDeadlineExceeded) << reply.status().ToString();
  EXPECT_FALSE(client->connected());
  OutFrame ping = Ping(1);
  EXPECT_EQ(client->Call(ping).status().code(), StatusCode::kUnavailable);
}

TEST_F(TransportTest, ReceiveDeadlineShorterThanTheLastOne) {
  // The plaintext client's deadline is the socket's receive timeout, set only when it
  // moves: a shorter timeout after a long one must still end the call in time (the
  // sleeping request's reply comes after 500 ms).
  std::unique_ptr<Client> client = Connect();
  ASSERT_NE(client, nullptr);
  client->SetTimeout(30s);
  OutFrame ping = Ping(1);
  ASSERT_TRUE(client->Call(ping).ok());
  client->SetTimeout(100ms);
  OutFrame slow = Ping(kSleep);
  StatusOr<Frame> reply = client->Call(slow);
  EXPECT_EQ(reply.status().code(), StatusCode::kDeadlineExceeded) << reply.status().ToString();
  EXPECT_NE(reply.status().message().find("receiving frame"), std::string::npos) << reply.status().ToString();
}

TEST(ClientTest, SendDeadlineWhenThePeerReadsNothing) {
  // A bare listener that accepts and never reads: a 32 MiB frame fills the socket
  // buffers, and the blocking send must end at the deadline.
  asio::io_context io;
  tcp::acceptor acceptor(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  tcp::socket peer(io);
  std::thread accept([&] { acceptor.accept(peer); });
  StatusOr<std::unique_ptr<Client>> client = Client::Connect("127.0.0.1", acceptor.local_endpoint().port(), 5s);
  accept.join();
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  (*client)->SetTimeout(200ms);
  (*client)->SetCompression(false, 1);
  std::vector<std::byte> data(32 << 20, std::byte{7});
  OutFrame big = Ping(1);
  big.attachments.push_back({data.data(), data.size(), false, nullptr});
  Status s = (*client)->Send(big);
  EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded) << s.ToString();
  EXPECT_NE(s.message().find("sending frame"), std::string::npos) << s.ToString();
  EXPECT_FALSE((*client)->connected());
  EXPECT_LT((*client)->bytes_sent(), data.size());
}

TEST_F(TransportTest, ManyPipelinedSmallFramesAreAnsweredInOrder) {
  // 200 pings in one write: the server reads them ahead, answers each at once and
  // reads on from Dispatch; the replies come back in order, and the connection stays
  // in step.
  std::unique_ptr<Client> client = Connect();
  ASSERT_NE(client, nullptr);
  ASSERT_NO_FATAL_FAILURE(PingMany(*client, 1000, 200));
  OutFrame ping = Ping(5);
  StatusOr<Frame> reply = client->Call(ping);
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_EQ(PongPayload(*reply), 5u);
  EXPECT_EQ(counters_.created, 1);
}

TEST_F(TransportTest, UnansweredRequestsRepliesAreDroppedBeforeTheNextReply) {
  // 150 pings nobody waits for (more than the 64 left unread at most), then a call: its
  // reply is the call's, in one round trip, and the connection stays in step.
  std::unique_ptr<Client> client = Connect();
  ASSERT_NE(client, nullptr);
  // They wait to go with the next request: written only when 64 replies would wait
  // unread (at the 65th and the 129th), in one write each.
  const uint64_t writes = client->writes();
  for (uint64_t i = 0; i < 150; ++i) {
    OutFrame ping = Ping(1000 + i);
    ASSERT_TRUE(client->SendUnanswered(ping).ok()) << i;
  }
  EXPECT_EQ(client->round_trips(), 0u);
  EXPECT_EQ(client->writes() - writes, 2u);
  const uint64_t handled = server_->totals().frames_handled.load();
  OutFrame ping = Ping(7);
  StatusOr<Frame> reply = client->Call(ping);
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_EQ(reply->request_id, ping.request_id);
  EXPECT_EQ(PongPayload(*reply), 7u);
  EXPECT_EQ(client->round_trips(), 1u);
  // The last 22 went in the call's write, ahead of it, and were answered.
  EXPECT_EQ(client->writes() - writes, 3u);
  EXPECT_EQ(server_->totals().frames_handled.load() - handled, 23u);
  // A pipeline of three is one more round trip.
  ASSERT_NO_FATAL_FAILURE(PingMany(*client, 20, 3));
  EXPECT_EQ(client->round_trips(), 2u);
}

TEST_F(TransportTest, PipelinedRepliesShareOneWrite) {
  std::unique_ptr<Client> client = Connect();
  ASSERT_NE(client, nullptr);
  OutFrame first = Ping(1000);
  ASSERT_TRUE(client->Call(first).ok());
  // Eight requests in one write: the server holds each reply while the next request is
  // already read whole, and writes the eight together.
  uint64_t before = server_->totals().writes.load();
  ASSERT_NO_FATAL_FAILURE(PingMany(*client, 10, 8));
  EXPECT_EQ(server_->totals().writes.load() - before, 1u);
  // A reply with an attachment is written at once (its bytes may be a tensor's, which a
  // later request could change), with the replies held before it. The reply before a
  // request with a small attachment, read whole with it, is held: two writes for these
  // three. Before one whose attachment is larger than the read-ahead (64 KiB) it is not
  // held (the server would hold it while it reads on): three writes.
  for (const size_t bytes : {size_t{100}, size_t{1} << 20}) {
    before = server_->totals().writes.load();
    std::vector<OutFrame> frames;
    frames.push_back(Ping(20));
    frames.push_back(Ping(21));
    frames.back().attachments.push_back(OwnedAttachment(std::vector<std::byte>(bytes, std::byte{7}), false, 0));
    frames.push_back(Ping(22));
    ASSERT_TRUE(client->SendMany(frames).ok());
    for (uint64_t i = 0; i < 3; ++i) {
      StatusOr<Frame> reply = client->Receive();
      ASSERT_TRUE(reply.ok()) << reply.status().ToString();
      EXPECT_EQ(PongPayload(*reply), 20 + i);
      EXPECT_EQ(reply->attachments.size(), i == 1 ? 1u : 0u);
    }
    EXPECT_EQ(server_->totals().writes.load() - before, bytes == 100 ? 2u : 3u) << bytes << " bytes";
  }
  // One request, one write.
  before = server_->totals().writes.load();
  OutFrame last = Ping(30);
  ASSERT_TRUE(client->Call(last).ok());
  EXPECT_EQ(server_->totals().writes.load() - before, 1u);
}

// A pipeline of many frames reaches the server in one write, however many buffers it
// takes (each ping is two: header and message). Asio's async write took 16 buffers a
// system call and sent the rest after a round through the io_context, so the server read
// the first eight requests alone, answered them, and then the rest: two replies' writes
// where one does.
TEST_F(TransportTest, ManyFramePipelineIsOneWrite) {
  std::unique_ptr<Client> client = Connect();
  ASSERT_NE(client, nullptr);
  OutFrame first = Ping(1000);
  ASSERT_TRUE(client->Call(first).ok());
  for (int round = 0; round < 20; ++round) {
    const uint64_t before = server_->totals().writes.load();
    ASSERT_NO_FATAL_FAILURE(PingMany(*client, 100, 40));
    EXPECT_EQ(server_->totals().writes.load() - before, 1u) << "round " << round;
  }
}

TEST_F(TransportTest, ServerCloseIsUnavailable) {
  std::unique_ptr<Client> client = Connect();
  ASSERT_NE(client, nullptr);
  OutFrame ping = Ping(1);
  ASSERT_TRUE(client->Call(ping).ok());
  server_->Stop();
  EXPECT_EQ(counters_.destroyed, 1);  // Stop destroyed the handler
  OutFrame again = Ping(2);
  Status s = client->Call(again).status();
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
}

TEST_F(TransportTest, ConcurrentClients) {
  constexpr int kClients = 4;
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int c = 0; c < kClients; ++c) {
    threads.emplace_back([&, c] {
      StatusOr<std::unique_ptr<Client>> client =
          Client::Connect("127.0.0.1", server_->port(), 5s);
      if (!client.ok()) return;
      std::vector<std::byte> data = Random(100000, c);
      for (uint64_t i = 0; i < 20; ++i) {
        OutFrame ping = Ping(100 + i);
        ping.attachments.push_back({data.data(), data.size(), false, nullptr});
        StatusOr<Frame> reply = (*client)->Call(ping);
        if (!reply.ok() || PongPayload(*reply) != 100 + i || reply->attachments.size() != 1 ||
            reply->attachments[0] != data) {
          return;
        }
      }
      ++ok;
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(ok, kClients);
}

TEST(ClientTest, ConnectFailureIsUnavailable) {
  asio::io_context io;
  tcp::acceptor probe(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  uint16_t port = probe.local_endpoint().port();
  probe.close();  // nothing listens there now
  StatusOr<std::unique_ptr<Client>> c = Client::Connect("127.0.0.1", port, 2s);
  EXPECT_EQ(c.status().code(), StatusCode::kUnavailable) << c.status().ToString();
}

TEST(ServerTest, HandlerFactoryMayRefuse) {
  ServerOptions options;
  options.port = 0;
  Server server(options, [](const ConnectionInfo&) { return nullptr; });
  ASSERT_TRUE(server.Start().ok());
  StatusOr<std::unique_ptr<Client>> c = Client::Connect("127.0.0.1", server.port(), 2s);
  ASSERT_TRUE(c.ok());
  OutFrame ping = Ping(1);
  EXPECT_EQ((*c)->Call(ping).status().code(), StatusCode::kUnavailable);
}

TEST(ErrorTest, StatusRoundTripsThroughReply) {
  OutFrame f = MakeErrorReply(3, NotFound("no tensor 12"));
  StatusOr<EncodedFrame> e = EncodeFrame(f, EncodeOptions());
  ASSERT_TRUE(e.ok());
  StatusOr<Frame> d = DecodeFrame(Flatten(*e), Limits());
  ASSERT_TRUE(d.ok());
  Status s = ReplyStatus(*d);
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "no tensor 12");

  capnp::MallocMessageBuilder pong;
  pong.initRoot<wire::Reply>().initPong();
  EXPECT_TRUE(ErrorFromReply(pong.getRoot<wire::Reply>().asReader()).ok());
}

TEST(ErrorTest, BytesThatAreNotUtf8AreEscapedOnTheWire) {
  // A function name from a hostile executable: Latin-1, a lone continuation byte, a NUL
  // and an overlong '/'; the valid UTF-8 around them is kept.
  const std::string name("caf\xE9 \x80 a\0b \xC0\xAF \xE2\x82\xAC", 17);
  OutFrame f = MakeErrorReply(5, InvalidArgument("function '" + name + "' not found"));
  capnp::Text::Reader sent = f.message->getRoot<wire::Reply>().asReader().getError().getMessage();
  EXPECT_EQ(std::string(sent.begin(), sent.size()),
            "function 'caf\\xE9 \\x80 a\\x00b \\xC0\\xAF \xE2\x82\xAC' not found");
  StatusOr<EncodedFrame> e = EncodeFrame(f, EncodeOptions());
  ASSERT_TRUE(e.ok());
  StatusOr<Frame> d = DecodeFrame(Flatten(*e), Limits());
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(ReplyStatus(*d).message(), std::string(sent.begin(), sent.size()));
}

TEST(ErrorTest, AMessageLargerThanTheFirstSegmentRoundTrips) {
  // NewMessage's first segment is 1 KiB: a 100 KB error message spills into further
  // segments, which the frame carries and the reader validates and reads whole.
  std::string text(100000, 'e');
  for (size_t i = 0; i < text.size(); i += 997) text[i] = static_cast<char>('a' + i % 26);
  OutFrame f = MakeErrorReply(4, InvalidArgument(text));
  EXPECT_GT(f.message->getSegmentsForOutput().size(), 1u);
  StatusOr<EncodedFrame> e = EncodeFrame(f, EncodeOptions());
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  StatusOr<Frame> d = DecodeFrame(Flatten(*e), Limits());
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  Status s = ReplyStatus(*d);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), text);
}

}  // namespace transport_test
}  // namespace remex::rpc
