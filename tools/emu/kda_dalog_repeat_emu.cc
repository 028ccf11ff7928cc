// The host driver of tools/emu/run_kda_chunked_backward_emu.sh (see there): kernels 2-4 of the
// chunked KDA backward, their CUDA source compiled for the host, against the FP64 reference.
#include "cuda_host_shim.h"
#include "kern_emu.inc"
// Launch 1 (kda_chunked_forward_emu.cc): records into ws, chunk-start states at a.checkpoints.
void EmuChunkedForwardCheckpoints(const FwdArgs& a, char* ws);
}  // namespace kda_cuda
}  // namespace cakegrad::kernels

#include <cstdio>
#include <random>
#include <type_traits>

#include "reference/kda_reference_internal.h"

namespace cakegrad::kernels::kda_ref {
#include "prep.inc"
}

using namespace cakegrad::kernels;
namespace R = cakegrad::kernels::kda_ref;
namespace L = cakegrad::kernels::kda_layout;

static uint16_t ToBf(float x) { return __bfloat16_as_ushort(__float2bfloat16_rn(x)); }
static float FromBf(uint16_t u) {
  uint32_t b = uint32_t(u) << 16;
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}
static double RoundBf(double x) { return FromBf(ToBf(static_cast<float>(x))); }
static void SplitTo(double x, uint16_t* hi, uint16_t* lo) {
  const float f = static_cast<float>(x);
  *hi = ToBf(f);
  *lo = ToBf(f - FromBf(*hi));
}
static double RelL2(const std::vector<double>& a, const std::vector<double>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

// Usage: kda_dalog_repeat_emu T H seed0 count [fp64|kernels] [B] [init]
// Test draws (tests/gpu/kda_kernels_test.cu MakeHost): q k v g beta dO BF16 N(0,1), A_log
// U(-1,1), dt_bias N(0,0.5), initial_state N(0,0.1) (with "init"), dfinal_state N(0,1); scale
// 1/sqrt(128), lb -5. B > 1: B documents of T tokens without cu_seqlens, as the test's
// B2_T65_H1 (Shape::lens empty), one dA_log per head summed over them.
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
    fill(&p.g, n, 0, 1, true);
    fill(&p.beta, tok * H, 0, 1, true);
    std::vector<double> d_o, dfinal;
    fill(&d_o, n, 0, 1, true);
    p.A_log.resize(H);
    for (auto& e : p.A_log) e = double(float(ud(rng)));
    fill(&p.dt_bias, H * 128, 0, 0.5, false);
    fill(&dfinal, N * H * 128 * 128, 0, 1.0, false);
    if (with_init) fill(&p.s0, N * H * 128 * 128, 0, 0.1, false);
    p.scale = double(float(1.0 / std::sqrt(128.0)));
    p.lower_bound = -5.0;
    R::Grads exact;
    R::Backward(p, d_o, dfinal, &exact);
    // Device-side buffers (host memory here).
    auto bf = [](const std::vector<double>& x) {
      std::vector<uint16_t> o(x.size());
      for (size_t i = 0; i < x.size(); ++i) o[i] = ToBf(float(x[i]));
      return o;
    };
    auto f32 = [](const std::vector<double>& x) {
      std::vector<float> o(x.size());
      for (size_t i = 0; i < x.size(); ++i) o[i] = float(x[i]);
      return o;
    };
    std::vector<uint16_t> q = bf(p.q), k = bf(p.k), v = bf(p.v), g = bf(p.g), beta = bf(p.beta),
                          dob = bf(d_o);
    std::vector<float> A_log = f32(p.A_log), dt_bias = f32(p.dt_bias), dfs = f32(dfinal);
    std::vector<int64_t> cu = p.cu;
    const int64_t slots = L::ChunkSlots(tok, N);
    const L::ChunkBwdLayout lay = L::MakeChunkBwdLayout(1, tok, H, N);
    std::vector<unsigned char> ws(lay.total, 0xA5);
    char* wsp = reinterpret_cast<char*>(ws.data());
    std::vector<float> s0f = f32(p.s0);
    if (use_kernels) {
      kda_cuda::FwdArgs f{};
      f.s.cu_seqlens = B > 1 ? nullptr : cu.data();
      f.s.is_int64 = 1;
      f.s.T = B > 1 ? T : tok;
      f.s.total_tokens = tok;
      f.s.H = H;
      f.s.N = N;
      f.s.scale = float(p.scale);
      f.s.lower_bound = float(p.lower_bound);
      f.q = q.data();
      f.k = k.data();
      f.v = v.data();
      f.g = g.data();
      f.beta = beta.data();
      f.A_log = A_log.data();
      f.dt_bias = dt_bias.data();
      f.initial_state = with_init ? s0f.data() : nullptr;
      f.checkpoints = reinterpret_cast<float*>(wsp + lay.s0);
      kda_cuda::EmuChunkedForwardCheckpoints(f, wsp + lay.records);
    }
    // Records and S0 from the FP64 chunk math.
    for (int64_t h = 0; h < H && !use_kernels; ++h) {
      for (int64_t d = 0; d < N; ++d) {
        const int64_t bos = cu[d], eos = cu[d + 1];
        const int64_t chunks = (eos - bos + 63) / 64;
        std::vector<double> S(128 * 128, 0.0);
        if (with_init)
          for (int e = 0; e < 128 * 128; ++e) S[e] = p.s0[(d * H + h) * 16384 + e];
        for (int64_t c = 0; c < chunks; ++c) {
          const int64_t t0 = bos + c * 64, slot = bos / 64 + d + c;
          R::Chunk ch = R::Prepare(p, d_o, t0, int(std::min<int64_t>(64, eos - t0)), h);
          char* rec = wsp + lay.records + (slot * H + h) * L::kRecBytes;
          uint16_t* negw = reinterpret_cast<uint16_t*>(rec + L::kRecNegW);
          uint16_t* qg = reinterpret_cast<uint16_t*>(rec + L::kRecQg);
          uint16_t* kdt = reinterpret_cast<uint16_t*>(rec + L::kRecKdecT);
          uint16_t* m = reinterpret_cast<uint16_t*>(rec + L::kRecM);
          float* uv = reinterpret_cast<float*>(rec + L::kRecUv);
          float* gamc = reinterpret_cast<float*>(rec + L::kRecGamC);
          for (int t = 0; t < 64; ++t)
            for (int kk = 0; kk < 128; ++kk) {
              SplitTo(-ch.W[t * 128 + kk], &negw[t * 128 + kk], &negw[8192 + t * 128 + kk]);
              SplitTo(ch.QG[t * 128 + kk], &qg[t * 128 + kk], &qg[8192 + t * 128 + kk]);
              SplitTo(ch.Kdec[t * 128 + kk], &kdt[kk * 64 + t], &kdt[8192 + kk * 64 + t]);
              uv[t * 128 + kk] = float(ch.Uv[t * 128 + kk]);
            }
          for (int t = 0; t < 64; ++t)
            for (int i = 0; i < 64; ++i)
              SplitTo(ch.M[t * 64 + i], &m[t * 64 + i], &m[4096 + t * 64 + i]);
          for (int kk = 0; kk < 128; ++kk) gamc[kk] = float(ch.gc[kk]);
          float* s0c = reinterpret_cast<float*>(wsp + lay.s0) + (slot * H + h) * 16384;
          for (int e = 0; e < 16384; ++e) s0c[e] = float(S[e]);
          // S1 = S0 gc + U^T Kdec
          std::vector<double> U(64 * 128), S1(128 * 128);
          for (int t = 0; t < 64; ++t)
            for (int vv = 0; vv < 128; ++vv) {
              double u = ch.Uv[t * 128 + vv];
              for (int kk = 0; kk < 128; ++kk) u -= ch.W[t * 128 + kk] * S[vv * 128 + kk];
              U[t * 128 + vv] = u;
            }
          for (int vv = 0; vv < 128; ++vv)
            for (int kk = 0; kk < 128; ++kk) {
              double s = S[vv * 128 + kk] * ch.gc[kk];
              for (int t = 0; t < 64; ++t) s += U[t * 128 + vv] * ch.Kdec[t * 128 + kk];
              S1[vv * 128 + kk] = s;
            }
          S = S1;
        }
      }
    }
    std::vector<uint16_t> dq(n, 0xFFFF), dk(n, 0xFFFF), dv(n, 0xFFFF), dg(n, 0xFFFF),
        dbeta(tok * H, 0xFFFF);
    std::vector<float> dA(H, NAN), ddt(H * 128, NAN), dinit(N * H * 16384, NAN);
    uint32_t status = 0;
    kda_cuda::ChunkBwdArgs b{};
    b.s.cu_seqlens = B > 1 ? nullptr : cu.data();
    b.s.is_int64 = 1;
    b.s.T = B > 1 ? T : tok;
    b.s.total_tokens = tok;
    b.s.H = H;
    b.s.N = N;
    b.s.scale = float(p.scale);
    b.s.lower_bound = float(p.lower_bound);
    b.s.device_status = &status;
    b.q = q.data();
    b.k = k.data();
    b.v = v.data();
    b.g = g.data();
    b.beta = beta.data();
    b.d_o = dob.data();
    b.A_log = A_log.data();
    b.dt_bias = dt_bias.data();
    b.dfinal_state = dfs.data();
    b.records = wsp + lay.records;
    b.s0 = reinterpret_cast<const float*>(wsp + lay.s0);
    b.ds1 = reinterpret_cast<float*>(wsp + lay.ds1);
    b.partials = reinterpret_cast<float*>(wsp + lay.partials);
    b.dq = dq.data();
    b.dk = dk.data();
    b.dv = dv.data();
    b.dg = dg.data();
    b.dbeta = dbeta.data();
    b.dinitial_state = dinit.data();
    using namespace cakegrad::kernels::kda_cuda;
    auto chain = [&](auto rows) {
      using Tr = ChainTraits<decltype(rows)::value>;
      EmuLaunch({unsigned(Tr::kSlices), unsigned(H), unsigned(N)}, Tr::kThreads,
                [&] { KdaChunkDstateKernel<decltype(rows)::value>(b); });
    };
    chain(std::integral_constant<int, 16>{});
    EmuLaunch({unsigned(slots), unsigned(H), 1}, GradTraits::kThreads,
              [&] { KdaChunkGradKernel(b); });
    EmuLaunch({unsigned(H), 1, 1}, 128,
              [&] { KdaChunkParamReduceKernel(b.partials, slots, H, dA.data(), ddt.data()); });

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
