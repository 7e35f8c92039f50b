#include "device_server/load_test.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <memory>
#include <random>
#include <thread>
#include <unordered_set>

#include "base/fiber.h"

namespace remex::server {
namespace {

using Clock = std::chrono::steady_clock;

struct Query {
  Clock::time_point issued;
  uint32_t remaining = 0;  // samples not yet completed
};

struct Job {
  size_t query = 0;
  uint64_t sample = 0;  // global sample index, in issue order
};

struct LaneState {
  std::unique_ptr<Fiber> fiber;
  Job job;
  Status status;
  bool busy = false;
};

}  // namespace

Status ValidateLoadTestOptions(const LoadTestOptions& o, std::chrono::milliseconds time_limit) {
  auto range = [](const char* name, uint64_t v, uint64_t lo, uint64_t hi) -> Status {
    if (v < lo || v > hi) {
      return InvalidArgument(std::string("loadTest: ") + name + " must be in [" + std::to_string(lo) + ", " +
                             std::to_string(hi) + "], got " + std::to_string(v));
    }
    return OkStatus();
  };
  REMEX_RETURN_IF_ERROR(range("concurrency", o.concurrency, 1, kMaxLoadConcurrency));
  if (o.scenario == LoadScenario::kMultiStream) {
    REMEX_RETURN_IF_ERROR(range("samplesPerQuery", o.samples_per_query, 1, kMaxSamplesPerQuery));
  } else if (o.samples_per_query != 1) {
    return InvalidArgument(std::string("loadTest: samplesPerQuery is for the multi-stream scenario; ") +
                           LoadScenarioName(o.scenario) + " takes 1, got " + std::to_string(o.samples_per_query));
  }
  if (o.scenario == LoadScenario::kServer) {
    if (!(o.target_qps > 0) || !(o.target_qps <= kMaxTargetQps)) {
      return InvalidArgument("loadTest: targetQps must be in (0, 1e6] for the server scenario, got " +
                             std::to_string(o.target_qps));
    }
  } else if (o.target_qps != 0) {
    return InvalidArgument(std::string("loadTest: targetQps is for the server scenario; ") +
                           LoadScenarioName(o.scenario) + " issues queries as they complete (or at once)");
  }
  REMEX_RETURN_IF_ERROR(range("minQueries", o.min_queries, 0, kMaxLoadQueries));
  if (std::chrono::milliseconds(o.min_duration_ms) > time_limit) {
    return InvalidArgument("loadTest: minDurationMs " + std::to_string(o.min_duration_ms) +
                           " is over the server's limit of " + std::to_string(time_limit.count()) + " ms");
  }
  if (o.min_queries == 0 && o.min_duration_ms == 0) {
    return InvalidArgument("loadTest: give minQueries or minDurationMs (both are 0)");
  }
  return OkStatus();
}

StatusOr<LoadTestResult> RunLoadTest(std::vector<LoadLane>& lanes, const LoadTestOptions& o,
                                     std::chrono::milliseconds time_limit, const vm::RunControl& session) {
  REMEX_RETURN_IF_ERROR(ValidateLoadTestOptions(o, time_limit));
  if (lanes.size() < o.concurrency) {
    return Internal("loadTest: " + std::to_string(lanes.size()) + " lanes for concurrency " +
                    std::to_string(o.concurrency));
  }
  const Clock::time_point start = Clock::now();
  const Clock::time_point deadline = start + time_limit;
  const Clock::time_point min_end = start + std::chrono::milliseconds(o.min_duration_ms);
  const size_t n_lanes = o.concurrency;
  std::vector<LaneState> state(n_lanes);
  for (size_t i = 0; i < n_lanes; ++i) {
    vm::RunControl& c = *lanes[i].control;
    c.deadline = deadline;
    c.budget = time_limit;
    c.yield = &Fiber::Suspend;
  }
  const std::unordered_set<uint64_t> audited(o.audited_samples.begin(), o.audited_samples.end());
  // The audit's floor: the run issues samples at least up to its last chosen sample,
  // so a run slower than the warmup's estimate still checks every one it chose.
  const uint64_t audit_floor =
      o.audited_samples.empty() ? 0 : *std::max_element(o.audited_samples.begin(), o.audited_samples.end()) + 1;

  std::vector<Query> queries;
  std::deque<Job> pending;
  uint64_t next_sample = 0;
  LoadTestResult result;
  bool issuing = true;
  bool stopping = false;  // the limit was reached: lanes are being stopped
  Status failure;         // the first error of a sample or of the session

  const uint32_t per_query = o.scenario == LoadScenario::kMultiStream ? o.samples_per_query : 1;
  auto issue = [&](Clock::time_point when) {
    queries.push_back({when, per_query});
    for (uint32_t k = 0; k < per_query; ++k) pending.push_back({queries.size() - 1, next_sample++});
  };
  auto idle_lanes = [&] {
    return static_cast<size_t>(std::count_if(state.begin(), state.end(), [](const LaneState& l) { return !l.busy; }));
  };
  auto stop_lanes = [&](const std::string& why) {
    for (size_t i = 0; i < n_lanes; ++i) {
      vm::RunControl& c = *lanes[i].control;
      if (!c.cancelled.load(std::memory_order_acquire)) {
        c.reason = why;
        c.cancelled.store(true, std::memory_order_release);
      }
    }
  };

  auto stop_at_limit = [&] {
    stopping = true;
    issuing = false;
    stop_lanes("the load test reached the server's limit of " + std::to_string(time_limit.count()) + " ms");
    pending.clear();  // never started: their queries are dropped
  };

  // The first queries.
  PoissonArrivals arrivals(o.target_qps, o.seed);
  Clock::time_point next_arrival = start;
  switch (o.scenario) {
    case LoadScenario::kSingleStream:
      for (size_t i = 0; i < n_lanes; ++i) issue(start);
      break;
    case LoadScenario::kMultiStream:
      issue(start);
      break;
    case LoadScenario::kServer:
      break;  // arrivals below, from `start` on
    case LoadScenario::kOffline: {
      const uint64_t n = std::min<uint64_t>(
          kMaxLoadQueries, std::max(audit_floor, OfflineQueryCount(o.min_queries, o.min_duration_ms,
                                                                   o.seconds_per_sample, static_cast<uint32_t>(n_lanes))));
      for (uint64_t i = 0; i < n; ++i) issue(start);
      issuing = false;
      break;
    }
  }

  Clock::time_point last_completion = start;
  auto complete = [&](size_t lane, Clock::time_point now) -> Status {
    LaneState& l = state[lane];
    l.busy = false;
    l.fiber.reset();
    Query& q = queries[l.job.query];
    if (!l.status.ok()) {
      // Stopped at the limit (by the generator, or by its own deadline, which is the
      // same): its query is dropped.
      if (!stopping && l.status.code() == StatusCode::kDeadlineExceeded && now >= deadline) stop_at_limit();
      if (stopping) return OkStatus();
      return l.status.WithContext("loadTest sample " + std::to_string(l.job.sample));
    }
    ++result.samples;
    last_completion = now;
    if (--q.remaining == 0) {
      ++result.completed;
      if (o.completed_queries != nullptr) o.completed_queries->fetch_add(1, std::memory_order_relaxed);
      // The next query of a closed-loop stream.
      if (issuing && (o.scenario == LoadScenario::kSingleStream || o.scenario == LoadScenario::kMultiStream)) {
        issue(now);
      }
    }
    // Recorded after the completion time was taken: the copy is outside the latency.
    if (audited.count(l.job.sample)) REMEX_RETURN_IF_ERROR(lanes[lane].audit(l.job.sample));
    return OkStatus();
  };

  std::vector<Clock::time_point> done_at;  // per query, once complete
  for (;;) {
    Clock::time_point now = Clock::now();
    if (failure.ok()) {
      Status st = session.Check(now);
      if (!st.ok()) {
        failure = st;
        stop_lanes(st.message());
      }
    }
    if (!stopping && failure.ok() && now > deadline) stop_at_limit();
    if (issuing) {
      if (o.scenario == LoadScenario::kServer) {
        while (next_arrival <= now && queries.size() < kMaxLoadQueries) {
          // A query finds every lane busy (or others already waiting): it waits.
          if (!pending.empty() || idle_lanes() == 0) ++result.late;
          issue(next_arrival);
          next_arrival += arrivals.NextGap();
        }
      }
      if ((now >= min_end && queries.size() >= o.min_queries && next_sample >= audit_floor) ||
          queries.size() >= kMaxLoadQueries) {
        issuing = false;
      }
    }
    // Queued samples go to idle lanes.
    if (failure.ok() && !stopping) {
      for (size_t i = 0; i < n_lanes && !pending.empty(); ++i) {
        LaneState& l = state[i];
        if (l.busy) continue;
        l.job = pending.front();
        pending.pop_front();
        l.busy = true;
        l.status = OkStatus();
        l.fiber = std::make_unique<Fiber>([&lane = lanes[i], &l] { l.status = lane.run(); });
      }
    }
    // One step (up to the next kernel) of each busy lane.
    bool any_busy = false;
    for (size_t i = 0; i < n_lanes; ++i) {
      LaneState& l = state[i];
      if (!l.busy) continue;
      if (!l.fiber->Resume()) {
        any_busy = true;
        continue;
      }
      const Clock::time_point done = Clock::now();
      const size_t query = l.job.query;
      Status st = complete(i, done);
      if (!st.ok() && failure.ok()) {
        failure = st;
        stop_lanes(st.message());
      }
      if (queries[query].remaining == 0) {
        if (done_at.size() < queries.size()) done_at.resize(queries.size());
        done_at[query] = done;
      }
    }
    if (any_busy) continue;
    if (!failure.ok()) return failure;  // every lane has stopped
    if (!pending.empty()) continue;
    if (!issuing || stopping) break;
    if (o.scenario == LoadScenario::kServer) {
      // Nothing to run until the next arrival.
      std::this_thread::sleep_until(std::min(next_arrival, deadline + std::chrono::milliseconds(1)));
      continue;
    }
    break;  // a closed loop with nothing in flight: only after its last query
  }

  done_at.resize(queries.size());
  result.issue_nanos.reserve(queries.size());
  result.latency_nanos.reserve(queries.size());
  for (size_t q = 0; q < queries.size(); ++q) {
    result.issue_nanos.push_back(static_cast<uint64_t>(std::max<int64_t>(
        0, std::chrono::duration_cast<std::chrono::nanoseconds>(queries[q].issued - start).count())));
    if (queries[q].remaining == 0) {
      result.latency_nanos.push_back(static_cast<uint64_t>(
          std::chrono::duration_cast<std::chrono::nanoseconds>(done_at[q] - queries[q].issued).count()));
    } else {
      result.latency_nanos.push_back(0);
      ++result.dropped;
    }
  }
  result.duration_nanos =
      static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(last_completion - start).count());
  return result;
}

}  // namespace remex::server
