// Tensor requests: tensorAlloc, tensorWrite, tensorRead, tensorStats, tensorCompare,
// free, listHandles.
#include "device_server/session.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "vm/tensor_ops.h"

namespace remex::server {

Status Session::TensorAlloc(wire::TensorAlloc::Reader req, wire::Reply::Builder reply) {
  REMEX_RETURN_IF_ERROR(CheckDevice(req.getDevice()));
  REMEX_ASSIGN_OR_RETURN(auto desc, rpc::ReadTensorDesc(req.getDesc()));
  REMEX_ASSIGN_OR_RETURN(auto t, vm::AllocateTensor(*allocator_, desc.first, desc.second));
  // The allocator reuses blocks other sessions freed: a tensor handed out unwritten
  // is cleared first, so that it never shows another session's data.
  REMEX_RETURN_IF_ERROR(state_->device->Memset(t->data(), 0, t->nbytes()));
  auto r = reply.initTensor();
  rpc::WriteTensorDesc(r.initDesc(), t->dtype, t->shape);
  r.setTensor(Add(std::move(t)));
  return OkStatus();
}

Status Session::TensorWrite(wire::TensorWrite::Reader req, rpc::Frame& frame, wire::Reply::Builder reply) {
  if (frame.attachments.size() != 1) {
    return InvalidArgument("tensorWrite needs the tensor's bytes as its one attachment");
  }
  const auto& bytes = frame.attachments[0];
  const bool in_place = frame.attachment_in_place.size() == 1 && frame.attachment_in_place[0];
  if (in_place && !pending_write_) return Internal("tensorWrite: the received tensor went missing");
  vm::TensorPtr t;
  uint64_t handle = req.getTensor();
  uint64_t named = req.getResultHandle();
  if (named != 0) {
    if (handle != 0) return InvalidArgument("tensorWrite: resultHandle names a new tensor only (tensor = 0)");
    REMEX_RETURN_IF_ERROR(CheckClientHandle(named));
  }
  if (handle == 0) {
    REMEX_RETURN_IF_ERROR(CheckDevice(req.getDevice()));
    if (in_place) {
      t = std::move(pending_write_);  // allocated and filled by AttachmentDestination
    } else {
      REMEX_ASSIGN_OR_RETURN(auto desc, rpc::ReadTensorDesc(req.getDesc()));
      REMEX_ASSIGN_OR_RETURN(t, vm::AllocateTensor(*allocator_, desc.first, desc.second));
    }
  } else {
    pending_write_.reset();  // when in place, it was this very tensor
    REMEX_ASSIGN_OR_RETURN(t, Lookup<vm::TensorPtr>(handle));
    if (req.getDesc().getDtype() != 0) {
      REMEX_ASSIGN_OR_RETURN(auto desc, rpc::ReadTensorDesc(req.getDesc()));
      if (desc.first != t->dtype || desc.second != t->shape) {
        return InvalidArgument("tensorWrite: tensor " + std::to_string(handle) + " is " +
                               std::string(DTypeName(t->dtype)) + " " + ShapeToString(t->shape) +
                               ", the request describes " + std::string(DTypeName(desc.first)) + " " +
                               ShapeToString(desc.second));
      }
    }
  }
  if (!in_place && bytes.size() != t->nbytes()) {
    return InvalidArgument("tensorWrite: " + std::to_string(bytes.size()) + " bytes for a " +
                           std::string(DTypeName(t->dtype)) + " tensor of shape " +
                           ShapeToString(t->shape) + " (" + std::to_string(t->nbytes()) + " bytes)");
  }
  if (in_place) {
    // Received straight into CPU device memory.
    if (t->dtype == DType::kBool) CanonicalizeBoolBytes(t->data(), t->nbytes());
  } else {
    if (t->dtype == DType::kBool) CanonicalizeBoolBytes(frame.attachments[0].data(), bytes.size());
    // TODO(perf): a pinned staging buffer for devices other than the CPU.
    REMEX_RETURN_IF_ERROR(state_->device->CopyToDevice(t->data(), bytes.data(), bytes.size()));
  }
  auto r = reply.initTensor();
  rpc::WriteTensorDesc(r.initDesc(), t->dtype, t->shape);
  if (handle == 0 && named != 0) {
    objects_.emplace(named, std::move(t));
    handle = named;
  } else if (handle == 0) {
    handle = Add(std::move(t));
  }
  r.setTensor(handle);
  return OkStatus();
}

Status Session::TensorRead(wire::TensorRead::Reader req, wire::Reply::Builder reply, rpc::OutFrame& out) {
  REMEX_ASSIGN_OR_RETURN(auto t, Lookup<vm::TensorPtr>(req.getTensor()));
  auto r = reply.initTensor();
  r.setTensor(req.getTensor());
  rpc::WriteTensorDesc(r.initDesc(), t->dtype, t->shape);
  const auto element_size = static_cast<uint8_t>(DTypeSize(t->dtype));
  if (state_->device->kind() == kernels::DeviceKind::kCpu) {
    // CPU device memory is host memory: the reply is sent straight from the tensor,
    // which the attachment keeps alive. Nothing else of this session runs before the
    // reply is written (requests are served one at a time).
    out.attachments.push_back({t->data(), t->nbytes(), /*compress=*/true, t, element_size});
    return OkStatus();
  }
  std::vector<std::byte> bytes(t->nbytes());
  REMEX_RETURN_IF_ERROR(state_->device->CopyToHost(bytes.data(), t->data(), bytes.size()));
  out.attachments.push_back(rpc::OwnedAttachment(std::move(bytes), /*compress=*/true, element_size));
  return OkStatus();
}

Status Session::TensorStats(wire::TensorStats::Reader req, wire::Reply::Builder reply) {
  REMEX_ASSIGN_OR_RETURN(auto t, Lookup<vm::TensorPtr>(req.getTensor()));
  REMEX_ASSIGN_OR_RETURN(vm::TensorStats stats, vm::ComputeStats(*state_->device, *t));
  auto r = reply.initTensorStats();
  r.setCount(stats.count);
  r.setMin(stats.min);
  r.setMax(stats.max);
  r.setMean(stats.mean);
  r.setStd(stats.std);
  r.setNanCount(stats.nan_count);
  r.setInfCount(stats.inf_count);
  return OkStatus();
}

Status Session::TensorCompare(wire::TensorCompare::Reader req, wire::Reply::Builder reply) {
  REMEX_ASSIGN_OR_RETURN(auto a, Lookup<vm::TensorPtr>(req.getA()));
  REMEX_ASSIGN_OR_RETURN(auto b, Lookup<vm::TensorPtr>(req.getB()));
  REMEX_ASSIGN_OR_RETURN(vm::Comparison cmp,
                         vm::CompareTensors(*state_->device, *a, *b, req.getRtol(), req.getAtol(), req.getEqualNan()));
  auto r = reply.initTensorCompare();
  r.setCount(cmp.count);
  r.setMismatches(cmp.mismatches);
  r.setMaxAbsError(cmp.max_abs_error);
  r.setMaxRelError(cmp.max_rel_error);
  r.setFirstMismatch(cmp.first_mismatch);
  return OkStatus();
}

Status Session::Free(wire::Free::Reader req, wire::Reply::Builder reply) {
  std::string missing;
  for (uint64_t h : req.getHandles()) {
    if (!objects_.count(h)) missing += (missing.empty() ? "" : ", ") + HandleString(h);
  }
  if (!missing.empty()) return NotFound("handles not found in this session (none freed): " + missing);
  for (uint64_t h : req.getHandles()) objects_.erase(h);
  reply.setFree();
  return OkStatus();
}

Status Session::ListHandles(wire::Reply::Builder reply) {
  // Bounded by --max-handles-per-session (CheckHandleRoom): at most that many entries.
  std::vector<uint64_t> handles;
  handles.reserve(objects_.size());
  for (const auto& [h, o] : objects_) handles.push_back(h);
  std::sort(handles.begin(), handles.end());
  auto list = reply.initListHandles().initHandles(static_cast<unsigned>(handles.size()));
  const std::string device = state_->device->name();
  for (size_t i = 0; i < handles.size(); ++i) {
    const Object& o = objects_.at(handles[i]);
    auto e = list[static_cast<unsigned>(i)];
    e.setHandle(handles[i]);
    e.setKind(KindName(o));
    e.setDevice(device);
    if (const auto* t = std::get_if<vm::TensorPtr>(&o)) {
      rpc::WriteTensorDesc(e.initDesc(), (*t)->dtype, (*t)->shape);
      e.setBytes((*t)->nbytes());
    } else if (const auto* m = std::get_if<std::shared_ptr<const vm::Executable>>(&o)) {
      e.setBytes((*m)->constant_bytes());
    }
  }
  return OkStatus();
}

}  // namespace remex::server
