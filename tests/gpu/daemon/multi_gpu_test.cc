// One cakegradd for every GPU of the node (needs two or more GPUs; skips otherwise): each GPU's
// regions are served on that GPU with the same bits as on any other, a call spanning two GPUs is
// refused naming both, and a daemon whose CUDA_VISIBLE_DEVICES orders the GPUs differently from
// the client's still runs each call on the GPU the client meant (routing by UUID).
#include <cuda_runtime.h>

#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cakegrad/kernels/cuda_memory.h"
#include "common/test_util.h"
#include "daemon_process.h"
#include "device_arena.h"
#include "gmock/gmock.h"
#include "gpu/gpu_test_util.h"
#include "gtest/gtest.h"

namespace cakegrad::testing {
namespace {

using ::testing::HasSubstr;

#define CAKEGRAD_REQUIRE_TWO_GPUS()                                               \
  do {                                                                            \
    CAKEGRAD_REQUIRE_GPU();                                                       \
    int cakegrad_count = 0;                                                       \
    CUDA_ASSERT_OK(cudaGetDeviceCount(&cakegrad_count));                          \
    if (cakegrad_count < 2) {                                                     \
      GTEST_SKIP() << "multi-GPU test: " << cakegrad_count                        \
                   << " CUDA device visible, needs 2 (run it on nvidia-h200-x2: " \
                      "tools/gpu/run_multi_gpu.sh)";                              \
    }                                                                             \
  } while (0)

std::string Uuid(int device) {
  std::string uuid;
  EXPECT_TRUE(kernels::CudaDeviceUuid(device, &uuid).ok());
  return uuid;
}

constexpr int64_t kS = 3000, kC = 1024 + 8, kN = 4;    // conv1d
constexpr int64_t kT = 777, kH = 3, kD = 3, kK = 128;  // KDA, kD documents

// Fresh random inputs, drawn once and copied to every GPU that serves them.
struct Inputs {
  std::vector<uint16_t> x = RandomBf16(kS * kC), dy = RandomBf16(kS * kC);
  std::vector<float> w = RandomFloat(kC * 4, 0, 0.5), b = RandomFloat(kC, 0, 0.1);
  std::vector<int64_t> conv_cuts = {0, 1, 1500, 1500, kS};  // 1-token and empty documents
  std::vector<uint16_t> q = RandomBf16(kT * kH * kK), k = RandomBf16(kT * kH * kK),
                        v = RandomBf16(kT * kH * kK), g = RandomBf16(kT * kH * kK),
                        beta = RandomBf16(kT * kH), d_o = RandomBf16(kT * kH * kK);
  std::vector<float> a_log = UniformFloat(kH, -1, 1), dt_bias = RandomFloat(kH * kK, 0, 0.5),
                     h0 = RandomFloat(kD * kH * kK * kK, 0, 0.1),
                     dfs = RandomFloat(kD * kH * kK * kK);
  std::vector<int32_t> kda_cuts = {0, 0, 300, kT};  // an empty document first
};

// conv1d backward and KDA forward + backward on one GPU's arena.
struct Workload {
  Tensor x, w, b, cu, dy, dx, dw, db;
  Tensor q, k, v, g, beta, a_log, dt_bias, h0, kcu, d_o, dfs;
  Tensor o, fs, dq, dk, dv, dg, dbeta, da, ddt, dh0;

  Workload(DeviceArena& a, const Inputs& in) {
    const std::vector<int64_t> sc = {kS, kC}, ts = {1, kT, kH, kK}, ss = {kD, kH, kK, kK};
    x = a.Put(DType::kBF16, sc, in.x);
    dy = a.Put(DType::kBF16, sc, in.dy);
    w = a.Put(DType::kFP32, {kC, 4}, in.w);
    b = a.Put(DType::kFP32, {kC}, in.b);
    cu = a.Put(DType::kINT64, {kN + 1}, in.conv_cuts);
    dx = a.Alloc(DType::kBF16, sc);
    dw = a.Alloc(DType::kFP32, {kC, 4});
    db = a.Alloc(DType::kFP32, {kC});
    q = a.Put(DType::kBF16, ts, in.q);
    k = a.Put(DType::kBF16, ts, in.k);
    v = a.Put(DType::kBF16, ts, in.v);
    g = a.Put(DType::kBF16, ts, in.g);
    beta = a.Put(DType::kBF16, {1, kT, kH}, in.beta);
    a_log = a.Put(DType::kFP32, {kH}, in.a_log);
    dt_bias = a.Put(DType::kFP32, {kH, kK}, in.dt_bias);
    h0 = a.Put(DType::kFP32, ss, in.h0);
    kcu = a.Put(DType::kINT32, {kD + 1}, in.kda_cuts);
    d_o = a.Put(DType::kBF16, ts, in.d_o);
    dfs = a.Put(DType::kFP32, ss, in.dfs);
    o = a.Alloc(DType::kBF16, ts);
    fs = a.Alloc(DType::kFP32, ss);
    dq = a.Alloc(DType::kBF16, ts);
    dk = a.Alloc(DType::kBF16, ts);
    dv = a.Alloc(DType::kBF16, ts);
    dg = a.Alloc(DType::kBF16, ts);
    dbeta = a.Alloc(DType::kBF16, {1, kT, kH});
    da = a.Alloc(DType::kFP32, {kH});
    ddt = a.Alloc(DType::kFP32, {kH, kK});
    dh0 = a.Alloc(DType::kFP32, ss);
  }
  std::vector<std::pair<Tensor, const char*>> Outputs() const {
    return {{dx, "conv1d dx"},
            {dw, "conv1d dweight"},
            {db, "conv1d dbias"},
            {o, "kda o"},
            {fs, "kda final_state"},
            {dq, "kda dq"},
            {dk, "kda dk"},
            {dv, "kda dv"},
            {dg, "kda dg"},
            {dbeta, "kda dbeta"},
            {da, "kda dA_log"},
            {ddt, "kda ddt_bias"},
            {dh0, "kda dinitial_state"}};
  }
  // Runs the three calls (outputs poisoned first); every response must name `uuid`.
  void Serve(Client& client, DeviceArena& a, const std::string& uuid) const {
    for (const auto& [t, name] : Outputs()) a.Poison(t);
    std::vector<absl::StatusOr<v1::RunResponse>> runs;
    runs.push_back(client.Conv1dBackward({x, w, cu, dy, b, "bf16", std::nullopt, dx, dw, db}));
    runs.push_back(
        client.KdaForward({q, k, v, g, beta, a_log, dt_bias, h0, kcu, {}, std::nullopt, o, fs}));
    runs.push_back(client.KdaBackward({q,  k,   v,   g,     beta, a_log,        dt_bias,
                                       h0, d_o, dfs, kcu,   {},   std::nullopt, dq,
                                       dk, dv,  dg,  dbeta, da,   ddt,          dh0}));
    for (const auto& run : runs) {
      ASSERT_TRUE(run.ok()) << run.status();
      EXPECT_EQ(run->gpu_uuid(), uuid) << run->operator_() << " ran on another GPU";
    }
  }
};

// Output bytes of every tensor of `w` in arena `a`.
std::vector<std::vector<uint8_t>> Results(const Workload& w, const DeviceArena& a) {
  std::vector<std::vector<uint8_t>> out;
  for (const auto& [t, name] : w.Outputs()) out.push_back(a.Bytes(t));
  return out;
}

void ExpectSameResults(const Workload& w, const std::vector<std::vector<uint8_t>>& x,
                       const std::vector<std::vector<uint8_t>>& y, const std::string& what) {
  const auto outputs = w.Outputs();
  ASSERT_EQ(x.size(), outputs.size());
  ASSERT_EQ(y.size(), outputs.size());
  for (size_t i = 0; i < outputs.size(); ++i) {
    EXPECT_TRUE(x[i] == y[i]) << outputs[i].second << " differs: " << what;
  }
}

class MultiGpuDaemonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    CAKEGRAD_REQUIRE_TWO_GPUS();
    // Graph caches are per GPU: each GPU captures its own graph of the same shapes.
    ASSERT_TRUE(daemon_.Start({"--backend=cuda", "--cuda_graphs=8"}).ok())
        << "see " << daemon_.log_path();
    auto client = Client::Connect(daemon_.address(), "multi-gpu-test");
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = *std::move(client);
  }
  DaemonProcess daemon_;
  std::unique_ptr<Client> client_;
};

TEST_F(MultiGpuDaemonTest, EachGpuServesItsRegionsWithTheSameBits) {
  auto caps = client_->GetCapabilities();
  ASSERT_TRUE(caps.ok()) << caps.status();
  ASSERT_GE(caps->devices_size(), 2);
  EXPECT_EQ(caps->devices(0).uuid(), Uuid(0));
  EXPECT_EQ(caps->devices(1).uuid(), Uuid(1));
  const Inputs in;
  std::vector<std::vector<uint8_t>> results[2];
  std::optional<Workload> layout;  // the same on both GPUs; names the outputs
  for (int gpu : {0, 1}) {
    SCOPED_TRACE(absl::StrCat("GPU ", gpu));
    ScopedDevice on(gpu);
    DeviceArena arena(256ull << 20, gpu);
    arena.Register(*client_);
    const Workload w(arena, in);
    layout = w;
    w.Serve(*client_, arena, Uuid(gpu));
    results[gpu] = Results(w, arena);
    // Again (a graph replay on this GPU): the same bits.
    w.Serve(*client_, arena, Uuid(gpu));
    ExpectSameResults(w, results[gpu], Results(w, arena), "first and second call");
    ASSERT_TRUE(client_->UnregisterRegion(arena.region()).ok());
  }
  ExpectSameResults(*layout, results[0], results[1], "GPU 0 and GPU 1 served different bits");
}

TEST_F(MultiGpuDaemonTest, CallSpanningTwoGpusIsRefusedNamingBoth) {
  DeviceArena on0(1 << 20, 0), on1(1 << 20, 1);
  on0.Register(*client_);
  on1.Register(*client_);
  const int64_t S = 64, C = 32;
  const Tensor x = on0.Put(DType::kBF16, {S, C}, RandomBf16(S * C));
  const Tensor w = on0.Put(DType::kFP32, {C, 4}, RandomFloat(C * 4));
  const Tensor cu = on0.Put(DType::kINT64, {2}, std::vector<int64_t>{0, S});
  const Tensor y = on1.Alloc(DType::kBF16, {S, C});
  const auto before = on1.Bytes(y);
  auto run = client_->Conv1dForward({x, w, cu, std::nullopt, y});
  ASSERT_FALSE(run.ok());
  EXPECT_EQ(run.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(run.status().message()), HasSubstr("y is on GPU " + Uuid(1)));
  EXPECT_THAT(std::string(run.status().message()), HasSubstr("x is on GPU " + Uuid(0)));
  EXPECT_TRUE(on1.Bytes(y) == before) << "a refused call must not write";
}

// The daemon sees the client's GPU 1 as its GPU 0 (CUDA_VISIBLE_DEVICES by UUID, reversed):
// a client tensor on its GPU 1 must still be computed there, with the bits that GPU gives when
// the ordinals agree.
TEST_F(MultiGpuDaemonTest, DaemonWithOtherDeviceOrderRoutesByUuid) {
  DaemonProcess reversed;
  ASSERT_TRUE(
      reversed
          .Start({"--backend=cuda"}, {absl::StrCat("CUDA_VISIBLE_DEVICES=", Uuid(1), ",", Uuid(0))})
          .ok())
      << "see " << reversed.log_path();
  auto other = Client::Connect(reversed.address(), "multi-gpu-test-reversed");
  ASSERT_TRUE(other.ok()) << other.status();
  auto caps = (*other)->GetCapabilities();
  ASSERT_TRUE(caps.ok()) << caps.status();
  ASSERT_GE(caps->devices_size(), 2);
  EXPECT_EQ(caps->devices(0).uuid(), Uuid(1)) << "the daemon's GPU 0 is the client's GPU 1";
  {
    std::ifstream log(reversed.log_path());
    std::stringstream text;
    text << log.rdbuf();
    EXPECT_THAT(text.str(), HasSubstr("GPU 0: " + Uuid(1)));
  }
  ScopedDevice on(1);
  const Inputs in;
  DeviceArena a(256ull << 20, 1), b(256ull << 20, 1);
  a.Register(**other);
  b.Register(*client_);  // through the daemon whose ordinals agree with the client's
  const Workload wa(a, in), wb(b, in);
  wa.Serve(**other, a, Uuid(1));
  wb.Serve(*client_, b, Uuid(1));
  ExpectSameResults(wa, Results(wa, a), Results(wb, b),
                    "a daemon with reversed CUDA_VISIBLE_DEVICES vs one with the client's order");
}

}  // namespace
}  // namespace cakegrad::testing
