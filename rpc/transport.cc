// Errors on the wire. The rest of the transport: stream.{h,cc} (the byte stream and
// TLS), server.cc and server_connection.{h,cc} (the server side), client.cc.
#include "rpc/transport.h"

#include <string>

#include "base/utf8.h"

namespace remex::rpc {
namespace {

static_assert(static_cast<int>(wire::ErrorCode::OK) == static_cast<int>(StatusCode::kOk));
static_assert(static_cast<int>(wire::ErrorCode::INVALID_ARGUMENT) ==
              static_cast<int>(StatusCode::kInvalidArgument));
static_assert(static_cast<int>(wire::ErrorCode::FAILED_PRECONDITION) ==
              static_cast<int>(StatusCode::kFailedPrecondition));
static_assert(static_cast<int>(wire::ErrorCode::INTERNAL) ==
              static_cast<int>(StatusCode::kInternal));
static_assert(static_cast<int>(wire::ErrorCode::DATA_LOSS) ==
              static_cast<int>(StatusCode::kDataLoss));
constexpr int kMaxStatusCode = static_cast<int>(StatusCode::kDataLoss);

}  // namespace

// ---------------------------------------------------------------------------------------
// Errors on the wire.

Status ErrorFromReply(const wire::Reply::Reader& reply) {
  if (!reply.isError()) return OkStatus();
  wire::Error::Reader error = reply.getError();
  int code = static_cast<int>(error.getCode());
  StatusCode status_code = (code > 0 && code <= kMaxStatusCode) ? static_cast<StatusCode>(code)
                                                                : StatusCode::kUnknown;
  capnp::Text::Reader message = error.getMessage();
  // A server is not trusted to send valid UTF-8 either.
  return Status(status_code, EscapeInvalidUtf8(std::string_view(message.begin(), message.size())));
}

void FillError(const Status& status, wire::Error::Builder error) {
  error.setCode(static_cast<wire::ErrorCode>(static_cast<uint16_t>(status.code())));
  // Messages quote names and strings from executables and requests: the wire's Text is
  // UTF-8 without NUL whatever they held.
  error.setMessage(EscapeInvalidUtf8(status.message()));
}

OutFrame MakeErrorReply(uint64_t request_id, const Status& status) {
  OutFrame frame;
  frame.request_id = request_id;
  frame.message = NewMessage();
  FillError(status, frame.message->initRoot<wire::Reply>().initError());
  return frame;
}

}  // namespace remex::rpc
