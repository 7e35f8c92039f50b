// Helpers shared by both ends of the wire schema (rpc/remex.capnp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "base/dtype.h"
#include "base/status.h"
#include "rpc/remex.capnp.h"

namespace remex::rpc {

// Handles with this bit set are named by the client (Invoke.resultHandles,
// TensorWrite.resultHandle); the server never issues one.
inline constexpr uint64_t kClientHandleBit = uint64_t{1} << 63;

// The most invokes one Profile request profiles (Profile.runs).
inline constexpr uint32_t kMaxProfileRuns = 100;
// The most trace events one ProfileReply carries (32 bytes each on the wire: 16 MiB at
// most, a quarter of the largest message); the rest are counted, not sent.
inline constexpr size_t kMaxProfileTraceEvents = size_t{1} << 19;

// Fills a TensorDesc: dtype as its ONNX TensorProto.DataType value, shape as given
// (-1 for a dimension not known before a call).
void WriteTensorDesc(wire::TensorDesc::Builder out, DType dtype, const Shape& shape);

// Reads a TensorDesc; INVALID_ARGUMENT for a dtype Remex does not hold.
StatusOr<std::pair<DType, Shape>> ReadTensorDesc(wire::TensorDesc::Reader desc);

// The request's field name in the protocol ("invoke", "tensorWrite", ...); "unknown"
// for a union member this build's schema does not know.
std::string RequestKindName(wire::Request::Reader request);

}  // namespace remex::rpc
