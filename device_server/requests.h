// The server's request table (requests.def, which says how to add a request): each
// request kind's lane, whether it creates handles, its name and metrics slot, and the
// lookup from a wire::Request::Which (internal to device_server/).
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <string_view>

#include "rpc/remex.capnp.h"

namespace remex::server {

// Where a request is served (Session::HandleAsync).
enum class Lane : uint8_t {
  // The connection's I/O thread, at once: requests without device work, and those that
  // must not queue behind the work they are about (cancel, progress).
  kIoThread,
  // On a device whose memory the host reads in place (DeviceCapabilities::
  // host_access_in_place: the CPU device), the I/O thread (tensorRead: its reply is sent
  // straight from the tensor's memory); on another device, kDeviceWorker.
  kIoThreadOnHostMemory,
  // The host pool (two threads): parsing, decompression and verification need no
  // device, which goes on serving other sessions meanwhile.
  kHostPool,
  // The device worker (device_worker.h), as a fiber that yields after each kernel and
  // each time slice, so that sessions share the device.
  kDeviceWorker,
  // kDeviceWorker; but on a device whose work runs inline on the calling thread
  // (DeviceCapabilities::inline_execution: the CPU device), when the worker is idle and the session's
  // last request of this lane took under --inline-invoke-below-us
  // (ServerConfig::inline_invoke_below), inline on the I/O thread (invoke).
  kDeviceWorkerOrInline,
  // kDeviceWorker; but on a device whose work runs inline (DeviceCapabilities::
  // inline_execution: the CPU device), when the worker is idle, inline on the I/O
  // thread (unless --inline-invoke-below-us is 0), with the same budget: requests whose
  // work is the session's bookkeeping, microseconds long (setInput, setOutput, free,
  // tensorWrite, whose bytes the CPU device received in place, and tensorAlloc, whose
  // fill yields every 1 MiB). Each one on the worker cost two thread hand-offs, more
  // than its work: a decoder step's five of them (its inputs bound, its token
  // uploaded, the previous step's cache freed) cost more than its kernels.
  kInlineWhenIdle,
  // The device worker, exclusively: the request runs without yielding, so its timings
  // are its own (benchmark, profile, loadTest).
  kExclusive,
};

// One row of the table.
struct RequestRow {
  rpc::wire::Request::Which kind;
  // The union field's name in remex.capnp (the kind in logs and metrics).
  std::string_view name;
  Lane lane;
  // The session must have room for one more handle before the handler runs.
  bool creates_handles;
};

// The rows in requests.def's order; a row's index is its metrics slot
// (RequestMetrics::Count).
inline constexpr RequestRow kRequests[] = {
#define REMEX_REQUEST(Name, NAME, name, lane, creates_handles) \
  {rpc::wire::Request::NAME, name, Lane::lane, creates_handles},
#include "device_server/requests.def"
#undef REMEX_REQUEST
};
inline constexpr size_t kNumRequests = std::size(kRequests);

namespace requests_internal {
inline constexpr size_t kKindBound = [] {
  size_t bound = 0;
  for (const RequestRow& row : kRequests) bound = std::max(bound, static_cast<size_t>(row.kind) + 1);
  return bound;
}();
// The row index of each kind; -1 where none.
inline constexpr std::array<int, kKindBound> kRowOfKind = [] {
  std::array<int, kKindBound> rows{};
  rows.fill(-1);
  for (size_t i = 0; i < kNumRequests; ++i)
    rows[static_cast<size_t>(kRequests[i].kind)] = static_cast<int>(i);
  return rows;
}();
static_assert(
    [] {
      size_t distinct = 0;
      for (int row : kRowOfKind) distinct += row >= 0;
      return distinct == kNumRequests;
    }(),
    "requests.def has two rows for one kind");
}  // namespace requests_internal

// The row of `kind`; nullptr when it has none (a request of a newer protocol, which
// Session::Dispatch answers UNIMPLEMENTED).
constexpr const RequestRow* FindRequest(rpc::wire::Request::Which kind) {
  const auto k = static_cast<size_t>(kind);
  if (k >= requests_internal::kKindBound || requests_internal::kRowOfKind[k] < 0) return nullptr;
  return &kRequests[requests_internal::kRowOfKind[k]];
}

// The row's index in kRequests: its metrics slot.
constexpr size_t RowIndex(const RequestRow& row) { return static_cast<size_t>(&row - kRequests); }

}  // namespace remex::server
