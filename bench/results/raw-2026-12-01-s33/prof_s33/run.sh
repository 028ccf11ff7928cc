#!/usr/bin/env bash
# prof_s33: line-level ncu source counters (warp states, stall samples) of backward_finish's token
# and column kernels at T = 16384, C = 4096, iters 20 (mhc bench --profile), main 91ac911's
# packaged build; map with the -lineinfo object of the same build (bench/ncu_sass_lines.py). The
# call ran these steps inline (git show c598d63:bench/results/raw-2026-12-01-s33/prof_s33/run.sh);
# tools/gpu/ncu_source_profile.sh holds them now.
# Device call: {"command": "bash bench/results/raw-2026-12-01-s33/prof_s33/run.sh",
#   "carry": [".carry/gpu.tar.xz"], "timeout_s": 200}
set -uo pipefail
[ -x .carry/gpu/bin/cakegrad_mhc_bench ] || tar xJf .carry/gpu.tar.xz
export LD_LIBRARY_PATH=$PWD/.carry/gpu/lib:${LD_LIBRARY_PATH:-}
for k in MhcBwdTokenKernel MhcBwdColumnsTcKernel; do
  bash tools/gpu/ncu_source_profile.sh "$k" "$k" .carry/gpu/bin/cakegrad_mhc_bench --profile
done
