#!/usr/bin/env bash
# kda60 (nineteenth session, the last ~240 s of device time): base = main 815a56b; pre = the grad
# kernel issues U's loads before the token rows' and dU's and P's right after, then one barrier
# and the gate sums (two block barriers fewer; 48 B of spill, stored and reloaded once). Same bits
# expected (hash lines). 2 alternating chunked-only bench rounds; the suite and sanitizers on pre.
# Device call: {"command": "tar xJf .carry/kda60x/kda60.tar.xz -C .carry && bash .carry/kda60/run.sh",
#   "carry": [".carry/kda60x"], "timeout_s": 180}
set -uo pipefail
source tools/gpu/ab_extras.sh
ab_call kda60
for v in base pre; do
  timeout 40 $D/$v/cakegrad_gpu_kda_tests --gtest_filter='KdaKernels.ChunkedBackwardHashesForCrossBuildComparison' \
    2>&1 | grep hashes > "$AB_OUT/hashes_$v.txt"
  echo "$v: $(wc -l < "$AB_OUT/hashes_$v.txt") hash lines, $(cmp -s "$AB_OUT/hashes_base.txt" "$AB_OUT/hashes_$v.txt" && echo EQUAL || echo DIFFERENT) to base's"
done | tee "$AB_OUT/hash_summary.txt"
OUT=$AB_OUT BENCH_ENV="KDA_BENCH_CHUNKED_ONLY=1" BENCH_TIMEOUT=30 TEST_TIMEOUT=120 \
  timeout 160 bash tools/gpu/ab_bench.sh $D kda "base pre" 2 "pre" > "$AB_OUT/ab_stdout.txt" 2>&1
echo "== ab rc=$? at $(ab_el) s"; cat "$AB_OUT/ab_stdout.txt"; ab_pack
echo "== done at $(ab_el) s"
