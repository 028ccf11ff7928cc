// The chunked KDA backward's algorithm, step for step as kernels/cuda/kda_chunked_backward.cu
// computes it (record, checkpoint-mode forward, reverse chain, per-chunk pass with the stable
// gate assembly, reduce), in FP64 on the host, against the FP64 sequential reference. It checks
// the equations, signs and index ranges of the CUDA version without a GPU (not its precision or
// its synchronization). Keep it in step with the kernel.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "reference/kda_reference_internal.h"

namespace cakegrad::kernels::kda_ref {
namespace {

constexpr int C = 64;
constexpr int D = 128;

using Mat = std::vector<double>;  // row-major

double Sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

struct Chunk {
  int len = 0;
  int64_t t0 = 0;
  Mat kraw, qraw, G, dO;  // [C][D]
  std::vector<double> rk, rq, bt;
  Mat P, A, Tinv, W, Uv, M, QG, Kdec;  // [C][C] or [C][D]
  std::vector<double> gc;              // [D]
};

// The chunk's record quantities in FP64 (the preparation kernel's outputs, plus P and Tinv).
Chunk Prepare(const Problem& p, const std::vector<double>& d_o, int64_t t0, int len, int64_t h) {
  const int64_t H = p.H;
  Chunk c;
  c.len = len;
  c.t0 = t0;
  c.kraw.assign(C * D, 0.0);
  c.qraw.assign(C * D, 0.0);
  c.G.assign(C * D, 0.0);
  c.dO.assign(C * D, 0.0);
  c.rk.assign(C, 0.0);
  c.rq.assign(C, 0.0);
  c.bt.assign(C, 0.0);
  const double exp_a = std::exp(p.A_log[h]);
  for (int t = 0; t < len; ++t) {
    const int64_t base = ((t0 + t) * H + h) * D;
    double sq = 0, sk = 0;
    for (int k = 0; k < D; ++k) {
      c.qraw[t * D + k] = p.q[base + k];
      c.kraw[t * D + k] = p.k[base + k];
      c.dO[t * D + k] = d_o[base + k];
      sq += p.q[base + k] * p.q[base + k];
      sk += p.k[base + k] * p.k[base + k];
      c.G[t * D + k] = p.lower_bound * Sigmoid(exp_a * (p.g[base + k] + p.dt_bias[h * D + k]));
    }
    c.rq[t] = 1.0 / std::sqrt(sq + 1e-6);
    c.rk[t] = 1.0 / std::sqrt(sk + 1e-6);
    c.bt[t] = Sigmoid(p.beta[(t0 + t) * H + h]);
  }
  for (int k = 0; k < D; ++k) {
    for (int t = 1; t < C; ++t) c.G[t * D + k] += c.G[(t - 1) * D + k];
  }
  auto kh = [&](int t, int k) { return c.kraw[t * D + k] * c.rk[t]; };
  auto qh = [&](int t, int k) { return c.qraw[t * D + k] * c.rq[t]; };
  c.P.assign(C * C, 0.0);
  c.A.assign(C * C, 0.0);
  c.M.assign(C * C, 0.0);
  for (int t = 0; t < C; ++t) {
    for (int i = 0; i <= t; ++i) {
      double pp = 0, mm = 0;
      for (int k = 0; k < D; ++k) {
        const double e = std::exp(c.G[t * D + k] - c.G[i * D + k]);
        pp += kh(t, k) * kh(i, k) * e;
        mm += qh(t, k) * kh(i, k) * e;
      }
      if (i < t) {
        c.P[t * C + i] = pp;
        c.A[t * C + i] = c.bt[t] * pp;
      }
      c.M[t * C + i] = mm;
    }
  }
  // Tinv = (I + A)^-1 by forward substitution.
  c.Tinv.assign(C * C, 0.0);
  for (int j = 0; j < C; ++j) {
    for (int i = 0; i < C; ++i) {
      double x = i == j ? 1.0 : 0.0;
      for (int l = 0; l < i; ++l) x -= c.A[i * C + l] * c.Tinv[l * C + j];
      c.Tinv[i * C + j] = x;
    }
  }
  c.W.assign(C * D, 0.0);
  c.Uv.assign(C * D, 0.0);
  c.QG.assign(C * D, 0.0);
  c.Kdec.assign(C * D, 0.0);
  c.gc.assign(D, 0.0);
  for (int k = 0; k < D; ++k) c.gc[k] = std::exp(c.G[(C - 1) * D + k]);
  for (int t = 0; t < C; ++t) {
    for (int k = 0; k < D; ++k) {
      double w = 0, u = 0;
      for (int s = 0; s <= t; ++s) {
        w += c.Tinv[t * C + s] * c.bt[s] * kh(s, k) * std::exp(c.G[s * D + k]);
        if (s < len) u += c.Tinv[t * C + s] * c.bt[s] * p.v[((t0 + s) * H + h) * D + k];
      }
      c.W[t * D + k] = w;
      c.Uv[t * D + k] = u;
      c.QG[t * D + k] = qh(t, k) * std::exp(c.G[t * D + k]);
      c.Kdec[t * D + k] = kh(t, k) * std::exp(c.G[(C - 1) * D + k] - c.G[t * D + k]);
    }
  }
  return c;
}

// One chunk of the checkpoint-mode forward (the state pass): U = Uv - W S^T from the chunk-start
// state S ([t][v]), and the chunk-end state S1 = S Gam_C + U^T Kdec. (tools/emu's drivers use
// both too.)
Mat ChunkU(const Chunk& k, const Mat& S) {
  Mat U(C * D);
  for (int t = 0; t < C; ++t) {
    for (int v = 0; v < D; ++v) {
      double u = k.Uv[t * D + v];
      for (int kk = 0; kk < D; ++kk) u -= k.W[t * D + kk] * S[v * D + kk];
      U[t * D + v] = u;
    }
  }
  return U;
}
Mat StateStep(const Chunk& k, const Mat& S) {
  const Mat U = ChunkU(k, S);
  Mat S1(D * D);
  for (int v = 0; v < D; ++v) {
    for (int kk = 0; kk < D; ++kk) {
      double s = S[v * D + kk] * k.gc[kk];
      for (int t = 0; t < C; ++t) s += U[t * D + v] * k.Kdec[t * D + kk];
      S1[v * D + kk] = s;
    }
  }
  return S1;
}

// One chunk of the reverse chain (KdaChunkDstateKernel): the chunk-start state gradient from the
// chunk-end one dS, dU = scale M^T dO + Kdec dS^T and dS0 = dS Gam_C + scale dO^T (Q Gam) - dU^T W.
Mat ReverseStep(const Problem& p, const Chunk& k, const Mat& dS) {
  Mat dU(C * D);
  for (int t = 0; t < C; ++t) {
    for (int v = 0; v < D; ++v) {
      double a1 = 0, a2 = 0;
      for (int s = t; s < C; ++s) a1 += k.M[s * C + t] * k.dO[s * D + v];
      for (int kk = 0; kk < D; ++kk) a2 += k.Kdec[t * D + kk] * dS[v * D + kk];
      dU[t * D + v] = p.scale * a1 + a2;
    }
  }
  Mat dS0(D * D);
  for (int v = 0; v < D; ++v) {
    for (int kk = 0; kk < D; ++kk) {
      double x = 0, y = 0;
      for (int t = 0; t < C; ++t) {
        x += k.dO[t * D + v] * k.QG[t * D + kk];
        y += dU[t * D + v] * -k.W[t * D + kk];
      }
      dS0[v * D + kk] = dS[v * D + kk] * k.gc[kk] + p.scale * x + y;
    }
  }
  return dS0;
}

// The per-chunk pass (KdaChunkGradKernel) for one chunk; adds the partials to pdt, pal.
void ChunkGrads(const Problem& p, const Chunk& c, const Mat& S0, const Mat& dS1, int64_t h,
                Grads* g, std::vector<double>* pdt, std::vector<double>* pal) {
  const int64_t H = p.H;
  const double sc = p.scale;
  auto kh = [&](int t, int k) { return c.kraw[t * D + k] * c.rk[t]; };
  auto qh = [&](int t, int k) { return c.qraw[t * D + k] * c.rq[t]; };
  Mat U(C * D), dU(C * D), dW(C * D);
  std::vector<double> dqh(C * D), dkh(C * D), X(C * D), Y(C * D), z(D);
  for (int t = 0; t < C; ++t) {
    for (int v = 0; v < D; ++v) {
      double u = c.Uv[t * D + v], a1 = 0, a2 = 0;
      for (int k = 0; k < D; ++k) {
        u += -c.W[t * D + k] * S0[v * D + k];
        a2 += c.Kdec[t * D + k] * dS1[v * D + k];
      }
      for (int s = 0; s < C; ++s) a1 += c.M[s * C + t] * c.dO[s * D + v];
      U[t * D + v] = u;
      dU[t * D + v] = sc * a1 + a2;
    }
  }
  for (int k = 0; k < D; ++k) {
    double acc = 0;
    for (int v = 0; v < D; ++v) acc += dS1[v * D + k] * S0[v * D + k];
    z[k] = std::exp(c.G[(C - 1) * D + k]) * acc;
  }
  for (int t = 0; t < C; ++t) {
    for (int k = 0; k < D; ++k) {
      double a1 = 0, a2 = 0, a3 = 0;
      for (int v = 0; v < D; ++v) {
        a1 += c.dO[t * D + v] * S0[v * D + k];
        a2 += dU[t * D + v] * S0[v * D + k];
        a3 += U[t * D + v] * dS1[v * D + k];
      }
      const double gam = std::exp(c.G[t * D + k]);
      const double dqg = sc * a1;
      dqh[t * D + k] = gam * dqg;
      X[t * D + k] = qh(t, k) * gam * dqg;
      dW[t * D + k] = -a2;
      const double dec = std::exp(c.G[(C - 1) * D + k] - c.G[t * D + k]);
      dkh[t * D + k] = dec * a3;
      Y[t * D + k] = kh(t, k) * dec * a3;
    }
  }
  Mat dM(C * C, 0.0);
  for (int t = 0; t < C; ++t) {
    for (int s = 0; s <= t; ++s) {
      double acc = 0;
      for (int v = 0; v < D; ++v) acc += c.dO[t * D + v] * U[s * D + v];
      dM[t * C + s] = sc * acc;
    }
  }
  // Solve (I + A)^T x = y in place for the 256 columns of [dW | dU].
  for (int col = 0; col < 2 * D; ++col) {
    Mat& y = col < D ? dW : dU;
    const int cc = col % D;
    for (int t = C - 1; t >= 0; --t) {
      double x = y[t * D + cc];
      for (int s = t + 1; s < C; ++s) x -= c.bt[s] * c.P[s * C + t] * y[s * D + cc];
      y[t * D + cc] = x;
    }
  }
  const Mat& dKb = dW;
  const Mat& dVb = dU;
  Mat dA(C * C, 0.0);
  for (int t = 0; t < C; ++t) {
    for (int i = 0; i < t; ++i) {
      double x = 0, y = 0;
      for (int k = 0; k < D; ++k) {
        x += dKb[t * D + k] * -c.W[i * D + k];
        y += dVb[t * D + k] * c.Uv[i * D + k];
      }
      dA[t * C + i] = x - y;
    }
  }
  for (int t = 0; t < C; ++t) {
    for (int k = 0; k < D; ++k) {
      const double gam = std::exp(c.G[t * D + k]);
      dkh[t * D + k] += c.bt[t] * gam * dKb[t * D + k];
      X[t * D + k] += c.bt[t] * kh(t, k) * gam * dKb[t * D + k];
    }
  }
  for (int t = 0; t < c.len; ++t) {
    const int64_t tok = c.t0 + t;
    double s = 0;
    for (int k = 0; k < D; ++k) {
      g->dv[(tok * H + h) * D + k] = c.bt[t] * dVb[t * D + k];
      s += dVb[t * D + k] * p.v[(tok * H + h) * D + k];
      s += dKb[t * D + k] * kh(t, k) * std::exp(c.G[t * D + k]);
    }
    for (int i = 0; i < C; ++i) s += dA[t * C + i] * c.P[t * C + i];
    g->dbeta[tok * H + h] = c.bt[t] * (1 - c.bt[t]) * s;
  }
  for (int t = 0; t < C; ++t) {
    for (int k = 0; k < D; ++k) {
      const double gt = c.G[t * D + k];
      double rowA = 0, rowM = 0, colA = 0, colM = 0;
      for (int i = 0; i < t; ++i) {
        const double f = kh(i, k) * std::exp(gt - c.G[i * D + k]);
        rowA += dA[t * C + i] * f;
        rowM += dM[t * C + i] * f;
      }
      for (int s = t + 1; s < C; ++s) {
        const double e = std::exp(c.G[s * D + k] - gt);
        colA += c.bt[s] * dA[s * C + t] * kh(s, k) * e;
        colM += dM[s * C + t] * qh(s, k) * e;
      }
      const double dmd = dM[t * C + t];
      dkh[t * D + k] += c.bt[t] * rowA + colA + colM + dmd * qh(t, k);
      dqh[t * D + k] += rowM + dmd * kh(t, k);
      X[t * D + k] += kh(t, k) * c.bt[t] * rowA + qh(t, k) * rowM - kh(t, k) * (colA + colM);
    }
  }
  const double exp_a = std::exp(p.A_log[h]);
  for (int k = 0; k < D; ++k) {
    double ex = 0;
    std::vector<double> exc(C);
    for (int t = 0; t < C; ++t) {
      exc[t] = ex;
      ex += Y[t * D + k];
    }
    double rev = 0;
    for (int t = C - 1; t >= 0; --t) {
      rev += X[t * D + k];
      if (t >= c.len) continue;
      const double dgl = rev + exc[t] + z[k];
      const int64_t base = ((c.t0 + t) * H + h) * D + k;
      const double x = exp_a * (p.g[base] + p.dt_bias[h * D + k]);
      const double sg = Sigmoid(x);
      const double dx = dgl * p.lower_bound * sg * (1 - sg);
      g->dg[base] = exp_a * dx;
      (*pdt)[k] += exp_a * dx;
      (*pal)[k] += x * dx;
    }
  }
  for (int t = 0; t < c.len; ++t) {
    double sq = 0, sk = 0;
    for (int k = 0; k < D; ++k) {
      sq += qh(t, k) * dqh[t * D + k];
      sk += kh(t, k) * dkh[t * D + k];
    }
    for (int k = 0; k < D; ++k) {
      const int64_t base = ((c.t0 + t) * H + h) * D + k;
      g->dq[base] = c.rq[t] * (dqh[t * D + k] - qh(t, k) * sq);
      g->dk[base] = c.rk[t] * (dkh[t * D + k] - kh(t, k) * sk);
    }
  }
}

Grads ChunkedBackward(const Problem& p, const std::vector<double>& d_o, const Mat& dfinal) {
  const int64_t H = p.H, N = static_cast<int64_t>(p.cu.size()) - 1, tok = p.total_tokens;
  Grads g;
  g.dq.assign(tok * H * D, 0.0);
  g.dk = g.dv = g.dg = g.dq;
  g.dbeta.assign(tok * H, 0.0);
  g.dA_log.assign(H, 0.0);
  g.ddt_bias.assign(H * D, 0.0);
  g.ds0.assign(N * H * D * D, 0.0);
  for (int64_t h = 0; h < H; ++h) {
    std::vector<double> pdt(D, 0.0), pal(D, 0.0);
    for (int64_t n = 0; n < N; ++n) {
      const int64_t bos = p.cu[n], eos = p.cu[n + 1];
      const int64_t chunks = (eos - bos + C - 1) / C;
      std::vector<Chunk> ch;
      for (int64_t c = 0; c < chunks; ++c) {
        const int64_t t0 = bos + c * C;
        ch.push_back(Prepare(p, d_o, t0, static_cast<int>(std::min<int64_t>(C, eos - t0)), h));
      }
      // Checkpoint-mode forward: S0 per chunk.
      std::vector<Mat> S0(chunks);
      Mat S(D * D, 0.0);
      if (!p.s0.empty()) {
        for (int e = 0; e < D * D; ++e) S[e] = p.s0[(n * H + h) * D * D + e];
      }
      for (int64_t c = 0; c < chunks; ++c) {
        S0[c] = S;
        S = StateStep(ch[c], S);
      }
      // Reverse chain (KdaChunkDstateKernel): dS1 per chunk, dinitial_state.
      std::vector<Mat> dS1(chunks);
      Mat dS(D * D, 0.0);
      if (!dfinal.empty()) {
        for (int e = 0; e < D * D; ++e) dS[e] = dfinal[(n * H + h) * D * D + e];
      }
      for (int64_t c = chunks - 1; c >= 0; --c) {
        dS1[c] = dS;
        dS = ReverseStep(p, ch[c], dS);
      }
      for (int e = 0; e < D * D; ++e) g.ds0[(n * H + h) * D * D + e] = dS[e];
      for (int64_t c = 0; c < chunks; ++c) ChunkGrads(p, ch[c], S0[c], dS1[c], h, &g, &pdt, &pal);
    }
    double al = 0;
    for (int k = 0; k < D; ++k) {
      g.ddt_bias[h * D + k] = pdt[k];
      al += pal[k];
    }
    g.dA_log[h] = al;
  }
  return g;
}

double RelL2(const std::vector<double>& a, const std::vector<double>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

void CheckCase(const std::vector<int64_t>& lens, int64_t H, bool with_init, bool with_dfinal,
               double dt_mean, double scale, double lower_bound, unsigned seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> nd(0.0, 1.0);
  Problem p;
  p.cu.push_back(0);
  for (int64_t l : lens) p.cu.push_back(p.cu.back() + l);
  p.total_tokens = p.cu.back();
  p.H = H;
  const int64_t N = static_cast<int64_t>(lens.size());
  const int64_t n = p.total_tokens * H * D;
  auto fill = [&](std::vector<double>* x, int64_t count, double mean, double sd) {
    x->resize(count);
    for (auto& e : *x) e = mean + sd * nd(rng);
  };
  fill(&p.q, n, 0, 1);
  fill(&p.k, n, 0, 1);
  fill(&p.v, n, 0, 1);
  fill(&p.g, n, 0, 1);
  fill(&p.beta, p.total_tokens * H, 0, 1);
  fill(&p.A_log, H, 0, 0.5);
  fill(&p.dt_bias, H * D, dt_mean, 0.5);
  if (with_init) fill(&p.s0, N * H * D * D, 0, 0.1);
  p.scale = scale;
  p.lower_bound = lower_bound;
  std::vector<double> d_o, dfinal;
  fill(&d_o, n, 0, 1);
  if (with_dfinal) fill(&dfinal, N * H * D * D, 0, 0.1);
  Grads exact;
  Backward(p, d_o, dfinal, &exact);
  const Grads got = ChunkedBackward(p, d_o, dfinal);
  const struct {
    const char* name;
    const std::vector<double>*a, *b;
  } checks[] = {{"dq", &got.dq, &exact.dq},
                {"dk", &got.dk, &exact.dk},
                {"dv", &got.dv, &exact.dv},
                {"dg", &got.dg, &exact.dg},
                {"dbeta", &got.dbeta, &exact.dbeta},
                {"dA_log", &got.dA_log, &exact.dA_log},
                {"ddt_bias", &got.ddt_bias, &exact.ddt_bias},
                {"dinitial_state", &got.ds0, &exact.ds0}};
  for (const auto& c : checks) {
    const double err = RelL2(*c.a, *c.b);
    EXPECT_LE(err, 1e-10) << c.name;
  }
}

TEST(KdaChunkedBackwardMath, MatchesSequentialReference) {
  CheckCase({130}, 1, true, true, 0.0, 0.0883883, -5.0, 1);
  CheckCase({64}, 1, false, false, 0.0, 0.0883883, -5.0, 2);
  CheckCase({1}, 1, true, true, 0.0, 0.0883883, -5.0, 3);
}

TEST(KdaChunkedBackwardMath, PackedSlowDecayAndOptions) {
  CheckCase({0, 1, 64, 63, 65, 0, 7}, 2, true, true, 0.0, 2.5, -0.3, 4);
  CheckCase({5, 0, 191, 1}, 1, false, true, -6.0, 0.3, -1.0, 5);
}

}  // namespace
}  // namespace cakegrad::kernels::kda_ref
