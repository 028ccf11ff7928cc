// The host driver of tools/emu/run_kda_dalog_repeat_emu.sh (see there): the chunked KDA
// backward's kernels, their CUDA source compiled for the host, on repeated fresh draws against the
// FP64 reference, printing dA_log's error and conditioning per draw.
#include "cuda_host_shim.h"
#include "kern_emu.inc"
// Launch 1 (kda_chunked_forward_emu.cc): records into ws, chunk-start states at a.checkpoints.
void EmuChunkedForwardCheckpoints(const FwdArgs& a, char* ws);
}  // namespace kda_cuda
}  // namespace cakegrad::kernels

#include <cstdio>
#include <random>

#include "reference/kda_reference_internal.h"

namespace cakegrad::kernels::kda_ref {
#include "prep.inc"
}

#include "kda_bwd_emu_driver.h"

using namespace cakegrad::kernels;
using namespace kda_emu;

// Usage: kda_dalog_repeat_emu T H seed0 count [fp64|kernels] [B] [init]
// Test draws (tests/gpu/kda_kernels_test.cu MakeHost): q k v g beta dO BF16 N(0,1), A_log
// U(-1,1), dt_bias N(0,0.5), initial_state N(0,0.1) (with "init"), dfinal_state N(0,1); scale
// 1/sqrt(128), lb -5. B > 1: B documents of T tokens without cu_seqlens, as the test's
// B2_T65_H1 (Shape::lens empty), one dA_log per head summed over them. Seed s draws the inputs
// of the GPU test's KDA_TEST_SEED=s, value for value (same engine, distributions and order).
int main(int argc, char** argv) {
  const int64_t T = std::atoll(argv[1]), H = std::atoll(argv[2]);
  const uint64_t seed0 = std::atoll(argv[3]);
  const int count = std::atoi(argv[4]);
  const bool use_kernels = !(argc > 5 && std::strcmp(argv[5], "fp64") == 0);
  const int64_t B = argc > 6 ? std::atoll(argv[6]) : 1;
  const bool with_init = argc > 7 && std::strcmp(argv[7], "init") == 0;
  for (int rep = 0; rep < count; ++rep) {
    std::mt19937_64 rng(seed0 + rep);
    std::normal_distribution<double> nd(0.0, 1.0);
    std::uniform_real_distribution<double> ud(-1.0, 1.0);
    R::Problem p;
    const int64_t tok = B * T, N = B;
    for (int64_t d = 0; d <= N; ++d) p.cu.push_back(d * T);
    p.total_tokens = tok;
    p.H = H;
    const int64_t n = tok * H * 128;
    auto fill = [&](std::vector<double>* x, int64_t cnt, double mean, double sd, bool bf) {
      x->resize(cnt);
      for (auto& e : *x) {
        e = mean + sd * nd(rng);
        e = bf ? RoundBf(e) : double(float(e));
      }
    };
    fill(&p.q, n, 0, 1, true);
    fill(&p.k, n, 0, 1, true);
    fill(&p.v, n, 0, 1, true);
    // EMU_G_MEAN=6: the test's fast-decay shapes (g ~ N(6, 1), gates near lower_bound).
    static const double g_mean =
        std::getenv("EMU_G_MEAN") ? std::atof(std::getenv("EMU_G_MEAN")) : 0;
    fill(&p.g, n, g_mean, 1, true);
    fill(&p.beta, tok * H, 0, 1, true);
    std::vector<double> d_o, dfinal;
    fill(&d_o, n, 0, 1, true);
    p.A_log.resize(H);
    for (auto& e : p.A_log) e = double(float(ud(rng)));
    fill(&p.dt_bias, H * 128, 0, 0.5, false);
    // MakeHost's order: the initial state (drawn whether used or not), then dfinal_state.
    std::vector<double> s0;
    fill(&s0, N * H * 128 * 128, 0, 0.1, false);
    if (with_init) p.s0 = s0;
    fill(&dfinal, N * H * 128 * 128, 0, 1.0, false);
    p.scale = double(float(1.0 / std::sqrt(128.0)));
    p.lower_bound = -5.0;
    R::Grads exact;
    R::Backward(p, d_o, dfinal, &exact);
    Inputs in = MakeInputs(p, d_o, dfinal);
    const kda_cuda::KdaShape shape = MakeShape(p, in, B, T);
    const L::ChunkBwdLayout lay = L::MakeChunkBwdLayout(1, tok, H, N);
    std::vector<unsigned char> ws(lay.total, 0xA5);
    char* wsp = reinterpret_cast<char*>(ws.data());
    FillRecords(p, d_o, in, shape, with_init, use_kernels, lay, wsp);
    const Outputs out = RunBackwardKernels(in, shape, lay, wsp, 16);
    const std::vector<float>&dA = out.dA, &ddt = out.ddt, &dinit = out.dinit;

    auto d32 = [](const std::vector<float>& x) { return std::vector<double>(x.begin(), x.end()); };
    // conditioning per head: sum_{t,k} |x dx| / |sum x dx| from the exact dg (= e^A dx)
    std::printf("seed %llu dA_log %.3e ddt_bias %.3e dinit %.3e |",
                (unsigned long long)(seed0 + rep), RelL2(d32(dA), exact.dA_log),
                RelL2(d32(ddt), exact.ddt_bias), RelL2(d32(dinit), exact.ds0));
    for (int64_t h = 0; h < H; ++h) {
      const double ea = std::exp(p.A_log[h]);
      double sabs = 0;
      for (int64_t t = 0; t < tok; ++t)
        for (int kk = 0; kk < 128; ++kk) {
          const int64_t i = (t * H + h) * 128 + kk;
          sabs += std::fabs(ea * (p.g[i] + p.dt_bias[h * 128 + kk]) * exact.dg[i] / ea);
        }
      std::printf(" h%lld exact %.6e got %.6e cond %.0f", (long long)h, exact.dA_log[h],
                  double(dA[h]), sabs / std::fabs(exact.dA_log[h]));
    }
    std::printf("\n");
    std::fflush(stdout);
  }
  return 0;
}
