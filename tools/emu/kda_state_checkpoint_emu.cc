// The chunk state pass's checkpoint instances (KdaChunkStateKernel<rows, true>: the chunked
// backward's recompute, every chunk-start state S0 in FP32 and final_state) at 16, 32 and 64 rows
// on the host (tools/emu), hashed, so that a state-pass change meant to be bitwise can be checked
// against a base revision there too: the chunked backward's emulator runs the 16-row instance
// only (kda_chunked_forward_emu.cc). The 64-row case is the accuracy driver's (2 documents, 129
// and 63 tokens, slow gates). The plain instance (the fallback without clusters) must give the
// same bits; the forward's final_state is compared too (its pass multiplies Kdec^T in BF16x3
// where the checkpoint pass has BF16x6 and a third part of Kdec^T: close, not equal).
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
    char* wsp = reinterpret_cast<char*>(ws.data());
    const float nan = std::nanf("");
    std::vector<float> ck(slots * H * 128 * 128, nan), fs(N * H * 128 * 128, nan);
    std::vector<float> chunk_p(slots * H * kda_layout::kChunkPFloats, nan);
    std::vector<float> chunk_tinv(chunk_p.size(), nan), chunk_u(slots * H * 64 * 128, nan);
    std::vector<uint16_t> kdt3(slots * H * 128 * 64, 0xffff), o(tok * H * 128, 0xffff);
    // The chunked backward's launch 1: the checkpoint preparation, then the checkpoint pass as
    // the device runs it (2-CTA clusters) and as its plain fallback; both must give the same bits.
    kda_cuda::FwdArgs f = in.Args();
    f.initial_state = s0.data();
    f.chunk_p = chunk_p.data();
    f.chunk_tinv = chunk_tinv.data();
    f.chunk_u = chunk_u.data();
    f.chunk_kdt3 = kdt3.data();
    EmuLaunch(EmuGrid(kda_cuda::ChunkSlotGrid(slots, H)), kda_cuda::kPrepThreads,
              [&] { kda_cuda::KdaChunkPrepKernel<kda_cuda::kPrepThreads, true>(f, wsp); });
    f.checkpoints = ck.data();
    f.final_state = fs.data();
    kda_emu::EmuStatePass<true>(cs.rows, f, wsp);
    kda_emu::Fnv1a fnv;
    fnv.Add(ck.data(), ck.size() * 4);
    fnv.Add(fs.data(), fs.size() * 4);
    std::vector<float> ck_plain(ck.size(), nan), fs_plain(fs.size(), nan);
    f.checkpoints = ck_plain.data();
    f.final_state = fs_plain.data();
    kda_emu::EmuStatePass<true, true>(cs.rows, f, wsp);
    const bool plain_same = std::memcmp(ck.data(), ck_plain.data(), ck.size() * 4) == 0 &&
                            std::memcmp(fs.data(), fs_plain.data(), fs.size() * 4) == 0;
    // The forward (its own preparation and pass, BF16x3 on Kdec^T where the checkpoint pass has
    // BF16x6): the same chain to about its precision, not bitwise.
    kda_cuda::FwdArgs fw = in.Args();
    fw.initial_state = s0.data();
    std::vector<float> fs_fwd(fs.size(), nan);
    fw.final_state = fs_fwd.data();
    fw.o = o.data();
    kda_emu::EmuPrep(fw, wsp);
    kda_emu::EmuStatePass<false>(cs.rows, fw, wsp);
    double num = 0, den = 0;
    for (size_t i = 0; i < fs.size(); ++i) {
      num += (double(fs[i]) - fs_fwd[i]) * (double(fs[i]) - fs_fwd[i]);
      den += double(fs_fwd[i]) * fs_fwd[i];
    }
    int64_t written = 0;
    for (float x : ck) written += !std::isnan(x);
    if (!plain_same) rc = 1;
    std::printf(
        "rows %2d, %lld tokens %lld docs H %lld: checkpoints written %lld, plain instance %s; "
        "final_state rel-L2 to the forward's %.2e; checkpoints + final_state fnv1a %016llx\n",
        cs.rows, (long long)tok, (long long)N, (long long)H, (long long)written,
        plain_same ? "bitwise" : "DIFFERS", den > 0 ? std::sqrt(num / den) : 0.0,
        static_cast<unsigned long long>(fnv.hash));
  }
  return rc;
}
