// The FP64 KDA reference against central finite differences of its own forward (every input,
// fresh random values each run), a hand-computed 1-token case, and its validation.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "cakegrad/kernels/kda.h"
#include "common/test_util.h"
#include "reference/kda_reference_internal.h"

namespace cakegrad::kernels {
namespace {

using kda_ref::Grads;
using kda_ref::Problem;
using testing::Rng;

constexpr int64_t kD = kKdaHeadDim;

std::vector<double> Normal(size_t n, double stddev) {
  std::normal_distribution<double> dist(0.0, stddev);
  std::vector<double> out(n);
  for (auto& x : out) x = dist(Rng());
  return out;
}

std::vector<double> Uniform(size_t n, double lo, double hi) {
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> out(n);
  for (auto& x : out) x = dist(Rng());
  return out;
}

Problem RandomProblem(std::vector<int64_t> cu, int64_t H, bool with_s0, double scale,
                      double lower_bound) {
  Problem p;
  p.cu = std::move(cu);
  p.total_tokens = p.cu.back();
  p.H = H;
  const size_t tok = p.total_tokens * H * kD;
  const int64_t N = static_cast<int64_t>(p.cu.size()) - 1;
  p.q = Normal(tok, 1.0);
  p.k = Normal(tok, 1.0);
  p.v = Normal(tok, 1.0);
  p.g = Normal(tok, 1.0);
  p.beta = Normal(p.total_tokens * H, 1.0);
  p.A_log = Uniform(H, -1.0, 1.0);
  p.dt_bias = Normal(H * kD, 0.5);
  if (with_s0) p.s0 = Normal(N * H * kD * kD, 0.1);
  p.scale = scale;
  p.lower_bound = lower_bound;
  return p;
}

double Loss(const Problem& p, const std::vector<double>& d_o, const std::vector<double>& dfs) {
  std::vector<double> o, fs;
  kda_ref::Forward(p, &o, &fs);
  double l = 0.0;
  for (size_t i = 0; i < o.size(); ++i) l += d_o[i] * o[i];
  for (size_t i = 0; i < fs.size(); ++i) l += dfs[i] * fs[i];
  return l;
}

// Checks `samples` random entries (all of them when the tensor is smaller) of one input.
void CheckInput(const std::string& name, Problem* p, std::vector<double>* x,
                const std::vector<double>& grad, const std::vector<double>& d_o,
                const std::vector<double>& dfs, int samples) {
  ASSERT_EQ(x->size(), grad.size()) << name;
  std::vector<size_t> idx(x->size());
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
  std::shuffle(idx.begin(), idx.end(), Rng());
  if (static_cast<int>(idx.size()) > samples) idx.resize(samples);
  double num = 0.0, den = 0.0;
  for (size_t i : idx) {
    const double x0 = (*x)[i];
    const double h = 1e-4 * std::max(1.0, std::fabs(x0));
    (*x)[i] = x0 + h;
    const double lp = Loss(*p, d_o, dfs);
    (*x)[i] = x0 - h;
    const double lm = Loss(*p, d_o, dfs);
    (*x)[i] = x0;
    const double fd = (lp - lm) / (2.0 * h);
    EXPECT_NEAR(grad[i], fd, 1e-6 + 1e-4 * std::fabs(fd)) << name << "[" << i << "]";
    num += (grad[i] - fd) * (grad[i] - fd);
    den += fd * fd;
  }
  EXPECT_GT(den, 0.0) << name << ": sampled gradients are all zero";
  EXPECT_LE(std::sqrt(num / den), 1e-5) << name;
}

void CheckAllGradients(std::vector<int64_t> cu, int64_t H, double scale, double lower_bound,
                       int samples) {
  Problem p = RandomProblem(std::move(cu), H, /*with_s0=*/true, scale, lower_bound);
  const int64_t N = static_cast<int64_t>(p.cu.size()) - 1;
  const std::vector<double> d_o = Normal(p.total_tokens * H * kD, 1.0);
  const std::vector<double> dfs = Normal(N * H * kD * kD, 1.0);
  Grads g;
  kda_ref::Backward(p, d_o, dfs, &g);
  CheckInput("q", &p, &p.q, g.dq, d_o, dfs, samples);
  CheckInput("k", &p, &p.k, g.dk, d_o, dfs, samples);
  CheckInput("v", &p, &p.v, g.dv, d_o, dfs, samples);
  CheckInput("g", &p, &p.g, g.dg, d_o, dfs, samples);
  CheckInput("beta", &p, &p.beta, g.dbeta, d_o, dfs, samples);
  CheckInput("A_log", &p, &p.A_log, g.dA_log, d_o, dfs, samples);
  CheckInput("dt_bias", &p, &p.dt_bias, g.ddt_bias, d_o, dfs, samples);
  CheckInput("initial_state", &p, &p.s0, g.ds0, d_o, dfs, samples);
  // dA_log's terms, one a token and key channel: dg (g + dt_bias), since the gate's argument
  // exp(A_log) (g + dt_bias) is linear in g with slope exp(A_log).
  ASSERT_EQ(g.dA_log_terms.size(), static_cast<size_t>(H));
  for (int64_t h = 0; h < H; ++h) {
    double sum = 0.0, abs_sum = 0.0;
    for (int64_t t = 0; t < p.total_tokens; ++t) {
      for (int64_t i = 0; i < kD; ++i) {
        const int64_t e = (t * H + h) * kD + i;
        const double term = g.dg[e] * (p.g[e] + p.dt_bias[h * kD + i]);
        sum += term;
        abs_sum += std::fabs(term);
      }
    }
    EXPECT_NEAR(g.dA_log[h], sum, 1e-9 * abs_sum) << "head " << h;
    EXPECT_NEAR(g.dA_log_terms[h], abs_sum, 1e-12 * abs_sum) << "head " << h;
    EXPECT_GT(g.dA_log_terms[h], 0.0) << "head " << h;
  }
}

TEST(KdaReference, GradientsMatchFiniteDifferencesOneDoc) {
  CheckAllGradients({0, 9}, 2, 1.0 / std::sqrt(128.0), -5.0, 24);
}

TEST(KdaReference, GradientsMatchFiniteDifferencesOtherScaleAndBound) {
  CheckAllGradients({0, 6}, 1, 0.3, -1.5, 24);
}

TEST(KdaReference, GradientsMatchFiniteDifferencesBatch) {
  CheckAllGradients({0, 5, 10}, 2, 1.0 / std::sqrt(128.0), -5.0, 16);
}

TEST(KdaReference, GradientsMatchFiniteDifferencesPackedWithEmptyAndOneTokenDocs) {
  CheckAllGradients({0, 0, 1, 7, 7, 16}, 2, 1.0 / std::sqrt(128.0), -5.0, 20);
}

TEST(KdaReference, GradientsMatchFiniteDifferencesAcrossCheckpoints) {
  // 150 tokens cross the reference's 64-token checkpoints twice.
  CheckAllGradients({0, 150}, 1, 1.0 / std::sqrt(128.0), -5.0, 6);
}

TEST(KdaReference, OneTokenFromZeroStateByHand) {
  Problem p = RandomProblem({0, 1}, 1, /*with_s0=*/false, 0.25, -5.0);
  std::vector<double> o, fs;
  kda_ref::Forward(p, &o, &fs);
  double nq = 0.0, nk = 0.0, qk = 0.0;
  for (int64_t i = 0; i < kD; ++i) {
    nq += p.q[i] * p.q[i];
    nk += p.k[i] * p.k[i];
    qk += p.q[i] * p.k[i];
  }
  const double qhkh = qk / std::sqrt((nq + 1e-6) * (nk + 1e-6));
  const double bt = 1.0 / (1.0 + std::exp(-p.beta[0]));
  for (int64_t r = 0; r < kD; ++r) {
    // S = bt v kh^T (decay of zero is zero), so o = scale * bt * v * (kh . qh).
    EXPECT_NEAR(o[r], 0.25 * bt * p.v[r] * qhkh, 1e-12) << r;
    EXPECT_NEAR(fs[r * kD + 7], bt * p.v[r] * p.k[7] / std::sqrt(nk + 1e-6), 1e-12) << r;
  }
}

// The BF16 entry points: T == 0, validation, and agreement with the FP64 core.
struct Bf16Case {
  int64_t B, T, H;
  std::vector<int64_t> cu;  // empty: none
  std::vector<uint16_t> q, k, v, g, beta, d_o;
  std::vector<float> A_log, dt_bias, s0, dfs;
};

Bf16Case MakeBf16Case(int64_t B, int64_t T, int64_t H, std::vector<int64_t> cu) {
  Bf16Case c{B, T, H, std::move(cu), {}, {}, {}, {}, {}, {}, {}, {}, {}, {}};
  const int64_t N = c.cu.empty() ? B : static_cast<int64_t>(c.cu.size()) - 1;
  const size_t tok = B * T * H * kD;
  c.q = testing::RandomBf16(tok);
  c.k = testing::RandomBf16(tok);
  c.v = testing::RandomBf16(tok);
  c.g = testing::RandomBf16(tok);
  c.beta = testing::RandomBf16(B * T * H);
  c.d_o = testing::RandomBf16(tok);
  c.A_log = testing::UniformFloat(H, -1.0, 1.0);
  c.dt_bias = testing::RandomFloat(H * kD, 0.0, 0.5);
  c.s0 = testing::RandomFloat(N * H * kD * kD, 0.0, 0.1);
  c.dfs = testing::RandomFloat(N * H * kD * kD);
  return c;
}

KdaBwdParams BwdParams(Bf16Case& c, std::vector<uint16_t>* tok_out, std::vector<uint16_t>* dbeta,
                       std::vector<float>* dA, std::vector<float>* ddt, std::vector<float>* ds0) {
  const size_t tok = c.B * c.T * c.H * kD;
  tok_out->assign(4 * tok + 1, 0xFFFF);
  dbeta->assign(c.B * c.T * c.H, 0xFFFF);
  dA->assign(c.H, NAN);
  ddt->assign(c.H * kD, NAN);
  ds0->assign(c.s0.size(), NAN);
  KdaBwdParams p;
  p.q = c.q.data();
  p.k = c.k.data();
  p.v = c.v.data();
  p.g = c.g.data();
  p.beta = c.beta.data();
  p.A_log = c.A_log.data();
  p.dt_bias = c.dt_bias.data();
  p.initial_state = c.s0.data();
  p.d_o = c.d_o.data();
  p.dfinal_state = c.dfs.data();
  p.cu_seqlens = c.cu.empty() ? nullptr : c.cu.data();
  p.seqlens_dtype = DType::kINT64;
  p.dq = tok_out->data();
  p.dk = tok_out->data() + tok;
  p.dv = tok_out->data() + 2 * tok;
  p.dg = tok_out->data() + 3 * tok;
  p.dbeta = dbeta->data();
  p.dA_log = dA->data();
  p.ddt_bias = ddt->data();
  p.dinitial_state = ds0->data();
  p.B = c.B;
  p.T = c.T;
  p.H = c.H;
  p.num_docs = c.cu.empty() ? 0 : static_cast<int64_t>(c.cu.size()) - 1;
  return p;
}

TEST(KdaReference, EmptySequenceKeepsStatesAndZeroesParameterGradients) {
  Bf16Case c = MakeBf16Case(3, 0, 2, {});
  std::vector<uint16_t> tok, dbeta;
  std::vector<float> dA, ddt, ds0;
  KdaBwdParams bp = BwdParams(c, &tok, &dbeta, &dA, &ddt, &ds0);
  ASSERT_TRUE(KdaBackwardReference(bp).ok());
  EXPECT_EQ(ds0, c.dfs);
  for (float x : dA) EXPECT_EQ(x, 0.0f);
  for (float x : ddt) EXPECT_EQ(x, 0.0f);

  KdaFwdParams fp;
  std::vector<float> fs(c.s0.size(), NAN);
  fp.A_log = c.A_log.data();
  fp.dt_bias = c.dt_bias.data();
  fp.initial_state = c.s0.data();
  fp.final_state = fs.data();
  fp.B = 3;
  fp.T = 0;
  fp.H = 2;
  ASSERT_TRUE(KdaForwardReference(fp).ok());
  EXPECT_EQ(fs, c.s0);
}

TEST(KdaReference, Bf16EntryPointsMatchTheFp64Core) {
  Bf16Case c = MakeBf16Case(1, 12, 2, {0, 3, 3, 4, 12});
  std::vector<uint16_t> tok, dbeta;
  std::vector<float> dA, ddt, ds0;
  KdaBwdParams bp = BwdParams(c, &tok, &dbeta, &dA, &ddt, &ds0);
  ASSERT_TRUE(KdaBackwardReference(bp).ok());

  Problem p;
  p.cu = c.cu;
  p.total_tokens = 12;
  p.H = 2;
  p.q = testing::Bf16ToDouble(c.q);
  p.k = testing::Bf16ToDouble(c.k);
  p.v = testing::Bf16ToDouble(c.v);
  p.g = testing::Bf16ToDouble(c.g);
  p.beta = testing::Bf16ToDouble(c.beta);
  p.A_log = testing::ToDouble(c.A_log);
  p.dt_bias = testing::ToDouble(c.dt_bias);
  p.s0 = testing::ToDouble(c.s0);
  p.scale = kKdaDefaultScale;
  p.lower_bound = kKdaDefaultLowerBound;
  Grads g;
  kda_ref::Backward(p, testing::Bf16ToDouble(c.d_o), testing::ToDouble(c.dfs), &g);
  const size_t n = 12 * 2 * kD;
  for (size_t i = 0; i < n; ++i) {
    ASSERT_EQ(tok[i], DoubleToBf16(g.dq[i])) << i;
    ASSERT_EQ(tok[3 * n + i], DoubleToBf16(g.dg[i])) << i;
  }
  for (size_t i = 0; i < dA.size(); ++i) EXPECT_EQ(dA[i], static_cast<float>(g.dA_log[i]));
  for (size_t i = 0; i < ds0.size(); ++i) ASSERT_EQ(ds0[i], static_cast<float>(g.ds0[i])) << i;

  std::vector<uint16_t> o(n, 0xFFFF);
  std::vector<float> fs(c.s0.size(), NAN);
  KdaFwdParams fp;
  fp.q = c.q.data();
  fp.k = c.k.data();
  fp.v = c.v.data();
  fp.g = c.g.data();
  fp.beta = c.beta.data();
  fp.A_log = c.A_log.data();
  fp.dt_bias = c.dt_bias.data();
  fp.initial_state = c.s0.data();
  fp.cu_seqlens = c.cu.data();
  fp.o = o.data();
  fp.final_state = fs.data();
  fp.B = 1;
  fp.T = 12;
  fp.H = 2;
  fp.num_docs = 4;
  ASSERT_TRUE(KdaForwardReference(fp).ok());
  std::vector<double> o64, fs64;
  kda_ref::Forward(p, &o64, &fs64);
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(o[i], DoubleToBf16(o64[i])) << i;
  for (size_t i = 0; i < fs.size(); ++i) ASSERT_EQ(fs[i], static_cast<float>(fs64[i])) << i;
}

TEST(KdaReference, RejectsMalformedArguments) {
  Bf16Case c = MakeBf16Case(1, 6, 1, {0, 2, 6});
  std::vector<uint16_t> tok, dbeta;
  std::vector<float> dA, ddt, ds0;
  KdaBwdParams bp = BwdParams(c, &tok, &dbeta, &dA, &ddt, &ds0);
  ASSERT_TRUE(KdaBackwardReference(bp).ok());

  const std::vector<std::vector<int64_t>> bad = {{1, 2, 6}, {0, 4, 2}, {0, 2, 5}, {0, 2, 7}};
  for (const auto& cu : bad) {
    c.cu = cu;
    bp.cu_seqlens = c.cu.data();
    const Status st = KdaBackwardReference(bp);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << cu[0] << "," << cu[1] << "," << cu[2];
  }
  c.cu = {0, 2, 6};
  bp.cu_seqlens = c.cu.data();
  const std::vector<int32_t> cu32 = {0, 5, 2};
  bp.cu_seqlens = cu32.data();
  bp.seqlens_dtype = DType::kINT32;
  EXPECT_EQ(KdaBackwardReference(bp).code(), StatusCode::kInvalidArgument);
  bp.cu_seqlens = c.cu.data();
  bp.seqlens_dtype = DType::kINT64;
  bp.lower_bound = 0.0f;
  EXPECT_EQ(KdaBackwardReference(bp).code(), StatusCode::kInvalidArgument);
  bp.lower_bound = -5.5f;
  EXPECT_EQ(KdaBackwardReference(bp).code(), StatusCode::kInvalidArgument);
  bp.lower_bound = -5.0f;
  bp.scale = 0.0f;
  EXPECT_EQ(KdaBackwardReference(bp).code(), StatusCode::kInvalidArgument);
  bp.scale = 1.0f;
  bp.B = 2;
  bp.T = 3;
  EXPECT_EQ(KdaBackwardReference(bp).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace cakegrad::kernels
