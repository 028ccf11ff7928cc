// Accuracy of every chunk record of the chunked KDA forward's preparation (KdaChunkPrepKernel),
// its CUDA source run on the host (tools/emu), against the same quantities in FP64 (Prepare of
// tests/kernels/kda_chunked_backward_math_test.cc): -W, Q Gam, Kdec^T and M as hi + lo, Uv and
// Gam_C. Sharper than o's rel-L2 (dominated by o's BF16 rounding) for value-changing
// preparation candidates: run it on the base and the candidate
// (tools/emu/run_kda_prep_records_acc_emu.sh). Prints, per field, the rel-L2 over all chunks and
// the worst chunk's rel-L2.
#include <cstdio>
#include <random>

#include "cuda_host_shim.h"
#include "fwd_emu.inc"
}  // namespace kda_cuda
}  // namespace cakegrad::kernels

#include "kda_emu_bf16.h"
#include "kda_emu_fwd_inputs.h"
#include "reference/kda_reference_internal.h"

namespace cakegrad::kernels::kda_ref {
#include "prep.inc"
}

using namespace cakegrad::kernels;
using kda_emu::FromBf;
using kda_emu::ToBf;

int main() {
  const kda_emu::FwdCase cases[] = {{{70, 0, 1, 130, 64}, 2, 0.0, 0.0, -5.f},
                                    {{1024}, 1, 0.0, 0.0, -5.f},
                                    {{129, 63}, 1, -6.0, 0.0, -5.f},
                                    {{200}, 1, 0.0, 6.0, -5.f},
                                    {{65, 127}, 1, 0.0, 0.0, -0.3f}};
  const char* names[6] = {"W", "Q Gam", "Kdec", "M", "Uv", "Gam_C"};
  std::mt19937_64 rng(31);
  std::normal_distribution<double> nd(0.0, 1.0);
  for (const kda_emu::FwdCase& cs : cases) {
    const kda_ref::Problem p = kda_emu::ProblemOf<kda_ref::Problem>(cs, rng, nd, false);
    const int64_t tok = p.cu.back(), N = cs.lens.size(), H = cs.H, n = tok * H * 128;
    const kda_emu::FwdInputs in = kda_emu::InputsOf(p, cs.lower_bound);
    std::vector<unsigned char> ws(kda_layout::FwdWorkspaceBytes(1, tok, H, N), 0xA5);
    const kda_cuda::FwdArgs f = in.Args();
    char* wsp = reinterpret_cast<char*>(ws.data());
    kda_emu::EmuPrep(f, wsp);
    double num[6] = {}, den[6] = {}, worst[6] = {};
    const std::vector<double> no_do(n, 0.0);
    for (int64_t h = 0; h < H; ++h) {
      for (int64_t d = 0; d < N; ++d) {
        const int64_t bos = p.cu[d], eos = p.cu[d + 1];
        for (int64_t c = 0; c < (eos - bos + 63) / 64; ++c) {
          const int64_t t0 = bos + c * 64, slot = bos / 64 + d + c;
          const kda_ref::Chunk ch =
              kda_ref::Prepare(p, no_do, t0, int(std::min<int64_t>(64, eos - t0)), h);
          const char* rec = wsp + (slot * H + h) * kda_layout::kRecBytes;
          auto u16 = [&](int64_t off) { return reinterpret_cast<const uint16_t*>(rec + off); };
          const uint16_t* negw = u16(kda_layout::kRecNegW);
          const uint16_t* qg = u16(kda_layout::kRecQg);
          const uint16_t* kdt = u16(kda_layout::kRecKdecT);
          const uint16_t* m = u16(kda_layout::kRecM);
          const float* uv = reinterpret_cast<const float*>(rec + kda_layout::kRecUv);
          const float* gc = reinterpret_cast<const float*>(rec + kda_layout::kRecGamC);
          double cn[6] = {}, cd[6] = {};
          auto add = [&](int f, double got, double want) {
            cn[f] += (got - want) * (got - want);
            cd[f] += want * want;
          };
          auto hl = [](const uint16_t* x, int i, int lo) {
            return double(FromBf(x[i])) + double(FromBf(x[i + lo]));
          };
          for (int t = 0; t < 64; ++t) {
            for (int kk = 0; kk < 128; ++kk) {
              add(0, -hl(negw, t * 128 + kk, 8192), ch.W[t * 128 + kk]);
              add(1, hl(qg, t * 128 + kk, 8192), ch.QG[t * 128 + kk]);
              add(2, hl(kdt, kk * 64 + t, 8192), ch.Kdec[t * 128 + kk]);
              add(4, uv[t * 128 + kk], ch.Uv[t * 128 + kk]);
            }
            for (int i = 0; i < 64; ++i) add(3, hl(m, t * 64 + i, 4096), ch.M[t * 64 + i]);
          }
          for (int kk = 0; kk < 128; ++kk) add(5, gc[kk], ch.gc[kk]);
          for (int f = 0; f < 6; ++f) {
            num[f] += cn[f];
            den[f] += cd[f];
            if (cd[f] > 0) worst[f] = std::max(worst[f], std::sqrt(cn[f] / cd[f]));
          }
        }
      }
    }
    std::printf("%5lld tokens %lld docs H %lld dt %+.0f g %+.0f lb %+.1f:", (long long)tok,
                (long long)N, (long long)H, cs.dt_mean, cs.g_mean, cs.lower_bound);
    for (int f = 0; f < 6; ++f) {
      std::printf("  %s %.2e (worst chunk %.2e)", names[f], std::sqrt(num[f] / den[f]), worst[f]);
    }
    std::printf("\n");
  }
  return 0;
}
