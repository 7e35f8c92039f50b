#include "host_client/tooling/interrupt.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstring>

namespace remex::tooling {
namespace {

// A cancel that found nothing in progress is sent again this often, this many times.

}  // namespace

StatusOr<std::unique_ptr<Interrupter>> Interrupter::Start(Report report) {
  std::unique_ptr<Interrupter> irq(new Interrupter(std::move(report)));
  if (pipe2(irq->pipe_, O_CLOEXEC) != 0) {
    return Internal(std::string("cannot make the interrupt pipe: ") + std::strerror(errno));
  }
  // A signal handler never blocks on a full pipe (a byte already there wakes the thread).
  fcntl(irq->pipe_[1], F_SETFL, fcntl(irq->pipe_[1], F_GETFL) | O_NONBLOCK);
  irq->thread_ = std::thread([p = irq.get()] { p->Loop(); });
  return irq;
}

Interrupter::~Interrupter() {
  const unsigned char stop = 0;
  while (write(pipe_[1], &stop, 1) < 0 && errno == EINTR) {
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    watched_ = nullptr;
    ++generation_;
  }
  changed_.notify_all();
  if (thread_.joinable()) thread_.join();
  close(pipe_[0]);
  close(pipe_[1]);
}

void Interrupter::Notify(int signal) noexcept {
  const int saved = errno;
  const unsigned char byte = static_cast<unsigned char>(signal > 0 && signal < 256 ? signal : 255);
  signal_.store(byte);
  ssize_t n = write(pipe_[1], &byte, 1);
  (void)n;
  errno = saved;
}

void Interrupter::Watch(client::Session* session) {
  {
    std::lock_guard<std::mutex> lock(mu_);  // waits for a cancel in flight
    watched_ = session;
    ++generation_;
  }
  changed_.notify_all();
}

void Interrupter::Loop() {
  for (;;) {
    unsigned char byte = 0;
    const ssize_t n = read(pipe_[0], &byte, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0 || byte == 0) return;
    CancelWatched();
  }
}

void Interrupter::CancelWatched() {
  std::unique_lock<std::mutex> lock(mu_);
  if (watched_ == nullptr) return;
  const uint64_t generation = generation_;
  if (report_) report_("cancelling the request on the server");
  for (int attempt = 1;; ++attempt) {
    StatusOr<bool> cancelled = watched_->Cancel();
    if (!cancelled.ok()) {
      if (report_) report_("cannot cancel: " + cancelled.status().ToString());
      return;
    }
    if (*cancelled) return;
    if (attempt == Interrupter::kCancelAttempts) {
      if (report_) report_("nothing runs on the server to cancel; the command goes on");
      return;
    }
    // The request may be on its way to the server: again in a moment, unless the call
    // has ended meanwhile.
    if (changed_.wait_for(lock, Interrupter::kCancelRetryEvery, [&] { return generation_ != generation; })) return;
  }
}

std::string SignalName(int signal) {
  switch (signal) {
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    case SIGHUP: return "SIGHUP";
    case SIGQUIT: return "SIGQUIT";
    default: return "signal " + std::to_string(signal);
  }
}

}  // namespace remex::tooling
