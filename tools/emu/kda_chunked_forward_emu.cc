// Launch 1 of the chunked KDA backward on the host (tools/emu): the chunked forward's preparation
// kernel and its state pass in checkpoint mode, their CUDA source compiled for the host with
// mma.sync and cp.async emulated (cuda_host_shim.h). A separate translation unit: the forward's
// and the backward's kernels each keep their own anonymous-namespace helpers.
#include "cuda_host_shim.h"
#include "fwd_emu.inc"

// Records into ws, chunk-start states into a.checkpoints (16-row slices, as 2-CTA clusters like
// the device's launch: the emulated CTA issues its peer's copies too).
void EmuChunkedForwardCheckpoints(const FwdArgs& a, char* ws) {
  const int64_t slots = kda_layout::ChunkSlots(a.s.total_tokens, a.s.N);
  EmuLaunch(EmuGrid(ChunkSlotGrid(slots, a.s.H)), kPrepThreads,
            [&] { KdaChunkPrepKernel<kPrepThreads, true>(a, ws); });
  EmuLaunch({unsigned(StateTraits<16>::kSlices), unsigned(a.s.H), unsigned(a.s.N)},
            StateTraits<16>::kThreads, [&] { KdaChunkStateKernel<16, true, true>(a, ws); });
}

}  // namespace kda_cuda
}  // namespace cakegrad::kernels
