// One launcher thread per device. gRPC handlers hand it validated calls and return at once; it
// launches them one at a time, taking turns between sessions (round robin), so one busy client
// cannot starve another. The queue is bounded: a full queue answers RESOURCE_EXHAUSTED.
// Calls the backend leaves in flight (up to its max_in_flight) are finished, and answered, by a
// second thread in launch order, so the next call is already on the GPU while one is answered.
#pragma once

#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "launch/backend.h"
#include "ops/op_spec.h"

namespace cakegrad::server {

struct JobTiming {
  absl::Duration queued;   // from Submit to the start of execution
  absl::Duration compute;  // from the start of execution to its end (launch + GPU + wait)
  ExecuteInfo info;        // how the backend ran it
};

struct Job {
  std::string session_id;
  std::unique_ptr<BoundCall> call;
  // Called once, on the launcher or the completion thread, with the outcome; must not block on
  // other jobs.
  std::function<void(absl::Status, JobTiming)> done;
  absl::Time enqueued;
};

class Executor {
 public:
  Executor(Backend* backend, int device, size_t max_queue);
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  absl::Status Submit(Job job);
  // Stops accepting work, finishes every queued and in-flight job, joins the threads.
  // Idempotent.
  void Drain();
  size_t queued() const;

 private:
  struct InFlight {
    Job job;
    absl::Time start;
    ExecuteInfo info;
    FinishFn finish;
  };
  void Loop();
  void CompleteLoop();
  void Finish(Job& job, absl::Status status, absl::Time start, const ExecuteInfo& info);

  Backend* const backend_;
  const int device_;
  const size_t max_queue_;
  const size_t max_in_flight_;
  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool launcher_done_ ABSL_GUARDED_BY(mu_) = false;
  size_t queued_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<std::string, std::deque<Job>> per_session_ ABSL_GUARDED_BY(mu_);
  std::deque<std::string> turn_order_ ABSL_GUARDED_BY(mu_);  // sessions with queued jobs
  std::deque<InFlight> in_flight_ ABSL_GUARDED_BY(mu_);      // launched, in launch order
  std::thread thread_, completer_;
};

}  // namespace cakegrad::server
