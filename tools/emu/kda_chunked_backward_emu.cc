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

int main(int argc, char** argv) {
  std::vector<int64_t> lens = {70, 0, 1, 130, 64};
  const int64_t H = 2;
  const bool with_init = !(argc > 1 && std::strcmp(argv[1], "noinit") == 0);
  const double dt_mean = argc > 2 ? std::atof(argv[2]) : 0.0;
  // "kernels": records and S0 from the emulated launch 1; otherwise built here in FP64.
  const bool use_kernels = argc > 3 && std::strcmp(argv[3], "kernels") == 0;
  // The reverse chain's slice width (16, 32 or 64 state rows per CTA).
  const int chain_rows = argc > 4 ? std::atoi(argv[4]) : 16;
  if (chain_rows != 16 && chain_rows != 32 && chain_rows != 64) return 2;
  std::mt19937_64 rng(7);
  std::normal_distribution<double> nd(0.0, 1.0);
  R::Problem p;
  p.cu.push_back(0);
  for (int64_t l : lens) p.cu.push_back(p.cu.back() + l);
  const int64_t tok = p.cu.back(), N = lens.size();
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
  fill(&p.A_log, H, 0, 0.5, false);
  fill(&p.dt_bias, H * 128, dt_mean, 0.5, false);
  if (with_init) fill(&p.s0, N * H * 128 * 128, 0, 0.1, false);
  p.scale = 0.0883883476483184;
  p.lower_bound = -5.0;
  p.scale = double(float(p.scale));
  std::vector<double> d_o, dfinal;
  fill(&d_o, n, 0, 1, true);
  fill(&dfinal, N * H * 128 * 128, 0, 0.1, false);
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
  // EMU_WS_FILL=<byte>: the workspace's initial bytes (0xA5 by default), to check that no output
  // depends on them (the outputs' hash below must not change).
  const char* ws_fill = std::getenv("EMU_WS_FILL");
  std::vector<unsigned char> ws(lay.total, ws_fill ? std::atoi(ws_fill) : 0xA5);
  char* wsp = reinterpret_cast<char*>(ws.data());
  std::vector<float> s0f = f32(p.s0);
  if (use_kernels) {
    kda_cuda::FwdArgs f{};
    f.s.cu_seqlens = cu.data();
    f.s.is_int64 = 1;
    f.s.T = tok;
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
  b.s.cu_seqlens = cu.data();
  b.s.is_int64 = 1;
  b.s.T = tok;
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
  if (chain_rows == 16) chain(std::integral_constant<int, 16>{});
  if (chain_rows == 32) chain(std::integral_constant<int, 32>{});
  if (chain_rows == 64) chain(std::integral_constant<int, 64>{});
  std::printf("chain done\n");
  EmuLaunch({unsigned(slots), unsigned(H), 1}, GradTraits::kThreads,
            [&] { KdaChunkGradKernel(b); });
  std::printf("grad done\n");
  EmuLaunch({unsigned(H), 1, 1}, 128,
            [&] { KdaChunkParamReduceKernel(b.partials, slots, H, dA.data(), ddt.data()); });
  auto d16 = [](const std::vector<uint16_t>& x) {
    std::vector<double> o(x.size());
    for (size_t i = 0; i < x.size(); ++i) o[i] = FromBf(x[i]);
    return o;
  };
  auto d32 = [](const std::vector<float>& x) { return std::vector<double>(x.begin(), x.end()); };
  const struct {
    const char* name;
    double err, limit;
  } checks[] = {{"dq", RelL2(d16(dq), exact.dq), 5e-3},
                {"dk", RelL2(d16(dk), exact.dk), 5e-3},
                {"dv", RelL2(d16(dv), exact.dv), 5e-3},
                {"dg", RelL2(d16(dg), exact.dg), 5e-3},
                {"dbeta", RelL2(d16(dbeta), exact.dbeta), 5e-3},
                {"dA_log", RelL2(d32(dA), exact.dA_log), 1e-4},
                {"ddt_bias", RelL2(d32(ddt), exact.ddt_bias), 1e-4},
                {"dinitial_state", RelL2(d32(dinit), exact.ds0), 1e-4}};
  uint64_t hash = 1469598103934665603ull;
  auto fnv = [&](const void* data, size_t bytes) {
    const auto* c = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < bytes; ++i) hash = (hash ^ c[i]) * 1099511628211ull;
  };
  for (const auto* x : {&dq, &dk, &dv, &dg, &dbeta}) fnv(x->data(), x->size() * 2);
  for (const auto* x : {&dA, &ddt, &dinit}) fnv(x->data(), x->size() * 4);
  std::printf("outputs fnv1a %016llx\n", static_cast<unsigned long long>(hash));
  int rc = status == 0 ? 0 : 1;
  for (const auto& c : checks) {
    const bool ok = c.err <= c.limit;  // false for NaN: an output left unwritten
    std::printf("%-15s rel-L2 %.3e (limit %.0e)%s\n", c.name, c.err, c.limit, ok ? "" : "  FAIL");
    if (!ok) rc = 1;
  }
  return rc;
}
