// Session requests: hello, ping, authenticate, cancel, progress.
#include "device_server/session.h"

#include <openssl/crypto.h>
#include <spdlog/spdlog.h>

#include <mutex>
#include <string>
#include <utility>

#include "base/version.h"
#include "device_server/environment.h"
#include "rpc/auth.h"

namespace remex::server {

Status Session::Hello(wire::Hello::Reader req, wire::Reply::Builder root) {
  auto reply = root.initHello();
  if (req.getProtocolMajor() != rpc::kProtocolMajor) {
    return FailedPrecondition("protocol version " + std::to_string(req.getProtocolMajor()) + "." +
                              std::to_string(req.getProtocolMinor()) + " is not supported; server speaks " +
                              std::to_string(rpc::kProtocolMajor) + "." + std::to_string(rpc::kProtocolMinor));
  }
  hello_done_ = true;
  client_name_ = req.getClientName();
  spdlog::info("session {}: hello from client '{}'", id_, client_name_);
  reply.setProtocolMajor(rpc::kProtocolMajor);
  reply.setProtocolMinor(rpc::kProtocolMinor);
  reply.setServerName("remex-server");
  if (!authenticated()) {
    // A stranger learns what it needs to authenticate and nothing else: no version,
    // session id, cancel key or device. The client says hello again once
    // authenticated to learn those.
    if (auth_failed_) return PermissionDenied(NotAuthenticatedMessage());
    if (state_->config.lease_key) {
      // Checked against the farm at the session's start, not from a cached copy: a
      // lease acquired a moment ago is honoured, one released is not.
      auto lease = state_->config.lease_key();
      hello_lease_.clear();
      hello_lease_refused_.clear();
      if (lease.ok()) {
        hello_lease_ = std::move(lease).value();
      } else if (lease.status().code() == StatusCode::kFailedPrecondition) {
        hello_lease_refused_ = lease.status().message();  // authenticate says so
      } else {
        return lease.status().WithContext("reading this device's lease from the farm");
      }
    }
    REMEX_ASSIGN_OR_RETURN(challenge_, rpc::RandomBytes(rpc::kAuthNonceBytes));
    reply.setAuthChallenge(
        capnp::Data::Reader(reinterpret_cast<const capnp::byte*>(challenge_.data()), challenge_.size()));
    return OkStatus();
  }
  reply.setServerVersion(kRemexVersion);
  reply.setSessionId(id_);
  // Other sessions are none of this client's business: no count, and only this
  // session's own bytes.
  reply.setActiveSessions(0);
  auto devices = reply.initDevices(1);
  devices[0].setName(state_->device->name());
  devices[0].setDescription(state_->device->description());
  devices[0].setMemoryBytes(state_->device->memory_bytes());
  devices[0].setBytesInUse(allocator_->stats().allocated_bytes);
  devices[0].setInt8ChannelsLast(state_->device->capabilities().int8_channels_last);
  devices[0].setFloatChannelsLast(state_->device->capabilities().float_channels_last);
  {
    std::lock_guard<std::mutex> lock(state_->sessions_mu);  // Cancel reads it from other sessions
    if (cancel_key_.empty()) {
      REMEX_ASSIGN_OR_RETURN(cancel_key_, rpc::RandomBytes(kCancelKeyBytes));
    }
    reply.setCancelKey(
        capnp::Data::Reader(reinterpret_cast<const capnp::byte*>(cancel_key_.data()), cancel_key_.size()));
  }
  FillEnvironment(state_->config, *state_->device, state_->nvml.get(), reply.initEnvironment());
  return OkStatus();
}

Status Session::Ping(wire::Ping::Reader req, wire::Reply::Builder reply) {
  reply.initPong().setPayload(req.getPayload());
  return OkStatus();
}

Status Session::Authenticate(wire::Authenticate::Reader req, wire::Reply::Builder reply) {
  const bool farm = static_cast<bool>(state_->config.lease_key);
  const std::string& token = farm ? hello_lease_ : state_->config.token;
  if (!farm && token.empty()) return FailedPrecondition("this server requires no authentication");
  if (authenticated_) return FailedPrecondition("the session is authenticated already");
  if (auth_failed_) return PermissionDenied(NotAuthenticatedMessage());
  if (challenge_.empty()) return FailedPrecondition("authenticate answers hello's challenge: say hello first");
  if (farm && !hello_lease_refused_.empty()) {
    auth_failed_ = true;
    spdlog::warn("session {} ({}): {}", id_, peer_, hello_lease_refused_);
    return PermissionDenied("this device's lease record in the farm is refused: " + hello_lease_refused_);
  }
  if (farm && token.empty()) {
    auth_failed_ = true;
    return PermissionDenied("this device is in a farm and not leased: acquire a lease first (remex farm lease, or "
                            "--farm with run, bench and check)");
  }
  auto nonce = req.getClientNonce();
  const std::string client_nonce(reinterpret_cast<const char*>(nonce.begin()), nonce.size());
  const std::string challenge = std::exchange(challenge_, std::string());
  if (farm) {
    // The lease's holder signs with the private key of the public key in the farm; what
    // Redis holds cannot make the signature.
    auto signature = req.getSignature();
    const std::string client_signature(reinterpret_cast<const char*>(signature.begin()), signature.size());
    if (client_signature.empty()) {
      auth_failed_ = true;
      return PermissionDenied("authentication failed: this device is in a farm and takes the signature of its "
                              "lease's key (protocol 1." + std::to_string(rpc::kMinorLeaseSignature) +
                              "), not a token's proof: use the token a lease gives (remex farm lease, or --farm)");
    }
    if (client_nonce.size() != rpc::kAuthNonceBytes ||
        !rpc::VerifyLeaseSignature(token, challenge, client_nonce, client_signature)) {
      auth_failed_ = true;
      spdlog::warn("session {} ({}): authentication failed (lease signature)", id_, peer_);
      return PermissionDenied("authentication failed: the signature is not by the key of this device's current lease");
    }
    authenticated_ = true;
    {
      std::lock_guard<std::mutex> lock(state_->sessions_mu);  // KeepLease reads it
      lease_ = token;
    }
    reply.initAuthenticate();  // no server proof: the device holds no secret of the lease
    spdlog::info("session {} ({}): authenticated by its lease", id_, peer_);
    return OkStatus();
  }
  auto proof = req.getProof();
  const std::string client_proof(reinterpret_cast<const char*>(proof.begin()), proof.size());
  if (client_nonce.size() != rpc::kAuthNonceBytes ||
      !rpc::ProofsEqual(client_proof, rpc::AuthProof(token, "client", challenge, client_nonce))) {
    auth_failed_ = true;
    spdlog::warn("session {} ({}): authentication failed", id_, peer_);
    return PermissionDenied("authentication failed: the proof does not match this server's token");
  }
  authenticated_ = true;
  const std::string server_proof = rpc::AuthProof(token, "server", challenge, client_nonce);
  reply.initAuthenticate().setServerProof(
      capnp::Data::Reader(reinterpret_cast<const capnp::byte*>(server_proof.data()), server_proof.size()));
  spdlog::info("session {} ({}): authenticated", id_, peer_);
  return OkStatus();
}

Session* Session::FindByCancelKeyLocked(uint64_t session_id, capnp::Data::Reader key) const {
  Session* target = nullptr;
  for (Session* s : state_->sessions) {
    if (s->id_ == session_id) target = s;
  }
  if (target == nullptr || target->cancel_key_.empty() || key.size() != target->cancel_key_.size() ||
      CRYPTO_memcmp(key.begin(), target->cancel_key_.data(), key.size()) != 0) {
    return nullptr;
  }
  return target;
}

Status Session::Progress(wire::Progress::Reader req, wire::Reply::Builder reply) {
  auto r = reply.initProgress();
  std::lock_guard<std::mutex> lock(state_->sessions_mu);
  Session* target = FindByCancelKeyLocked(req.getSessionId(), req.getCancelKey());
  if (target == nullptr) {
    return NotFound("no open session " + std::to_string(req.getSessionId()) + " with that cancel key");
  }
  const RequestProgress& p = target->progress_;
  const uint8_t kind = p.kind.load(std::memory_order_acquire);
  if (!target->busy_ || kind == RequestProgress::kNone) return OkStatus();
  const uint64_t done = p.done.load(std::memory_order_relaxed);
  const uint64_t total = p.total.load(std::memory_order_relaxed);
  const int64_t started = p.started_ns.load(std::memory_order_relaxed);
  const int64_t now = std::chrono::steady_clock::now().time_since_epoch().count();
  const uint64_t elapsed = static_cast<uint64_t>(std::max<int64_t>(0, now - started));
  r.setRunning(true);
  r.setKind(RequestProgress::Name(kind));
  r.setDone(done);
  r.setTotal(total);
  r.setElapsedNanos(elapsed);
  if (done > 0 && total > done) {
    r.setRemainingNanos(static_cast<uint64_t>(static_cast<double>(elapsed) / static_cast<double>(done) *
                                              static_cast<double>(total - done)));
  }
  return OkStatus();
}

Status Session::Cancel(wire::Cancel::Reader req, wire::Reply::Builder reply) {
  bool cancelled = false;
  {
    std::lock_guard<std::mutex> lock(state_->sessions_mu);
    Session* target = FindByCancelKeyLocked(req.getSessionId(), req.getCancelKey());
    if (target == nullptr) {
      return NotFound("no open session " + std::to_string(req.getSessionId()) + " with that cancel key");
    }
    if (target->busy_ && !target->control_.cancelled.load(std::memory_order_acquire)) {
      // Named by the session cancelled, as its client knows it (hello's sessionId).
      target->control_.reason = "cancelled by a cancel request for session " + std::to_string(target->id_);
      target->cancel_requested_ = true;
      target->cancelled_at_ = std::chrono::steady_clock::now();
      target->control_.cancelled.store(true, std::memory_order_release);
      cancelled = true;
    }
  }
  if (cancelled) spdlog::info("session {}: cancelled session {}'s request", id_, req.getSessionId());
  reply.initCancel().setCancelled(cancelled);
  return OkStatus();
}

std::string Session::NotAuthenticatedMessage() const {
  if (auth_failed_) return "authentication failed earlier in this session: reconnect";
  if (state_->config.lease_key) {
    return "this device is in a farm: authenticate with the token of its lease (remex farm lease, or --farm with "
           "run, bench and check)";
  }
  return "this server requires a token: authenticate after hello (clients: --token-file FILE or REMEX_TOKEN)";
}

}  // namespace remex::server
