// The mHC CUDA kernels against the FP64 reference (SPEC.md section 1 accuracy), with fresh
// random inputs and NaN-poisoned outputs, plus bitwise determinism (runs, garbage workspaces,
// another stream, CUDA graph replay), accumulate and T == 0 semantics.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cakegrad/kernels/mhc.h"
#include "common/test_util.h"
#include "gpu/gpu_test_util.h"
#include "reference/mhc_reference_internal.h"

namespace cakegrad::kernels {
namespace {

using ::cakegrad::testing::Bf16ToDouble;
using ::cakegrad::testing::DeviceBuffer;
using ::cakegrad::testing::Fnv1a;
using ::cakegrad::testing::RandomFloat;
using ::cakegrad::testing::RelL2;
using ::cakegrad::testing::ToDouble;
using ::cakegrad::testing::UniformFloat;

constexpr float kRmsEps = 1e-5f;
constexpr float kHcEps = 1e-6f;
constexpr double kBf16Tol = 4e-3;
constexpr double kFp32Tol = 1e-5;

// Runs f(begin, end) over [0, n) split across the host's cores (the FP64 oracle is per token).
template <typename F>
void ParallelFor(int64_t n, F f) {
  const int64_t workers =
      std::max<int64_t>(1, std::min<int64_t>(n, std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  for (int64_t w = 0; w < workers; ++w) {
    pool.emplace_back([=] { f(n * w / workers, n * (w + 1) / workers); });
  }
  for (auto& th : pool) th.join();
}

// N(0, 1) BF16 values drawn on all host cores (fresh seeds from the shared generator): the
// largest cases hold over 10^8 values.
std::vector<uint16_t> ParallelRandomBf16(int64_t n) {
  std::vector<uint16_t> out(n);
  const int64_t workers = std::max<int64_t>(1, std::thread::hardware_concurrency());
  std::vector<uint64_t> seeds(workers);
  for (auto& sd : seeds) sd = ::cakegrad::testing::Rng()();
  ParallelFor(workers, [&](int64_t w0, int64_t w1) {
    for (int64_t w = w0; w < w1; ++w) {
      std::mt19937_64 rng(seeds[w]);
      std::normal_distribution<float> dist(0.0f, 1.0f);
      for (int64_t i = n * w / workers; i < n * (w + 1) / workers; ++i) {
        out[i] = FloatToBf16(dist(rng));
      }
    }
  });
  return out;
}

struct HostProblem {
  int64_t T, C, K;
  int iters;
  std::vector<uint16_t> X, B, dY, dU;
  std::vector<float> fn, scale, base;
  HostProblem(int64_t t, int64_t c, int it) : T(t), C(c), K(4 * c), iters(it) {
    X = ParallelRandomBf16(T * K);
    B = ParallelRandomBf16(T * C);
    dY = ParallelRandomBf16(T * K);
    dU = ParallelRandomBf16(T * C);
    fn = RandomFloat(24 * K, 0.0, 1e-2);
    scale = UniformFloat(3, 1e-2, 1.0);
    base = RandomFloat(24);
  }
};

// FP64 oracle of every output; stats and grad_stats are the reference's FP32 records, which
// the GPU's finish/backward calls also take as inputs (each function is checked on its own).
struct Oracle {
  std::vector<float> stats, grad_stats;
  std::vector<double> U, Y, dB, dX, dfn, dscale, dbase;
};

Oracle ComputeOracle(const HostProblem& h) {
  Oracle o;
  const int64_t T = h.T, C = h.C, K = h.K;
  o.stats.assign(T * 64, 0.f);
  o.grad_stats.assign(T * 32, 0.f);
  o.U.assign(T * C, 0.0);
  o.Y.assign(T * K, 0.0);
  o.dB.assign(T * C, 0.0);
  o.dX.assign(T * K, 0.0);
  ParallelFor(T, [&](int64_t t0, int64_t t1) {
    if (t1 <= t0) return;
    MhcFwdStatsParams sp;
    sp.X = h.X.data() + t0 * K;
    sp.fn = h.fn.data();
    sp.scale = h.scale.data();
    sp.base = h.base.data();
    sp.stats = o.stats.data() + t0 * 64;
    sp.T = t1 - t0;
    sp.C = C;
    sp.rms_eps = kRmsEps;
    sp.hc_eps = kHcEps;
    sp.sinkhorn_iters = h.iters;
    EXPECT_TRUE(MhcForwardStatsReference(sp).ok());
    std::vector<uint16_t> dB16((t1 - t0) * C);
    MhcBwdPrepareParams bp;
    bp.X = sp.X;
    bp.dY = h.dY.data() + t0 * K;
    bp.B = h.B.data() + t0 * C;
    bp.stats = sp.stats;
    bp.dB = dB16.data();
    bp.grad_stats = o.grad_stats.data() + t0 * 32;
    bp.T = t1 - t0;
    bp.C = C;
    EXPECT_TRUE(MhcBackwardPrepareReference(bp).ok());
    for (int64_t t = t0; t < t1; ++t) {
      const float* st = &o.stats[t * 64];
      for (int64_t c = 0; c < C; ++c) {
        double u = 0.0, db = 0.0;
        for (int a = 0; a < 4; ++a)
          u += static_cast<double>(st[25 + a]) * Bf16ToFloat(h.X[t * K + a * C + c]);
        o.U[t * C + c] = u;
        for (int b = 0; b < 4; ++b) {
          double y = static_cast<double>(st[29 + b]) * Bf16ToFloat(h.B[t * C + c]);
          for (int a = 0; a < 4; ++a) {
            y += static_cast<double>(st[33 + 4 * a + b]) * Bf16ToFloat(h.X[t * K + a * C + c]);
          }
          o.Y[t * K + b * C + c] = y;
          db += static_cast<double>(st[29 + b]) * Bf16ToFloat(h.dY[t * K + b * C + c]);
        }
        o.dB[t * C + c] = db;
      }
    }
  });
  // backward_finish in FP64 with per-worker dfn partials summed in worker order.
  const int64_t workers =
      std::max<int64_t>(1, std::min<int64_t>(T, std::thread::hardware_concurrency()));
  std::vector<std::vector<double>> dfn_w(workers, std::vector<double>(24 * K, 0.0));
  std::vector<std::vector<double>> ds_w(workers, std::vector<double>(3, 0.0));
  std::vector<std::vector<double>> db_w(workers, std::vector<double>(24, 0.0));
  std::vector<std::thread> pool;
  const std::vector<double> fn64(h.fn.begin(), h.fn.end());
  const std::vector<double> sc64(h.scale.begin(), h.scale.end());
  const std::vector<double> bs64(h.base.begin(), h.base.end());
  for (int64_t w = 0; w < workers && T > 0; ++w) {
    pool.emplace_back([&, w] {
      std::vector<double> x(K), dy(K), du(C);
      double st[64], gs[32];
      for (int64_t t = T * w / workers; t < T * (w + 1) / workers; ++t) {
        for (int64_t i = 0; i < K; ++i) {
          x[i] = Bf16ToFloat(h.X[t * K + i]);
          dy[i] = Bf16ToFloat(h.dY[t * K + i]);
        }
        for (int64_t c = 0; c < C; ++c) du[c] = Bf16ToFloat(h.dU[t * C + c]);
        for (int k = 0; k < 64; ++k) st[k] = o.stats[t * 64 + k];
        for (int k = 0; k < 32; ++k) gs[k] = o.grad_stats[t * 32 + k];
        mhc_ref::BackwardFinishToken(x.data(), dy.data(), du.data(), fn64.data(), sc64.data(),
                                     bs64.data(), st, gs, C, kHcEps, h.iters, &o.dX[t * K],
                                     dfn_w[w].data(), ds_w[w].data(), db_w[w].data());
      }
    });
  }
  for (auto& th : pool) th.join();
  o.dfn.assign(24 * K, 0.0);
  o.dscale.assign(3, 0.0);
  o.dbase.assign(24, 0.0);
  for (int64_t w = 0; w < workers && T > 0; ++w) {
    for (int64_t i = 0; i < 24 * K; ++i) o.dfn[i] += dfn_w[w][i];
    for (int g = 0; g < 3; ++g) o.dscale[g] += ds_w[w][g];
    for (int j = 0; j < 24; ++j) o.dbase[j] += db_w[w][j];
  }
  return o;
}

// Device copies of the inputs and (poisoned) outputs of all five functions.
struct DeviceProblem {
  DeviceBuffer<uint16_t> X, B, dY, dU, U, Y, dB, dX;
  DeviceBuffer<float> fn, scale, base, stats, stats2, ref_stats, ref_grad_stats, grad_stats, dfn,
      dscale, dbase;
  DeviceBuffer<uint8_t> ws;
  const HostProblem& h;
  explicit DeviceProblem(const HostProblem& hp, const Oracle& o)
      : X(hp.X),
        B(hp.B),
        dY(hp.dY),
        dU(hp.dU),
        U(hp.T * hp.C),
        Y(hp.T * hp.K),
        dB(hp.T * hp.C),
        dX(hp.T * hp.K),
        fn(hp.fn),
        scale(hp.scale),
        base(hp.base),
        stats(hp.T * 64),
        stats2(hp.T * 64),
        ref_stats(o.stats),
        ref_grad_stats(o.grad_stats),
        grad_stats(hp.T * 32),
        dfn(24 * hp.K),
        dscale(3),
        dbase(24),
        ws(std::max<int64_t>({MhcBackwardFinishWorkspaceBytes(hp.T, hp.C),
                              MhcForwardWorkspaceBytes(hp.T, hp.C), 16})),
        h(hp) {
    for (auto* b : {&U, &Y, &dB, &dX}) b->Fill(0xFF);
    for (auto* b : {&stats, &stats2, &grad_stats, &dfn, &dscale, &dbase}) b->Fill(0xFF);
    ws.Fill(0xA5);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }

  MhcFwdPrepareParams Prepare() const {
    MhcFwdPrepareParams p;
    p.X = X.get();
    p.fn = fn.get();
    p.scale = scale.get();
    p.base = base.get();
    p.U = U.get();
    p.stats = stats.get();
    p.T = h.T;
    p.C = h.C;
    p.rms_eps = kRmsEps;
    p.hc_eps = kHcEps;
    p.sinkhorn_iters = h.iters;
    p.workspace = ws.get();
    p.workspace_bytes = static_cast<int64_t>(ws.bytes());
    return p;
  }
  MhcFwdStatsParams Stats() const {
    MhcFwdStatsParams p;
    p.X = X.get();
    p.fn = fn.get();
    p.scale = scale.get();
    p.base = base.get();
    p.stats = stats2.get();
    p.T = h.T;
    p.C = h.C;
    p.rms_eps = kRmsEps;
    p.hc_eps = kHcEps;
    p.sinkhorn_iters = h.iters;
    p.workspace = ws.get();
    p.workspace_bytes = static_cast<int64_t>(ws.bytes());
    return p;
  }
  MhcFwdFinishParams Finish() const {
    MhcFwdFinishParams p;
    p.X = X.get();
    p.B = B.get();
    p.stats = ref_stats.get();
    p.Y = Y.get();
    p.T = h.T;
    p.C = h.C;
    return p;
  }
  MhcBwdPrepareParams BwdPrepare() const {
    MhcBwdPrepareParams p;
    p.X = X.get();
    p.dY = dY.get();
    p.B = B.get();
    p.stats = ref_stats.get();
    p.dB = dB.get();
    p.grad_stats = grad_stats.get();
    p.T = h.T;
    p.C = h.C;
    return p;
  }
  MhcBwdFinishParams BwdFinish() const {
    MhcBwdFinishParams p;
    p.X = X.get();
    p.dY = dY.get();
    p.dU = dU.get();
    p.fn = fn.get();
    p.scale = scale.get();
    p.base = base.get();
    p.stats = ref_stats.get();
    p.grad_stats = ref_grad_stats.get();
    p.dX = dX.get();
    p.dfn = dfn.get();
    p.dscale = dscale.get();
    p.dbase = dbase.get();
    p.T = h.T;
    p.C = h.C;
    p.rms_eps = kRmsEps;
    p.hc_eps = kHcEps;
    p.sinkhorn_iters = h.iters;
    p.workspace = ws.get();
    p.workspace_bytes = static_cast<int64_t>(ws.bytes());
    return p;
  }
};

std::vector<double> ColumnRange(const std::vector<float>& v, int64_t rows, int width, int lo,
                                int hi) {
  std::vector<double> out;
  for (int64_t r = 0; r < rows; ++r) {
    for (int k = lo; k < hi; ++k) out.push_back(v[r * width + k]);
  }
  return out;
}

struct Case {
  int64_t T, C;
  int iters;
};

class MhcKernelsAccuracy : public ::testing::TestWithParam<Case> {};

TEST_P(MhcKernelsAccuracy, AllFunctionsMatchReference) {
  CAKEGRAD_REQUIRE_GPU();
  const Case cs = GetParam();
  const HostProblem h(cs.T, cs.C, cs.iters);
  const Oracle o = ComputeOracle(h);
  DeviceProblem d(h, o);
  ASSERT_TRUE(MhcForwardPrepareCuda(d.Prepare(), nullptr).ok());
  ASSERT_TRUE(MhcForwardStatsCuda(d.Stats(), nullptr).ok());
  ASSERT_TRUE(MhcForwardFinishCuda(d.Finish(), nullptr).ok());
  ASSERT_TRUE(MhcBackwardPrepareCuda(d.BwdPrepare(), nullptr).ok());
  ASSERT_TRUE(MhcBackwardFinishCuda(d.BwdFinish(), nullptr).ok());
  CUDA_ASSERT_OK(cudaDeviceSynchronize());

  std::string line;
  auto check = [&](const char* what, double err, double tol) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), " %s %.2e", what, err);
    line += buf;
    EXPECT_LE(err, tol) << what;
  };
  const auto stats = d.stats.Download();
  const auto stats2 = d.stats2.Download();
  EXPECT_EQ(0, std::memcmp(stats.data(), stats2.data(), stats.size() * 4))
      << "forward_stats must be bitwise equal to forward_prepare's stats";
  check("stats", RelL2(ToDouble(stats), ToDouble(o.stats)), kFp32Tol);
  // Each part of the record on its own, so a small part cannot hide in a large one.
  check("m", RelL2(ColumnRange(stats, h.T, 64, 0, 24), ColumnRange(o.stats, h.T, 64, 0, 24)),
        kFp32Tol);
  check("r|pre|post",
        RelL2(ColumnRange(stats, h.T, 64, 24, 33), ColumnRange(o.stats, h.T, 64, 24, 33)),
        kFp32Tol);
  check("R", RelL2(ColumnRange(stats, h.T, 64, 33, 49), ColumnRange(o.stats, h.T, 64, 33, 49)),
        kFp32Tol);
  for (int64_t t = 0; t < h.T; ++t) {
    for (int k = 49; k < 64; ++k) ASSERT_EQ(stats[t * 64 + k], 0.0f);
  }
  check("U", RelL2(Bf16ToDouble(d.U.Download()), o.U), kBf16Tol);
  check("Y", RelL2(Bf16ToDouble(d.Y.Download()), o.Y), kBf16Tol);
  check("dB", RelL2(Bf16ToDouble(d.dB.Download()), o.dB), kBf16Tol);
  const auto gs = d.grad_stats.Download();
  check("grad_stats", RelL2(ToDouble(gs), ToDouble(o.grad_stats)), kFp32Tol);
  for (int64_t t = 0; t < h.T; ++t) {
    for (int k = 20; k < 32; ++k) ASSERT_EQ(gs[t * 32 + k], 0.0f);
  }
  check("dX", RelL2(Bf16ToDouble(d.dX.Download()), o.dX), kBf16Tol);
  check("dfn", RelL2(ToDouble(d.dfn.Download()), o.dfn), kFp32Tol);
  check("dscale", RelL2(ToDouble(d.dscale.Download()), o.dscale), kFp32Tol);
  check("dbase", RelL2(ToDouble(d.dbase.Download()), o.dbase), kFp32Tol);
  std::printf("rel-L2 T=%lld C=%lld it=%d:%s\n", static_cast<long long>(h.T),
              static_cast<long long>(h.C), h.iters, line.c_str());
}

// A covering set of T x C x iters (the CPU oracle bounds the largest).
INSTANTIATE_TEST_SUITE_P(Shapes, MhcKernelsAccuracy,
                         ::testing::Values(Case{1, 7168, 64}, Case{1, 256, 1}, Case{1, 4096, 20},
                                           Case{7, 4096, 1}, Case{45, 4096, 3}, Case{7, 256, 20},
                                           Case{7, 16384, 20}, Case{4096, 4096, 20},
                                           Case{4097, 4096, 20}, Case{4096, 7168, 64},
                                           Case{4096, 512, 1}, Case{16384, 256, 64},
                                           Case{16384, 4096, 20}),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return "T" + std::to_string(info.param.T) + "_C" +
                                  std::to_string(info.param.C) + "_it" +
                                  std::to_string(info.param.iters);
                         });

// dscale[g] = sum over tokens of sum_{j in g} dl_j m_j cancels: each Sinkhorn row of dl sums
// to zero, so when the 16 mixing rows of fn are nearly equal (m_8..m_23 nearly equal within a
// token) group 2 keeps only ~kSpread of its terms' size. The former FP32 token chain (~1e-7 per
// term) gave dscale 2e-4 .. 4e-4 here on the H200; the FP64 chain gives ~3e-8, the final FP32
// rounding. dU and B are scaled by 2^-13 (exact in BF16) so the non-cancelling groups 0 and 1
// do not hide group 2.
class MhcDscaleCancellation : public ::testing::TestWithParam<Case> {};

TEST_P(MhcDscaleCancellation, ParameterGradientsMatchReference) {
  CAKEGRAD_REQUIRE_GPU();
  const Case cs = GetParam();
  constexpr double kSpread = 1e-4;
  constexpr float kSmall = 1.0f / 8192.0f;
  HostProblem h(cs.T, cs.C, cs.iters);
  const auto common = RandomFloat(h.K, 0.0, 1e-2);
  const auto spread = RandomFloat(16 * h.K, 0.0, 1e-2 * kSpread);
  for (int j = 8; j < 24; ++j) {
    for (int64_t i = 0; i < h.K; ++i) h.fn[j * h.K + i] = common[i] + spread[(j - 8) * h.K + i];
  }
  for (auto* v : {&h.dU, &h.B}) {
    for (auto& e : *v) e = FloatToBf16(Bf16ToFloat(e) * kSmall);
  }
  const Oracle o = ComputeOracle(h);
  DeviceProblem d(h, o);  // outputs NaN-poisoned, workspace garbage
  ASSERT_TRUE(MhcBackwardFinishCuda(d.BwdFinish(), nullptr).ok());
  CUDA_ASSERT_OK(cudaDeviceSynchronize());
  const double e_ds = RelL2(ToDouble(d.dscale.Download()), o.dscale);
  const double e_db = RelL2(ToDouble(d.dbase.Download()), o.dbase);
  const double e_fn = RelL2(ToDouble(d.dfn.Download()), o.dfn);
  const double e_dx = RelL2(Bf16ToDouble(d.dX.Download()), o.dX);
  std::printf(
      "cancellation T=%lld C=%lld it=%d: dscale %.2e (|dscale| = %.3e %.3e %.3e) "
      "dbase %.2e dfn %.2e dX %.2e\n",
      static_cast<long long>(h.T), static_cast<long long>(h.C), h.iters, e_ds, o.dscale[0],
      o.dscale[1], o.dscale[2], e_db, e_fn, e_dx);
  EXPECT_LE(e_ds, kFp32Tol);
  EXPECT_LE(e_db, kFp32Tol);
  EXPECT_LE(e_fn, kFp32Tol);
  EXPECT_LE(e_dx, kBf16Tol);
}

INSTANTIATE_TEST_SUITE_P(Shapes, MhcDscaleCancellation,
                         ::testing::Values(Case{96, 256, 20}, Case{4096, 1024, 20},
                                           Case{33, 4096, 64}, Case{200, 512, 1}),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return "T" + std::to_string(info.param.T) + "_C" +
                                  std::to_string(info.param.C) + "_it" +
                                  std::to_string(info.param.iters);
                         });

// Snapshot of every output of the five functions.
struct Outputs {
  std::vector<uint16_t> U, Y, dB, dX;
  std::vector<float> stats, stats2, grad_stats, dfn, dscale, dbase;
  bool operator==(const Outputs& o) const {
    auto same = [](const auto& a, const auto& b) {
      return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(a[0])) == 0;
    };
    return same(U, o.U) && same(Y, o.Y) && same(dB, o.dB) && same(dX, o.dX) &&
           same(stats, o.stats) && same(stats2, o.stats2) && same(grad_stats, o.grad_stats) &&
           same(dfn, o.dfn) && same(dscale, o.dscale) && same(dbase, o.dbase);
  }
};

void EnqueueAll(const DeviceProblem& d, cudaStream_t s) {
  ASSERT_TRUE(MhcForwardPrepareCuda(d.Prepare(), s).ok());
  ASSERT_TRUE(MhcForwardStatsCuda(d.Stats(), s).ok());
  ASSERT_TRUE(MhcForwardFinishCuda(d.Finish(), s).ok());
  ASSERT_TRUE(MhcBackwardPrepareCuda(d.BwdPrepare(), s).ok());
  ASSERT_TRUE(MhcBackwardFinishCuda(d.BwdFinish(), s).ok());
}

Outputs Snapshot(const DeviceProblem& d) {
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  return Outputs{d.U.Download(),          d.Y.Download(),     d.dB.Download(),
                 d.dX.Download(),         d.stats.Download(), d.stats2.Download(),
                 d.grad_stats.Download(), d.dfn.Download(),   d.dscale.Download(),
                 d.dbase.Download()};
}

// Poisons every output and refills the workspace; waits, since the calls may run on a
// non-blocking stream that does not order after cudaMemset.
void Poison(DeviceProblem& d, uint8_t ws_byte) {
  for (auto* b : {&d.U, &d.Y, &d.dB, &d.dX}) b->Fill(0xFF);
  for (auto* b : {&d.stats, &d.stats2, &d.grad_stats, &d.dfn, &d.dscale, &d.dbase}) b->Fill(0xFF);
  d.ws.Fill(ws_byte);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

TEST(MhcKernels, BitwiseDeterministicAcrossRunsWorkspacesStreamsAndGraphs) {
  CAKEGRAD_REQUIRE_GPU();
  const HostProblem h(4096, 4096, 20);
  Oracle o;
  o.stats = RandomFloat(h.T * 64);
  o.grad_stats = RandomFloat(h.T * 32);
  // Valid records (from the GPU forward) so the backward sees realistic coefficients.
  DeviceProblem d(h, o);
  ASSERT_TRUE(MhcForwardStatsCuda(d.Stats(), nullptr).ok());
  CUDA_ASSERT_OK(
      cudaMemcpy(d.ref_stats.get(), d.stats2.get(), d.stats2.bytes(), cudaMemcpyDeviceToDevice));
  EnqueueAll(d, nullptr);
  const Outputs first = Snapshot(d);

  // Again, with the workspace refilled with other garbage.
  Poison(d, 0x3C);
  EnqueueAll(d, nullptr);
  EXPECT_TRUE(Snapshot(d) == first) << "rerun with another workspace content";

  // On another (non-blocking) stream.
  cudaStream_t s1;
  CUDA_ASSERT_OK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
  Poison(d, 0x00);
  EnqueueAll(d, s1);
  CUDA_ASSERT_OK(cudaStreamSynchronize(s1));
  EXPECT_TRUE(Snapshot(d) == first) << "another stream";

  // Captured into a graph and replayed twice.
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CUDA_ASSERT_OK(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal));
  EnqueueAll(d, s1);
  CUDA_ASSERT_OK(cudaStreamEndCapture(s1, &graph));
  CUDA_ASSERT_OK(cudaGraphInstantiate(&exec, graph, 0));
  for (int rep = 0; rep < 2; ++rep) {
    Poison(d, static_cast<uint8_t>(0x11 * (rep + 1)));
    CUDA_ASSERT_OK(cudaGraphLaunch(exec, s1));
    CUDA_ASSERT_OK(cudaStreamSynchronize(s1));
    EXPECT_TRUE(Snapshot(d) == first) << "graph replay " << rep;
  }
  CUDA_ASSERT_OK(cudaGraphExecDestroy(exec));
  CUDA_ASSERT_OK(cudaGraphDestroy(graph));
  CUDA_ASSERT_OK(cudaStreamDestroy(s1));
}

// Prints fnv1a hashes of backward_finish's outputs (dX, dfn, dscale, dbase) and of its token
// records for pinned inputs (the stats from the GPU forward, grad_stats from backward_prepare),
// and a second line with forward_prepare's U and stats and forward_finish's Y of the same calls,
// so that builds can be compared bitwise across processes (tools/gpu/ab_bench.sh's HASH_FILTER).
// Checks nothing itself beyond successful calls.
TEST(MhcKernels, ForwardAndBackwardHashesForCrossBuildComparison) {
  CAKEGRAD_REQUIRE_GPU();
  for (const Case cs : {Case{4097, 4096, 20}, Case{16384, 4096, 20}, Case{7, 256, 1},
                        Case{1031, 1024, 64}, Case{1, 4096, 3}, Case{33, 7168, 5}}) {
    ::cakegrad::testing::Rng().seed(20261130 + cs.T + cs.C + cs.iters);
    const HostProblem h(cs.T, cs.C, cs.iters);
    Oracle o;
    o.stats = RandomFloat(h.T * 64);
    o.grad_stats = RandomFloat(h.T * 32);
    ::cakegrad::testing::Rng().seed(std::random_device{}());  // later tests draw fresh inputs
    DeviceProblem d(h, o);
    ASSERT_TRUE(MhcForwardStatsCuda(d.Stats(), nullptr).ok());
    CUDA_ASSERT_OK(
        cudaMemcpy(d.ref_stats.get(), d.stats2.get(), d.stats2.bytes(), cudaMemcpyDeviceToDevice));
    EnqueueAll(d, nullptr);
    CUDA_ASSERT_OK(cudaDeviceSynchronize());
    const auto dX = d.dX.Download();
    const auto dfn = d.dfn.Download();
    const auto dscale = d.dscale.Download();
    const auto dbase = d.dbase.Download();
    // The records lead the workspace; floats [62, 64) of each are scratch, unwritten.
    const auto ws = d.ws.Download();
    std::vector<uint8_t> rec;
    for (int64_t t = 0; t < h.T; ++t) {
      const uint8_t* r = ws.data() + t * 64 * sizeof(float);
      rec.insert(rec.end(), r, r + 62 * sizeof(float));
    }
    std::printf(
        "[ mhc bwd hashes T%lld C%lld i%d ] records %016llx dX %016llx dfn %016llx "
        "dscale %016llx dbase %016llx\n",
        static_cast<long long>(h.T), static_cast<long long>(h.C), h.iters,
        Fnv1a(rec.data(), rec.size()), Fnv1a(dX.data(), 2 * dX.size()),
        Fnv1a(dfn.data(), 4 * dfn.size()), Fnv1a(dscale.data(), 4 * dscale.size()),
        Fnv1a(dbase.data(), 4 * dbase.size()));
    const auto U = d.U.Download();
    const auto stats = d.stats.Download();
    const auto Y = d.Y.Download();
    std::printf("[ mhc fwd hashes T%lld C%lld i%d ] U %016llx stats %016llx Y %016llx\n",
                static_cast<long long>(h.T), static_cast<long long>(h.C), h.iters,
                Fnv1a(U.data(), 2 * U.size()), Fnv1a(stats.data(), 4 * stats.size()),
                Fnv1a(Y.data(), 2 * Y.size()));
  }
}

TEST(MhcKernels, AccumulateAddsReproducibly) {
  CAKEGRAD_REQUIRE_GPU();
  const HostProblem h(1000, 1024, 20);
  Oracle o;
  o.stats = RandomFloat(h.T * 64);
  o.grad_stats = RandomFloat(h.T * 32);
  DeviceProblem d(h, o);
  ASSERT_TRUE(MhcForwardStatsCuda(d.Stats(), nullptr).ok());
  CUDA_ASSERT_OK(
      cudaMemcpy(d.ref_stats.get(), d.stats2.get(), d.stats2.bytes(), cudaMemcpyDeviceToDevice));
  MhcBwdFinishParams p = d.BwdFinish();
  ASSERT_TRUE(MhcBackwardFinishCuda(p, nullptr).ok());
  CUDA_ASSERT_OK(cudaDeviceSynchronize());
  const auto sum_fn = d.dfn.Download();
  const auto sum_s = d.dscale.Download();
  const auto sum_b = d.dbase.Download();

  const auto init_fn = RandomFloat(24 * h.K), init_s = RandomFloat(3), init_b = RandomFloat(24);
  d.dfn.Upload(init_fn);
  d.dscale.Upload(init_s);
  d.dbase.Upload(init_b);
  p.accumulate = true;
  for (int rep = 0; rep < 2; ++rep) {
    d.ws.Fill(static_cast<uint8_t>(0x5A + rep));
    CUDA_ASSERT_OK(cudaDeviceSynchronize());
    ASSERT_TRUE(MhcBackwardFinishCuda(p, nullptr).ok());
    CUDA_ASSERT_OK(cudaDeviceSynchronize());
  }
  CUDA_ASSERT_OK(cudaDeviceSynchronize());
  // Two accumulations: (init + s) + s in FP32, bit for bit.
  auto check = [](const std::vector<float>& got, const std::vector<float>& init,
                  const std::vector<float>& s, const char* what) {
    for (size_t i = 0; i < got.size(); ++i) {
      const float want = (init[i] + s[i]) + s[i];
      ASSERT_EQ(std::memcmp(&got[i], &want, 4), 0) << what << "[" << i << "]";
    }
  };
  check(d.dfn.Download(), init_fn, sum_fn, "dfn");
  check(d.dscale.Download(), init_s, sum_s, "dscale");
  check(d.dbase.Download(), init_b, sum_b, "dbase");
}

TEST(MhcKernels, EmptyInputZeroesOrKeepsParameterGradients) {
  CAKEGRAD_REQUIRE_GPU();
  const HostProblem h(0, 4096, 20);
  Oracle o;
  DeviceProblem d(h, o);
  EnqueueAll(d, nullptr);
  CUDA_ASSERT_OK(cudaDeviceSynchronize());
  for (float v : d.dfn.Download()) ASSERT_EQ(v, 0.0f);
  for (float v : d.dscale.Download()) ASSERT_EQ(v, 0.0f);
  for (float v : d.dbase.Download()) ASSERT_EQ(v, 0.0f);
  const auto init_fn = RandomFloat(24 * h.K);
  d.dfn.Upload(init_fn);
  MhcBwdFinishParams p = d.BwdFinish();
  p.accumulate = true;
  ASSERT_TRUE(MhcBackwardFinishCuda(p, nullptr).ok());
  CUDA_ASSERT_OK(cudaDeviceSynchronize());
  EXPECT_EQ(d.dfn.Download(), init_fn);
}

TEST(MhcKernels, RejectsBadArguments) {
  CAKEGRAD_REQUIRE_GPU();
  const HostProblem h(16, 256, 20);
  Oracle o;
  o.stats = RandomFloat(h.T * 64);
  o.grad_stats = RandomFloat(h.T * 32);
  DeviceProblem d(h, o);
  MhcBwdFinishParams p = d.BwdFinish();
  p.workspace_bytes = MhcBackwardFinishWorkspaceBytes(h.T, h.C) - 1;
  EXPECT_EQ(MhcBackwardFinishCuda(p, nullptr).code(), StatusCode::kInvalidArgument);
  p = d.BwdFinish();
  p.sinkhorn_iters = 65;
  EXPECT_EQ(MhcBackwardFinishCuda(p, nullptr).code(), StatusCode::kInvalidArgument);
  MhcFwdStatsParams s = d.Stats();
  s.C = 300;
  EXPECT_EQ(MhcForwardStatsCuda(s, nullptr).code(), StatusCode::kInvalidArgument);
}

// Small, for compute-sanitizer (memcheck, racecheck): every function, ragged token tiles; C = 4096
// takes the forward's cluster path, the others the two-kernel path.
TEST(MhcKernels, SanitizeSmall) {
  CAKEGRAD_REQUIRE_GPU();
  for (const Case cs : {Case{7, 256, 3}, Case{67, 512, 2}, Case{37, 4096, 2}}) {
    const HostProblem h(cs.T, cs.C, cs.iters);
    const Oracle o = ComputeOracle(h);
    DeviceProblem d(h, o);
    EnqueueAll(d, nullptr);
    CUDA_ASSERT_OK(cudaDeviceSynchronize());
    EXPECT_LE(RelL2(Bf16ToDouble(d.dX.Download()), o.dX), kBf16Tol);
    EXPECT_LE(RelL2(ToDouble(d.dfn.Download()), o.dfn), kFp32Tol);
    EXPECT_LE(RelL2(ToDouble(d.stats.Download()), ToDouble(o.stats)), kFp32Tol);
  }
}

}  // namespace
}  // namespace cakegrad::kernels
