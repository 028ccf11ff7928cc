#!/usr/bin/env bash
# mhc75 (prepared in the thirty-third session, NEVER RUN: no device time left): backward_finish's
# token kernel walking token 0's groups, then token 1's, through four register buffers (three items
# in flight while one is converted; branch mhc-tok-seq, 5b21f32) against main (kernels of 7c5099e).
# The same bits by construction (each token's sums in the same order): the hash gate must be
# equal. Loop ~207 instructions an item (a token's group) against ~169 on main; 128 registers at
# __launch_bounds__(128, 4), 16 B spilled outside the loop.
# The candidate is seq.patch here (5b21f32, on a local branch a fresh checkout lacks). Build here:
#   git checkout -b mhc-tok-seq 4c2e1e5 && git am bench/results/raw-2026-12-01-s33/mhc75/seq.patch
#   git checkout main && bash tools/gpu/build_ab_carry.sh mhc75 mhc kernels/cuda/mhc_backward.cu \
#     base=git:4c2e1e5 seq=git:mhc-tok-seq
# Device call: {"command": "bash bench/results/raw-2026-12-01-s33/mhc75/run.sh",
#   "carry": [".carry/mhc75x"], "timeout_s": 420}
exec bash tools/gpu/mhc_ab_call.sh mhc75 "base seq" seq
