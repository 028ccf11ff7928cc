// The host driver of tools/emu/run_kda_segment_emu.sh (see there): the sequential KDA backward's
// passes before its backward kernel (kda_row_pass.cu: the segment transitions and the recompute
// pass; kda_segment.cu: the scans), their CUDA source compiled for the host, against the
// recurrence walked token by token in FP64 here. Checks every checkpoint the recompute pass and
// the forward scan leave, every residual, and the state gradient at every segment's end (the
// reverse scan's), over packed documents cut into several segments. The workspace starts as NaN,
// so a read of a word no pass wrote shows as NaN in the outputs.
#include "cuda_host_shim.h"
#include "rowpass_emu.inc"
}  // namespace kda_cuda
}  // namespace cakegrad::kernels
#include "segment_emu.inc"
}  // namespace kda_cuda
}  // namespace cakegrad::kernels

#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "kda_emu_bf16.h"
#include "reference/kda_layout.h"

using namespace cakegrad::kernels;
using kda_emu::FromBf;
using kda_emu::ToBf;
namespace L = kda_layout;

namespace {

constexpr int D = 128;

// One token's FP64 vectors as ComputeTokenCost64 and StoreToken64 form them (the same operations,
// in a loop).
struct Vecs {
  double kh[D], qh[D], d[D], bt;
};
Vecs TokenVecs(const std::vector<uint16_t>& q, const std::vector<uint16_t>& k,
               const std::vector<uint16_t>& g, const std::vector<uint16_t>& beta,
               const std::vector<float>& dt_bias, double exp_a, double lb, int64_t t, int64_t H,
               int64_t h) {
  Vecs v;
  double sq = 0, sk = 0;
  for (int i = 0; i < D; ++i) {
    const double qf = FromBf(q[(t * H + h) * D + i]);
    const double kf = FromBf(k[(t * H + h) * D + i]);
    sq += qf * qf;
    sk += kf * kf;
  }
  const double rq = 1.0 / std::sqrt(sq + 1e-6), rk = 1.0 / std::sqrt(sk + 1e-6);
  for (int i = 0; i < D; ++i) {
    v.kh[i] = FromBf(k[(t * H + h) * D + i]) * rk;
    v.qh[i] = FromBf(q[(t * H + h) * D + i]) * rq;
    const double z =
        exp_a * (static_cast<double>(FromBf(g[(t * H + h) * D + i])) + dt_bias[h * D + i]);
    v.d[i] = std::exp(lb / (1.0 + std::exp(-z)));
  }
  v.bt = 1.0 / (1.0 + std::exp(-static_cast<double>(FromBf(beta[t * H + h]))));
  return v;
}

// max |got - exact| over max |exact|, for one 128 x 128 matrix.
double MaxRelDiff(const double* got, const std::vector<double>& exact) {
  double e = 0, m = 0;
  for (int i = 0; i < D * D; ++i) {
    e = std::max(e, std::fabs(got[i] - exact[i]));
    m = std::max(m, std::fabs(exact[i]));
  }
  return e / m;
}

}  // namespace

int main(int argc, char** argv) {
  // Segments of kSegmentMin tokens: the documents below span 1 to 3 of them, with an empty and a
  // 1-token one, and one that ends on a segment boundary.
  const std::vector<int64_t> lens = {600, 0, 1, 256, 300, 40};
  const int64_t H = 2;
  const double g_mean = argc > 1 ? std::atof(argv[1]) : 0.0;  // 6: gates near lower_bound
  std::mt19937_64 rng(11);
  std::normal_distribution<double> nd(0.0, 1.0);
  std::vector<int64_t> cu = {0};
  for (int64_t l : lens) cu.push_back(cu.back() + l);
  const int64_t tok = cu.back(), N = static_cast<int64_t>(lens.size());
  auto bf = [&](size_t n, double mean) {
    std::vector<uint16_t> x(n);
    for (auto& e : x) e = ToBf(static_cast<float>(mean + nd(rng)));
    return x;
  };
  const auto q = bf(tok * H * D, 0), k = bf(tok * H * D, 0), v = bf(tok * H * D, 0),
             g = bf(tok * H * D, g_mean), beta = bf(tok * H, 0), d_o = bf(tok * H * D, 0);
  std::vector<float> A_log(H), dt_bias(H * D), s0(N * H * D * D), dfs(N * H * D * D);
  std::uniform_real_distribution<double> ud(-1.0, 1.0);
  for (auto& e : A_log) e = static_cast<float>(ud(rng));
  for (auto& e : dt_bias) e = static_cast<float>(0.5 * nd(rng));
  for (auto& e : s0) e = static_cast<float>(0.1 * nd(rng));
  for (auto& e : dfs) e = static_cast<float>(nd(rng));

  kda_cuda::SeqBwdArgs a{};
  a.s.cu_seqlens = cu.data();
  a.s.is_int64 = 1;
  a.s.T = tok;
  a.s.total_tokens = tok;
  a.s.H = H;
  a.s.N = N;
  a.s.segment = L::kSegmentMin;
  a.s.scale = 0.088388347648318f;
  a.s.lower_bound = -5.0f;
  uint32_t status = 0;
  a.s.device_status = &status;
  a.q = q.data();
  a.k = k.data();
  a.v = v.data();
  a.g = g.data();
  a.beta = beta.data();
  a.A_log = A_log.data();
  a.dt_bias = dt_bias.data();
  a.initial_state = s0.data();
  a.d_o = d_o.data();
  a.dfinal_state = dfs.data();
  const L::BwdLayout lay = L::MakeBwdLayout(1, tok, H, N);
  std::vector<double> ws(lay.total / 8, std::nan(""));
  a.checkpoints = ws.data() + lay.checkpoints / 8;
  a.residual = ws.data() + lay.residual / 8;
  a.tok_d = ws.data() + lay.tok_d / 8;
  a.tok_s = ws.data() + lay.tok_s / 8;
  a.seg_map = ws.data() + lay.seg_map / 8;
  a.seg_grad = ws.data() + lay.seg_grad / 8;
  std::vector<float> dinit(N * H * D * D, std::nanf(""));
  a.dinitial_state = dinit.data();

  using kda_cuda::RowLaunch;
  using RT = kda_cuda::RowTraits;
  const int64_t slots = L::SegmentSlots(tok, N, a.s.segment);
  const unsigned hh = static_cast<unsigned>(H);
  EmuLaunch({unsigned((tok + kda_cuda::kTokenPassWarps - 1) / kda_cuda::kTokenPassWarps), hh, 1},
            kda_cuda::kTokenPassWarps * 32, [&] { kda_cuda::KdaTokenPassKernel(a); });
  EmuLaunch({unsigned(kda_cuda::CtasPerSlot(RowLaunch::kBM) * slots), hh, 1}, RT::kThreads,
            [&] { kda_cuda::KdaRowPassKernel<RowLaunch::kBM>(a); });
  EmuLaunch({unsigned(kda_cuda::CtasPerSlot(RowLaunch::kE) * slots), hh, 1}, RT::kThreads,
            [&] { kda_cuda::KdaRowPassKernel<RowLaunch::kE>(a); });
  EmuLaunch({2 * kda_cuda::ScanTraits::kCtas, hh, unsigned(N)}, kda_cuda::ScanTraits::kThreads,
            [&] { kda_cuda::KdaSegmentScanKernel(a); });
  EmuLaunch({unsigned(kda_cuda::CtasPerSlot(RowLaunch::kRecompute) * slots), hh, 1}, RT::kThreads,
            [&] { kda_cuda::KdaRowPassKernel<RowLaunch::kRecompute>(a); });

  // The recurrence token by token in FP64, forward (states, residuals) and backward (gradients).
  double err_ck = 0, err_w = 0, err_g = 0, err_init = 0;
  int checked_ck = 0, checked_g = 0;
  const double lb = a.s.lower_bound, scale = a.s.scale;
  std::vector<double> S(D * D), G(D * D);
  for (int64_t n = 0; n < N; ++n) {
    const int64_t bos = cu[n], eos = cu[n + 1];
    for (int64_t h = 0; h < H; ++h) {
      const double exp_a = std::exp(static_cast<double>(A_log[h]));
      for (int e = 0; e < D * D; ++e) S[e] = s0[(n * H + h) * D * D + e];
      for (int64_t t = bos; t < eos; ++t) {
        if ((t - bos) % L::kCheckpointInterval == 0) {
          err_ck = std::max(err_ck,
                            MaxRelDiff(kda_cuda::CheckpointAt(a.checkpoints, bos, n, t, H, h), S));
          ++checked_ck;
        }
        const Vecs tv = TokenVecs(q, k, g, beta, dt_bias, exp_a, lb, t, H, h);
        for (int r = 0; r < D; ++r) {
          double p = 0;
          for (int c = 0; c < D; ++c) {
            S[r * D + c] *= tv.d[c];
            p += S[r * D + c] * tv.kh[c];
          }
          const double w = FromBf(v[(t * H + h) * D + r]) - p;
          const double got = a.residual[(t * H + h) * D + r];
          err_w = std::max(err_w, std::fabs(got - w) / (std::fabs(w) + 1e-30));
          for (int c = 0; c < D; ++c) S[r * D + c] += tv.bt * w * tv.kh[c];
        }
      }
      // Backward: the gradient entering each segment from beyond it is what its backward kernel
      // starts from (seg_grad at the segment's slot).
      for (int e = 0; e < D * D; ++e) G[e] = dfs[(n * H + h) * D * D + e];
      const int64_t len = a.s.segment;
      for (int64_t t = eos - 1; t >= bos; --t) {
        if ((t + 1 - bos) % len == 0 || t == eos - 1) {
          const int64_t c = (t - bos) / len;
          err_g =
              std::max(err_g, MaxRelDiff(a.seg_grad + ((bos / len + n + c) * H + h) * D * D, G));
          ++checked_g;
        }
        const Vecs tv = TokenVecs(q, k, g, beta, dt_bias, exp_a, lb, t, H, h);
        for (int r = 0; r < D; ++r) {
          const double sdo = scale * FromBf(d_o[(t * H + h) * D + r]);
          double du = 0;
          for (int c = 0; c < D; ++c) {
            G[r * D + c] += sdo * tv.qh[c];
            du += G[r * D + c] * tv.kh[c];
          }
          for (int c = 0; c < D; ++c)
            G[r * D + c] = (G[r * D + c] - tv.bt * du * tv.kh[c]) * tv.d[c];
        }
      }
      if (eos == bos) {  // the scan's: an empty document's dinitial_state is dfinal_state
        for (int i = 0; i < D * D; ++i) {
          err_init = std::max(err_init, std::fabs(double(dinit[(n * H + h) * D * D + i]) - G[i]));
        }
      }
    }
  }
  const bool ok = err_ck < 1e-12 && err_w < 1e-9 && err_g < 1e-12 && err_init == 0 && status == 0 &&
                  std::isfinite(err_ck + err_w + err_g);
  std::printf(
      "segments of %lld tokens, g ~ N(%.0f, 1): checkpoints %d max rel %.2e; residuals max rel "
      "%.2e; segment-end gradients %d max rel %.2e; empty document's dinitial_state %.1e; "
      "status %u: %s\n",
      static_cast<long long>(a.s.segment), g_mean, checked_ck, err_ck, err_w, checked_g, err_g,
      err_init, status, ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}
