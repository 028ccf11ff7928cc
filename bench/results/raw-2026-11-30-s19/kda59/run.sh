#!/usr/bin/env bash
# kda59 (nineteenth session): base = main 01b78b4; wl = warps 4-15 of the grad kernel, idle while
# warps 0-3 sum the gates, ask L2 for the next wave's CTA's q, k, g, dO rows with per-thread
# prefetch.global.L2 (kda56's bulk prefetches serialized a warp's addresses and were slower).
# Cache hints only: hash lines must be equal. 3 alternating chunked-only bench rounds, ncu times.
# Device call: {"command": "tar xJf .carry/kda59x/kda59.tar.xz -C .carry && bash .carry/kda59/run.sh",
#   "carry": [".carry/kda59x"], "timeout_s": 200}
set -uo pipefail
source tools/gpu/ab_extras.sh
ab_call kda59
for v in base wl; do
  timeout 60 $D/$v/cakegrad_gpu_kda_tests --gtest_filter='KdaKernels.ChunkedBackwardHashesForCrossBuildComparison' \
    2>&1 | grep hashes > "$AB_OUT/hashes_$v.txt"
  echo "$v: $(wc -l < "$AB_OUT/hashes_$v.txt") hash lines, $(cmp -s "$AB_OUT/hashes_base.txt" "$AB_OUT/hashes_$v.txt" && echo EQUAL || echo DIFFERENT) to base's"
done | tee "$AB_OUT/hash_summary.txt"
OUT=$AB_OUT BENCH_ENV="KDA_BENCH_CHUNKED_ONLY=1" BENCH_TIMEOUT=40 \
  timeout 150 bash tools/gpu/ab_bench.sh $D kda "base wl" 3 > "$AB_OUT/ab_stdout.txt" 2>&1
echo "== ab rc=$? at $(ab_el) s"; cat "$AB_OUT/ab_stdout.txt"; ab_pack
AB_NCU_UNTIL=170 ab_ncu_time $D "base wl"
ab_pack; echo "== done at $(ab_el) s"
