// cakegradd --backend=cuda serving a separate client process through CUDA IPC: regions are
// mapped, listed, bounded and released; every operator's results are bitwise equal to calling
// the kernel library directly in this process.
#include <cuda_runtime.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cakegrad/kernels/conv1d.h"
#include "cakegrad/kernels/kda.h"
#include "cakegrad/kernels/mhc.h"
#include "common/test_util.h"
#include "daemon_process.h"
#include "device_arena.h"
#include "gmock/gmock.h"
#include "gpu/gpu_test_util.h"
#include "grpcpp/create_channel.h"
#include "gtest/gtest.h"
#include "slow_producer.h"

namespace cakegrad::testing {
namespace {

using ::testing::HasSubstr;
namespace k = kernels;

// Every test runs against a daemon that launches eagerly and one that replays captured CUDA
// graphs (--cuda_graphs): the results must be the library's bits either way.
class CudaDaemonTest : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    CAKEGRAD_REQUIRE_GPU();
    ASSERT_TRUE(
        daemon_.Start({"--backend=cuda", "--cuda_graphs=" + std::to_string(GetParam())}).ok())
        << "see " << daemon_.log_path();
    auto client = Client::Connect(daemon_.address(), "cuda-daemon-test");
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = *std::move(client);
    ASSERT_EQ(cudaStreamCreate(&stream_), cudaSuccess);
  }
  void TearDown() override {
    client_.reset();
    if (stream_ != nullptr) {
      EXPECT_EQ(cudaStreamDestroy(stream_), cudaSuccess);
    }
  }

  // The same bytes the daemon wrote, computed here by the library into a second arena.
  void ExpectSame(const DeviceArena& a, const Tensor& served, const DeviceArena& b,
                  const Tensor& direct, const char* what) {
    EXPECT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    const auto x = a.Bytes(served), y = b.Bytes(direct);
    EXPECT_EQ(x.size(), y.size());
    EXPECT_TRUE(x == y) << what << " differs between the daemon and the library";
  }

  void CheckKdaServed(Client& client, k::KdaBackwardAlgorithm algorithm, int64_t H);

  DaemonProcess daemon_;
  std::unique_ptr<Client> client_;
  cudaStream_t stream_ = nullptr;
};

TEST_P(CudaDaemonTest, RegionsAreMappedListedBoundedAndReleased) {
  DeviceArena arena(1 << 20);
  auto whole = client_->RegisterCudaBuffer(arena.base(), 1 << 20, "whole");
  ASSERT_TRUE(whole.ok()) << whole.status();
  auto sub = client_->RegisterCudaBuffer(static_cast<char*>(arena.base()) + 4096, 8192, "sub");
  ASSERT_TRUE(sub.ok()) << sub.status();
  auto listed = client_->ListRegions();
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 2u);
  for (const auto& r : *listed) {
    EXPECT_EQ(r.kind(), "cuda");
    EXPECT_THAT(r.gpu_uuid(), HasSubstr("GPU-"));
    EXPECT_EQ(r.byte_size(), r.label() == "whole" ? (1u << 20) : 8192u);
  }

  // The daemon checks sizes against the real allocation, not the client's word.
  cudaIpcMemHandle_t handle;
  ASSERT_EQ(cudaIpcGetMemHandle(&handle, arena.base()), cudaSuccess);
  auto stub = v1::Cakegrad::NewStub(
      grpc::CreateChannel(daemon_.address(), grpc::InsecureChannelCredentials()));
  v1::RegisterRegionRequest request;
  request.set_session_id(client_->session_id());
  request.mutable_cuda()->set_ipc_handle(std::string(reinterpret_cast<char*>(&handle), 64));
  request.mutable_cuda()->set_byte_size(4 << 20);
  request.mutable_cuda()->set_gpu_uuid(listed->front().gpu_uuid());
  grpc::ClientContext c1;
  v1::RegisterRegionResponse response;
  grpc::Status oversize = stub->RegisterRegion(&c1, request, &response);
  EXPECT_EQ(oversize.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(oversize.error_message(), HasSubstr("exceeds the shared allocation"));
  request.mutable_cuda()->set_byte_size(4096);
  request.mutable_cuda()->set_offset_in_allocation((1 << 20) - 100);
  grpc::ClientContext c2;
  EXPECT_EQ(stub->RegisterRegion(&c2, request, &response).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  request.mutable_cuda()->set_offset_in_allocation(0);
  request.mutable_cuda()->set_gpu_uuid("GPU-00000000-0000-0000-0000-000000000000");
  grpc::ClientContext c3;
  EXPECT_EQ(stub->RegisterRegion(&c3, request, &response).error_code(),
            grpc::StatusCode::NOT_FOUND);

  auto observer = Client::Connect(daemon_.address(), "observer");
  ASSERT_TRUE(observer.ok());
  EXPECT_EQ((*observer)->GetServerStatus()->regions(), 2u);
  ASSERT_TRUE(client_->Close().ok());
  EXPECT_EQ((*observer)->GetServerStatus()->regions(), 0u) << "the session's end releases them";
}

TEST_P(CudaDaemonTest, Conv1dServedBitwiseEqualToTheLibrary) {
  const int64_t S = 40000, C = 4096 + 7, N = 16;
  std::vector<int64_t> cuts(N + 1, 0);
  for (int64_t i = 1; i < N; ++i) cuts[i] = (S * i) / N + (i % 3) * 17;
  cuts[5] = cuts[4];  // an empty document
  cuts[N] = S;
  // Inputs once, outputs once: both policies write the same (poisoned again) outputs.
  DeviceArena served(3ull << 30), direct(3ull << 30);
  served.Register(*client_);
  const auto xs = RandomBf16(S * C), dys = RandomBf16(S * C);
  const auto w = RandomFloat(C * 4, 0, 0.5), b = RandomFloat(C, 0, 0.1);
  Tensor tx[2], tdy[2], tw[2], tb[2], tcu[2], ty[2], tdx[2], tdw[2], tdb[2];
  DeviceArena* arenas[2] = {&served, &direct};
  for (int i = 0; i < 2; ++i) {
    DeviceArena& a = *arenas[i];
    tx[i] = a.Put(DType::kBF16, {S, C}, xs);
    tdy[i] = a.Put(DType::kBF16, {S, C}, dys);
    tw[i] = a.Put(DType::kFP32, {C, 4}, w);
    tb[i] = a.Put(DType::kFP32, {C}, b);
    tcu[i] = a.Put(DType::kINT64, {N + 1}, cuts);
    ty[i] = a.Alloc(DType::kBF16, {S, C});
    tdx[i] = a.Alloc(DType::kBF16, {S, C});
    tdw[i] = a.Alloc(DType::kFP32, {C, 4});
    tdb[i] = a.Alloc(DType::kFP32, {C});
  }
  const Tensor dx2 = served.Alloc(DType::kBF16, {S, C}), dw2 = served.Alloc(DType::kFP32, {C, 4}),
               db2 = served.Alloc(DType::kFP32, {C});
  for (const char* policy : {"bf16", "fp32"}) {
    for (int i = 0; i < 2; ++i) {
      for (const Tensor* t : {&ty[i], &tdx[i], &tdw[i], &tdb[i]}) arenas[i]->Poison(*t);
    }
    ASSERT_TRUE(client_->Conv1dForward({tx[0], tw[0], tcu[0], tb[0], ty[0]}).ok());
    auto run = client_->Conv1dBackward(
        {tx[0], tw[0], tcu[0], tdy[0], tb[0], policy, std::nullopt, tdx[0], tdw[0], tdb[0]});
    ASSERT_TRUE(run.ok()) << run.status();

    k::Conv1dFwdParams f;
    f.x = direct.ptr<uint16_t>(tx[1]);
    f.weight = direct.ptr<float>(tw[1]);
    f.bias = direct.ptr<float>(tb[1]);
    f.cu_seqlens = direct.ptr<int64_t>(tcu[1]);
    f.seqlens_dtype = DType::kINT64;
    f.y = direct.ptr<uint16_t>(ty[1]);
    f.S = S;
    f.C = C;
    f.num_docs = N;
    ASSERT_TRUE(k::Conv1dForwardCuda(f, stream_).ok());
    DeviceBuffer<uint8_t> ws(k::Conv1dBackwardWorkspaceBytes(S, C));
    k::Conv1dBwdParams p;
    p.x = f.x;
    p.weight = f.weight;
    p.bias = f.bias;
    p.cu_seqlens = f.cu_seqlens;
    p.seqlens_dtype = DType::kINT64;
    p.dy = direct.ptr<uint16_t>(tdy[1]);
    p.policy = std::string(policy) == "fp32" ? k::SiluGradPreactivation::kFP32
                                             : k::SiluGradPreactivation::kBF16;
    p.dx = direct.ptr<uint16_t>(tdx[1]);
    p.dweight = direct.ptr<float>(tdw[1]);
    p.dbias = direct.ptr<float>(tdb[1]);
    p.workspace = ws.get();
    p.workspace_bytes = static_cast<int64_t>(ws.bytes());
    p.S = S;
    p.C = C;
    p.num_docs = N;
    ASSERT_TRUE(k::Conv1dBackwardCuda(p, stream_).ok());
    ExpectSame(served, ty[0], direct, ty[1], "y");
    ExpectSame(served, tdx[0], direct, tdx[1], "dx");
    ExpectSame(served, tdw[0], direct, tdw[1], "dweight");
    ExpectSame(served, tdb[0], direct, tdb[1], "dbias");
    // The same call into other outputs: a graph replay (same key) with new pointers.
    for (const Tensor* t : {&dx2, &dw2, &db2}) served.Poison(*t);
    ASSERT_TRUE(client_
                    ->Conv1dBackward(
                        {tx[0], tw[0], tcu[0], tdy[0], tb[0], policy, std::nullopt, dx2, dw2, db2})
                    .ok());
    ExpectSame(served, dx2, direct, tdx[1], "dx, second call");
    ExpectSame(served, dw2, direct, tdw[1], "dweight, second call");
    ExpectSame(served, db2, direct, tdb[1], "dbias, second call");
  }
}

TEST_P(CudaDaemonTest, MalformedCuSeqlensIsInvalidArgumentOnTheGpu) {
  const int64_t S = 1000, C = 64;
  DeviceArena arena(16 << 20);
  arena.Register(*client_);
  std::vector<int32_t> bad = {0, 700, 300, static_cast<int32_t>(S)};
  Conv1dBackwardArgs args;
  args.x = arena.Put(DType::kBF16, {S, C}, RandomBf16(S * C));
  args.weight = arena.Put(DType::kFP32, {C, 4}, RandomFloat(C * 4));
  args.cu_seqlens = arena.Put(DType::kINT32, {4}, bad);
  args.dy = arena.Put(DType::kBF16, {S, C}, RandomBf16(S * C));
  args.dx = arena.Alloc(DType::kBF16, {S, C});
  args.dweight = arena.Alloc(DType::kFP32, {C, 4});
  auto run = client_->Conv1dBackward(args);
  EXPECT_EQ(run.status().code(), absl::StatusCode::kInvalidArgument) << run.status();
  EXPECT_THAT(std::string(run.status().message()), HasSubstr("cu_seqlens is malformed"));
  std::vector<int32_t> good = {0, 300, 700, static_cast<int32_t>(S)};
  ASSERT_EQ(
      cudaMemcpy(arena.ptr<int32_t>(args.cu_seqlens), good.data(), 16, cudaMemcpyHostToDevice),
      cudaSuccess);
  EXPECT_TRUE(client_->Conv1dBackward(args).ok()) << "the daemon recovers";
}

TEST_P(CudaDaemonTest, MhcServedBitwiseEqualToTheLibrary) {
  const int64_t T = 4096, C = 4096;
  DeviceArena served(1ull << 30), direct(1ull << 30);
  served.Register(*client_);
  const auto xs = RandomBf16(T * 4 * C), bs = RandomBf16(T * C), dys = RandomBf16(T * 4 * C),
             dus = RandomBf16(T * C);
  const auto fn = RandomFloat(24 * 4 * C, 0, 1e-2), scale = UniformFloat(3, 1e-2, 1),
             base = RandomFloat(24);
  Tensor x[2], b[2], dy[2], du[2], tfn[2], tscale[2], tbase[2], u[2], stats[2], y[2], db[2], gs[2],
      dx[2], dfn[2], dscale[2], dbase[2];
  DeviceArena* arenas[2] = {&served, &direct};
  for (int i = 0; i < 2; ++i) {
    DeviceArena& a = *arenas[i];
    x[i] = a.Put(DType::kBF16, {T, 4, C}, xs);
    b[i] = a.Put(DType::kBF16, {T, C}, bs);
    dy[i] = a.Put(DType::kBF16, {T, 4, C}, dys);
    du[i] = a.Put(DType::kBF16, {T, C}, dus);
    tfn[i] = a.Put(DType::kFP32, {24, 4 * C}, fn);
    tscale[i] = a.Put(DType::kFP32, {3}, scale);
    tbase[i] = a.Put(DType::kFP32, {24}, base);
    u[i] = a.Alloc(DType::kBF16, {T, C});
    stats[i] = a.Alloc(DType::kFP32, {T, 64});
    y[i] = a.Alloc(DType::kBF16, {T, 4, C});
    db[i] = a.Alloc(DType::kBF16, {T, C});
    gs[i] = a.Alloc(DType::kFP32, {T, 32});
    dx[i] = a.Alloc(DType::kBF16, {T, 4, C});
    dfn[i] = a.Alloc(DType::kFP32, {24, 4 * C});
    dscale[i] = a.Alloc(DType::kFP32, {3});
    dbase[i] = a.Alloc(DType::kFP32, {24});
  }
  ASSERT_TRUE(
      client_->MhcForwardPrepare({x[0], tfn[0], tscale[0], tbase[0], {}, u[0], stats[0]}).ok());
  ASSERT_TRUE(client_->MhcForwardFinish({x[0], b[0], stats[0], y[0]}).ok());
  ASSERT_TRUE(client_->MhcBackwardPrepare({x[0], dy[0], b[0], stats[0], db[0], gs[0]}).ok());
  MhcBackwardFinishArgs fa{x[0],     dy[0],    du[0],     b[0],    tfn[0], tscale[0],
                           tbase[0], stats[0], gs[0],     {},      false,  std::nullopt,
                           dx[0],    dfn[0],   dscale[0], dbase[0]};
  auto run = client_->MhcBackwardFinish(fa);
  ASSERT_TRUE(run.ok()) << run.status();

  DeviceBuffer<uint8_t> ws(
      std::max({k::MhcForwardWorkspaceBytes(T, C), k::MhcBackwardPrepareWorkspaceBytes(T, C),
                k::MhcBackwardFinishWorkspaceBytes(T, C), int64_t{16}}));
  auto P = [&](const Tensor& t) { return direct.ptr<uint16_t>(t); };
  auto F = [&](const Tensor& t) { return direct.ptr<float>(t); };
  k::MhcFwdPrepareParams fp;
  fp.X = P(x[1]);
  fp.fn = F(tfn[1]);
  fp.scale = F(tscale[1]);
  fp.base = F(tbase[1]);
  fp.U = P(u[1]);
  fp.stats = F(stats[1]);
  fp.T = T;
  fp.C = C;
  fp.workspace = ws.get();
  fp.workspace_bytes = static_cast<int64_t>(ws.bytes());
  ASSERT_TRUE(k::MhcForwardPrepareCuda(fp, stream_).ok());
  k::MhcFwdFinishParams ff{P(x[1]), P(b[1]), F(stats[1]), P(y[1]), T, C};
  ASSERT_TRUE(k::MhcForwardFinishCuda(ff, stream_).ok());
  k::MhcBwdPrepareParams bp{P(x[1]), P(dy[1]), P(b[1]), F(stats[1]), P(db[1]), F(gs[1]), T, C};
  ASSERT_TRUE(k::MhcBackwardPrepareCuda(bp, stream_).ok());
  k::MhcBwdFinishParams bf;
  bf.X = P(x[1]);
  bf.dY = P(dy[1]);
  bf.dU = P(du[1]);
  bf.fn = F(tfn[1]);
  bf.scale = F(tscale[1]);
  bf.base = F(tbase[1]);
  bf.stats = F(stats[1]);
  bf.grad_stats = F(gs[1]);
  bf.dX = P(dx[1]);
  bf.dfn = F(dfn[1]);
  bf.dscale = F(dscale[1]);
  bf.dbase = F(dbase[1]);
  bf.T = T;
  bf.C = C;
  bf.workspace = ws.get();
  bf.workspace_bytes = static_cast<int64_t>(ws.bytes());
  ASSERT_TRUE(k::MhcBackwardFinishCuda(bf, stream_).ok());
  ExpectSame(served, u[0], direct, u[1], "U");
  ExpectSame(served, stats[0], direct, stats[1], "stats");
  ExpectSame(served, y[0], direct, y[1], "Y");
  ExpectSame(served, db[0], direct, db[1], "dB");
  ExpectSame(served, gs[0], direct, gs[1], "grad_stats");
  ExpectSame(served, dx[0], direct, dx[1], "dX");
  ExpectSame(served, dfn[0], direct, dfn[1], "dfn");
  ExpectSame(served, dscale[0], direct, dscale[1], "dscale");
  ExpectSame(served, dbase[0], direct, dbase[1], "dbase");
}

// KDA forward and backward served by `client`'s daemon at H heads equal the library's bits with
// `algorithm` (the one the daemon's --kda_backward should pick at H).
void CudaDaemonTest::CheckKdaServed(Client& client, k::KdaBackwardAlgorithm algorithm, int64_t H) {
  const int64_t T = 2048, N = 5;
  const std::vector<int64_t> cuts = {0, 1, 1, 700, 1500, T};  // 1-token and empty documents
  const int64_t tok = T * H * 128;
  DeviceArena served(1ull << 30), direct(1ull << 30);
  served.Register(client);
  const auto q = RandomBf16(tok), kk = RandomBf16(tok), v = RandomBf16(tok), g = RandomBf16(tok),
             beta = RandomBf16(T * H), d_o = RandomBf16(tok);
  const auto a_log = UniformFloat(H, -1, 1), dt_bias = RandomFloat(H * 128, 0, 0.5),
             h0 = RandomFloat(N * H * 128 * 128, 0, 0.1), dfs = RandomFloat(N * H * 128 * 128);
  Tensor tq[2], tk[2], tv[2], tg[2], tbeta[2], ta[2], tdt[2], th0[2], tcu[2], tdo[2], tdfs[2], o[2],
      fs[2], dq[2], dk[2], dv[2], dg[2], dbeta[2], da[2], ddt[2], dh0[2];
  DeviceArena* arenas[2] = {&served, &direct};
  const std::vector<int64_t> ts = {1, T, H, 128}, ss = {N, H, 128, 128};
  for (int i = 0; i < 2; ++i) {
    DeviceArena& a = *arenas[i];
    tq[i] = a.Put(DType::kBF16, ts, q);
    tk[i] = a.Put(DType::kBF16, ts, kk);
    tv[i] = a.Put(DType::kBF16, ts, v);
    tg[i] = a.Put(DType::kBF16, ts, g);
    tbeta[i] = a.Put(DType::kBF16, {1, T, H}, beta);
    ta[i] = a.Put(DType::kFP32, {H}, a_log);
    tdt[i] = a.Put(DType::kFP32, {H, 128}, dt_bias);
    th0[i] = a.Put(DType::kFP32, ss, h0);
    tcu[i] = a.Put(DType::kINT64, {N + 1}, cuts);
    tdo[i] = a.Put(DType::kBF16, ts, d_o);
    tdfs[i] = a.Put(DType::kFP32, ss, dfs);
    o[i] = a.Alloc(DType::kBF16, ts);
    fs[i] = a.Alloc(DType::kFP32, ss);
    dq[i] = a.Alloc(DType::kBF16, ts);
    dk[i] = a.Alloc(DType::kBF16, ts);
    dv[i] = a.Alloc(DType::kBF16, ts);
    dg[i] = a.Alloc(DType::kBF16, ts);
    dbeta[i] = a.Alloc(DType::kBF16, {1, T, H});
    da[i] = a.Alloc(DType::kFP32, {H});
    ddt[i] = a.Alloc(DType::kFP32, {H, 128});
    dh0[i] = a.Alloc(DType::kFP32, ss);
  }
  KdaForwardArgs fa{tq[0],  tk[0],  tv[0], tg[0],        tbeta[0], ta[0], tdt[0],
                    th0[0], tcu[0], {},    std::nullopt, o[0],     fs[0]};
  auto fwd = client.KdaForward(fa);
  ASSERT_TRUE(fwd.ok()) << fwd.status();
  KdaBackwardArgs ba{tq[0],  tk[0],  tv[0],   tg[0],    tbeta[0], ta[0],        tdt[0],
                     th0[0], tdo[0], tdfs[0], tcu[0],   {},       std::nullopt, dq[0],
                     dk[0],  dv[0],  dg[0],   dbeta[0], da[0],    ddt[0],       dh0[0]};
  auto bwd = client.KdaBackward(ba);
  ASSERT_TRUE(bwd.ok()) << bwd.status();

  auto P = [&](const Tensor& t) { return direct.ptr<uint16_t>(t); };
  auto F = [&](const Tensor& t) { return direct.ptr<float>(t); };
  DeviceBuffer<uint8_t> ws(
      std::max(k::KdaForwardWorkspaceBytes(1, T, H, N), k::KdaBackwardWorkspaceBytes(1, T, H, N)));
  k::KdaFwdParams f;
  f.q = P(tq[1]);
  f.k = P(tk[1]);
  f.v = P(tv[1]);
  f.g = P(tg[1]);
  f.beta = P(tbeta[1]);
  f.A_log = F(ta[1]);
  f.dt_bias = F(tdt[1]);
  f.initial_state = F(th0[1]);
  f.cu_seqlens = direct.ptr<int64_t>(tcu[1]);
  f.o = P(o[1]);
  f.final_state = F(fs[1]);
  f.workspace = ws.get();
  f.workspace_bytes = static_cast<int64_t>(ws.bytes());
  f.B = 1;
  f.T = T;
  f.H = H;
  f.num_docs = N;
  ASSERT_TRUE(k::KdaForwardCuda(f, stream_).ok());
  k::KdaBwdParams b;
  b.q = f.q;
  b.k = f.k;
  b.v = f.v;
  b.g = f.g;
  b.beta = f.beta;
  b.A_log = f.A_log;
  b.dt_bias = f.dt_bias;
  b.initial_state = f.initial_state;
  b.d_o = P(tdo[1]);
  b.dfinal_state = F(tdfs[1]);
  b.cu_seqlens = f.cu_seqlens;
  b.dq = P(dq[1]);
  b.dk = P(dk[1]);
  b.dv = P(dv[1]);
  b.dg = P(dg[1]);
  b.dbeta = P(dbeta[1]);
  b.dA_log = F(da[1]);
  b.ddt_bias = F(ddt[1]);
  b.dinitial_state = F(dh0[1]);
  b.workspace = ws.get();
  b.workspace_bytes = static_cast<int64_t>(ws.bytes());
  b.B = 1;
  b.T = T;
  b.H = H;
  b.num_docs = N;
  b.algorithm = algorithm;
  ASSERT_TRUE(k::KdaBackwardCuda(b, stream_).ok());
  const std::pair<Tensor*, const char*> outputs[] = {
      {o, "o"},   {fs, "final_state"}, {dq, "dq"},     {dk, "dk"},        {dv, "dv"},
      {dg, "dg"}, {dbeta, "dbeta"},    {da, "dA_log"}, {ddt, "ddt_bias"}, {dh0, "dinitial_state"}};
  for (const auto& [t, name] : outputs) ExpectSame(served, t[0], direct, t[1], name);
}

// The default --kda_backward=auto: chunked kernels from 4 heads on, sequential below (the two
// differ in the last bits, so each check fails if the daemon picked the other).
TEST_P(CudaDaemonTest, KdaServedBitwiseEqualToTheLibrary) {
  CheckKdaServed(*client_, k::KdaBackwardAlgorithm::kChunked, /*H=*/4);
}

TEST_P(CudaDaemonTest, KdaAutoServesTheSequentialBackwardForOneHead) {
  CheckKdaServed(*client_, k::KdaBackwardAlgorithm::kSequential, /*H=*/1);
}

// --kda_backward=sequential reaches the kernels: at 4 heads, where auto would take the chunked
// ones, the served gradients are the sequential kernels' bits.
TEST_P(CudaDaemonTest, KdaSequentialBackwardServedWhenTheDaemonIsAskedTo) {
  DaemonProcess sequential;
  ASSERT_TRUE(sequential
                  .Start({"--backend=cuda", "--cuda_graphs=" + std::to_string(GetParam()),
                          "--kda_backward=sequential"})
                  .ok())
      << "see " << sequential.log_path();
  auto client = Client::Connect(sequential.address(), "cuda-daemon-test-sequential");
  ASSERT_TRUE(client.ok()) << client.status();
  CheckKdaServed(**client, k::KdaBackwardAlgorithm::kSequential, /*H=*/4);
}

TEST_P(CudaDaemonTest, EventCompletionOrdersBehindTheClientsSlowProducer) {
  const int64_t S = 1 << 16, C = 520, N = 3;
  const std::vector<int64_t> cuts = {0, 1000, 40000, S};
  DeviceArena served(512 << 20), direct(512 << 20);
  served.Register(*client_);
  const auto xs = RandomBf16(S * C), dys = RandomBf16(S * C);
  const auto w = RandomFloat(C * 4, 0, 0.5);
  DeviceBuffer<uint16_t> staging(xs);
  Conv1dBackwardArgs a;
  a.x = served.Alloc(DType::kBF16, {S, C});  // written only by the slow producer
  a.weight = served.Put(DType::kFP32, {C, 4}, w);
  a.cu_seqlens = served.Put(DType::kINT64, {N + 1}, cuts);
  a.dy = served.Put(DType::kBF16, {S, C}, dys);
  a.dx = served.Alloc(DType::kBF16, {S, C});
  a.dweight = served.Alloc(DType::kFP32, {C, 4});

  // The expected result, from the library on the final inputs.
  const Tensor x1 = direct.Put(DType::kBF16, {S, C}, xs), w1 = direct.Put(DType::kFP32, {C, 4}, w),
               cu1 = direct.Put(DType::kINT64, {N + 1}, cuts),
               dy1 = direct.Put(DType::kBF16, {S, C}, dys),
               dx1 = direct.Alloc(DType::kBF16, {S, C}), dw1 = direct.Alloc(DType::kFP32, {C, 4});
  DeviceBuffer<uint8_t> ws(std::max<int64_t>(k::Conv1dBackwardWorkspaceBytes(S, C), 16));
  k::Conv1dBwdParams p;
  p.x = direct.ptr<uint16_t>(x1);
  p.weight = direct.ptr<float>(w1);
  p.cu_seqlens = direct.ptr<int64_t>(cu1);
  p.seqlens_dtype = DType::kINT64;
  p.dy = direct.ptr<uint16_t>(dy1);
  p.dx = direct.ptr<uint16_t>(dx1);
  p.dweight = direct.ptr<float>(dw1);
  p.workspace = ws.get();
  p.workspace_bytes = static_cast<int64_t>(ws.bytes());
  p.S = S;
  p.C = C;
  p.num_docs = N;
  ASSERT_TRUE(k::Conv1dBackwardCuda(p, stream_).ok());
  CUDA_ASSERT_OK(cudaStreamSynchronize(stream_));

  ASSERT_TRUE(client_->EnableEventCompletion(stream_, 4).ok());
  for (int round = 0; round < 6; ++round) {
    for (const Tensor* t : {&a.x, &a.dx, &a.dweight}) {
      CUDA_ASSERT_OK(
          cudaMemsetAsync(served.ptr<void>(*t), 0xFF, DeviceArena::ByteSize(*t), stream_));
    }
    CUDA_ASSERT_OK(SlowCopy(served.ptr<void>(a.x), staging.get(), staging.bytes(), 50, stream_));
    auto run = client_->Conv1dBackward(a);
    ASSERT_TRUE(run.ok()) << run.status();
    // The reply came while the producer still runs: nobody waited on the host.
    EXPECT_EQ(cudaStreamQuery(stream_), cudaErrorNotReady);
    CUDA_ASSERT_OK(cudaStreamSynchronize(stream_));
    ExpectSame(served, a.dx, direct, dx1, "dx behind a slow producer");
    ExpectSame(served, a.dweight, direct, dw1, "dweight behind a slow producer");
  }

  // A malformed cu_seqlens found on the GPU fails the session's next EVENT request.
  const std::vector<int64_t> bad = {0, 40000, 1000, S};
  CUDA_ASSERT_OK(cudaMemcpyAsync(served.ptr<void>(a.cu_seqlens), bad.data(), 32,
                                 cudaMemcpyHostToDevice, stream_));
  ASSERT_TRUE(client_->Conv1dBackward(a).ok()) << "enqueued; the error is found on the GPU";
  CUDA_ASSERT_OK(cudaStreamSynchronize(stream_));
  CUDA_ASSERT_OK(cudaMemcpyAsync(served.ptr<void>(a.cu_seqlens), cuts.data(), 32,
                                 cudaMemcpyHostToDevice, stream_));
  auto next = client_->Conv1dBackward(a);
  EXPECT_EQ(next.status().code(), absl::StatusCode::kFailedPrecondition) << next.status();
  EXPECT_THAT(std::string(next.status().message()), HasSubstr("malformed cu_seqlens"));
  EXPECT_TRUE(client_->Conv1dBackward(a).ok()) << "reported once";
  CUDA_ASSERT_OK(cudaStreamSynchronize(stream_));

  // Closing must not touch the caller's stream, which may be gone by then (it crashed in
  // cudaStreamSynchronize on the destroyed stream before 2026-11-29).
  ASSERT_TRUE(client_->Conv1dBackward(a).ok());
  CUDA_ASSERT_OK(cudaStreamDestroy(stream_));
  stream_ = nullptr;
  EXPECT_TRUE(client_->Close().ok());
}

INSTANTIATE_TEST_SUITE_P(Launch, CudaDaemonTest, ::testing::Values(0, 8),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return info.param == 0 ? std::string("Eager") : std::string("Graphs");
                         });

// Shapes named by --capture_at_start are captured on every GPU before health turns SERVING: the
// very first request of such a shape replays the prepared graph with its own pointers (a hit)
// and writes the library's bits, and so does a second one into other outputs.
TEST(CudaDaemonCaptureAtStart, FirstRequestOfAConfiguredShapeIsACacheHit) {
  CAKEGRAD_REQUIRE_GPU();
  const int64_t S = 8192, C = 2048, N = 4;
  const std::string sc = absl::StrCat("[", S, ", ", C, "]"), c4 = absl::StrCat("[", C, ", 4]"),
                    c1 = absl::StrCat("[", C, "]");
  // The options as the client sends them: it always sets silu_grad_preactivation.
  const std::string plan =
      absl::StrCat("# conv1d_backward at S=", S, ", C=", C, ", ", N, " documents\n",  //
                   "request {\n  conv1d_backward {\n",                                //
                   "    x { dtype: BF16 shape: ", sc, " }\n",                         //
                   "    weight { dtype: FP32 shape: ", c4, " }\n",                    //
                   "    cu_seqlens { dtype: INT64 shape: [", N + 1, "] }\n",          //
                   "    dy { dtype: BF16 shape: ", sc, " }\n",                        //
                   "    bias { dtype: FP32 shape: ", c1, " }\n",                      //
                   "    silu_grad_preactivation: SILU_GRAD_PREACTIVATION_BF16\n",     //
                   "    dx { dtype: BF16 shape: ", sc, " }\n",                        //
                   "    dweight { dtype: FP32 shape: ", c4, " }\n",                   //
                   "    dbias { dtype: FP32 shape: ", c1, " }\n",                     //
                   "  }\n}\n");
  char path[] = "/tmp/cakegrad-capture-XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(write(fd, plan.data(), plan.size()), static_cast<ssize_t>(plan.size()));
  close(fd);
  DaemonProcess daemon;
  const absl::Status started = daemon.Start(
      {"--backend=cuda", "--cuda_graphs=8", absl::StrCat("--capture_at_start=", path)});
  unlink(path);
  ASSERT_TRUE(started.ok()) << started << "; see " << daemon.log_path();
  {
    std::ifstream log(daemon.log_path());
    std::stringstream text;
    text << log.rdbuf();
    EXPECT_THAT(text.str(), HasSubstr("captured request[0] conv1d_backward"));
  }
  auto client = Client::Connect(daemon.address(), "capture-at-start-test");
  ASSERT_TRUE(client.ok()) << client.status();
  cudaStream_t stream = nullptr;
  CUDA_ASSERT_OK(cudaStreamCreate(&stream));

  std::vector<int64_t> cuts = {0, S / 3, S / 3, S / 2 + 5, S};  // one empty document
  DeviceArena served(1ull << 30), direct(1ull << 30);
  served.Register(**client);
  const auto xs = RandomBf16(S * C), dys = RandomBf16(S * C);
  const auto w = RandomFloat(C * 4, 0, 0.5), b = RandomFloat(C, 0, 0.1);
  Tensor tx[2], tdy[2], tw[2], tb[2], tcu[2], tdx[2], tdw[2], tdb[2];
  DeviceArena* arenas[2] = {&served, &direct};
  for (int i = 0; i < 2; ++i) {
    DeviceArena& a = *arenas[i];
    tx[i] = a.Put(DType::kBF16, {S, C}, xs);
    tdy[i] = a.Put(DType::kBF16, {S, C}, dys);
    tw[i] = a.Put(DType::kFP32, {C, 4}, w);
    tb[i] = a.Put(DType::kFP32, {C}, b);
    tcu[i] = a.Put(DType::kINT64, {N + 1}, cuts);
    tdx[i] = a.Alloc(DType::kBF16, {S, C});
    tdw[i] = a.Alloc(DType::kFP32, {C, 4});
    tdb[i] = a.Alloc(DType::kFP32, {C});
  }

  k::Conv1dBwdParams p;
  p.x = direct.ptr<uint16_t>(tx[1]);
  p.weight = direct.ptr<float>(tw[1]);
  p.bias = direct.ptr<float>(tb[1]);
  p.cu_seqlens = direct.ptr<int64_t>(tcu[1]);
  p.seqlens_dtype = DType::kINT64;
  p.dy = direct.ptr<uint16_t>(tdy[1]);
  p.policy = k::SiluGradPreactivation::kBF16;
  p.dx = direct.ptr<uint16_t>(tdx[1]);
  p.dweight = direct.ptr<float>(tdw[1]);
  p.dbias = direct.ptr<float>(tdb[1]);
  DeviceBuffer<uint8_t> ws(k::Conv1dBackwardWorkspaceBytes(S, C));
  p.workspace = ws.get();
  p.workspace_bytes = static_cast<int64_t>(ws.bytes());
  p.S = S;
  p.C = C;
  p.num_docs = N;
  ASSERT_TRUE(k::Conv1dBackwardCuda(p, stream).ok());
  CUDA_ASSERT_OK(cudaStreamSynchronize(stream));

  const Tensor dx2 = served.Alloc(DType::kBF16, {S, C}), dw2 = served.Alloc(DType::kFP32, {C, 4}),
               db2 = served.Alloc(DType::kFP32, {C});
  const Tensor outs[2][3] = {{tdx[0], tdw[0], tdb[0]}, {dx2, dw2, db2}};
  for (int call = 0; call < 2; ++call) {
    const Tensor& dx = outs[call][0];
    const Tensor& dw = outs[call][1];
    const Tensor& db = outs[call][2];
    auto run = (*client)->Conv1dBackward(
        {tx[0], tw[0], tcu[0], tdy[0], tb[0], "bf16", std::nullopt, dx, dw, db});
    ASSERT_TRUE(run.ok()) << run.status();
    EXPECT_EQ(run->graph(), "hit")
        << "call " << call << ": the shape was captured at start; see " << daemon.log_path();
    EXPECT_TRUE(served.Bytes(dx) == direct.Bytes(tdx[1])) << "dx differs, call " << call;
    EXPECT_TRUE(served.Bytes(dw) == direct.Bytes(tdw[1])) << "dweight differs, call " << call;
    EXPECT_TRUE(served.Bytes(db) == direct.Bytes(tdb[1])) << "dbias differs, call " << call;
  }
  client->reset();
  CUDA_ASSERT_OK(cudaStreamDestroy(stream));
}

}  // namespace
}  // namespace cakegrad::testing
