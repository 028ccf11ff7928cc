// cakegradd as users meet it: a real daemon process on a real socket, this process as its
// client. The host backend runs the FP64 references, so results must equal, bit for bit, the
// same reference called here.
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <future>
#include <memory>
#include <random>
#include <sstream>
#include <thread>

#include "cakegrad/kernels/conv1d.h"
#include "common/test_util.h"
#include "daemon_process.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "shm_arena.h"

namespace cakegrad::testing {
namespace {

using ::testing::HasSubstr;
namespace k = kernels;

class DaemonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(daemon_.Start().ok()) << "see " << daemon_.log_path();
    auto client = Client::Connect(daemon_.address(), "daemon-test");
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = *std::move(client);
  }

  void ExpectHealthy() {
    EXPECT_TRUE(daemon_.Alive());
    EXPECT_TRUE(CheckHealth(daemon_.address()).ok());
  }

  uint64_t Regions() {
    auto status = client_->GetServerStatus();
    EXPECT_TRUE(status.ok()) << status.status();
    return status.ok() ? status->regions() : ~0ull;
  }

  DaemonProcess daemon_;
  std::unique_ptr<Client> client_;
};

// Returns once a request holds `region` (ListRegions' in_flight count), so a test acts while
// the request runs, not before it arrived.
// A conv1d backward running in the daemon, returned once ListRegions shows it in flight. Under
// heavy load a call can finish before the first poll sees it; then a call twice as long is
// tried, since the tests need the window, not a size (the earlier region is unregistered).
struct InFlight {
  std::unique_ptr<Conv1dCall> call;
  std::future<absl::StatusOr<v1::RunResponse>> result;
};

InFlight StartInFlight(Client& client) {
  int64_t S = 1 << 17;  // the host reference takes tens of milliseconds
  for (int attempt = 0; attempt < 2; ++attempt, S *= 2) {
    InFlight f;
    f.call = std::make_unique<Conv1dCall>(client, S, 64);
    Conv1dCall* call = f.call.get();
    f.result = std::async(std::launch::async,
                          [&client, call] { return client.Conv1dBackward(call->args); });
    const uint64_t region = call->arena.region();
    while (f.result.wait_for(std::chrono::milliseconds(1)) != std::future_status::ready) {
      auto regions = client.ListRegions();
      if (!regions.ok()) {
        ADD_FAILURE() << regions.status();
        return f;
      }
      for (const auto& r : *regions) {
        if (r.region_id() == region && r.in_flight() > 0) return f;
      }
    }
    EXPECT_TRUE(client.UnregisterRegion(region).ok());
  }
  ADD_FAILURE() << "no conv1d backward was seen in flight in two tries";
  return {};
}

// Random document boundaries with empty documents mixed in.
std::vector<int64_t> RandomCuts(int64_t S, int64_t docs) {
  std::uniform_int_distribution<int64_t> cut(0, S);
  std::vector<int64_t> cuts(docs + 1, 0);
  for (int64_t i = 1; i < docs; ++i) cuts[i] = cut(Rng());
  cuts[docs] = S;
  std::sort(cuts.begin(), cuts.end());
  if (docs >= 3) cuts[2] = cuts[1];  // an empty document
  return cuts;
}

struct Conv1dCase {
  int64_t S, C, docs;
  bool bias;
  DType weight_dtype;
  DType seqlens_dtype;
  const char* policy;
};

class Conv1dServed : public DaemonTest, public ::testing::WithParamInterface<Conv1dCase> {};

TEST_P(Conv1dServed, ForwardAndBackwardEqualTheReference) {
  const Conv1dCase c = GetParam();
  ShmArena arena(*client_, 64ull << 20);
  const auto xs = RandomBf16(c.S * c.C), dys = RandomBf16(c.S * c.C);
  std::vector<float> w32 = RandomFloat(c.C * 4, 0, 0.5), b32 = RandomFloat(c.C, 0, 0.1);
  std::vector<uint16_t> w16(w32.size()), b16(b32.size());
  for (size_t i = 0; i < w32.size(); ++i) w16[i] = k::FloatToBf16(w32[i]);
  for (size_t i = 0; i < b32.size(); ++i) b16[i] = k::FloatToBf16(b32[i]);
  const bool bf16w = c.weight_dtype == DType::kBF16;
  const std::vector<int64_t> cuts = RandomCuts(c.S, c.docs);
  std::vector<int32_t> cuts32(cuts.begin(), cuts.end());

  Tensor x = arena.Put(DType::kBF16, {c.S, c.C}, xs);
  Tensor dy = arena.Put(DType::kBF16, {c.S, c.C}, dys);
  Tensor weight =
      bf16w ? arena.Put(DType::kBF16, {c.C, 4}, w16) : arena.Put(DType::kFP32, {c.C, 4}, w32);
  std::optional<Tensor> bias;
  if (c.bias)
    bias = bf16w ? arena.Put(DType::kBF16, {c.C}, b16) : arena.Put(DType::kFP32, {c.C}, b32);
  Tensor cu = c.seqlens_dtype == DType::kINT64 ? arena.Put(DType::kINT64, {c.docs + 1}, cuts)
                                               : arena.Put(DType::kINT32, {c.docs + 1}, cuts32);
  Tensor y = arena.Alloc(DType::kBF16, {c.S, c.C});
  Tensor dx = arena.Alloc(DType::kBF16, {c.S, c.C});
  Tensor dweight = arena.Alloc(c.weight_dtype, {c.C, 4});
  std::optional<Tensor> dbias;
  if (c.bias) dbias = arena.Alloc(c.weight_dtype, {c.C});

  ASSERT_TRUE(client_->Conv1dForward({x, weight, cu, bias, y}).ok());
  auto run = client_->Conv1dBackward(
      {x, weight, cu, dy, bias, c.policy, std::nullopt, dx, dweight, dbias});
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->operator_(), "conv1d_backward");

  const int64_t pbytes = k::DTypeBytes(c.weight_dtype);
  std::vector<uint16_t> ref_y(c.S * c.C), ref_dx(c.S * c.C);
  std::vector<uint8_t> ref_dw(c.C * 4 * pbytes), ref_db(c.C * pbytes);
  k::Conv1dFwdParams f;
  f.x = xs.data();
  f.weight = bf16w ? static_cast<const void*>(w16.data()) : w32.data();
  f.weight_dtype = c.weight_dtype;
  f.bias = !c.bias ? nullptr : bf16w ? static_cast<const void*>(b16.data()) : b32.data();
  f.bias_dtype = c.weight_dtype;
  f.cu_seqlens =
      c.seqlens_dtype == DType::kINT64 ? static_cast<const void*>(cuts.data()) : cuts32.data();
  f.seqlens_dtype = c.seqlens_dtype;
  f.y = ref_y.data();
  f.S = c.S;
  f.C = c.C;
  f.num_docs = c.docs;
  ASSERT_TRUE(k::Conv1dForwardReference(f).ok());
  k::Conv1dBwdParams b;
  b.x = f.x;
  b.weight = f.weight;
  b.weight_dtype = f.weight_dtype;
  b.bias = f.bias;
  b.bias_dtype = f.bias_dtype;
  b.cu_seqlens = f.cu_seqlens;
  b.seqlens_dtype = f.seqlens_dtype;
  b.dy = dys.data();
  b.policy = std::string(c.policy) == "fp32" ? k::SiluGradPreactivation::kFP32
                                             : k::SiluGradPreactivation::kBF16;
  b.dx = ref_dx.data();
  b.dweight = ref_dw.data();
  b.dweight_dtype = c.weight_dtype;
  b.dbias = c.bias ? ref_db.data() : nullptr;
  b.dbias_dtype = c.weight_dtype;
  b.S = c.S;
  b.C = c.C;
  b.num_docs = c.docs;
  ASSERT_TRUE(k::Conv1dBackwardReference(b).ok());

  EXPECT_EQ(arena.Get<uint16_t>(y), ref_y);
  EXPECT_EQ(arena.Get<uint16_t>(dx), ref_dx);
  EXPECT_EQ(0, std::memcmp(arena.data<uint8_t>(dweight), ref_dw.data(), ref_dw.size()));
  if (c.bias) {
    EXPECT_EQ(0, std::memcmp(arena.data<uint8_t>(*dbias), ref_db.data(), ref_db.size()));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, Conv1dServed,
    ::testing::Values(Conv1dCase{1000, 7, 5, true, DType::kFP32, DType::kINT32, "bf16"},
                      Conv1dCase{777, 1, 1, false, DType::kFP32, DType::kINT64, "fp32"},
                      Conv1dCase{2048, 64, 16, true, DType::kBF16, DType::kINT64, "bf16"},
                      Conv1dCase{513, 33, 9, false, DType::kBF16, DType::kINT32, "fp32"},
                      Conv1dCase{0, 8, 2, true, DType::kFP32, DType::kINT32, "bf16"}));

TEST_F(DaemonTest, CapabilitiesListEveryOperator) {
  auto caps = client_->GetCapabilities();
  ASSERT_TRUE(caps.ok());
  EXPECT_EQ(caps->backend(), "host");
  EXPECT_EQ(caps->protocol(), "cakegrad.v1");
  std::vector<std::string> names;
  for (const auto& op : caps->operators()) names.push_back(op.name());
  EXPECT_THAT(names, ::testing::UnorderedElementsAre(
                         "conv1d_forward", "conv1d_backward", "mhc_forward_prepare",
                         "mhc_forward_stats", "mhc_forward_finish", "mhc_backward_prepare",
                         "mhc_backward_finish", "kda_forward", "kda_backward"));
}

TEST_F(DaemonTest, BadInputsGetPreciseErrorsAndTheDaemonStaysHealthy) {
  Conv1dCall call(*client_);
  ASSERT_TRUE(client_->Conv1dBackward(call.args).ok());
  struct Case {
    const char* what;
    std::function<void(Conv1dBackwardArgs&)> mutate;
    absl::StatusCode code;
    const char* message;
  };
  const std::vector<Case> cases = {
      {"offset out of bounds", [](auto& a) { a.dx.offset = (1 << 16) + 8 * 64 * 8 - 16; },
       absl::StatusCode::kInvalidArgument, "dx lies outside region"},
      {"offset overflow", [](auto& a) { a.dy.offset = ~0ull - 7; },
       absl::StatusCode::kInvalidArgument, "dy lies outside region"},
      {"size overflow",
       [](auto& a) {
         a.x.shape = {int64_t{1} << 40, int64_t{1} << 23};
       },
       absl::StatusCode::kInvalidArgument, "x"},
      {"wrong dtype", [](auto& a) { a.dy.dtype = DType::kFP32; },
       absl::StatusCode::kInvalidArgument, "dy must be bfloat16, got float32"},
      {"wrong shape",
       [](auto& a) {
         a.dy.shape = {64, 9};
       },
       absl::StatusCode::kInvalidArgument, "dy must have shape [S, C] = [64, 8], got [64, 9]"},
      {"misaligned", [](auto& a) { a.dweight.offset += 2; }, absl::StatusCode::kInvalidArgument,
       "dweight is misaligned"},
      {"unknown region", [](auto& a) { a.x.region_id = 987654; }, absl::StatusCode::kNotFound,
       "x: region 987654 is not registered"},
      {"bad policy", [](auto& a) { a.silu_grad_preactivation = "fp16"; },
       absl::StatusCode::kInvalidArgument, "silu_grad_preactivation"},
  };
  for (const Case& c : cases) {
    Conv1dBackwardArgs args = call.args;
    c.mutate(args);
    auto run = client_->Conv1dBackward(args);
    EXPECT_EQ(run.status().code(), c.code) << c.what << ": " << run.status();
    EXPECT_THAT(std::string(run.status().message()), HasSubstr(c.message)) << c.what;
  }
  ExpectHealthy();
  EXPECT_TRUE(client_->Conv1dBackward(call.args).ok());
}

TEST_F(DaemonTest, MalformedCuSeqlensIsInvalidArgument) {
  Conv1dCall call(*client_);
  for (std::vector<int32_t> cuts : {std::vector<int32_t>{0, 40, 20},     // decreasing, last != S
                                    std::vector<int32_t>{0, 100, 64},    // out of range
                                    std::vector<int32_t>{0, 32, 63},     // last != S
                                    std::vector<int32_t>{5, 32, 64}}) {  // first != 0
    std::memcpy(call.arena.data<int32_t>(call.args.cu_seqlens), cuts.data(), 12);
    auto run = client_->Conv1dBackward(call.args);
    EXPECT_EQ(run.status().code(), absl::StatusCode::kInvalidArgument) << run.status();
    EXPECT_THAT(std::string(run.status().message()), HasSubstr("cu_seqlens"));
  }
  ExpectHealthy();
}

TEST_F(DaemonTest, AnotherSessionsRegionIsPermissionDenied) {
  Conv1dCall mine(*client_);
  auto other = Client::Connect(daemon_.address(), "intruder");
  ASSERT_TRUE(other.ok());
  Conv1dCall theirs(**other);
  Conv1dBackwardArgs args = mine.args;
  args.dx.region_id = theirs.arena.region();
  auto run = client_->Conv1dBackward(args);
  EXPECT_EQ(run.status().code(), absl::StatusCode::kPermissionDenied) << run.status();
  EXPECT_THAT(std::string(run.status().message()), HasSubstr("belongs to another session"));
  EXPECT_EQ(client_->UnregisterRegion(theirs.arena.region()).code(),
            absl::StatusCode::kPermissionDenied);
  auto listed = client_->ListRegions();
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(listed->size(), 1u) << "a session lists only its own regions";
}

TEST_F(DaemonTest, RegisterRegionErrors) {
  EXPECT_EQ(client_->RegisterHostRegion("/cakegrad-does-not-exist", 64).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(client_->RegisterHostRegion("no-leading-slash", 64).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto buf = SharedMemoryBuffer::Create(4096);
  ASSERT_TRUE(buf.ok());
  auto too_big = client_->RegisterHostRegion(buf->name(), 8192);
  EXPECT_EQ(too_big.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(too_big.status().message()), HasSubstr("exceeds the size"));
  EXPECT_EQ(client_->RegisterHostRegion(buf->name(), 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  int dummy = 0;
  EXPECT_NE(client_->RegisterCudaBuffer(&dummy, 4).status().code(), absl::StatusCode::kOk);
  EXPECT_EQ(Regions(), 0u);
}

TEST(DaemonLimits, OversizeRegionRefusedBeforeMapping) {
  DaemonProcess daemon;
  ASSERT_TRUE(daemon.Start({"--max_region_bytes=4096"}).ok());
  auto client = Client::Connect(daemon.address(), "limits");
  ASSERT_TRUE(client.ok());
  auto small = SharedMemoryBuffer::Create(4096);
  auto big = SharedMemoryBuffer::Create(8192);
  ASSERT_TRUE(small.ok() && big.ok());
  EXPECT_TRUE((*client)->RegisterHostRegion(small->name(), 4096).ok());
  auto refused = (*client)->RegisterHostRegion(big->name(), 8192);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("--max_region_bytes (4096)"));
}

TEST_F(DaemonTest, UnknownSessionIsNotFound) {
  v1::RunRequest request;
  request.mutable_conv1d_forward();
  auto channel_client = Client::Connect(daemon_.address(), "second");
  ASSERT_TRUE(channel_client.ok());
  ASSERT_TRUE((*channel_client)->Close().ok());
  // A closed session's id is refused everywhere.
  auto run = (*channel_client)->Run(request);
  EXPECT_EQ(run.status().code(), absl::StatusCode::kNotFound) << run.status();
}

TEST_F(DaemonTest, EventCompletionNeedsTheCudaBackend) {
  Conv1dCall call(*client_);
  v1::RunRequest request;
  auto* m = request.mutable_conv1d_backward();
  *m->mutable_x() = ToProto(call.args.x);
  *m->mutable_weight() = ToProto(call.args.weight);
  *m->mutable_cu_seqlens() = ToProto(call.args.cu_seqlens);
  *m->mutable_dy() = ToProto(call.args.dy);
  *m->mutable_dx() = ToProto(call.args.dx);
  *m->mutable_dweight() = ToProto(call.args.dweight);
  ASSERT_TRUE(client_->Run(request).ok());
  request.mutable_completion()->set_mode(v1::Completion::EVENT);
  auto run = client_->Run(request);
  EXPECT_EQ(run.status().code(), absl::StatusCode::kFailedPrecondition) << run.status();
  EXPECT_THAT(std::string(run.status().message()), HasSubstr("cuda backend"));
  request.mutable_completion()->set_mode(static_cast<v1::Completion::Mode>(9));
  EXPECT_EQ(client_->Run(request).status().code(), absl::StatusCode::kInvalidArgument);
  v1::RunRequest empty;
  EXPECT_EQ(client_->Run(empty).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(client_->EnableEventCompletion(nullptr).code(), absl::StatusCode::kOk);
}

TEST_F(DaemonTest, UnregisterWhileInUseDefersTheUnmap) {
  InFlight in_flight = StartInFlight(*client_);
  ASSERT_NE(in_flight.call, nullptr);
  Conv1dCall& call = *in_flight.call;
  EXPECT_TRUE(client_->UnregisterRegion(call.arena.region()).ok());
  auto result = in_flight.result.get();
  ASSERT_TRUE(result.ok()) << result.status();
  // The request that pinned the region completed with correct results (the client's own
  // mapping of the arena outlives the daemon's).
  std::vector<uint16_t> ref_dx(call.S * call.C);
  std::vector<float> ref_dw(call.C * 4);
  k::Conv1dBwdParams b;
  b.x = call.arena.data<uint16_t>(call.args.x);
  b.weight = call.arena.data<float>(call.args.weight);
  b.cu_seqlens = call.arena.data<int32_t>(call.args.cu_seqlens);
  b.dy = call.arena.data<uint16_t>(call.args.dy);
  b.dx = ref_dx.data();
  b.dweight = ref_dw.data();
  b.S = call.S;
  b.C = call.C;
  b.num_docs = 2;
  ASSERT_TRUE(k::Conv1dBackwardReference(b).ok());
  EXPECT_EQ(call.arena.Get<uint16_t>(call.args.dx), ref_dx);
  EXPECT_EQ(call.arena.Get<float>(call.args.dweight), ref_dw);
  // ... and the region is gone for later ones.
  EXPECT_EQ(client_->Conv1dBackward(call.args).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(Regions(), 0u);
}

TEST_F(DaemonTest, TruncatedSharedMemoryIsAnErrorNotACrash) {
  Conv1dCall call(*client_, 4096, 64);
  ASSERT_EQ(ftruncate(shm_open(call.arena.buffer().name().c_str(), O_RDWR, 0), 0), 0);
  auto run = client_->Conv1dBackward(call.args);
  EXPECT_EQ(run.status().code(), absl::StatusCode::kFailedPrecondition) << run.status();
  EXPECT_THAT(std::string(run.status().message()), HasSubstr("truncated"));
  ExpectHealthy();
  Conv1dCall fresh(*client_);
  EXPECT_TRUE(client_->Conv1dBackward(fresh.args).ok());
}

TEST_F(DaemonTest, KilledClientsRegionsAreReleased) {
  std::string cmd =
      std::string(CAKEGRAD_CLI_PATH) + " hold-regions --regions=3 --address=" + daemon_.address();
  FILE* child = popen(("exec " + cmd).c_str(), "r");
  ASSERT_NE(child, nullptr);
  char line[1024] = {};
  ASSERT_NE(fgets(line, sizeof(line), child), nullptr);
  std::istringstream ready(line);
  std::string word, session;
  pid_t pid = -1;
  ready >> word >> pid >> session;
  ASSERT_EQ(word, "ready") << line;
  std::vector<std::string> shm_names;
  for (std::string name; ready >> name;) shm_names.push_back(name);
  EXPECT_EQ(shm_names.size(), 3u);
  EXPECT_EQ(Regions(), 3u);
  ASSERT_GT(pid, 0);
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  pclose(child);
  for (const std::string& name : shm_names) shm_unlink(name.c_str());  // the dead client's
  uint64_t regions = ~0ull;
  for (int i = 0; i < 100 && regions != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    regions = Regions();
  }
  EXPECT_EQ(regions, 0u);
  auto status = client_->GetServerStatus();
  ASSERT_TRUE(status.ok());
  EXPECT_EQ(status->sessions(), 1u) << "only this test's session remains";
  ExpectHealthy();
}

TEST_F(DaemonTest, SocketModeAndCleanShutdown) {
  struct stat st;
  ASSERT_EQ(stat(daemon_.socket_path().c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0660u);
  Conv1dCall call(*client_);
  client_.reset();
  EXPECT_EQ(daemon_.Stop(), 0);
  EXPECT_NE(stat(daemon_.socket_path().c_str(), &st), 0) << "socket file removed on exit";
}

TEST_F(DaemonTest, ShutdownFinishesInFlightWork) {
  InFlight in_flight = StartInFlight(*client_);
  ASSERT_NE(in_flight.call, nullptr);
  Conv1dCall& call = *in_flight.call;
  kill(daemon_.pid(), SIGTERM);
  auto result = in_flight.result.get();
  EXPECT_TRUE(result.ok()) << result.status();
  for (uint16_t v : call.arena.Get<uint16_t>(call.args.dx)) {
    ASSERT_NE(v, 0xFFFF) << "dx fully written before the daemon exited";
  }
  EXPECT_EQ(daemon_.Stop(), 0);
}

// A misspelt kernel choice stops the daemon at start, naming the flag and its values, rather
// than serving with a default the operator did not ask for.
TEST(DaemonFlags, UnknownKdaBackwardStopsTheDaemonAtStart) {
  DaemonProcess daemon;
  const absl::Status started = daemon.Start({"--kda_backward=fast"});
  ASSERT_EQ(started.code(), absl::StatusCode::kFailedPrecondition) << started;
  std::ifstream log(daemon.log_path());
  std::stringstream text;
  text << log.rdbuf();
  EXPECT_THAT(text.str(),
              HasSubstr("--kda_backward must be auto, sequential or chunked, got \"fast\""));
  DaemonProcess chunked;  // accepted on any backend (the host backend has one algorithm)
  EXPECT_TRUE(chunked.Start({"--kda_backward=chunked"}).ok()) << "see " << chunked.log_path();
}

TEST(DaemonNotRunning, ConnectSaysWhatToDo) {
  auto client = Client::Connect("unix:///tmp/cakegrad-no-such-daemon.sock", "x", 0.3);
  EXPECT_EQ(client.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(client.status().message()), HasSubstr("is it running"));
}

}  // namespace
}  // namespace cakegrad::testing
