// FP64 reference of recurrent KDA (SPEC.md section 3): the test oracle and the host backend.
// Every (document, head) pair is an independent recurrence, so they run on a few threads; the
// only cross-pair sums (dA_log, ddt_bias over documents) are added in a fixed order afterwards.
#include <algorithm>
#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include "cakegrad/kernels/kda.h"
#include "kda_reference_internal.h"

namespace cakegrad::kernels {
namespace kda_ref {
namespace {

constexpr int64_t kD = kKdaHeadDim;
constexpr int64_t kDD = kD * kD;
// Tokens between the states the backward keeps; the states in between are recomputed, so the
// memory is (L / 64 + 64) states per pair instead of L.
constexpr int64_t kRefCheckpoint = 64;

double Sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

// Everything the recurrence needs from one token of one head.
struct TokenPrep {
  double qh[kD], kh[kD], d[kD], z[kD], s[kD];
  double rq, rk;  // 1 / sqrt(|q|^2 + eps), 1 / sqrt(|k|^2 + eps)
  double bt;      // sigmoid(beta)
};

void Prepare(const Problem& p, int64_t t, int64_t h, TokenPrep* tp) {
  const double* q = &p.q[(t * p.H + h) * kD];
  const double* k = &p.k[(t * p.H + h) * kD];
  const double* g = &p.g[(t * p.H + h) * kD];
  double sq = 0.0, sk = 0.0;
  for (int64_t i = 0; i < kD; ++i) {
    sq += q[i] * q[i];
    sk += k[i] * k[i];
  }
  tp->rq = 1.0 / std::sqrt(sq + 1e-6);
  tp->rk = 1.0 / std::sqrt(sk + 1e-6);
  const double ea = std::exp(p.A_log[h]);
  for (int64_t i = 0; i < kD; ++i) {
    tp->qh[i] = q[i] * tp->rq;
    tp->kh[i] = k[i] * tp->rk;
    tp->z[i] = ea * (g[i] + p.dt_bias[h * kD + i]);
    tp->s[i] = Sigmoid(tp->z[i]);
    tp->d[i] = std::exp(p.lower_bound * tp->s[i]);
  }
  tp->bt = Sigmoid(p.beta[t * p.H + h]);
}

// One token's state update in place; w[v] = v_t[v] - (S_decayed kh)[v] when w is not null.
void Step(const Problem& p, int64_t t, int64_t h, const TokenPrep& tp, double* S, double* w) {
  const double* vt = &p.v[(t * p.H + h) * kD];
  for (int64_t r = 0; r < kD; ++r) {
    double* row = S + r * kD;
    double pred = 0.0;
    for (int64_t i = 0; i < kD; ++i) {
      row[i] *= tp.d[i];
      pred += row[i] * tp.kh[i];
    }
    const double wr = vt[r] - pred;
    const double u = tp.bt * wr;
    for (int64_t i = 0; i < kD; ++i) row[i] += u * tp.kh[i];
    if (w != nullptr) w[r] = wr;
  }
}

void InitState(const Problem& p, int64_t n, int64_t h, double* S) {
  if (p.s0.empty()) {
    std::fill(S, S + kDD, 0.0);
  } else {
    std::copy_n(&p.s0[(n * p.H + h) * kDD], kDD, S);
  }
}

// Runs fn(n, h) for every pair on up to hardware_concurrency threads (static partition).
template <typename Fn>
void ForEachPair(int64_t N, int64_t H, const Fn& fn) {
  const int64_t pairs = N * H;
  const int64_t hw = std::max<int64_t>(1, std::thread::hardware_concurrency());
  const int64_t workers = std::min<int64_t>(std::min<int64_t>(hw, 16), pairs);
  if (workers <= 1) {
    for (int64_t i = 0; i < pairs; ++i) fn(i / H, i % H);
    return;
  }
  std::vector<std::thread> threads;
  for (int64_t w = 0; w < workers; ++w) {
    threads.emplace_back([&, w] {
      for (int64_t i = w; i < pairs; i += workers) fn(i / H, i % H);
    });
  }
  for (auto& th : threads) th.join();
}

}  // namespace

void Forward(const Problem& p, std::vector<double>* o, std::vector<double>* final_state) {
  const int64_t N = static_cast<int64_t>(p.cu.size()) - 1;
  o->assign(p.total_tokens * p.H * kD, 0.0);
  final_state->assign(N * p.H * kDD, 0.0);
  ForEachPair(N, p.H, [&](int64_t n, int64_t h) {
    std::vector<double> S(kDD);
    InitState(p, n, h, S.data());
    TokenPrep tp;
    for (int64_t t = p.cu[n]; t < p.cu[n + 1]; ++t) {
      Prepare(p, t, h, &tp);
      Step(p, t, h, tp, S.data(), nullptr);
      double* ot = &(*o)[(t * p.H + h) * kD];
      for (int64_t r = 0; r < kD; ++r) {
        double acc = 0.0;
        for (int64_t i = 0; i < kD; ++i) acc += S[r * kD + i] * tp.qh[i];
        ot[r] = p.scale * acc;
      }
    }
    std::copy(S.begin(), S.end(), final_state->begin() + (n * p.H + h) * kDD);
  });
}

void Backward(const Problem& p, const std::vector<double>& d_o, const std::vector<double>& dfinal,
              Grads* gr) {
  const int64_t N = static_cast<int64_t>(p.cu.size()) - 1;
  const int64_t H = p.H;
  const int64_t tok = p.total_tokens * H * kD;
  gr->dq.assign(tok, 0.0);
  gr->dk.assign(tok, 0.0);
  gr->dv.assign(tok, 0.0);
  gr->dg.assign(tok, 0.0);
  gr->dbeta.assign(p.total_tokens * H, 0.0);
  gr->ds0.assign(N * H * kDD, 0.0);
  // Per-pair parameter gradients, summed over documents in order after the threads join.
  std::vector<double> pair_dA(N * H, 0.0), pair_dA_terms(N * H, 0.0), pair_ddt(N * H * kD, 0.0);

  ForEachPair(N, H, [&](int64_t n, int64_t h) {
    const int64_t bos = p.cu[n], eos = p.cu[n + 1], L = eos - bos;
    const int64_t chunks = (L + kRefCheckpoint - 1) / kRefCheckpoint;
    // Forward pass keeping the state at every chunk start.
    std::vector<double> ckpt(std::max<int64_t>(chunks, 1) * kDD);
    std::vector<double> S(kDD);
    InitState(p, n, h, S.data());
    TokenPrep tp;
    for (int64_t t = bos; t < eos; ++t) {
      if ((t - bos) % kRefCheckpoint == 0) {
        std::copy(S.begin(), S.end(), ckpt.begin() + ((t - bos) / kRefCheckpoint) * kDD);
      }
      Prepare(p, t, h, &tp);
      Step(p, t, h, tp, S.data(), nullptr);
    }

    std::vector<double> dS(kDD, 0.0);
    if (!dfinal.empty()) std::copy_n(&dfinal[(n * H + h) * kDD], kDD, dS.begin());
    std::vector<double> states((kRefCheckpoint + 1) * kDD), wbuf(kRefCheckpoint * kD);
    std::vector<TokenPrep> preps(kRefCheckpoint);
    double dqh[kD], dkh[kD], dd[kD], du[kD];
    for (int64_t c = chunks - 1; c >= 0; --c) {
      const int64_t t0 = bos + c * kRefCheckpoint;
      const int64_t t1 = std::min(eos, t0 + kRefCheckpoint);
      // states[j] = S before token t0 + j; states[j + 1] = S after it.
      std::copy_n(&ckpt[c * kDD], kDD, states.begin());
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t j = t - t0;
        Prepare(p, t, h, &preps[j]);
        std::copy_n(&states[j * kDD], kDD, &states[(j + 1) * kDD]);
        Step(p, t, h, preps[j], &states[(j + 1) * kDD], &wbuf[j * kD]);
      }
      for (int64_t t = t1 - 1; t >= t0; --t) {
        const int64_t j = t - t0;
        const TokenPrep& q = preps[j];
        const double* Sp = &states[j * kDD];
        const double* St = &states[(j + 1) * kDD];
        const double* w = &wbuf[j * kD];
        const double* dot = &d_o[(t * H + h) * kD];
        // o = scale * S_t qh.
        for (int64_t i = 0; i < kD; ++i) {
          double acc = 0.0;
          for (int64_t r = 0; r < kD; ++r) acc += dot[r] * St[r * kD + i];
          dqh[i] = p.scale * acc;
        }
        for (int64_t r = 0; r < kD; ++r) {
          for (int64_t i = 0; i < kD; ++i) dS[r * kD + i] += p.scale * dot[r] * q.qh[i];
        }
        // S_t = Sd + u kh^T, u = bt * w, w = v - Sd kh, Sd = S_prev * d.
        double dbt = 0.0;
        std::fill(dkh, dkh + kD, 0.0);
        std::fill(dd, dd + kD, 0.0);
        for (int64_t r = 0; r < kD; ++r) {
          double acc = 0.0;
          for (int64_t i = 0; i < kD; ++i) acc += dS[r * kD + i] * q.kh[i];
          du[r] = acc;
          dbt += acc * w[r];
        }
        for (int64_t r = 0; r < kD; ++r) {
          const double u = q.bt * w[r];
          const double dpred = -q.bt * du[r];
          for (int64_t i = 0; i < kD; ++i) {
            const double sd = Sp[r * kD + i] * q.d[i];
            dkh[i] += dS[r * kD + i] * u + dpred * sd;
            const double dsd = dS[r * kD + i] + dpred * q.kh[i];
            dd[i] += dsd * Sp[r * kD + i];
            dS[r * kD + i] = dsd * q.d[i];
          }
        }
        double* dv = &gr->dv[(t * H + h) * kD];
        for (int64_t r = 0; r < kD; ++r) dv[r] = q.bt * du[r];
        gr->dbeta[t * H + h] = dbt * q.bt * (1.0 - q.bt);
        // Through the L2 norms: dx = (dxh - xh (xh . dxh)) / |x|.
        double qd = 0.0, kd = 0.0;
        for (int64_t i = 0; i < kD; ++i) {
          qd += q.qh[i] * dqh[i];
          kd += q.kh[i] * dkh[i];
        }
        double* dq = &gr->dq[(t * H + h) * kD];
        double* dk = &gr->dk[(t * H + h) * kD];
        double* dg = &gr->dg[(t * H + h) * kD];
        const double ea = std::exp(p.A_log[h]);
        for (int64_t i = 0; i < kD; ++i) {
          dq[i] = (dqh[i] - q.qh[i] * qd) * q.rq;
          dk[i] = (dkh[i] - q.kh[i] * kd) * q.rk;
          // d = exp(lb * sigmoid(z)), z = exp(A_log) * (g + dt_bias).
          const double dz = dd[i] * q.d[i] * p.lower_bound * q.s[i] * (1.0 - q.s[i]);
          dg[i] = dz * ea;
          pair_ddt[(n * H + h) * kD + i] += dz * ea;  // z is linear in dt_bias and g
          const double term = dz * q.z[i];
          pair_dA[n * H + h] += term;
          pair_dA_terms[n * H + h] += std::abs(term);
        }
      }
    }
    std::copy(dS.begin(), dS.end(), gr->ds0.begin() + (n * H + h) * kDD);
  });

  gr->dA_log.assign(H, 0.0);
  gr->dA_log_terms.assign(H, 0.0);
  gr->ddt_bias.assign(H * kD, 0.0);
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t h = 0; h < H; ++h) {
      gr->dA_log[h] += pair_dA[n * H + h];
      gr->dA_log_terms[h] += pair_dA_terms[n * H + h];
      for (int64_t i = 0; i < kD; ++i) gr->ddt_bias[h * kD + i] += pair_ddt[(n * H + h) * kD + i];
    }
  }
}

}  // namespace kda_ref

namespace {

constexpr int64_t kD = kKdaHeadDim;

// Shared checks of both entry points; fills *cu with the validated document offsets.
Status ValidateCommon(int64_t B, int64_t T, int64_t H, int64_t num_docs, const void* cu_seqlens,
                      DType seqlens_dtype, float scale, float lower_bound,
                      std::vector<int64_t>* cu) {
  if (B < 0 || T < 0) return InvalidArgument("kda: B and T must be >= 0");
  if (H < 1) return InvalidArgument("kda: H must be >= 1, got " + std::to_string(H));
  if (!(scale > 0.0f) || !std::isfinite(scale)) {
    return InvalidArgument("kda: scale must be finite and > 0");
  }
  if (!(lower_bound >= -5.0f && lower_bound < 0.0f)) {
    return InvalidArgument("kda: lower_bound must be in [-5, 0), got " +
                           std::to_string(lower_bound));
  }
  cu->clear();
  if (cu_seqlens == nullptr) {
    if (num_docs != 0 && num_docs != B) {
      return InvalidArgument("kda: without cu_seqlens num_docs must be B (or 0), got " +
                             std::to_string(num_docs));
    }
    for (int64_t b = 0; b <= B; ++b) cu->push_back(b * T);
    return OkStatus();
  }
  if (B != 1) return InvalidArgument("kda: cu_seqlens needs B == 1, got " + std::to_string(B));
  if (num_docs < 1) return InvalidArgument("kda: cu_seqlens needs num_docs >= 1");
  if (seqlens_dtype != DType::kINT32 && seqlens_dtype != DType::kINT64) {
    return InvalidArgument(std::string("kda: cu_seqlens must be int32 or int64, got ") +
                           DTypeName(seqlens_dtype));
  }
  for (int64_t i = 0; i <= num_docs; ++i) {
    cu->push_back(seqlens_dtype == DType::kINT32 ? static_cast<const int32_t*>(cu_seqlens)[i]
                                                 : static_cast<const int64_t*>(cu_seqlens)[i]);
  }
  if ((*cu)[0] != 0) return InvalidArgument("kda: cu_seqlens[0] must be 0");
  for (int64_t i = 0; i < num_docs; ++i) {
    if ((*cu)[i + 1] < (*cu)[i]) {
      return InvalidArgument("kda: cu_seqlens must be non-decreasing (index " +
                             std::to_string(i + 1) + ")");
    }
  }
  if (cu->back() != T) {
    return InvalidArgument("kda: cu_seqlens[N] must equal T = " + std::to_string(T) + ", got " +
                           std::to_string(cu->back()));
  }
  return OkStatus();
}

std::vector<double> Bf16Vec(const uint16_t* p, int64_t n) {
  std::vector<double> out(n);
  for (int64_t i = 0; i < n; ++i) out[i] = Bf16ToFloat(p[i]);
  return out;
}

std::vector<double> F32Vec(const float* p, int64_t n) {
  return p == nullptr ? std::vector<double>() : std::vector<double>(p, p + n);
}

template <typename Params>
Status BuildProblem(const Params& p, kda_ref::Problem* pr) {
  Status st = ValidateCommon(p.B, p.T, p.H, p.num_docs, p.cu_seqlens, p.seqlens_dtype, p.scale,
                             p.lower_bound, &pr->cu);
  if (!st.ok()) return st;
  const int64_t tokens = p.B * p.T;
  if (tokens > 0 &&
      (p.q == nullptr || p.k == nullptr || p.v == nullptr || p.g == nullptr || p.beta == nullptr)) {
    return InvalidArgument("kda: q, k, v, g and beta are required");
  }
  if (p.A_log == nullptr || p.dt_bias == nullptr) {
    return InvalidArgument("kda: A_log and dt_bias are required");
  }
  const int64_t N = static_cast<int64_t>(pr->cu.size()) - 1;
  pr->total_tokens = tokens;
  pr->H = p.H;
  pr->q = Bf16Vec(p.q, tokens * p.H * kD);
  pr->k = Bf16Vec(p.k, tokens * p.H * kD);
  pr->v = Bf16Vec(p.v, tokens * p.H * kD);
  pr->g = Bf16Vec(p.g, tokens * p.H * kD);
  pr->beta = Bf16Vec(p.beta, tokens * p.H);
  pr->A_log = F32Vec(p.A_log, p.H);
  pr->dt_bias = F32Vec(p.dt_bias, p.H * kD);
  pr->s0 = F32Vec(p.initial_state, N * p.H * kD * kD);
  pr->scale = p.scale;
  pr->lower_bound = p.lower_bound;
  return OkStatus();
}

}  // namespace

Status KdaForwardReference(const KdaFwdParams& p) {
  kda_ref::Problem pr;
  Status st = BuildProblem(p, &pr);
  if (!st.ok()) return st;
  if (pr.total_tokens > 0 && p.o == nullptr) return InvalidArgument("kda: o is required");
  std::vector<double> o, fs;
  kda_ref::Forward(pr, &o, &fs);
  for (size_t i = 0; i < o.size(); ++i) p.o[i] = DoubleToBf16(o[i]);
  if (p.final_state != nullptr) {
    for (size_t i = 0; i < fs.size(); ++i) p.final_state[i] = static_cast<float>(fs[i]);
  }
  return OkStatus();
}

Status KdaBackwardReference(const KdaBwdParams& p) {
  kda_ref::Problem pr;
  Status st = BuildProblem(p, &pr);
  if (!st.ok()) return st;
  const int64_t N = static_cast<int64_t>(pr.cu.size()) - 1;
  if (pr.total_tokens > 0 && (p.d_o == nullptr || p.dq == nullptr || p.dk == nullptr ||
                              p.dv == nullptr || p.dg == nullptr || p.dbeta == nullptr)) {
    return InvalidArgument("kda: d_o and the token gradients dq, dk, dv, dg, dbeta are required");
  }
  if (p.dA_log == nullptr || p.ddt_bias == nullptr || (N > 0 && p.dinitial_state == nullptr)) {
    return InvalidArgument("kda: dA_log, ddt_bias and dinitial_state are required");
  }
  const std::vector<double> d_o = Bf16Vec(p.d_o, pr.total_tokens * p.H * kD);
  const std::vector<double> dfinal = F32Vec(p.dfinal_state, N * p.H * kD * kD);
  kda_ref::Grads gr;
  kda_ref::Backward(pr, d_o, dfinal, &gr);
  for (size_t i = 0; i < gr.dq.size(); ++i) {
    p.dq[i] = DoubleToBf16(gr.dq[i]);
    p.dk[i] = DoubleToBf16(gr.dk[i]);
    p.dv[i] = DoubleToBf16(gr.dv[i]);
    p.dg[i] = DoubleToBf16(gr.dg[i]);
  }
  for (size_t i = 0; i < gr.dbeta.size(); ++i) p.dbeta[i] = DoubleToBf16(gr.dbeta[i]);
  for (size_t i = 0; i < gr.dA_log.size(); ++i) p.dA_log[i] = static_cast<float>(gr.dA_log[i]);
  for (size_t i = 0; i < gr.ddt_bias.size(); ++i) {
    p.ddt_bias[i] = static_cast<float>(gr.ddt_bias[i]);
  }
  for (size_t i = 0; i < gr.ds0.size(); ++i) p.dinitial_state[i] = static_cast<float>(gr.ds0[i]);
  return OkStatus();
}

}  // namespace cakegrad::kernels
