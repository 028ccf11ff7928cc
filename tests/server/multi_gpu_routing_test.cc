// One daemon, several GPUs, without any GPU: the real service, registry, sessions and one
// executor per device, over an in-process channel, with a backend that pretends to be two GPUs
// (host memory behind "CUDA" regions). A region lands on the GPU its UUID names, a call runs on
// the executor of the GPU that holds its tensors and the response names that GPU, a call that
// spans two GPUs is refused naming both, and a stalled GPU does not hold up the other.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "cakegrad/v1/service.grpc.pb.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/server_builder.h"
#include "launch/backend.h"
#include "launch/device_table.h"
#include "metrics/metrics.h"
#include "ops/op_registry.h"
#include "regions/region_registry.h"
#include "rpc/service.h"
#include "schedule/executor.h"
#include "server_test_util.h"
#include "sessions/session_manager.h"

namespace cakegrad::server {
namespace {

using test_support::Ref;
using ::testing::HasSubstr;

const std::vector<std::string> kUuids = {"GPU-aaaaaaaa-0000-0000-0000-000000000000",
                                         "GPU-bbbbbbbb-1111-1111-1111-111111111111"};

// Two "GPUs" found by UUID like the cuda backend finds them; Execute records where each call ran.
class FakeGpus : public Backend {
 public:
  FakeGpus() : table_(kUuids) {}
  const char* name() const override { return "fake-gpus"; }
  RegionKind memory() const override { return RegionKind::kCuda; }
  absl::StatusOr<MappedRange> MapHost(const v1::HostRegion&) override {
    return absl::FailedPreconditionError("fake GPUs take CUDA regions");
  }
  absl::StatusOr<MappedRange> MapCuda(const v1::CudaRegion& region) override {
    absl::StatusOr<int> ordinal = table_.Find(region.gpu_uuid());
    if (!ordinal.ok()) return ordinal.status();
    return test_support::OwnedHostRange(region.byte_size(), *ordinal, table_.uuid(*ordinal));
  }
  void Describe(v1::Capabilities* caps) const override {
    caps->set_backend("fake-gpus");
    for (const std::string& uuid : kUuids) caps->add_devices()->set_uuid(uuid);
  }
  int num_devices() const override { return table_.size(); }
  absl::StatusOr<std::vector<std::string>> RegisterEvents(
      const std::string&, const std::string&, const std::vector<std::string>&) override {
    return absl::UnimplementedError("no events");
  }
  absl::Status CheckEventSlot(const std::string&, int, int) override {
    return absl::UnimplementedError("no events");
  }
  void ReleaseSession(const std::string&) override {}
  absl::Status Execute(const BoundCall& call, ExecuteInfo*, FinishFn*) override {
    {
      absl::MutexLock lock(&mu);
      ran.push_back({call.device, std::this_thread::get_id()});
    }
    if (call.device == 0 && stall_gpu0) release_gpu0.WaitForNotification();
    return absl::OkStatus();
  }

  struct Ran {
    int device;
    std::thread::id thread;
  };
  absl::Mutex mu;
  std::vector<Ran> ran;
  bool stall_gpu0 = false;  // set before any call
  absl::Notification release_gpu0;

 private:
  DeviceTable table_;
};

class MultiGpuRoutingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!FindOp("conv1d_forward")->has_cuda) {
      GTEST_SKIP() << "this build has no CUDA kernels (nvcc not found at configure time): a "
                      "CUDA-memory daemon refuses every operator";
    }
    regions_ = std::make_unique<RegionRegistry>(64);
    sessions_ = std::make_unique<SessionManager>(regions_.get(), 8, [](const std::string&) {});
    for (int d = 0; d < backend_.num_devices(); ++d) {
      executors_.push_back(std::make_unique<Executor>(&backend_, d, 16));
    }
    ServiceContext ctx;
    ctx.backend = &backend_;
    ctx.regions = regions_.get();
    ctx.sessions = sessions_.get();
    ctx.executors = &executors_;
    ctx.metrics = &metrics_;
    ctx.limits.set_max_regions_per_session(64);
    ctx.limits.set_max_region_bytes(1 << 20);
    ctx.limits.set_max_sessions(8);
    ctx.limits.set_max_request_bytes(4 << 20);
    service_.Attach(std::move(ctx));
    service_.SetReady(true);
    grpc::ServerBuilder builder;
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    stub_ = v1::Cakegrad::NewStub(server_->InProcessChannel(grpc::ChannelArguments()));
    session_reader_ = stub_->OpenSession(&session_context_, v1::OpenSessionRequest());
    v1::SessionEvent opened;
    ASSERT_TRUE(session_reader_->Read(&opened));
    session_ = opened.session_id();
  }
  void TearDown() override {
    if (server_ == nullptr) return;
    if (!backend_.release_gpu0.HasBeenNotified()) backend_.release_gpu0.Notify();
    for (auto& e : executors_) e->Drain();
    session_context_.TryCancel();
    const grpc::Status ended = session_reader_->Finish();
    (void)ended;  // cancelled on purpose
    server_->Shutdown();
  }

  // A region of `bytes` on the GPU named `uuid`.
  absl::StatusOr<uint64_t> Register(const std::string& uuid, uint64_t bytes = 1 << 16) {
    v1::RegisterRegionRequest request;
    request.set_session_id(session_);
    request.mutable_cuda()->set_ipc_handle(std::string(64, '\1'));
    request.mutable_cuda()->set_byte_size(bytes);
    request.mutable_cuda()->set_gpu_uuid(uuid);
    v1::RegisterRegionResponse response;
    grpc::ClientContext context;
    const grpc::Status s = stub_->RegisterRegion(&context, request, &response);
    if (!s.ok())
      return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
    return response.region_id();
  }

  // conv1d_forward with x, weight, cu_seqlens in region `in` and y in region `out`.
  v1::RunRequest Conv1dForward(uint64_t in, uint64_t out) {
    v1::RunRequest run;
    run.set_session_id(session_);
    auto* r = run.mutable_conv1d_forward();
    *r->mutable_x() = Ref(in, 0, v1::BF16, {64, 32});
    *r->mutable_weight() = Ref(in, 8192, v1::FP32, {32, 4});
    *r->mutable_cu_seqlens() = Ref(in, 16384, v1::INT64, {2});
    *r->mutable_y() = Ref(out, out == in ? 24576 : 0, v1::BF16, {64, 32});
    return run;
  }

  // A call queued behind a stalled GPU would wait forever: 10 s is "never".
  grpc::Status Run(const v1::RunRequest& run, v1::RunResponse* response) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    return stub_->Run(&context, run, response);
  }

  FakeGpus backend_;
  Metrics metrics_;
  std::unique_ptr<RegionRegistry> regions_;
  std::unique_ptr<SessionManager> sessions_;
  std::vector<std::unique_ptr<Executor>> executors_;
  CakegradService service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::Cakegrad::Stub> stub_;
  grpc::ClientContext session_context_;
  std::unique_ptr<grpc::ClientReader<v1::SessionEvent>> session_reader_;
  std::string session_;
};

TEST_F(MultiGpuRoutingTest, EachCallRunsOnTheExecutorOfTheGpuHoldingItsTensors) {
  // The client names the GPUs by UUID, in its own order (its ordinals are not the daemon's).
  auto on_b = Register(kUuids[1]);
  auto on_a = Register("aaaaaaaa-0000-0000-0000-000000000000");  // without "GPU-": same GPU
  ASSERT_TRUE(on_b.ok()) << on_b.status();
  ASSERT_TRUE(on_a.ok()) << on_a.status();
  v1::RunResponse response;
  for (uint64_t region : {*on_b, *on_a, *on_b}) {
    ASSERT_TRUE(Run(Conv1dForward(region, region), &response).ok());
    EXPECT_EQ(response.gpu_uuid(), region == *on_b ? kUuids[1] : kUuids[0]);
  }
  absl::MutexLock lock(&backend_.mu);
  ASSERT_EQ(backend_.ran.size(), 3u);
  EXPECT_EQ(backend_.ran[0].device, 1);
  EXPECT_EQ(backend_.ran[1].device, 0);
  EXPECT_EQ(backend_.ran[2].device, 1);
  // One launcher thread per GPU: GPU 1's calls share one, GPU 0's is another.
  EXPECT_EQ(backend_.ran[0].thread, backend_.ran[2].thread);
  EXPECT_NE(backend_.ran[0].thread, backend_.ran[1].thread);
}

TEST_F(MultiGpuRoutingTest, UnknownGpuIsRefusedAtRegistrationNamingTheServedOnes) {
  auto r = Register("GPU-cccccccc-2222-2222-2222-222222222222");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr(kUuids[0]));
  EXPECT_THAT(std::string(r.status().message()), HasSubstr(kUuids[1]));
}

TEST_F(MultiGpuRoutingTest, CallSpanningTwoGpusIsRefusedNamingBoth) {
  auto on_a = Register(kUuids[0]);
  auto on_b = Register(kUuids[1]);
  ASSERT_TRUE(on_a.ok() && on_b.ok());
  v1::RunResponse response;
  const grpc::Status s = Run(Conv1dForward(*on_a, *on_b), &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("y is on GPU " + kUuids[1]));
  EXPECT_THAT(s.error_message(), HasSubstr("x is on GPU " + kUuids[0]));
  absl::MutexLock lock(&backend_.mu);
  EXPECT_TRUE(backend_.ran.empty()) << "nothing may launch";
}

TEST_F(MultiGpuRoutingTest, AStalledGpuDoesNotHoldUpTheOther) {
  backend_.stall_gpu0 = true;
  auto on_a = Register(kUuids[0]);
  auto on_b = Register(kUuids[1]);
  ASSERT_TRUE(on_a.ok() && on_b.ok());
  v1::RunResponse stalled_response;
  grpc::Status stalled_status;
  std::thread stalled(
      [&] { stalled_status = Run(Conv1dForward(*on_a, *on_a), &stalled_response); });
  // Once GPU 0's call is inside Execute (and stays there), GPU 1 must still answer.
  auto stalled_started = [&] {
    absl::MutexLock lock(&backend_.mu);
    return !backend_.ran.empty();
  };
  for (int i = 0; i < 5000 && !stalled_started(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_TRUE(stalled_started());
  v1::RunResponse response;
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(Run(Conv1dForward(*on_b, *on_b), &response).ok());
    EXPECT_EQ(response.gpu_uuid(), kUuids[1]);
  }
  backend_.release_gpu0.Notify();
  stalled.join();
  EXPECT_TRUE(stalled_status.ok()) << stalled_status.error_message();
  EXPECT_EQ(stalled_response.gpu_uuid(), kUuids[0]);
}

}  // namespace
}  // namespace cakegrad::server
