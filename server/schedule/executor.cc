#include "schedule/executor.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

namespace cakegrad::server {

Executor::Executor(Backend* backend, int device, size_t max_queue)
    : backend_(backend), device_(device), max_queue_(max_queue) {
  thread_ = std::thread([this] { Loop(); });
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
}

size_t Executor::queued() const {
  absl::MutexLock lock(&mu_);
  return queued_;
}

void Executor::Loop() {
  for (;;) {
    Job job;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](Executor* e)
               ABSL_EXCLUSIVE_LOCKS_REQUIRED(e->mu_) { return e->queued_ > 0 || e->stopping_; },
          this));
      if (queued_ == 0) return;  // stopping and drained
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
    absl::Status status = backend_->Execute(*job.call, &info);
    JobTiming timing{start - job.enqueued, absl::Now() - start, info};
    if (!status.ok() && status.code() == absl::StatusCode::kInternal) {
      spdlog::error("{} on device {} failed: {}", job.call->op->name, device_, status.ToString());
    }
    job.call.reset();  // unpin regions before the reply: an unregister may be waiting on them
    job.done(std::move(status), timing);
  }
}

}  // namespace cakegrad::server
