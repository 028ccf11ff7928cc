#!/usr/bin/env bash
# kda58 (nineteenth session): base = main 216aee4; bal2 = kda57's balanced dA with the split tiles'
# second parts added by the block after the barrier (no named barriers: kda57's racecheck
# reported hazards); bal2d = + dA's -W / Uv fragments two steps ahead; bal2dc = + dgl's two
# cumulative sums on warps 0-3 and 4-7 side by side. bal2* should give kda57 bal's bits (hash
# lines compared with kda57's). 2 alternating chunked-only bench rounds; suite and sanitizers on
# bal2dc; ncu grad-kernel times.
# Device call: {"command": "tar xJf .carry/kda58x/kda58.tar.xz -C .carry && bash .carry/kda58/run.sh",
#   "carry": [".carry/kda58x"], "timeout_s": 330}
set -uo pipefail
source tools/gpu/ab_extras.sh
ab_call kda58
cp $D/hashes_kda57_bal.txt "$AB_OUT/"
for v in base bal2 bal2d bal2dc; do
  timeout 60 $D/$v/cakegrad_gpu_kda_tests --gtest_filter='KdaKernels.ChunkedBackwardHashesForCrossBuildComparison' \
    2>&1 | grep hashes > "$AB_OUT/hashes_$v.txt"
  echo "$v: $(wc -l < "$AB_OUT/hashes_$v.txt") hash lines, $(cmp -s "$D/hashes_kda57_bal.txt" "$AB_OUT/hashes_$v.txt" && echo EQUAL || echo DIFFERENT) to kda57 bal's"
done | tee "$AB_OUT/hash_summary.txt"
OUT=$AB_OUT BENCH_ENV="KDA_BENCH_CHUNKED_ONLY=1" BENCH_TIMEOUT=40 TEST_TIMEOUT=150 \
  timeout 250 bash tools/gpu/ab_bench.sh $D kda "base bal2 bal2d bal2dc" 2 "bal2dc" > "$AB_OUT/ab_stdout.txt" 2>&1
echo "== ab rc=$? at $(ab_el) s"; cat "$AB_OUT/ab_stdout.txt"; ab_pack
AB_NCU_UNTIL=290 ab_ncu_time $D "base bal2 bal2d bal2dc"
ab_pack; echo "== done at $(ab_el) s"
