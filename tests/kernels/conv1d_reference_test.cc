// The FP64 conv1d reference against central finite differences of the FP64 forward math, plus
// packing, empty documents, S == 0 and malformed cu_seqlens. Inputs are fresh random values.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "cakegrad/kernels/conv1d.h"
#include "common/test_util.h"

namespace cakegrad {
namespace {

using kernels::Bf16ToFloat;
using kernels::Conv1dBackwardReference;
using kernels::Conv1dBwdParams;
using kernels::Conv1dForwardReference;
using kernels::Conv1dFwdParams;
using kernels::DType;
using kernels::FloatToBf16;
using kernels::SiluGradPreactivation;
using kernels::StatusCode;
using testing::Bf16UlpsFrom;
using testing::RelL2;

constexpr int W = kernels::kConv1dWidth;

// One packed problem: BF16 activations, FP32 parameters (BF16-representable when the test runs the
// BF16 parameter route, so both routes see the same values).
struct Problem {
  int64_t S = 0;
  int64_t C = 0;
  std::vector<int64_t> cu;
  std::vector<uint16_t> x, dy;
  std::vector<float> w, b;
  bool has_bias = true;

  int64_t docs() const { return static_cast<int64_t>(cu.size()) - 1; }
};

Problem MakeProblem(const std::vector<int64_t>& lengths, int64_t C, bool bf16_params) {
  Problem p;
  p.C = C;
  p.cu.push_back(0);
  for (int64_t len : lengths) p.cu.push_back(p.cu.back() + len);
  p.S = p.cu.back();
  p.x = testing::RandomBf16(static_cast<size_t>(p.S * C));
  p.dy = testing::RandomBf16(static_cast<size_t>(p.S * C));
  // Weights around 0.5 keep pre near the SiLU's curved region, where the derivative matters.
  p.w = testing::RandomFloat(static_cast<size_t>(C * W), 0.0, 0.5);
  p.b = testing::RandomFloat(static_cast<size_t>(C), 0.0, 0.5);
  if (bf16_params) {
    for (auto& v : p.w) v = Bf16ToFloat(FloatToBf16(v));
    for (auto& v : p.b) v = Bf16ToFloat(FloatToBf16(v));
  }
  return p;
}

std::vector<uint16_t> ToBf16(const std::vector<float>& v) {
  std::vector<uint16_t> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = FloatToBf16(v[i]);
  return out;
}

double Silu(double v) { return v / (1.0 + std::exp(-v)); }
double SiluGrad(double v) {
  const double s = 1.0 / (1.0 + std::exp(-v));
  return s * (1.0 + v * (1.0 - s));
}

// The FP64 preactivation of the packed problem on double inputs (x may be perturbed off BF16).
std::vector<double> Pre(const Problem& p, const std::vector<double>& x,
                        const std::vector<double>& w, const std::vector<double>& b) {
  std::vector<double> pre(static_cast<size_t>(p.S * p.C));
  for (int64_t d = 0; d < p.docs(); ++d) {
    for (int64_t t = p.cu[d]; t < p.cu[d + 1]; ++t) {
      for (int64_t c = 0; c < p.C; ++c) {
        double acc = p.has_bias ? b[c] : 0.0;
        for (int k = 0; k < W; ++k) {
          const int64_t src = t - (W - 1) + k;
          if (src >= p.cu[d]) acc += w[c * W + k] * x[src * p.C + c];
        }
        pre[t * p.C + c] = acc;
      }
    }
  }
  return pre;
}

// loss = sum dy * silu(pre): its gradient is what conv1d_backward returns under "fp32".
double Loss(const Problem& p, const std::vector<double>& x, const std::vector<double>& w,
            const std::vector<double>& b) {
  const std::vector<double> pre = Pre(p, x, w, b);
  double loss = 0.0;
  for (size_t i = 0; i < pre.size(); ++i) loss += Bf16ToFloat(p.dy[i]) * Silu(pre[i]);
  return loss;
}

struct Grads {
  std::vector<uint16_t> dx;
  std::vector<double> dw, db;
};

// Runs the reference backward; parameter dtypes per the flags, outputs widened to double.
Grads RunBackward(const Problem& p, SiluGradPreactivation policy, bool bf16_params, bool bf16_grads,
                  bool int64_offsets) {
  const std::vector<uint16_t> w16 = ToBf16(p.w), b16 = ToBf16(p.b);
  std::vector<int32_t> cu32(p.cu.begin(), p.cu.end());
  Grads g;
  g.dx.assign(p.x.size(), testing::kPoisonBf16);
  std::vector<float> dw32(static_cast<size_t>(p.C * W), NAN), db32(static_cast<size_t>(p.C), NAN);
  std::vector<uint16_t> dw16(dw32.size(), testing::kPoisonBf16);
  std::vector<uint16_t> db16(db32.size(), testing::kPoisonBf16);

  Conv1dBwdParams prm;
  prm.x = p.x.data();
  prm.weight = bf16_params ? static_cast<const void*>(w16.data()) : p.w.data();
  prm.weight_dtype = bf16_params ? DType::kBF16 : DType::kFP32;
  prm.bias = !p.has_bias   ? nullptr
             : bf16_params ? static_cast<const void*>(b16.data())
                           : p.b.data();
  prm.bias_dtype = prm.weight_dtype;
  prm.cu_seqlens = int64_offsets ? static_cast<const void*>(p.cu.data()) : cu32.data();
  prm.seqlens_dtype = int64_offsets ? DType::kINT64 : DType::kINT32;
  prm.dy = p.dy.data();
  prm.policy = policy;
  prm.dx = g.dx.data();
  prm.dweight = bf16_grads ? static_cast<void*>(dw16.data()) : dw32.data();
  prm.dweight_dtype = bf16_grads ? DType::kBF16 : DType::kFP32;
  prm.dbias = !p.has_bias ? nullptr : bf16_grads ? static_cast<void*>(db16.data()) : db32.data();
  prm.dbias_dtype = prm.dweight_dtype;
  prm.S = p.S;
  prm.C = p.C;
  prm.num_docs = p.docs();
  const kernels::Status s = Conv1dBackwardReference(prm);
  EXPECT_TRUE(s.ok()) << s.message();
  if (bf16_grads) {
    g.dw = testing::Bf16ToDouble(dw16);
    if (p.has_bias) g.db = testing::Bf16ToDouble(db16);
  } else {
    g.dw = testing::ToDouble(dw32);
    if (p.has_bias) g.db = testing::ToDouble(db32);
  }
  return g;
}

std::vector<uint16_t> RunForward(const Problem& p) {
  std::vector<uint16_t> y(p.x.size(), testing::kPoisonBf16);
  Conv1dFwdParams prm;
  prm.x = p.x.data();
  prm.weight = p.w.data();
  prm.bias = p.has_bias ? p.b.data() : nullptr;
  prm.cu_seqlens = p.cu.data();
  prm.seqlens_dtype = DType::kINT64;
  prm.y = y.data();
  prm.S = p.S;
  prm.C = p.C;
  prm.num_docs = p.docs();
  const kernels::Status s = Conv1dForwardReference(prm);
  EXPECT_TRUE(s.ok()) << s.message();
  return y;
}

struct Route {
  bool bf16_params;
  bool bf16_grads;
  bool int64_offsets;
  bool has_bias;
};

class Conv1dReferenceFd : public ::testing::TestWithParam<Route> {};

// Every gradient of the "fp32" policy against central differences of the FP64 loss.
TEST_P(Conv1dReferenceFd, MatchesFiniteDifferences) {
  const Route r = GetParam();
  // An empty document, a 1-token one, one shorter than the kernel width and longer ones.
  Problem p = MakeProblem({7, 0, 1, 2, 13, 5}, 3, r.bf16_params);
  p.has_bias = r.has_bias;
  const Grads g =
      RunBackward(p, SiluGradPreactivation::kFP32, r.bf16_params, r.bf16_grads, r.int64_offsets);
  std::vector<double> x = testing::Bf16ToDouble(p.x);
  std::vector<double> w = testing::ToDouble(p.w), b = testing::ToDouble(p.b);

  auto central = [&](double* v) {
    const double h = 1e-5 * std::max(1.0, std::fabs(*v));
    const double keep = *v;
    *v = keep + h;
    const double up = Loss(p, x, w, b);
    *v = keep - h;
    const double down = Loss(p, x, w, b);
    *v = keep;
    return (up - down) / (2 * h);
  };
  // BF16 outputs are one rounding away from exact; FP32 outputs far closer.
  const double grad_tol = r.bf16_grads ? 1.0 / 128 : 1e-6;
  for (size_t i = 0; i < x.size(); ++i) {
    const double fd = central(&x[i]);
    const double dx = Bf16ToFloat(g.dx[i]);
    EXPECT_TRUE(Bf16UlpsFrom(dx, fd) <= 1.0 || std::fabs(dx - fd) < 1e-7)
        << "dx[" << i / p.C << ", " << i % p.C << "] = " << dx << ", finite difference " << fd;
  }
  for (size_t i = 0; i < w.size(); ++i) {
    const double fd = central(&w[i]);
    EXPECT_NEAR(g.dw[i], fd, grad_tol * (1e-2 + std::fabs(fd)))
        << "dweight[" << i / W << ", " << i % W << "]";
  }
  if (p.has_bias) {
    for (size_t c = 0; c < b.size(); ++c) {
      const double fd = central(&b[c]);
      EXPECT_NEAR(g.db[c], fd, grad_tol * (1e-2 + std::fabs(fd))) << "dbias[" << c << "]";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Routes, Conv1dReferenceFd,
                         ::testing::Values(Route{false, false, false, true},
                                           Route{false, false, true, false},
                                           Route{true, false, true, true},
                                           Route{true, true, false, true},
                                           Route{false, true, true, false}));

// "bf16" evaluates SiLU' at bf16(pre): checked against a direct per-element evaluation, and it must
// differ from "fp32" (so the policy is not ignored).
TEST(Conv1dReference, Bf16PolicyRoundsThePreactivation) {
  Problem p = MakeProblem({40, 3, 0, 21}, 5, false);
  const Grads g = RunBackward(p, SiluGradPreactivation::kBF16, false, false, false);
  const Grads g32 = RunBackward(p, SiluGradPreactivation::kFP32, false, false, false);
  const std::vector<double> pre =
      Pre(p, testing::Bf16ToDouble(p.x), testing::ToDouble(p.w), testing::ToDouble(p.b));
  std::vector<double> dpre(pre.size());
  for (size_t i = 0; i < pre.size(); ++i) {
    const double rounded = Bf16ToFloat(kernels::DoubleToBf16(pre[i]));
    dpre[i] = Bf16ToFloat(p.dy[i]) * SiluGrad(rounded);
  }
  std::vector<double> dw(p.w.size(), 0.0), db(p.b.size(), 0.0);
  for (int64_t d = 0; d < p.docs(); ++d) {
    for (int64_t t = p.cu[d]; t < p.cu[d + 1]; ++t) {
      for (int64_t c = 0; c < p.C; ++c) {
        double dx = 0.0;
        for (int k = 0; k < W; ++k) {
          const int64_t ahead = t + (W - 1) - k;
          if (ahead < p.cu[d + 1]) dx += p.w[c * W + k] * dpre[ahead * p.C + c];
          const int64_t behind = t - (W - 1) + k;
          if (behind >= p.cu[d]) {
            dw[c * W + k] += dpre[t * p.C + c] * Bf16ToFloat(p.x[behind * p.C + c]);
          }
        }
        db[c] += dpre[t * p.C + c];
        EXPECT_LE(Bf16UlpsFrom(Bf16ToFloat(g.dx[t * p.C + c]), dx), 0.5 + 1e-4)
            << "dx[" << t << ", " << c << "]";
      }
    }
  }
  EXPECT_LE(RelL2(g.dw, dw), 1e-7);
  EXPECT_LE(RelL2(g.db, db), 1e-7);
  EXPECT_GT(RelL2(g.dw, g32.dw), 1e-6) << "the bf16 policy changed nothing";
}

TEST(Conv1dReference, ForwardIsSiluOfPreactivation) {
  Problem p = MakeProblem({9, 0, 1, 30}, 6, false);
  const std::vector<uint16_t> y = RunForward(p);
  const std::vector<double> pre =
      Pre(p, testing::Bf16ToDouble(p.x), testing::ToDouble(p.w), testing::ToDouble(p.b));
  std::vector<double> exact(pre.size());
  for (size_t i = 0; i < pre.size(); ++i) {
    exact[i] = Silu(pre[i]);
    EXPECT_LE(Bf16UlpsFrom(Bf16ToFloat(y[i]), exact[i]), 0.5 + 1e-4) << "y[" << i << "]";
  }
  EXPECT_LE(RelL2(testing::Bf16ToDouble(y), exact), 3e-3);
}

// A hand-computed case: one channel, one document, weight [1, 2, 3, 4], no bias.
TEST(Conv1dReference, ForwardHandComputed) {
  Problem p;
  p.S = 5;
  p.C = 1;
  p.cu = {0, 5};
  p.x = ToBf16({1.0f, -2.0f, 0.5f, 0.25f, 3.0f});
  p.w = {1.0f, 2.0f, 3.0f, 4.0f};
  p.b = {0.0f};
  p.has_bias = false;
  const std::vector<uint16_t> y = RunForward(p);
  // pre = 4*x[t] + 3*x[t-1] + 2*x[t-2] + 1*x[t-3].
  const double pre[5] = {4.0, -8.0 + 3.0, 2.0 - 6.0 + 2.0, 1.0 + 1.5 - 4.0 + 1.0,
                         12.0 + 0.75 + 1.0 - 2.0};
  for (int t = 0; t < 5; ++t) {
    EXPECT_EQ(y[t], kernels::DoubleToBf16(Silu(pre[t]))) << "y[" << t << "]";
  }
}

// Each document computed alone gives the same dx/y bits, and the parameter gradients add up.
TEST(Conv1dReference, DocumentsDoNotLeak) {
  const std::vector<int64_t> lengths = {11, 1, 0, 4, 2, 17};
  Problem packed = MakeProblem(lengths, 4, false);
  const Grads g = RunBackward(packed, SiluGradPreactivation::kBF16, false, false, true);
  const std::vector<uint16_t> y = RunForward(packed);
  std::vector<double> dw_sum(packed.w.size(), 0.0), db_sum(packed.b.size(), 0.0);
  for (int64_t d = 0; d < packed.docs(); ++d) {
    Problem one = packed;
    const int64_t lo = packed.cu[d] * packed.C, hi = packed.cu[d + 1] * packed.C;
    one.S = packed.cu[d + 1] - packed.cu[d];
    one.cu = {0, one.S};
    one.x.assign(packed.x.begin() + lo, packed.x.begin() + hi);
    one.dy.assign(packed.dy.begin() + lo, packed.dy.begin() + hi);
    const Grads go = RunBackward(one, SiluGradPreactivation::kBF16, false, false, true);
    const std::vector<uint16_t> yo = RunForward(one);
    for (int64_t i = 0; i < hi - lo; ++i) {
      ASSERT_EQ(go.dx[i], g.dx[lo + i]) << "doc " << d << " element " << i;
      ASSERT_EQ(yo[i], y[lo + i]) << "doc " << d << " element " << i;
    }
    for (size_t i = 0; i < dw_sum.size(); ++i) dw_sum[i] += go.dw[i];
    for (size_t i = 0; i < db_sum.size(); ++i) db_sum[i] += go.db[i];
  }
  EXPECT_LE(RelL2(g.dw, dw_sum), 1e-6);
  EXPECT_LE(RelL2(g.db, db_sum), 1e-6);
}

// S == 0 (no documents, or only empty ones): zero gradients, nothing else touched.
TEST(Conv1dReference, EmptyInputZeroesParameterGradients) {
  for (const std::vector<int64_t>& lengths :
       {std::vector<int64_t>{}, std::vector<int64_t>{0, 0, 0}}) {
    Problem p = MakeProblem(lengths, 7, false);
    ASSERT_EQ(p.S, 0);
    for (bool bf16_grads : {false, true}) {
      const Grads g = RunBackward(p, SiluGradPreactivation::kFP32, false, bf16_grads, false);
      for (double v : g.dw) EXPECT_EQ(v, 0.0);
      for (double v : g.db) EXPECT_EQ(v, 0.0);
    }
    EXPECT_TRUE(RunForward(p).empty());
  }
}

// Malformed offsets are rejected before any output is written.
TEST(Conv1dReference, RejectsMalformedCuSeqlens) {
  Problem p = MakeProblem({6, 5}, 3, false);
  const std::vector<std::vector<int64_t>> bad = {
      {1, 6, 11}, {0, 7, 6, 11}, {0, 6, 10}, {0, 6, 12}, {0, -1, 11}};
  for (const auto& cu : bad) {
    std::vector<uint16_t> dx(p.x.size(), testing::kPoisonBf16), y = dx;
    std::vector<float> dw(p.w.size(), 123.0f), db(p.b.size(), 123.0f);
    Conv1dBwdParams b;
    b.x = p.x.data();
    b.weight = p.w.data();
    b.bias = p.b.data();
    b.cu_seqlens = cu.data();
    b.seqlens_dtype = DType::kINT64;
    b.dy = p.dy.data();
    b.dx = dx.data();
    b.dweight = dw.data();
    b.dbias = db.data();
    b.S = p.S;
    b.C = p.C;
    b.num_docs = static_cast<int64_t>(cu.size()) - 1;
    const kernels::Status s = Conv1dBackwardReference(b);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find("cu_seqlens"), std::string::npos) << s.message();
    for (uint16_t v : dx) ASSERT_EQ(v, testing::kPoisonBf16);
    for (float v : dw) ASSERT_EQ(v, 123.0f);
    for (float v : db) ASSERT_EQ(v, 123.0f);

    Conv1dFwdParams f;
    f.x = p.x.data();
    f.weight = p.w.data();
    f.cu_seqlens = cu.data();
    f.seqlens_dtype = DType::kINT64;
    f.y = y.data();
    f.S = p.S;
    f.C = p.C;
    f.num_docs = b.num_docs;
    EXPECT_EQ(Conv1dForwardReference(f).code(), StatusCode::kInvalidArgument);
    for (uint16_t v : y) ASSERT_EQ(v, testing::kPoisonBf16);
  }
}

TEST(Conv1dReference, RejectsBadArguments) {
  Problem p = MakeProblem({6}, 2, false);
  std::vector<uint16_t> dx(p.x.size());
  std::vector<float> dw(p.w.size()), db(p.b.size());
  Conv1dBwdParams b;
  b.x = p.x.data();
  b.weight = p.w.data();
  b.cu_seqlens = p.cu.data();
  b.seqlens_dtype = DType::kINT64;
  b.dy = p.dy.data();
  b.dx = dx.data();
  b.dweight = dw.data();
  b.S = p.S;
  b.C = p.C;
  b.num_docs = 1;
  ASSERT_TRUE(Conv1dBackwardReference(b).ok());
  Conv1dBwdParams no_bias_but_dbias = b;
  no_bias_but_dbias.dbias = db.data();
  EXPECT_EQ(Conv1dBackwardReference(no_bias_but_dbias).code(), StatusCode::kInvalidArgument);
  Conv1dBwdParams bias_without_dbias = b;
  bias_without_dbias.bias = p.b.data();
  EXPECT_EQ(Conv1dBackwardReference(bias_without_dbias).code(), StatusCode::kInvalidArgument);
  Conv1dBwdParams bad_dtype = b;
  bad_dtype.weight_dtype = DType::kINT32;
  EXPECT_EQ(Conv1dBackwardReference(bad_dtype).code(), StatusCode::kInvalidArgument);
  Conv1dBwdParams bad_offsets = b;
  bad_offsets.seqlens_dtype = DType::kFP32;
  EXPECT_EQ(Conv1dBackwardReference(bad_offsets).code(), StatusCode::kInvalidArgument);
  Conv1dBwdParams zero_c = b;
  zero_c.C = 0;
  EXPECT_EQ(Conv1dBackwardReference(zero_c).code(), StatusCode::kInvalidArgument);
}

// The host backend serves real sizes: S * C = 1e7 must stay well inside a few seconds.
TEST(Conv1dReference, BackwardOfTenMillionElementsIsFast) {
  Problem p = MakeProblem({800, 1641}, 4096, false);
  ASSERT_EQ(p.S * p.C, 2441 * 4096);
  const auto t0 = std::chrono::steady_clock::now();
  const Grads g = RunBackward(p, SiluGradPreactivation::kBF16, false, false, false);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(seconds, 5.0);
  RecordProperty("backward_seconds", std::to_string(seconds));
  EXPECT_NE(g.dx[0], testing::kPoisonBf16);
}

}  // namespace
}  // namespace cakegrad
