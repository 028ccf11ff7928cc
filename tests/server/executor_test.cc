// The launcher thread's queue: round robin between sessions, a bound, draining on shutdown.
#include "schedule/executor.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "absl/synchronization/notification.h"

namespace cakegrad::server {
namespace {

// Records the order of calls; the first call blocks until released so a queue can build up.
class RecordingBackend : public Backend {
 public:
  const char* name() const override { return "recording"; }
  RegionKind memory() const override { return RegionKind::kHost; }
  absl::StatusOr<MappedRange> MapHost(const v1::HostRegion&) override {
    return absl::UnimplementedError("");
  }
  absl::StatusOr<MappedRange> MapCuda(const v1::CudaRegion&) override {
    return absl::UnimplementedError("");
  }
  void Describe(v1::Capabilities*) const override {}
  int num_devices() const override { return 1; }
  absl::StatusOr<std::vector<std::string>> RegisterEvents(
      const std::string&, const std::string&, const std::vector<std::string>&) override {
    return absl::UnimplementedError("");
  }
  absl::Status CheckEventSlot(const std::string&, int, int) override {
    return absl::UnimplementedError("");
  }
  void ReleaseSession(const std::string&) override {}
  absl::Status Execute(const BoundCall& call, ExecuteInfo*, FinishFn*) override {
    if (order.empty()) {
      started.Notify();
      release.WaitForNotification();
    }
    order.push_back(call.dim("tag"));
    return call.dim("fail") ? absl::InvalidArgumentError("asked to fail") : absl::OkStatus();
  }

  absl::Notification started;  // the first call is running
  absl::Notification release;
  std::vector<int64_t> order;  // only touched by the launcher thread until Drain()
};

Job MakeJob(const std::string& session, int64_t tag, std::vector<absl::Status>* results,
            bool fail = false) {
  Job job;
  job.session_id = session;
  job.call = std::make_unique<BoundCall>();
  job.call->dims["tag"] = tag;
  job.call->dims["fail"] = fail;
  job.done = [results](absl::Status s, JobTiming) { results->push_back(std::move(s)); };
  return job;
}

TEST(Executor, TakesTurnsBetweenSessions) {
  RecordingBackend backend;
  std::vector<absl::Status> results;
  Executor executor(&backend, 0, 100);
  ASSERT_TRUE(executor.Submit(MakeJob("busy", 0, &results)).ok());
  backend.started.WaitForNotification();  // job 0 is now running and blocked
  for (int i = 1; i <= 4; ++i) ASSERT_TRUE(executor.Submit(MakeJob("busy", i, &results)).ok());
  ASSERT_TRUE(executor.Submit(MakeJob("quiet", 100, &results)).ok());
  ASSERT_TRUE(executor.Submit(MakeJob("quiet", 101, &results, /*fail=*/true)).ok());
  backend.release.Notify();
  executor.Drain();
  // The quiet session's jobs interleave with the busy one's instead of waiting behind all four.
  EXPECT_EQ(backend.order, (std::vector<int64_t>{0, 1, 100, 2, 101, 3, 4}));
  ASSERT_EQ(results.size(), 7u);
  int failures = 0;
  for (const auto& s : results) failures += !s.ok();
  EXPECT_EQ(failures, 1);
}

TEST(Executor, BoundedQueueAndDrain) {
  RecordingBackend backend;
  std::vector<absl::Status> results;
  Executor executor(&backend, 0, 2);
  ASSERT_TRUE(executor.Submit(MakeJob("a", 0, &results)).ok());
  backend.started.WaitForNotification();
  ASSERT_TRUE(executor.Submit(MakeJob("a", 1, &results)).ok());
  ASSERT_TRUE(executor.Submit(MakeJob("b", 2, &results)).ok());
  absl::Status full = executor.Submit(MakeJob("c", 3, &results));
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(full.message().find("--max_queue_depth"), std::string::npos);
  backend.release.Notify();
  executor.Drain();
  EXPECT_EQ(results.size(), 3u) << "every accepted job finishes before Drain returns";
  EXPECT_EQ(executor.Submit(MakeJob("a", 4, &results)).code(), absl::StatusCode::kUnavailable);
}

// Leaves every call in flight (like the cuda backend's SYNC calls) with up to `depth` at once;
// the calls finish only when the test releases them, in launch order.
class InFlightBackend : public RecordingBackend {
 public:
  int max_in_flight() const override { return 3; }
  absl::Status Execute(const BoundCall& call, ExecuteInfo*, FinishFn* finish) override {
    const int64_t tag = call.dim("tag");
    {
      absl::MutexLock lock(&mu);
      launched.push_back(tag);
      peak = std::max(peak, static_cast<int>(launched.size() - finished.size()));
    }
    *finish = [this, tag](ExecuteInfo* info) {
      absl::MutexLock lock(&mu);
      mu.Await(absl::Condition(&open));
      finished.push_back(tag);
      info->gpu = absl::Microseconds(7);
      return tag == 2 ? absl::InvalidArgumentError("found on the device") : absl::OkStatus();
    };
    return absl::OkStatus();
  }
  int launched_count() {
    absl::MutexLock lock(&mu);
    return static_cast<int>(launched.size());
  }

  absl::Mutex mu;
  bool open = false;  // finishes may complete
  std::vector<int64_t> launched, finished;
  int peak = 0;
};

TEST(Executor, KeepsTheBackendsSlotsInFlightAndFinishesInOrder) {
  InFlightBackend backend;
  std::vector<absl::Status> results;
  std::vector<JobTiming> timings;
  Executor executor(&backend, 0, 100);
  for (int i = 0; i < 6; ++i) {
    Job job = MakeJob("a", i, &results);
    job.done = [&](absl::Status s, JobTiming t) {
      results.push_back(std::move(s));
      timings.push_back(t);
    };
    ASSERT_TRUE(executor.Submit(std::move(job)).ok());
  }
  // Three calls launch without any finishing; the fourth waits for a free slot.
  for (int spin = 0; spin < 2000 && backend.launched_count() < 3; ++spin)
    absl::SleepFor(absl::Milliseconds(1));
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_EQ(backend.launched_count(), 3);
  {
    absl::MutexLock lock(&backend.mu);
    backend.open = true;
  }
  executor.Drain();
  EXPECT_EQ(backend.launched, (std::vector<int64_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(backend.finished, backend.launched) << "finished in launch order";
  EXPECT_LE(backend.peak, 3);
  ASSERT_EQ(results.size(), 6u);
  EXPECT_EQ(results[2].code(), absl::StatusCode::kInvalidArgument) << "a finish's outcome";
  for (int i : {0, 1, 3, 4, 5}) EXPECT_TRUE(results[i].ok()) << i;
  for (const JobTiming& t : timings) EXPECT_EQ(t.info.gpu, absl::Microseconds(7));
}

}  // namespace
}  // namespace cakegrad::server
