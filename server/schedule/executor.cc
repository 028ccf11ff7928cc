#include "schedule/executor.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

namespace cakegrad::server {

Executor::Executor(Backend* backend, int device, size_t max_queue)
    : backend_(backend),
      device_(device),
      max_queue_(max_queue),
      max_in_flight_(static_cast<size_t>(std::max(1, backend->max_in_flight()))) {
  thread_ = std::thread([this] { Loop(); });
  completer_ = std::thread([this] { CompleteLoop(); });
}

Executor::~Executor() { Drain(); }

absl::Status Executor::Submit(Job job) {
  absl::MutexLock lock(&mu_);
  if (stopping_) return absl::UnavailableError("the daemon is shutting down");
  if (queued_ >= max_queue_) {
    return absl::ResourceExhaustedError(
        absl::StrCat("device ", device_, " has ", queued_,
                     " requests queued, the limit (--max_queue_depth); "
                     "retry later"));
  }
  job.enqueued = absl::Now();
  std::deque<Job>& q = per_session_[job.session_id];
  if (q.empty()) turn_order_.push_back(job.session_id);
  q.push_back(std::move(job));
  ++queued_;
  return absl::OkStatus();
}

void Executor::Drain() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
  if (completer_.joinable()) completer_.join();
}

size_t Executor::queued() const {
  absl::MutexLock lock(&mu_);
  return queued_;
}

void Executor::Finish(Job& job, absl::Status status, absl::Time start, const ExecuteInfo& info) {
  JobTiming timing{start - job.enqueued, absl::Now() - start, info};
  if (!status.ok() && status.code() == absl::StatusCode::kInternal) {
    spdlog::error("{} on device {} failed: {}",
                  job.call->op != nullptr ? job.call->op->name : "a call", device_,
                  status.ToString());
  }
  job.call.reset();  // unpin regions before the reply: an unregister may be waiting on them
  job.done(std::move(status), timing);
}

void Executor::Loop() {
  for (;;) {
    Job job;
    {
      absl::MutexLock lock(&mu_);
      // A job is taken only when it can also be launched: while the backend's in-flight slots
      // are full it stays queued, where round robin still orders it.
      mu_.Await(absl::Condition(
          +[](Executor* e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(e->mu_) {
            return (e->queued_ > 0 && e->in_flight_.size() < e->max_in_flight_) ||
                   (e->stopping_ && e->queued_ == 0);
          },
          this));
      if (queued_ == 0) {  // stopping and drained
        launcher_done_ = true;
        return;
      }
      const std::string session = std::move(turn_order_.front());
      turn_order_.pop_front();
      std::deque<Job>& q = per_session_[session];
      job = std::move(q.front());
      q.pop_front();
      if (q.empty()) {
        per_session_.erase(session);
      } else {
        turn_order_.push_back(session);
      }
      --queued_;
    }
    const absl::Time start = absl::Now();
    ExecuteInfo info;
    FinishFn finish;
    absl::Status status = backend_->Execute(*job.call, &info, &finish);
    if (status.ok() && finish) {
      absl::MutexLock lock(&mu_);
      in_flight_.push_back(InFlight{std::move(job), start, info, std::move(finish)});
      continue;
    }
    Finish(job, std::move(status), start, info);
  }
}

void Executor::CompleteLoop() {
  for (;;) {
    InFlight call;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](Executor* e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(e->mu_) {
            return !e->in_flight_.empty() || e->launcher_done_;
          },
          this));
      if (in_flight_.empty()) return;  // the launcher has stopped and nothing is in flight
      // The slot stays counted until the call is finished: the backend reuses it after that.
      call = std::move(in_flight_.front());
    }
    absl::Status status = call.finish(&call.info);
    {
      absl::MutexLock lock(&mu_);
      in_flight_.pop_front();
    }
    Finish(call.job, std::move(status), call.start, call.info);
  }
}

}  // namespace cakegrad::server
