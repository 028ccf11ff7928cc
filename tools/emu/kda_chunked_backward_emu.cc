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

#include "reference/kda_reference_internal.h"

namespace cakegrad::kernels::kda_ref {
#include "prep.inc"
}

#include "kda_bwd_emu_driver.h"

using namespace cakegrad::kernels;
using namespace kda_emu;

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

  Inputs in = MakeInputs(p, d_o, dfinal);
  const kda_cuda::KdaShape shape = MakeShape(p, in, 1, tok);
  const L::ChunkBwdLayout lay = L::MakeChunkBwdLayout(1, tok, H, N);
  // EMU_WS_FILL=<byte>: the workspace's initial bytes (0xA5 by default), to check that no output
  // depends on them (the outputs' hash below must not change).
  const char* ws_fill = std::getenv("EMU_WS_FILL");
  std::vector<unsigned char> ws(lay.total, ws_fill ? std::atoi(ws_fill) : 0xA5);
  char* wsp = reinterpret_cast<char*>(ws.data());
  FillRecords(p, d_o, in, shape, with_init, use_kernels, lay, wsp);
  Outputs out = RunBackwardKernels(in, shape, lay, wsp, chain_rows);
  auto& [dq, dk, dv, dg, dbeta, dA, ddt, dinit, status] = out;
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
  kda_emu::Fnv1a fnv;
  for (const auto* x : {&dq, &dk, &dv, &dg, &dbeta}) fnv.Add(x->data(), x->size() * 2);
  for (const auto* x : {&dA, &ddt, &dinit}) fnv.Add(x->data(), x->size() * 4);
  std::printf("outputs fnv1a %016llx\n", static_cast<unsigned long long>(fnv.hash));
  int rc = status == 0 ? 0 : 1;
  for (const auto& c : checks) {
    const bool ok = c.err <= c.limit;  // false for NaN: an output left unwritten
    std::printf("%-15s rel-L2 %.3e (limit %.0e)%s\n", c.name, c.err, c.limit, ok ? "" : "  FAIL");
    if (!ok) rc = 1;
  }
  return rc;
}
