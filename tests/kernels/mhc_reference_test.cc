// The FP64 mHC reference against central finite differences of an FP64 loss built on the
// forward, and against the SPEC's layout, accumulate and T == 0 rules. Inputs are fresh random
// draws with the magnitudes of training (X ~ N(0,1), fn ~ N(0,1e-2), scale ~ U(1e-2,1),
// base ~ N(0,1)).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "reference/mhc_reference_internal.h"
#include "cakegrad/kernels/mhc.h"
#include "common/test_util.h"

namespace cakegrad::kernels {
namespace {

using ::cakegrad::testing::Bf16ToDouble;
using ::cakegrad::testing::RandomBf16;
using ::cakegrad::testing::RandomFloat;
using ::cakegrad::testing::RelL2;
using ::cakegrad::testing::UniformFloat;

constexpr double kRmsEps = 1e-5;
constexpr double kHcEps = 1e-6;

// A problem in FP64 (the loss's variables) plus its BF16/FP32 image for the public API. The
// loss is sum(wU * U) + sum(wY * Y) without rounding, so dU = wU and dY = wY.
struct Problem {
  int64_t T, C, K;
  int iters;
  std::vector<uint16_t> X16, B16, wU16, wY16;
  std::vector<double> x, b, wu, wy;
  std::vector<float> fn32, scale32, base32;
  std::vector<double> fn, scale, base;

  Problem(int64_t t, int64_t c, int it) : T(t), C(c), K(4 * c), iters(it) {
    X16 = RandomBf16(T * K);
    B16 = RandomBf16(T * C);
    wU16 = RandomBf16(T * C);
    wY16 = RandomBf16(T * K);
    fn32 = RandomFloat(24 * K, 0.0, 1e-2);
    scale32 = UniformFloat(3, 1e-2, 1.0);
    base32 = RandomFloat(24);
    x = Bf16ToDouble(X16);
    b = Bf16ToDouble(B16);
    wu = Bf16ToDouble(wU16);
    wy = Bf16ToDouble(wY16);
    fn.assign(fn32.begin(), fn32.end());
    scale.assign(scale32.begin(), scale32.end());
    base.assign(base32.begin(), base32.end());
  }

  mhc_ref::TokenCoeffs Coeffs(int64_t t) const {
    mhc_ref::TokenCoeffs co;
    mhc_ref::ForwardToken(&x[t * K], fn.data(), scale.data(), base.data(), C, kRmsEps, kHcEps,
                          iters, &co, nullptr);
    return co;
  }

  double Loss() const {
    double loss = 0.0;
    for (int64_t t = 0; t < T; ++t) {
      const mhc_ref::TokenCoeffs co = Coeffs(t);
      for (int64_t c = 0; c < C; ++c) {
        double u = 0.0;
        for (int a = 0; a < 4; ++a) u += co.pre[a] * x[t * K + a * C + c];
        loss += wu[t * C + c] * u;
        for (int bb = 0; bb < 4; ++bb) {
          double y = co.post[bb] * b[t * C + c];
          for (int a = 0; a < 4; ++a) y += co.R[4 * a + bb] * x[t * K + a * C + c];
          loss += wy[t * K + bb * C + c] * y;
        }
      }
    }
    return loss;
  }

  // Central difference of Loss() in *v, restoring it.
  double Fd(double* v, double h) {
    const double keep = *v;
    *v = keep + h;
    const double up = Loss();
    *v = keep - h;
    const double down = Loss();
    *v = keep;
    return (up - down) / (2 * h);
  }

  // stats / grad_stats of token t in FP64 (no FP32 rounding).
  void TokenRecords(int64_t t, double* st, double* gs) const {
    const mhc_ref::TokenCoeffs co = Coeffs(t);
    for (int j = 0; j < 64; ++j) st[j] = 0.0;
    for (int j = 0; j < 24; ++j) st[j] = co.m[j];
    st[24] = co.r;
    for (int a = 0; a < 4; ++a) {
      st[25 + a] = co.pre[a];
      st[29 + a] = co.post[a];
    }
    for (int k = 0; k < 16; ++k) st[33 + k] = co.R[k];
    for (int k = 0; k < 32; ++k) gs[k] = 0.0;
    for (int64_t c = 0; c < C; ++c) {
      for (int bb = 0; bb < 4; ++bb) {
        const double dy = wy[t * K + bb * C + c];
        gs[bb] += dy * b[t * C + c];
        for (int a = 0; a < 4; ++a) gs[4 + 4 * a + bb] += dy * x[t * K + a * C + c];
      }
    }
  }
};

// Public API chain: stats -> backward_prepare -> backward_finish.
struct ApiGrads {
  std::vector<float> stats, grad_stats, dfn, dscale, dbase;
  std::vector<uint16_t> dB, dX;
};

ApiGrads RunApi(const Problem& pr) {
  ApiGrads g;
  g.stats.assign(pr.T * 64, NAN);
  MhcFwdStatsParams sp;
  sp.X = pr.X16.data();
  sp.fn = pr.fn32.data();
  sp.scale = pr.scale32.data();
  sp.base = pr.base32.data();
  sp.stats = g.stats.data();
  sp.T = pr.T;
  sp.C = pr.C;
  sp.rms_eps = kRmsEps;
  sp.hc_eps = kHcEps;
  sp.sinkhorn_iters = pr.iters;
  EXPECT_TRUE(MhcForwardStatsReference(sp).ok());

  g.dB.assign(pr.T * pr.C, 0xFFFF);
  g.grad_stats.assign(pr.T * 32, NAN);
  MhcBwdPrepareParams bp;
  bp.X = pr.X16.data();
  bp.dY = pr.wY16.data();
  bp.B = pr.B16.data();
  bp.stats = g.stats.data();
  bp.dB = g.dB.data();
  bp.grad_stats = g.grad_stats.data();
  bp.T = pr.T;
  bp.C = pr.C;
  EXPECT_TRUE(MhcBackwardPrepareReference(bp).ok());

  g.dX.assign(pr.T * pr.K, 0xFFFF);
  g.dfn.assign(24 * pr.K, NAN);
  g.dscale.assign(3, NAN);
  g.dbase.assign(24, NAN);
  MhcBwdFinishParams fp;
  fp.X = pr.X16.data();
  fp.dY = pr.wY16.data();
  fp.dU = pr.wU16.data();
  fp.fn = pr.fn32.data();
  fp.scale = pr.scale32.data();
  fp.base = pr.base32.data();
  fp.stats = g.stats.data();
  fp.grad_stats = g.grad_stats.data();
  fp.dX = g.dX.data();
  fp.dfn = g.dfn.data();
  fp.dscale = g.dscale.data();
  fp.dbase = g.dbase.data();
  fp.T = pr.T;
  fp.C = pr.C;
  fp.rms_eps = kRmsEps;
  fp.hc_eps = kHcEps;
  fp.sinkhorn_iters = pr.iters;
  EXPECT_TRUE(MhcBackwardFinishReference(fp).ok());
  return g;
}

TEST(MhcSinkhornReference, BackwardMatchesFiniteDifferences) {
  for (int iters : {1, 2, 5, 20, 64}) {
    std::vector<double> L(16), W(16);
    for (auto& v : L) v = RandomFloat(1, 0.0, 1.5)[0];
    for (auto& v : W) v = RandomFloat(1)[0];
    std::vector<double> dL(16);
    mhc_ref::SinkhornBackward(L.data(), W.data(), kHcEps, iters, dL.data());
    auto loss = [&]() {
      double P[16];
      mhc_ref::SinkhornForward(L.data(), kHcEps, iters, P);
      double s = 0.0;
      for (int k = 0; k < 16; ++k) s += W[k] * P[k];
      return s;
    };
    std::vector<double> fd(16);
    for (int k = 0; k < 16; ++k) {
      const double keep = L[k], h = 1e-5;
      L[k] = keep + h;
      const double up = loss();
      L[k] = keep - h;
      const double down = loss();
      L[k] = keep;
      fd[k] = (up - down) / (2 * h);
    }
    EXPECT_LT(RelL2(dL, fd), 1e-7) << "iters " << iters;
  }
}

TEST(MhcSinkhornReference, ConvergesToDoublyStochastic) {
  std::vector<double> L(16), P(16);
  for (auto& v : L) v = RandomFloat(1)[0];
  mhc_ref::SinkhornForward(L.data(), kHcEps, 64, P.data());
  for (int k = 0; k < 4; ++k) {
    double row = 0.0, col = 0.0;
    for (int m = 0; m < 4; ++m) {
      row += P[4 * k + m];
      col += P[4 * m + k];
    }
    EXPECT_NEAR(row, 1.0, 1e-4);
    EXPECT_NEAR(col, 1.0, 1e-4);
  }
}

// FP64 gradients of one token (no FP32 or BF16 rounding) against finite differences of the loss
// in X, fn, scale and base; the public API's rounded outputs against the same differences.
TEST(MhcBackwardReference, GradientsMatchFiniteDifferences) {
  for (int iters : {1, 20}) {
    Problem pr(3, 256, iters);
    // FP64 chain through the internal per-token functions.
    std::vector<double> dx(pr.T * pr.K), dfn(24 * pr.K, 0.0), dscale(3, 0.0), dbase(24, 0.0);
    for (int64_t t = 0; t < pr.T; ++t) {
      double st[64], gs[32];
      pr.TokenRecords(t, st, gs);
      mhc_ref::BackwardFinishToken(&pr.x[t * pr.K], &pr.wy[t * pr.K], &pr.wu[t * pr.C],
                                   pr.fn.data(), pr.scale.data(), pr.base.data(), st, gs, pr.C,
                                   kHcEps, iters, &dx[t * pr.K], dfn.data(), dscale.data(),
                                   dbase.data());
    }
    const ApiGrads api = RunApi(pr);

    // scale and base: every entry.
    std::vector<double> fd_scale(3), fd_base(24);
    for (int g = 0; g < 3; ++g) fd_scale[g] = pr.Fd(&pr.scale[g], 1e-6);
    for (int j = 0; j < 24; ++j) fd_base[j] = pr.Fd(&pr.base[j], 1e-6);
    EXPECT_LT(RelL2(dscale, fd_scale), 1e-6) << "iters " << iters;
    EXPECT_LT(RelL2(dbase, fd_base), 1e-6) << "iters " << iters;
    EXPECT_LT(RelL2(::cakegrad::testing::ToDouble(api.dscale), fd_scale), 1e-5);
    EXPECT_LT(RelL2(::cakegrad::testing::ToDouble(api.dbase), fd_base), 1e-5);

    // fn and X: a random sample of entries (each difference costs two forward passes).
    std::vector<double> got_fn, got_fn_api, fd_fn, got_x, got_x_api, fd_x;
    for (int s = 0; s < 48; ++s) {
      const int64_t i = static_cast<int64_t>(UniformFloat(1, 0, 24 * pr.K - 1)[0]);
      got_fn.push_back(dfn[i]);
      got_fn_api.push_back(api.dfn[i]);
      fd_fn.push_back(pr.Fd(&pr.fn[i], 1e-6));
      const int64_t k = static_cast<int64_t>(UniformFloat(1, 0, pr.T * pr.K - 1)[0]);
      got_x.push_back(dx[k]);
      got_x_api.push_back(Bf16ToFloat(api.dX[k]));
      fd_x.push_back(pr.Fd(&pr.x[k], 1e-5));
    }
    EXPECT_LT(RelL2(got_fn, fd_fn), 1e-6) << "iters " << iters;
    EXPECT_LT(RelL2(got_x, fd_x), 1e-6) << "iters " << iters;
    EXPECT_LT(RelL2(got_fn_api, fd_fn), 1e-5) << "iters " << iters;
    EXPECT_LT(RelL2(got_x_api, fd_x), 4e-3) << "iters " << iters;
    // The whole FP64 dX against the public (BF16-rounded) one.
    EXPECT_LT(RelL2(Bf16ToDouble(api.dX), dx), 4e-3);
    EXPECT_LT(RelL2(::cakegrad::testing::ToDouble(api.dfn), dfn), 1e-5);
  }
}

// backward_prepare: dB against finite differences in B; grad_stats against its definition.
TEST(MhcBackwardReference, PrepareMatchesFiniteDifferences) {
  Problem pr(2, 256, 20);
  const ApiGrads api = RunApi(pr);
  std::vector<double> got, fd;
  for (int s = 0; s < 64; ++s) {
    const int64_t i = static_cast<int64_t>(UniformFloat(1, 0, pr.T * pr.C - 1)[0]);
    got.push_back(Bf16ToFloat(api.dB[i]));
    fd.push_back(pr.Fd(&pr.b[i], 1e-4));
  }
  EXPECT_LT(RelL2(got, fd), 4e-3);
  for (int64_t t = 0; t < pr.T; ++t) {
    double st[64], gs[32];
    pr.TokenRecords(t, st, gs);
    std::vector<double> want(gs, gs + 32), have(32);
    for (int k = 0; k < 32; ++k) have[k] = api.grad_stats[t * 32 + k];
    EXPECT_LT(RelL2(have, want), 1e-6);
    for (int k = 20; k < 32; ++k) EXPECT_EQ(api.grad_stats[t * 32 + k], 0.0f);
  }
  // dpost and dR are themselves derivatives of the loss in post and R: check dR by perturbing
  // through the loss would need R as a variable; the definition check above covers it.
}

TEST(MhcForwardReference, StatsLayoutAndPrepareAgree) {
  Problem pr(5, 512, 20);
  std::vector<float> stats(pr.T * 64, NAN), stats2(pr.T * 64, NAN);
  std::vector<uint16_t> U(pr.T * pr.C, 0xFFFF);
  MhcFwdPrepareParams p;
  p.X = pr.X16.data();
  p.fn = pr.fn32.data();
  p.scale = pr.scale32.data();
  p.base = pr.base32.data();
  p.U = U.data();
  p.stats = stats.data();
  p.T = pr.T;
  p.C = pr.C;
  p.sinkhorn_iters = 20;
  ASSERT_TRUE(MhcForwardPrepareReference(p).ok());
  MhcFwdStatsParams s;
  s.X = p.X;
  s.fn = p.fn;
  s.scale = p.scale;
  s.base = p.base;
  s.stats = stats2.data();
  s.T = p.T;
  s.C = p.C;
  s.sinkhorn_iters = 20;
  ASSERT_TRUE(MhcForwardStatsReference(s).ok());
  EXPECT_EQ(0, std::memcmp(stats.data(), stats2.data(), stats.size() * 4));
  for (int64_t t = 0; t < pr.T; ++t) {
    const mhc_ref::TokenCoeffs co = pr.Coeffs(t);
    const float* st = &stats[t * 64];
    for (int j = 0; j < 24; ++j) EXPECT_NEAR(st[j], co.m[j], 1e-6 * (1 + std::fabs(co.m[j])));
    EXPECT_NEAR(st[24], co.r, 1e-6 * co.r);
    for (int a = 0; a < 4; ++a) {
      EXPECT_NEAR(st[25 + a], co.pre[a], 1e-6);
      EXPECT_NEAR(st[29 + a], co.post[a], 1e-6);
      EXPECT_GT(st[25 + a], 0.0f);
      EXPECT_LT(st[29 + a], 2.0f);
    }
    for (int k = 0; k < 16; ++k) EXPECT_NEAR(st[33 + k], co.R[k], 1e-6);
    for (int k = 49; k < 64; ++k) EXPECT_EQ(st[k], 0.0f);
    // U and Y against their formulas with the stored coefficients.
    for (int64_t c = 0; c < pr.C; ++c) {
      double u = 0.0;
      for (int a = 0; a < 4; ++a) u += st[25 + a] * pr.x[t * pr.K + a * pr.C + c];
      EXPECT_EQ(U[t * pr.C + c], DoubleToBf16(u));
    }
  }
  std::vector<uint16_t> Y(pr.T * pr.K, 0xFFFF);
  MhcFwdFinishParams f;
  f.X = p.X;
  f.B = pr.B16.data();
  f.stats = stats.data();
  f.Y = Y.data();
  f.T = p.T;
  f.C = p.C;
  ASSERT_TRUE(MhcForwardFinishReference(f).ok());
  for (int64_t t = 0; t < pr.T; ++t) {
    const float* st = &stats[t * 64];
    for (int bb = 0; bb < 4; ++bb) {
      for (int64_t c = 0; c < pr.C; ++c) {
        double y = static_cast<double>(st[29 + bb]) * pr.b[t * pr.C + c];
        for (int a = 0; a < 4; ++a) y += st[33 + 4 * a + bb] * pr.x[t * pr.K + a * pr.C + c];
        EXPECT_EQ(Y[t * pr.K + bb * pr.C + c], DoubleToBf16(y));
      }
    }
  }
}

TEST(MhcBackwardReference, AccumulateAddsAndEmptyZeroesOrKeeps) {
  Problem pr(2, 256, 4);
  const ApiGrads fresh = RunApi(pr);
  MhcBwdFinishParams fp;
  fp.X = pr.X16.data();
  fp.dY = pr.wY16.data();
  fp.dU = pr.wU16.data();
  fp.fn = pr.fn32.data();
  fp.scale = pr.scale32.data();
  fp.base = pr.base32.data();
  fp.stats = fresh.stats.data();
  fp.grad_stats = fresh.grad_stats.data();
  std::vector<uint16_t> dX(pr.T * pr.K);
  const std::vector<float> init_fn = RandomFloat(24 * pr.K), init_s = RandomFloat(3),
                           init_b = RandomFloat(24);
  std::vector<float> dfn = init_fn, ds = init_s, db = init_b;
  fp.dX = dX.data();
  fp.dfn = dfn.data();
  fp.dscale = ds.data();
  fp.dbase = db.data();
  fp.T = pr.T;
  fp.C = pr.C;
  fp.rms_eps = kRmsEps;
  fp.hc_eps = kHcEps;
  fp.sinkhorn_iters = pr.iters;
  fp.accumulate = true;
  ASSERT_TRUE(MhcBackwardFinishReference(fp).ok());
  EXPECT_EQ(dX, fresh.dX);
  for (size_t i = 0; i < dfn.size(); ++i) {
    const double want = static_cast<double>(init_fn[i]) + fresh.dfn[i];
    EXPECT_NEAR(dfn[i], want, 1e-6 * (1 + std::fabs(want)));
  }
  for (int g = 0; g < 3; ++g) {
    EXPECT_NEAR(ds[g], init_s[g] + fresh.dscale[g], 1e-6 * (1 + std::fabs(fresh.dscale[g])));
  }
  for (int j = 0; j < 24; ++j) {
    EXPECT_NEAR(db[j], init_b[j] + fresh.dbase[j], 1e-6 * (1 + std::fabs(fresh.dbase[j])));
  }

  // T == 0 with accumulate: untouched.
  const std::vector<float> keep_fn = dfn, keep_s = ds, keep_b = db;
  fp.T = 0;
  ASSERT_TRUE(MhcBackwardFinishReference(fp).ok());
  EXPECT_EQ(dfn, keep_fn);
  EXPECT_EQ(ds, keep_s);
  EXPECT_EQ(db, keep_b);
  // T == 0 without: zeroed.
  fp.accumulate = false;
  ASSERT_TRUE(MhcBackwardFinishReference(fp).ok());
  for (float v : dfn) ASSERT_EQ(v, 0.0f);
  for (float v : ds) ASSERT_EQ(v, 0.0f);
  for (float v : db) ASSERT_EQ(v, 0.0f);
}

TEST(MhcReference, RejectsBadShapesAndOptions) {
  std::vector<uint16_t> X(4 * 300);
  std::vector<float> fn(24 * 4 * 300), sc(3, 1.0f), bs(24), st(64);
  MhcFwdStatsParams s;
  s.X = X.data();
  s.fn = fn.data();
  s.scale = sc.data();
  s.base = bs.data();
  s.stats = st.data();
  s.T = 1;
  s.C = 300;
  EXPECT_EQ(MhcForwardStatsReference(s).code(), StatusCode::kInvalidArgument);
  s.C = 256;
  s.sinkhorn_iters = 0;
  EXPECT_EQ(MhcForwardStatsReference(s).code(), StatusCode::kInvalidArgument);
  s.sinkhorn_iters = 65;
  EXPECT_EQ(MhcForwardStatsReference(s).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(MhcBackwardFinishWorkspaceBytes(16, 300), 0);
  EXPECT_GT(MhcBackwardFinishWorkspaceBytes(16, 4096), 0);
}

}  // namespace
}  // namespace cakegrad::kernels
