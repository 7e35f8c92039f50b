// Transport tests: attachment encodings and byte counts, pipelining (SendMany), and
// attachments received in place (ConnectionHandler::AttachmentDestination).
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
namespace transport_attachment_test {

using testing::Compressible;
using testing::Ping;
using testing::PongPayload;
using testing::Random;
using testing::RawExchange;
using testing::ReplyStatus;
using testing::SmoothFloats;
using testing::TransportTest;
using testing::WaitFor;
using testing::kCompressFloatReply;

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using namespace std::chrono_literals;

TEST_F(TransportTest, AttachmentStatsAndNegotiatedEncoding) {
  std::unique_ptr<Client> client = Connect();
  ASSERT_NE(client, nullptr);
  std::vector<std::byte> floats = SmoothFloats(4 << 20);

  // Before the server has spoken, the client sends in minor-0 encoding: one unshuffled
  // zstd frame.
  OutFrame first = Ping(kCompressFloatReply);
  first.attachments.push_back({floats.data(), floats.size(), true, nullptr, 4});
  StatusOr<Frame> reply = client->Call(first);
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_EQ(reply->attachments[0], floats);
  AttachmentStats after_first = client->attachment_stats();
  EXPECT_EQ(after_first.raw_sent, floats.size());
  EXPECT_EQ(after_first.raw_received, floats.size());
  // The reply to a minor-1 request was chunked and shuffled: much smaller.
  EXPECT_LT(after_first.wire_received * 2, after_first.wire_sent);

  // Now the client knows the server's minor: chunked and shuffled too.
  OutFrame second = Ping(kCompressFloatReply);
  second.attachments.push_back({floats.data(), floats.size(), true, nullptr, 4});
  reply = client->Call(second);
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_EQ(reply->attachments[0], floats);
  AttachmentStats after_second = client->attachment_stats();
  uint64_t second_wire = after_second.wire_sent - after_first.wire_sent;
  EXPECT_EQ(second_wire, after_first.wire_received);
  EXPECT_LT(second_wire * 2, after_first.wire_sent);

  // kNone: raw both ways where the client decides; the server still compresses.
  client->SetCompression(CompressionMode::kNone, 1);
  OutFrame third = Ping(kCompressFloatReply);
  third.attachments.push_back({floats.data(), floats.size(), true, nullptr, 4});
  ASSERT_TRUE(client->Call(third).ok());
  AttachmentStats after_third = client->attachment_stats();
  EXPECT_EQ(after_third.wire_sent - after_second.wire_sent, floats.size());
  EXPECT_EQ(after_third.raw_sent, 3 * floats.size());

  // kZstd on noise: compressed anyway, a little larger than raw; kAuto: raw.
  std::vector<std::byte> noise = Random(2 << 20, 21);
  client->SetCompression(CompressionMode::kZstd, 1);
  OutFrame fourth = Ping(2);
  fourth.attachments.push_back({noise.data(), noise.size(), true, nullptr});
  ASSERT_TRUE(client->Call(fourth).ok());
  AttachmentStats after_fourth = client->attachment_stats();
  EXPECT_GT(after_fourth.wire_sent - after_third.wire_sent, noise.size());
  client->SetCompression(CompressionMode::kAuto, 1);
  OutFrame fifth = Ping(2);
  fifth.attachments.push_back({noise.data(), noise.size(), true, nullptr});
  ASSERT_TRUE(client->Call(fifth).ok());
  AttachmentStats after_fifth = client->attachment_stats();
  EXPECT_EQ(after_fifth.wire_sent - after_fourth.wire_sent, noise.size());

  // The server counted the same attachment bytes, from its side.
  client->Close();
  ASSERT_TRUE(WaitFor([&] { return counters_.destroyed == 1; }));
  const AttachmentStats& server = counters_.last_attachment_stats;
  EXPECT_EQ(server.raw_received, after_fifth.raw_sent);
  EXPECT_EQ(server.wire_received, after_fifth.wire_sent);
  EXPECT_EQ(server.raw_sent, after_fifth.raw_received);
  EXPECT_EQ(server.wire_sent, after_fifth.wire_received);
}

TEST_F(TransportTest, SetCompressionBoolStillWorks) {
  std::unique_ptr<Client> client = Connect();
  ASSERT_NE(client, nullptr);
  std::vector<std::byte> data = Compressible(1 << 20);
  client->SetCompression(false, 1);
  OutFrame ping = Ping(2);
  ping.attachments.push_back({data.data(), data.size(), true, nullptr});
  ASSERT_TRUE(client->Call(ping).ok());
  EXPECT_EQ(client->attachment_stats().wire_sent, data.size());
  client->SetCompression(true, 3);
  OutFrame again = Ping(2);
  again.attachments.push_back({data.data(), data.size(), true, nullptr});
  ASSERT_TRUE(client->Call(again).ok());
  EXPECT_LT(client->attachment_stats().wire_sent, data.size() + data.size() / 10);
}

TEST_F(TransportTest, SendManyRepliesInOrder) {
  std::unique_ptr<Client> client = Connect();
  ASSERT_NE(client, nullptr);
  std::vector<std::byte> data = Compressible(300000);
  std::vector<OutFrame> frames;
  for (uint64_t i = 0; i < 3; ++i) {
    frames.push_back(Ping(40 + i));
    frames.back().attachments.push_back({data.data(), data.size(), true, nullptr});
  }
  ASSERT_TRUE(client->SendMany(frames).ok());
  for (uint64_t i = 0; i < 3; ++i) {
    EXPECT_NE(frames[i].request_id, 0u);
    if (i > 0) EXPECT_GT(frames[i].request_id, frames[i - 1].request_id);
    StatusOr<Frame> reply = client->Receive();
    ASSERT_TRUE(reply.ok()) << reply.status().ToString();
    EXPECT_EQ(reply->request_id, frames[i].request_id);
    EXPECT_EQ(PongPayload(*reply), 40 + i);
    ASSERT_EQ(reply->attachments.size(), 1u);
    EXPECT_EQ(reply->attachments[0], data);
  }
  // The connection is in step afterwards.
  OutFrame ping = Ping(9);
  StatusOr<Frame> reply = client->Call(ping);
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_EQ(PongPayload(*reply), 9u);

  std::vector<OutFrame> none;
  EXPECT_TRUE(client->SendMany(none).ok());
  std::vector<OutFrame> bad(2);  // the second has no message: nothing is written
  bad[0] = Ping(1);
  EXPECT_EQ(client->SendMany(bad).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(client->connected());
  reply = client->Call(ping);
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
}

TEST_F(TransportTest, SendManyLargeBothWaysDoesNotDeadlock) {
  // 4 x 16 MiB each way, far more than the socket buffers hold: the server's replies
  // must be read while the requests are still being written.
  std::unique_ptr<Client> client = Connect();
  ASSERT_NE(client, nullptr);
  client->SetTimeout(20s);
  std::vector<std::byte> data = Random(16 << 20, 31);
  std::vector<OutFrame> frames;
  for (uint64_t i = 0; i < 4; ++i) {
    frames.push_back(Ping(2));
    frames.back().attachments.push_back({data.data(), data.size(), false, nullptr});
  }
  Status s = client->SendMany(frames);
  ASSERT_TRUE(s.ok()) << s.ToString();
  for (uint64_t i = 0; i < 4; ++i) {
    StatusOr<Frame> reply = client->Receive();
    ASSERT_TRUE(reply.ok()) << reply.status().ToString();
    EXPECT_EQ(reply->request_id, frames[i].request_id);
    EXPECT_TRUE(reply->attachments.size() == 1 && reply->attachments[0] == data);
  }
}

TEST(PipelineTest, SendManyIsOneWrite) {
  // A bare listener: its first read returns whatever the client's first write put on
  // the wire. With one gather write that is all three frames.
  asio::io_context io;
  tcp::acceptor acceptor(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  uint16_t port = acceptor.local_endpoint().port();
  std::vector<std::byte> first_read;
  std::vector<uint64_t> ids;
  std::atomic<bool> accepted{false};
  std::thread peer([&] {
    tcp::socket socket(io);
    acceptor.accept(socket);
    accepted = true;
    std::vector<std::byte> buf(1 << 16);
    boost::system::error_code ec;
    size_t n = socket.read_some(asio::buffer(buf), ec);  // wakes at the first data
    first_read.assign(buf.begin(), buf.begin() + n);
    // Parse the frames, then answer each (after seeing all of them).
    size_t at = 0;
    while (at < first_read.size()) {
      StatusOr<FrameHeader> h =
          DecodeFrameHeader(std::span<const std::byte>(first_read).subspan(at));
      if (!h.ok()) break;
      ids.push_back(h->request_id);
      at += kFrameHeaderSize + h->message_bytes;
    }
    for (uint64_t id : ids) {
      OutFrame pong;
      pong.request_id = id;
      pong.message = std::make_unique<capnp::MallocMessageBuilder>();
      pong.message->initRoot<wire::Reply>().initPong().setPayload(id * 10);
      StatusOr<EncodedFrame> e = EncodeFrame(pong, EncodeOptions());
      if (e.ok()) asio::write(socket, asio::buffer(Flatten(*e)), ec);
    }
  });
  StatusOr<std::unique_ptr<Client>> client = Client::Connect("127.0.0.1", port, 5s);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  ASSERT_TRUE(WaitFor([&] { return accepted.load(); }));
  std::this_thread::sleep_for(20ms);  // the peer is blocked in its read by now
  std::vector<OutFrame> frames;
  for (uint64_t i = 0; i < 3; ++i) frames.push_back(Ping(i));
  ASSERT_TRUE((*client)->SendMany(frames).ok());
  EXPECT_EQ((*client)->writes(), 1u);
  for (uint64_t i = 0; i < 3; ++i) {
    StatusOr<Frame> reply = (*client)->Receive();
    ASSERT_TRUE(reply.ok()) << reply.status().ToString();
    EXPECT_EQ(reply->request_id, frames[i].request_id);
    EXPECT_EQ(PongPayload(*reply), frames[i].request_id * 10);
  }
  peer.join();
  EXPECT_EQ(first_read.size(), (*client)->bytes_sent());
  EXPECT_EQ(ids, (std::vector<uint64_t>{frames[0].request_id, frames[1].request_id,
                                        frames[2].request_id}));
}

// Receives attachment 0 of a ping into its own buffer when the ping payload asks for
// it (payload 1: in place; 2: a destination of the wrong size; 3: throw), then answers
// with a pong and the buffer as attachment.
class InPlaceHandler : public ConnectionHandler {
 public:
  InPlaceHandler(std::atomic<int>* handled, std::atomic<int>* failed) : handled_(handled), failed_(failed) {}

  void OnRequestFailed(const Frame& request_so_far, const Status& why) override {
    if (why.code() == StatusCode::kInvalidArgument && request_so_far.attachment_in_place.at(0)) ++*failed_;
  }

  std::span<std::byte> AttachmentDestination(const Frame& request_so_far, size_t index,
                                             uint64_t raw_size) override {
    capnp::FlatArrayMessageReader reader = request_so_far.Reader();
    uint64_t mode = reader.getRoot<wire::Request>().getPing().getPayload();
    seen_raw_size_ = raw_size;
    if (index != 0 || mode == 0) return {};
    if (mode == 3) throw std::runtime_error("no room");
    buffer_.assign(raw_size + (mode == 2 ? 1 : 0), std::byte{0});
    return buffer_;
  }

  OutFrame Handle(Frame& request) override {
    ++*handled_;
    OutFrame reply;
    reply.message = std::make_unique<capnp::MallocMessageBuilder>();
    bool in_place = request.attachment_in_place.size() == 1 && request.attachment_in_place[0];
    // Pong payload: 1 when attachment 0 arrived in place and its vector is empty.
    reply.message->initRoot<wire::Reply>().initPong().setPayload(
        in_place && request.attachments[0].empty() ? 1 : 0);
    std::vector<std::byte> echo = in_place ? buffer_ : request.attachments[0];
    reply.attachments.push_back(OwnedAttachment(std::move(echo), false));
    return reply;
  }

 private:
  std::atomic<int>* handled_;
  std::atomic<int>* failed_;
  std::vector<std::byte> buffer_;
  uint64_t seen_raw_size_ = 0;
};

class InPlaceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ServerOptions options;
    options.port = 0;
    options.threads = 1;
    server_ = std::make_unique<Server>(options, [this](const ConnectionInfo&) {
      return std::make_unique<InPlaceHandler>(&handled_, &failed_);
    });
    ASSERT_TRUE(server_->Start().ok());
  }

  std::unique_ptr<Client> Connect() {
    StatusOr<std::unique_ptr<Client>> c = Client::Connect("127.0.0.1", server_->port(), 5s);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return c.ok() ? std::move(c).value() : nullptr;
  }

  std::atomic<int> handled_{0};
  std::atomic<int> failed_{0};
  std::unique_ptr<Server> server_;
};

TEST_F(InPlaceTest, EveryCodecLandsInTheHandlersBuffer) {
  std::unique_ptr<Client> client = Connect();
  ASSERT_NE(client, nullptr);
  // Smooth floats with a noisy middle chunk, so kAuto mixes raw and shuffled chunks.
  std::vector<std::byte> data = SmoothFloats(3 * kAttachmentChunkBytes + 6);
  std::vector<std::byte> noise = Random(kAttachmentChunkBytes, 41);
  std::copy(noise.begin(), noise.end(), data.begin() + kAttachmentChunkBytes);
  struct Case {
    CompressionMode mode;
    const char* what;
  };
  // The first call goes out in minor-0 encoding (whole zstd), the others chunked.
  for (Case c : {Case{CompressionMode::kAuto, "whole zstd"}, Case{CompressionMode::kAuto, "chunked"},
                 Case{CompressionMode::kZstd, "chunked, all compressed"},
                 Case{CompressionMode::kNone, "raw"}}) {
    client->SetCompression(c.mode, 1);
    OutFrame ping = Ping(1);
    ping.attachments.push_back({data.data(), data.size(), true, nullptr, 4});
    StatusOr<Frame> reply = client->Call(ping);
    ASSERT_TRUE(reply.ok()) << c.what << ": " << reply.status().ToString();
    EXPECT_EQ(PongPayload(*reply), 1u) << c.what;
    ASSERT_EQ(reply->attachments.size(), 1u);
    EXPECT_EQ(reply->attachments[0], data) << c.what;
  }
  // Declining (an empty span) keeps the usual vector.
  OutFrame ping = Ping(0);
  ping.attachments.push_back({data.data(), data.size(), true, nullptr, 4});
  StatusOr<Frame> reply = client->Call(ping);
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_EQ(PongPayload(*reply), 0u);
  EXPECT_EQ(reply->attachments[0], data);
}

TEST_F(InPlaceTest, BadDestinationFailsTheFrame) {
  std::vector<std::byte> data = Compressible(100000);
  for (uint64_t mode : {uint64_t{2}, uint64_t{3}}) {
    std::unique_ptr<Client> client = Connect();
    ASSERT_NE(client, nullptr);
    OutFrame ping = Ping(mode);
    ping.attachments.push_back({data.data(), data.size(), true, nullptr});
    StatusOr<Frame> reply = client->Call(ping);
    ASSERT_TRUE(reply.ok()) << reply.status().ToString();
    Status s = ReplyStatus(*reply);
    EXPECT_EQ(s.code(), StatusCode::kInternal) << s.ToString();
    EXPECT_NE(s.message().find(mode == 2 ? "destination of 100001 bytes" : "no room"),
              std::string::npos)
        << s.message();
    OutFrame again = Ping(0);
    EXPECT_FALSE(client->Call(again).ok());  // the connection was closed
  }
  EXPECT_EQ(handled_, 0);
}

TEST_F(InPlaceTest, CorruptChunkAfterDestinationChosen) {
  // A chunked attachment whose second chunk is corrupt: the frame fails after the
  // handler chose its destination; Handle is never called, OnRequestFailed is (the
  // reply is written after it, so it has run by the time the reply arrives).
  std::vector<std::byte> data = SmoothFloats(2 * kAttachmentChunkBytes);
  OutFrame f = Ping(1);
  f.attachments.push_back({data.data(), data.size(), true, nullptr, 4});
  StatusOr<EncodedFrame> e = EncodeFrame(f, EncodeOptions());
  ASSERT_TRUE(e.ok());
  std::vector<std::byte> bytes = Flatten(*e);
  for (size_t i = bytes.size() - 100; i < bytes.size() - 50; ++i) bytes[i] ^= std::byte{0x5a};
  StatusOr<Frame> reply = DecodeFrame(RawExchange(server_->port(), bytes), Limits());
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_EQ(ReplyStatus(*reply).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(handled_, 0);
  EXPECT_EQ(failed_, 1) << "the handler was not told that its destination may be partly written";
}


}  // namespace transport_attachment_test
}  // namespace remex::rpc
