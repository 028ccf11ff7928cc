#!/usr/bin/env bash
# dA_log over repeated fresh draws (tools/emu/kda_dalog_repeat_emu.cc): the chunked backward's
# kernels run on the host (as run_kda_chunked_backward_emu.sh) against the FP64 reference.
# Usage (repo root): KERNEL=path/to/kda_chunked_backward.cu OUT=dir \
#   bash tools/emu/run_kda_dalog_repeat_emu.sh T H seed0 count [kernels|fp64] [B] [init]
# The test's B2_T65_H1 (two 65-token documents, initial state): ... 65 1 seed0 count kernels 2 init
# EMU_G_MEAN=6 draws g ~ N(6, 1) as the test's *_fastdecay shapes do (B2_T1000_H4_fastdecay:
# ... 1000 4 seed0 count kernels 2 init, ~5 min a draw).
# (~10-17 s per draw on the 2-core development machine).
# Arithmetic models (for telling a draw's luck from a systematic error): EMU_SFU_SALT=n another
# realization of the SFU's errors, EMU_SFU_ULPS=n every SFU result n ulps off, EMU_MMA_RZ=1 /
# EMU_MMA_TRUNC=26 the tensor cores' truncating accumulation as the H200 does it (cuda_host_shim.h).
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
out=${OUT:-/tmp/kda_dalog_emu}
if [ ! -x "$out/kda_dalog_repeat_emu" ] || [ -n "${REBUILD:-}" ]; then
  bash tools/emu/build_kda_bwd_emu.sh tools/emu/kda_dalog_repeat_emu.cc "$out" kda_dalog_repeat_emu
fi
exec "$out/kda_dalog_repeat_emu" "$@"
