// Accuracy of the chunked KDA forward on the host (tools/emu): the preparation and the state pass
// (forward mode, o and final_state), their CUDA source compiled by g++ with the device's
// approximate exp2 / rcp / rsqrt and mma.sync emulated (cuda_host_shim.h), against the FP64
// reference. For value-changing preparation candidates, whose accuracy must be shown without a
// GPU: run it on both versions (tools/emu/run_kda_forward_acc_emu.sh) and compare.
// Cases: packed documents (empty, 1-token, ragged), one long document, slow gates (dt_bias ~
// N(-6, .5)), saturated gates (g ~ N(6, 1)) and a mild lower_bound (-0.3); initial state
// N(0, 0.1). Prints o's and final_state's rel-L2 (SPEC: 5e-3 and 1e-4) and their max abs error.
#include <cstdio>
#include <random>

#include "cuda_host_shim.h"
#include "fwd_emu.inc"
}  // namespace kda_cuda
}  // namespace cakegrad::kernels

#include "kda_emu_bf16.h"
#include "kda_emu_fwd_inputs.h"
#include "reference/kda_reference_internal.h"

using namespace cakegrad::kernels;
using kda_emu::FromBf;
using kda_emu::RelL2;
using kda_emu::ToBf;

int main() {
  const kda_emu::FwdCase cases[] = {{{70, 0, 1, 130, 64}, 2, 0.0, 0.0, -5.f, 16},
                                    {{1024}, 1, 0.0, 0.0, -5.f, 32},
                                    {{129, 63}, 1, -6.0, 0.0, -5.f, 64},
                                    {{200}, 1, 0.0, 6.0, -5.f, 16},
                                    {{65, 127}, 1, 0.0, 0.0, -0.3f, 32}};
  std::mt19937_64 rng(23);
  std::normal_distribution<double> nd(0.0, 1.0);
  int rc = 0;
  double worst_o = 0, worst_s = 0;
  // FNV-1a of every o and final_state: with EMU_SMEM_FILL=<byte> (cuda_host_shim.h) two fills must
  // print the same hash, or some output read shared memory that no thread wrote.
  kda_emu::Fnv1a fnv;
  for (const kda_emu::FwdCase& cs : cases) {
    const kda_ref::Problem p = kda_emu::ProblemOf<kda_ref::Problem>(cs, rng, nd, true);
    const int64_t tok = p.cu.back(), N = cs.lens.size(), H = cs.H, n = tok * H * 128;
    std::vector<double> o_ref, s_ref;
    kda_ref::Forward(p, &o_ref, &s_ref);

    const kda_emu::FwdInputs in = kda_emu::InputsOf(p, cs.lower_bound);
    std::vector<float> s0(p.s0.begin(), p.s0.end());
    std::vector<uint16_t> o(n, 0xffff);  // poisoned (NaN)
    std::vector<float> fs(N * H * 128 * 128, std::nanf(""));
    std::vector<unsigned char> ws(kda_layout::FwdWorkspaceBytes(1, tok, H, N), 0xA5);
    kda_cuda::FwdArgs f = in.Args();
    f.initial_state = s0.data();
    f.o = o.data();
    f.final_state = fs.data();
    char* wsp = reinterpret_cast<char*>(ws.data());
    kda_emu::EmuPrep(f, wsp);
    kda_emu::EmuStatePass<false>(cs.rows, f, wsp);
    fnv.Add(o.data(), o.size() * 2);
    fnv.Add(fs.data(), fs.size() * 4);
    std::vector<double> od(n), sd(fs.begin(), fs.end());
    double mo = 0, ms = 0;
    for (int64_t i = 0; i < n; ++i) {
      od[i] = FromBf(o[i]);
      mo = std::max(mo, std::fabs(od[i] - o_ref[i]));
    }
    for (size_t i = 0; i < sd.size(); ++i) ms = std::max(ms, std::fabs(sd[i] - s_ref[i]));
    const double eo = RelL2(od, o_ref), es = RelL2(sd, s_ref);
    const bool ok = eo <= 5e-3 && es <= 1e-4;  // false for NaN: an output left unwritten
    if (!ok) rc = 1;
    worst_o = std::max(worst_o, eo);
    worst_s = std::max(worst_s, es);
    std::printf(
        "%5lld tokens %lld docs H %lld dt %+.0f g %+.0f lb %+.1f rows %2d: o rel-L2 %.3e "
        "(max abs %.2e), final_state rel-L2 %.3e (max abs %.2e)%s\n",
        (long long)tok, (long long)N, (long long)H, cs.dt_mean, cs.g_mean, cs.lower_bound, cs.rows,
        eo, mo, es, ms, ok ? "" : "  FAIL");
  }
  std::printf("worst: o %.3e, final_state %.3e; outputs fnv1a %016llx\n", worst_o, worst_s,
              static_cast<unsigned long long>(fnv.hash));
  return rc;
}
