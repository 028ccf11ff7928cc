#!/usr/bin/env bash
# Call mhc90 (fortieth session): forward_prepare at C = 4096 on the split-K CTAs (FwdMode::kSplitKU,
# branch mhc-splitu) instead of 7 clusters of 16: all 128 resident CTAs (8 rank sets) multiply as
# forward_stats' split-K kernel does, store their CTA sums, publish each stage (st.release of a
# per-rank count), and their U warps read the rank set's 16 sums of z_0..3 and sq back from L2
# (ld.acquire of the 16 counts, then ld.global.cg), sum them in rank order (the coefficient
# kernel's order: U and stats the same bits as main's) and write U from the X stage in shared
# memory. Launched cooperatively (the CTAs wait for each other), after a 512-byte memset of the
# counts; the coefficient kernel follows as forward_stats' does (programmatic, folding the sums).
# Why: the cluster kernel runs on 112 of 132 SMs at ~3.1 us a stage, the split-K kernel on 128 at
# ~2.4 us (forward_stats 0.153 ms); forward_prepare is 0.233 ms, 1.47x its floor (target 1.2x).
# Build: bash tools/gpu/build_ab_carry.sh mhc90 mhc kernels/cuda/mhc_forward.cu base=git:main cand=tree
#   (EXTRA=bench/results/raw-2026-12-02-s40/mhc90/run.sh)
# Device call: {"command": "bash bench/results/raw-2026-12-02-s40/mhc90/run.sh", "carry": [".carry/mhc90x"]}
# Read: the hash gate (cand's lines all equal base's: same bits by construction), the suite
# (23/23, graph replay included), memcheck / racecheck / synccheck on cand, forward_prepare's
# times at T = 4096 / 16384 and ncu of the forward kernels.
HIDE='backward_' \
  NCU_CLOCKS=none bash tools/gpu/mhc_ab_call.sh mhc90 "base cand" "cand" 0 4096,16384 \
  'MhcFwd(Cluster|Coef)' 2>&1 |
  grep -E "forward_|PASSED|FAILED|SUMMARY|hashes|Duration|Throughput|rc=|ERROR|error"
