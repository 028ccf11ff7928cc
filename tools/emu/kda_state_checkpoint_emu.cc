// The chunk state pass's checkpoint instances (KdaChunkStateKernel<rows, true>: the chunked
// backward's recompute, every chunk-start state S0 in FP32 and final_state) at 16, 32 and 64 rows
// on the host (tools/emu), hashed, so that a state-pass change meant to be bitwise can be checked
// against a base revision there too: the chunked backward's emulator runs the 16-row instance
// only (kda_chunked_forward_emu.cc). The 64-row case is the accuracy driver's (2 documents, 129
// and 63 tokens, slow gates); the checkpoints are also compared with the forward instance's
// final_state where a document's last chunk ends (the same state, the same order: equal).
// Usage: tools/emu/run_kda_state_checkpoint_emu.sh [BASE_REV]
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>

#include "cuda_host_shim.h"
#include "fwd_emu.inc"
}  // namespace kda_cuda
}  // namespace cakegrad::kernels

#include "kda_emu_bf16.h"
#include "kda_emu_fwd_inputs.h"
#include "reference/kda_reference_internal.h"

using namespace cakegrad::kernels;

int main() {
  const kda_emu::FwdCase cases[] = {{{70, 0, 1, 130, 64}, 2, 0.0, 0.0, -5.f, 16},
                                    {{200, 65}, 1, 0.0, 0.0, -5.f, 32},
                                    {{129, 63}, 1, -6.0, 0.0, -5.f, 64}};
  std::mt19937_64 rng(29);
  std::normal_distribution<double> nd(0.0, 1.0);
  int rc = 0;
  for (const kda_emu::FwdCase& cs : cases) {
    const kda_ref::Problem p = kda_emu::ProblemOf<kda_ref::Problem>(cs, rng, nd, true);
    const int64_t tok = p.cu.back(), N = cs.lens.size(), H = cs.H;
    const kda_emu::FwdInputs in = kda_emu::InputsOf(p, cs.lower_bound);
    std::vector<float> s0(p.s0.begin(), p.s0.end());
    const int64_t slots = kda_layout::ChunkSlots(tok, N);
    std::vector<unsigned char> ws(kda_layout::FwdWorkspaceBytes(1, tok, H, N), 0xA5);
    std::vector<float> ck(slots * H * 128 * 128, std::nanf("")), fs(N * H * 128 * 128, 0.f);
    std::vector<uint16_t> o(tok * H * 128, 0xffff);
    kda_cuda::FwdArgs f = in.Args();
    f.initial_state = s0.data();
    char* wsp = reinterpret_cast<char*>(ws.data());
    kda_emu::EmuPrep(f, wsp);
    auto run = [&](bool checkpoint) {
      checkpoint ? kda_emu::EmuStatePass<true>(cs.rows, f, wsp)
                 : kda_emu::EmuStatePass<false>(cs.rows, f, wsp);
    };
    f.checkpoints = ck.data();
    f.final_state = fs.data();
    run(true);
    kda_emu::Fnv1a fnv;
    fnv.Add(ck.data(), ck.size() * 4);
    fnv.Add(fs.data(), fs.size() * 4);
    // The forward instance's final_state must equal the checkpoint instance's (same chain).
    std::vector<float> fs2(fs.size(), std::nanf(""));
    f.checkpoints = nullptr;
    f.final_state = fs2.data();
    f.o = o.data();
    run(false);
    const bool same = std::memcmp(fs.data(), fs2.data(), fs.size() * 4) == 0;
    int64_t written = 0;
    for (float x : ck) written += !std::isnan(x);
    if (!same) rc = 1;
    std::printf(
        "rows %2d, %lld tokens %lld docs H %lld: checkpoints written %lld, final_state %s "
        "the forward's; checkpoints + final_state fnv1a %016llx\n",
        cs.rows, (long long)tok, (long long)N, (long long)H, (long long)written,
        same ? "bitwise" : "DIFFERS from", static_cast<unsigned long long>(fnv.hash));
  }
  return rc;
}
