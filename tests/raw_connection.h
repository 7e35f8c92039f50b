// A raw client connection to a remex-server for hand-written frames (tests that break
// the protocol as an attacker would, or stall mid-frame).
#pragma once

#include <gtest/gtest.h>

#include <boost/asio.hpp>
#include <capnp/message.h>
#include <capnp/serialize.h>

#include <array>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "base/dtype.h"
#include "base/status.h"
#include "rpc/frame.h"
#include "rpc/transport.h"

namespace remex::testing {

// A raw connection that has said hello, for hand-written frames.
class RawConnection {
 public:
  explicit RawConnection(uint16_t port) : sock_(io_) {
    sock_.connect({boost::asio::ip::make_address("127.0.0.1"), port});
    capnp::MallocMessageBuilder msg;
    msg.initRoot<rpc::wire::Request>().initHello().setProtocolMajor(rpc::kProtocolMajor);
    WriteMessage(msg, 1, 0);
    auto reply = ReadReply();
    EXPECT_TRUE(reply.ok()) << reply.ToString();
  }

  void WriteMessage(capnp::MessageBuilder& msg, uint64_t request_id, uint32_t attachments, uint32_t flags = 0) {
    auto words = capnp::messageToFlatArray(msg);
    rpc::FrameHeader fh;
    fh.flags = flags;
    fh.request_id = request_id;
    fh.message_bytes = static_cast<uint32_t>(words.asBytes().size());
    fh.attachment_count = attachments;
    boost::asio::write(sock_, boost::asio::buffer(rpc::EncodeFrameHeader(fh)));
    boost::asio::write(sock_, boost::asio::buffer(words.asBytes().begin(), words.asBytes().size()));
  }

  // A tensorWrite of a new float32 tensor of `elements` with one attachment, up to the
  // attachment's header `ah` (its payload is the caller's to write, or withhold).
  void BeginTensorWrite(uint64_t request_id, int64_t elements, const rpc::AttachmentHeader& ah) {
    capnp::MallocMessageBuilder msg;
    auto w = msg.initRoot<rpc::wire::Request>().initTensorWrite();
    w.initDesc().setDtype(static_cast<int32_t>(DType::kFloat32));
    w.getDesc().initShape(1).set(0, elements);
    WriteMessage(msg, request_id, 1);
    WriteAttachmentHeader(ah);
  }

  void WriteAttachmentHeader(const rpc::AttachmentHeader& ah) {
    boost::asio::write(sock_, boost::asio::buffer(rpc::EncodeAttachmentHeader(ah)));
  }
  void WriteBytes(const void* data, size_t n) { boost::asio::write(sock_, boost::asio::buffer(data, n)); }
  // This end's "127.0.0.1:PORT", as the server names its peer.
  std::string local_address() const {
    auto e = sock_.local_endpoint();
    return e.address().to_string() + ":" + std::to_string(e.port());
  }

  // Reads one reply frame and returns the tensor handle of a tensor reply (0 otherwise).
  uint64_t ReadTensorHandle() {
    std::array<std::byte, rpc::kFrameHeaderSize> hb;
    boost::asio::read(sock_, boost::asio::buffer(hb));
    auto fh = rpc::DecodeFrameHeader(hb);
    if (!fh.ok()) return 0;
    std::vector<capnp::word> words(fh->message_bytes / sizeof(capnp::word));
    boost::asio::read(sock_, boost::asio::buffer(words.data(), fh->message_bytes));
    capnp::FlatArrayMessageReader reader(kj::arrayPtr(words.data(), words.size()));
    auto reply = reader.getRoot<rpc::wire::Reply>();
    return reply.isTensor() ? reply.getTensor().getTensor() : 0;
  }

  // Reads one reply frame (no attachments expected) and returns the Status it carries.
  Status ReadReply() {
    std::array<std::byte, rpc::kFrameHeaderSize> hb;
    boost::system::error_code ec;
    boost::asio::read(sock_, boost::asio::buffer(hb), ec);
    if (ec) return Unavailable("connection: " + ec.message());
    auto fh = rpc::DecodeFrameHeader(hb);
    if (!fh.ok()) return fh.status();
    std::vector<capnp::word> words(fh->message_bytes / sizeof(capnp::word));
    boost::asio::read(sock_, boost::asio::buffer(words.data(), fh->message_bytes), ec);
    if (ec) return Unavailable("connection: " + ec.message());
    capnp::FlatArrayMessageReader reader(kj::arrayPtr(words.data(), words.size()));
    return rpc::ErrorFromReply(reader.getRoot<rpc::wire::Reply>());
  }

  // True when the server closes the connection within `timeout` (reads until EOF).
  bool ClosedWithin(std::chrono::milliseconds timeout) {
    auto until = std::chrono::steady_clock::now() + timeout;
    sock_.non_blocking(true);
    std::vector<char> sink(1 << 16);
    while (std::chrono::steady_clock::now() < until) {
      boost::system::error_code ec;
      sock_.read_some(boost::asio::buffer(sink), ec);
      if (ec == boost::asio::error::would_block) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        continue;
      }
      if (ec) return true;  // eof or reset
    }
    return false;
  }

 private:
  boost::asio::io_context io_;
  boost::asio::ip::tcp::socket sock_;
};

}  // namespace remex::testing
