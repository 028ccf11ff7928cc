// FP64 reference of the five mHC functions (SPEC.md section 1): the oracle of the CUDA tests and
// the daemon's host backend. Per token, the BF16/FP32 inputs are widened to FP64, the math runs
// in FP64 and each output is rounded once at the end.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "cakegrad/kernels/mhc.h"
#include "mhc_reference_internal.h"

namespace cakegrad::kernels {
namespace mhc_ref {
namespace {

constexpr int kN = kMhcStreams;

inline int Group(int j) { return j < 4 ? 0 : (j < 8 ? 1 : 2); }
inline double Sigmoid(double v) { return 1.0 / (1.0 + std::exp(-v)); }

// Row-softmax of L plus eps: the first matrix of the chain.
void SoftmaxPlusEps(const double* L, double hc_eps, double* soft, double* P) {
  for (int a = 0; a < kN; ++a) {
    double mx = L[4 * a];
    for (int b = 1; b < kN; ++b) mx = std::max(mx, L[4 * a + b]);
    double sum = 0.0;
    for (int b = 0; b < kN; ++b) sum += std::exp(L[4 * a + b] - mx);
    for (int b = 0; b < kN; ++b) {
      soft[4 * a + b] = std::exp(L[4 * a + b] - mx) / sum;
      P[4 * a + b] = soft[4 * a + b] + hc_eps;
    }
  }
}

// One normalization step in place: rows (sum over b) or columns (sum over a).
void NormalizeStep(bool rows, double hc_eps, double* P) {
  for (int line = 0; line < kN; ++line) {
    double sum = 0.0;
    for (int k = 0; k < kN; ++k) sum += rows ? P[4 * line + k] : P[4 * k + line];
    const double denom = sum + hc_eps;
    for (int k = 0; k < kN; ++k) (rows ? P[4 * line + k] : P[4 * k + line]) /= denom;
  }
}

// Steps after the softmax: column, then (row, column) x (iters - 1). Step s normalizes rows
// when s is odd.
inline int NumSteps(int iters) { return 2 * iters - 1; }
inline bool StepIsRow(int s) { return (s & 1) != 0; }

}  // namespace

void SinkhornForward(const double* L, double hc_eps, int iters, double* P) {
  double soft[16];
  SoftmaxPlusEps(L, hc_eps, soft, P);
  for (int s = 0; s < NumSteps(iters); ++s) NormalizeStep(StepIsRow(s), hc_eps, P);
}

void SinkhornBackward(const double* L, const double* dP, double hc_eps, int iters, double* dL) {
  const int steps = NumSteps(iters);
  // chain[s] is the input of step s; chain[steps] the result.
  std::vector<double> chain(static_cast<size_t>(steps + 1) * 16);
  double soft[16];
  SoftmaxPlusEps(L, hc_eps, soft, chain.data());
  for (int s = 0; s < steps; ++s) {
    std::copy(&chain[16 * s], &chain[16 * s] + 16, &chain[16 * (s + 1)]);
    NormalizeStep(StepIsRow(s), hc_eps, &chain[16 * (s + 1)]);
  }
  double g[16];
  std::copy(dP, dP + 16, g);
  for (int s = steps - 1; s >= 0; --s) {
    const double* in = &chain[16 * s];
    const double* out = &chain[16 * (s + 1)];
    const bool rows = StepIsRow(s);
    double gin[16];
    for (int line = 0; line < kN; ++line) {
      double sum = 0.0, dot = 0.0;
      for (int k = 0; k < kN; ++k) {
        const int idx = rows ? 4 * line + k : 4 * k + line;
        sum += in[idx];
        dot += g[idx] * out[idx];
      }
      const double denom = sum + hc_eps;
      for (int k = 0; k < kN; ++k) {
        const int idx = rows ? 4 * line + k : 4 * k + line;
        gin[idx] = (g[idx] - dot) / denom;
      }
    }
    std::copy(gin, gin + 16, g);
  }
  // P0 = softmax + eps: the eps has no gradient; softmax backward per row.
  for (int a = 0; a < kN; ++a) {
    double dot = 0.0;
    for (int b = 0; b < kN; ++b) dot += g[4 * a + b] * soft[4 * a + b];
    for (int b = 0; b < kN; ++b) dL[4 * a + b] = soft[4 * a + b] * (g[4 * a + b] - dot);
  }
}

void ForwardToken(const double* x, const double* fn, const double* scale, const double* base,
                  int64_t C, double rms_eps, double hc_eps, int iters, TokenCoeffs* out,
                  double* z_out) {
  const int64_t K = kN * C;
  double sq = 0.0;
  for (int64_t i = 0; i < K; ++i) sq += x[i] * x[i];
  out->r = 1.0 / std::sqrt(sq / static_cast<double>(K) + rms_eps);
  double l[kMhcLogits];
  for (int j = 0; j < kMhcLogits; ++j) {
    const double* row = fn + j * K;
    double z = 0.0;
    for (int64_t i = 0; i < K; ++i) z += row[i] * x[i];
    if (z_out != nullptr) z_out[j] = z;
    out->m[j] = out->r * z;
    l[j] = out->m[j] * scale[Group(j)] + base[j];
  }
  for (int a = 0; a < kN; ++a) {
    out->pre[a] = Sigmoid(l[a]) + hc_eps;
    out->post[a] = 2.0 * Sigmoid(l[4 + a]);
  }
  SinkhornForward(l + 8, hc_eps, iters, out->R);
}

void BackwardFinishToken(const double* x, const double* dy, const double* du, const double* fn,
                         const double* scale, const double* base, const double* stats,
                         const double* grad_stats, int64_t C, double hc_eps, int iters, double* dx,
                         double* dfn, double* dscale, double* dbase) {
  const int64_t K = kN * C;
  const double* m = stats;
  const double r = stats[24];
  const double* pre = stats + 25;
  const double* R = stats + 33;
  double dpre[kN] = {0, 0, 0, 0};
  for (int a = 0; a < kN; ++a) {
    for (int64_t c = 0; c < C; ++c) dpre[a] += du[c] * x[a * C + c];
  }
  double l[kMhcLogits], dl[kMhcLogits];
  for (int j = 0; j < kMhcLogits; ++j) l[j] = m[j] * scale[Group(j)] + base[j];
  for (int a = 0; a < kN; ++a) {
    const double s = Sigmoid(l[a]);
    dl[a] = dpre[a] * s * (1.0 - s);
    const double sp = Sigmoid(l[4 + a]);
    dl[4 + a] = grad_stats[a] * 2.0 * sp * (1.0 - sp);
  }
  SinkhornBackward(l + 8, grad_stats + 4, hc_eps, iters, dl + 8);
  double dz[kMhcLogits];
  double dr = 0.0;
  for (int j = 0; j < kMhcLogits; ++j) {
    dbase[j] += dl[j];
    dscale[Group(j)] += dl[j] * m[j];
    const double dm = dl[j] * scale[Group(j)];
    dz[j] = dm * r;
    dr += dm * (m[j] / r);
  }
  const double dsq = -0.5 * dr * r * r * r / static_cast<double>(K);
  for (int64_t i = 0; i < K; ++i) dx[i] = 2.0 * x[i] * dsq;
  for (int j = 0; j < kMhcLogits; ++j) {
    const double* row = fn + j * K;
    double* drow = dfn + j * K;
    const double dzj = dz[j];
    for (int64_t i = 0; i < K; ++i) {
      dx[i] += dzj * row[i];
      drow[i] += dzj * x[i];
    }
  }
  for (int a = 0; a < kN; ++a) {
    for (int64_t c = 0; c < C; ++c) {
      double v = pre[a] * du[c];
      for (int b = 0; b < kN; ++b) v += R[4 * a + b] * dy[b * C + c];
      dx[a * C + c] += v;
    }
  }
}

}  // namespace mhc_ref

namespace {

using mhc_ref::TokenCoeffs;

Status CheckShape(const char* fn_name, int64_t T, int64_t C) {
  if (T < 0) return InvalidArgument(std::string(fn_name) + ": T must be >= 0");
  if (C < kMhcMinC || C > kMhcMaxC || C % kMhcCAlign != 0) {
    return InvalidArgument(std::string(fn_name) +
                           ": C must be a multiple of 256 in [256, 16384], got " +
                           std::to_string(C));
  }
  return OkStatus();
}

Status CheckIters(const char* fn_name, int iters) {
  if (iters < 1 || iters > kMhcMaxSinkhornIters) {
    return InvalidArgument(std::string(fn_name) + ": sinkhorn_iters must be in [1, 64], got " +
                           std::to_string(iters));
  }
  return OkStatus();
}

Status CheckPtr(const char* fn_name, const void* p, const char* what) {
  if (p == nullptr) return InvalidArgument(std::string(fn_name) + ": " + what + " is null");
  return OkStatus();
}

#define MHC_RETURN_IF_ERROR(expr)            \
  do {                                       \
    Status mhc_status = (expr);              \
    if (!mhc_status.ok()) return mhc_status; \
  } while (0)

void WidenBf16(const uint16_t* src, int64_t n, double* dst) {
  for (int64_t i = 0; i < n; ++i) dst[i] = Bf16ToFloat(src[i]);
}

// forward_prepare and forward_stats share this; U may be null.
Status ForwardImpl(const char* name, const uint16_t* X, const float* fn, const float* scale,
                   const float* base, uint16_t* U, float* stats, int64_t T, int64_t C,
                   float rms_eps, float hc_eps, int iters) {
  MHC_RETURN_IF_ERROR(CheckShape(name, T, C));
  MHC_RETURN_IF_ERROR(CheckIters(name, iters));
  if (T == 0) return OkStatus();
  MHC_RETURN_IF_ERROR(CheckPtr(name, X, "X"));
  MHC_RETURN_IF_ERROR(CheckPtr(name, fn, "fn"));
  MHC_RETURN_IF_ERROR(CheckPtr(name, scale, "scale"));
  MHC_RETURN_IF_ERROR(CheckPtr(name, base, "base"));
  MHC_RETURN_IF_ERROR(CheckPtr(name, stats, "stats"));
  const int64_t K = kMhcStreams * C;
  const std::vector<double> fn64(fn, fn + kMhcLogits * K);
  const double scale64[3] = {scale[0], scale[1], scale[2]};
  const std::vector<double> base64(base, base + kMhcLogits);
  std::vector<double> x(K);
  for (int64_t t = 0; t < T; ++t) {
    WidenBf16(X + t * K, K, x.data());
    TokenCoeffs co;
    mhc_ref::ForwardToken(x.data(), fn64.data(), scale64, base64.data(), C, rms_eps, hc_eps, iters,
                          &co, nullptr);
    float* st = stats + t * kMhcStatsWidth;
    for (int j = 0; j < kMhcLogits; ++j) st[j] = static_cast<float>(co.m[j]);
    st[24] = static_cast<float>(co.r);
    for (int a = 0; a < 4; ++a) {
      st[25 + a] = static_cast<float>(co.pre[a]);
      st[29 + a] = static_cast<float>(co.post[a]);
    }
    for (int k = 0; k < 16; ++k) st[33 + k] = static_cast<float>(co.R[k]);
    for (int k = 49; k < kMhcStatsWidth; ++k) st[k] = 0.0f;
    if (U != nullptr) {
      // Like the kernels, U uses the coefficients as stored (FP32).
      for (int64_t c = 0; c < C; ++c) {
        double u = 0.0;
        for (int a = 0; a < 4; ++a) u += static_cast<double>(st[25 + a]) * x[a * C + c];
        U[t * C + c] = DoubleToBf16(u);
      }
    }
  }
  return OkStatus();
}

}  // namespace

Status MhcForwardPrepareReference(const MhcFwdPrepareParams& p) {
  if (p.T > 0) MHC_RETURN_IF_ERROR(CheckPtr("mhc_forward_prepare", p.U, "U"));
  return ForwardImpl("mhc_forward_prepare", p.X, p.fn, p.scale, p.base, p.U, p.stats, p.T, p.C,
                     p.rms_eps, p.hc_eps, p.sinkhorn_iters);
}

Status MhcForwardStatsReference(const MhcFwdStatsParams& p) {
  return ForwardImpl("mhc_forward_stats", p.X, p.fn, p.scale, p.base, nullptr, p.stats, p.T, p.C,
                     p.rms_eps, p.hc_eps, p.sinkhorn_iters);
}

Status MhcForwardFinishReference(const MhcFwdFinishParams& p) {
  const char* name = "mhc_forward_finish";
  MHC_RETURN_IF_ERROR(CheckShape(name, p.T, p.C));
  if (p.T == 0) return OkStatus();
  MHC_RETURN_IF_ERROR(CheckPtr(name, p.X, "X"));
  MHC_RETURN_IF_ERROR(CheckPtr(name, p.B, "B"));
  MHC_RETURN_IF_ERROR(CheckPtr(name, p.stats, "stats"));
  MHC_RETURN_IF_ERROR(CheckPtr(name, p.Y, "Y"));
  const int64_t C = p.C;
  for (int64_t t = 0; t < p.T; ++t) {
    const float* st = p.stats + t * kMhcStatsWidth;
    const uint16_t* x = p.X + t * 4 * C;
    const uint16_t* bt = p.B + t * C;
    uint16_t* y = p.Y + t * 4 * C;
    for (int b = 0; b < 4; ++b) {
      const double post = st[29 + b];
      for (int64_t c = 0; c < C; ++c) {
        double v = post * Bf16ToFloat(bt[c]);
        for (int a = 0; a < 4; ++a) {
          v += static_cast<double>(st[33 + 4 * a + b]) * Bf16ToFloat(x[a * C + c]);
        }
        y[b * C + c] = DoubleToBf16(v);
      }
    }
  }
  return OkStatus();
}

Status MhcBackwardPrepareReference(const MhcBwdPrepareParams& p) {
  const char* name = "mhc_backward_prepare";
  MHC_RETURN_IF_ERROR(CheckShape(name, p.T, p.C));
  if (p.T == 0) return OkStatus();
  MHC_RETURN_IF_ERROR(CheckPtr(name, p.X, "X"));
  MHC_RETURN_IF_ERROR(CheckPtr(name, p.dY, "dY"));
  MHC_RETURN_IF_ERROR(CheckPtr(name, p.B, "B"));
  MHC_RETURN_IF_ERROR(CheckPtr(name, p.stats, "stats"));
  MHC_RETURN_IF_ERROR(CheckPtr(name, p.dB, "dB"));
  MHC_RETURN_IF_ERROR(CheckPtr(name, p.grad_stats, "grad_stats"));
  const int64_t C = p.C;
  for (int64_t t = 0; t < p.T; ++t) {
    const float* st = p.stats + t * kMhcStatsWidth;
    const uint16_t* x = p.X + t * 4 * C;
    const uint16_t* dy = p.dY + t * 4 * C;
    const uint16_t* bt = p.B + t * C;
    double dpost[4] = {0, 0, 0, 0};
    double dR[16] = {};
    for (int64_t c = 0; c < C; ++c) {
      double dyc[4], xc[4];
      for (int k = 0; k < 4; ++k) {
        dyc[k] = Bf16ToFloat(dy[k * C + c]);
        xc[k] = Bf16ToFloat(x[k * C + c]);
      }
      const double bv = Bf16ToFloat(bt[c]);
      double db = 0.0;
      for (int b = 0; b < 4; ++b) {
        db += static_cast<double>(st[29 + b]) * dyc[b];
        dpost[b] += dyc[b] * bv;
        for (int a = 0; a < 4; ++a) dR[4 * a + b] += dyc[b] * xc[a];
      }
      p.dB[t * C + c] = DoubleToBf16(db);
    }
    float* gs = p.grad_stats + t * kMhcGradStatsWidth;
    for (int b = 0; b < 4; ++b) gs[b] = static_cast<float>(dpost[b]);
    for (int k = 0; k < 16; ++k) gs[4 + k] = static_cast<float>(dR[k]);
    for (int k = 20; k < kMhcGradStatsWidth; ++k) gs[k] = 0.0f;
  }
  return OkStatus();
}

Status MhcBackwardFinishReference(const MhcBwdFinishParams& p) {
  const char* name = "mhc_backward_finish";
  MHC_RETURN_IF_ERROR(CheckShape(name, p.T, p.C));
  MHC_RETURN_IF_ERROR(CheckIters(name, p.sinkhorn_iters));
  MHC_RETURN_IF_ERROR(CheckPtr(name, p.dfn, "dfn"));
  MHC_RETURN_IF_ERROR(CheckPtr(name, p.dscale, "dscale"));
  MHC_RETURN_IF_ERROR(CheckPtr(name, p.dbase, "dbase"));
  const int64_t C = p.C;
  const int64_t K = 4 * C;
  std::vector<double> dfn(kMhcLogits * K, 0.0);
  double dscale[3] = {0, 0, 0};
  double dbase[kMhcLogits] = {};
  if (p.T > 0) {
    MHC_RETURN_IF_ERROR(CheckPtr(name, p.X, "X"));
    MHC_RETURN_IF_ERROR(CheckPtr(name, p.dY, "dY"));
    MHC_RETURN_IF_ERROR(CheckPtr(name, p.dU, "dU"));
    MHC_RETURN_IF_ERROR(CheckPtr(name, p.fn, "fn"));
    MHC_RETURN_IF_ERROR(CheckPtr(name, p.scale, "scale"));
    MHC_RETURN_IF_ERROR(CheckPtr(name, p.base, "base"));
    MHC_RETURN_IF_ERROR(CheckPtr(name, p.stats, "stats"));
    MHC_RETURN_IF_ERROR(CheckPtr(name, p.grad_stats, "grad_stats"));
    MHC_RETURN_IF_ERROR(CheckPtr(name, p.dX, "dX"));
    const std::vector<double> fn64(p.fn, p.fn + kMhcLogits * K);
    const double scale64[3] = {p.scale[0], p.scale[1], p.scale[2]};
    const std::vector<double> base64(p.base, p.base + kMhcLogits);
    std::vector<double> x(K), dy(K), du(C), dx(K);
    double st[kMhcStatsWidth], gs[kMhcGradStatsWidth];
    for (int64_t t = 0; t < p.T; ++t) {
      WidenBf16(p.X + t * K, K, x.data());
      WidenBf16(p.dY + t * K, K, dy.data());
      WidenBf16(p.dU + t * C, C, du.data());
      for (int k = 0; k < kMhcStatsWidth; ++k) st[k] = p.stats[t * kMhcStatsWidth + k];
      for (int k = 0; k < kMhcGradStatsWidth; ++k) {
        gs[k] = p.grad_stats[t * kMhcGradStatsWidth + k];
      }
      mhc_ref::BackwardFinishToken(x.data(), dy.data(), du.data(), fn64.data(), scale64,
                                   base64.data(), st, gs, C, p.hc_eps, p.sinkhorn_iters, dx.data(),
                                   dfn.data(), dscale, dbase);
      for (int64_t i = 0; i < K; ++i) p.dX[t * K + i] = DoubleToBf16(dx[i]);
    }
  }
  // T == 0: zeros written, or the accumulators left as they are (adding zero).
  auto store = [&](float* out, double v) {
    *out = p.accumulate ? static_cast<float>(static_cast<double>(*out) + v) : static_cast<float>(v);
  };
  if (p.T == 0 && p.accumulate) return OkStatus();
  for (int64_t i = 0; i < kMhcLogits * K; ++i) store(&p.dfn[i], dfn[i]);
  for (int g = 0; g < 3; ++g) store(&p.dscale[g], dscale[g]);
  for (int j = 0; j < kMhcLogits; ++j) store(&p.dbase[j], dbase[j]);
  return OkStatus();
}

}  // namespace cakegrad::kernels
