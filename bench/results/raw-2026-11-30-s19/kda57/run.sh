#!/usr/bin/env bash
# kda57 (nineteenth session): base = main 216aee4 (kda55 merged); bal = dA's 20 tiles x 8 k-steps
# split 10 steps a warp (a tile split between two warps is summed first part + second part through
# a named barrier), where warps 0-3 did two whole tiles and the rest one. New bits in dA's split
# tiles. Hash lines, paired dA_log tails, 3 alternating chunked-only bench rounds, the suite and
# sanitizers on bal, ncu grad-kernel times, bal's SASS stall profile.
# Device call: {"command": "tar xJf .carry/kda57x/kda57.tar.xz -C .carry && bash .carry/kda57/run.sh",
#   "carry": [".carry/kda57x"], "timeout_s": 360}
set -uo pipefail
source tools/gpu/ab_extras.sh
ab_call kda57
for v in base bal; do
  timeout 60 $D/$v/cakegrad_gpu_kda_tests --gtest_filter='KdaKernels.ChunkedBackwardHashesForCrossBuildComparison' \
    2>&1 | grep hashes > "$AB_OUT/hashes_$v.txt"
  echo "$v: $(wc -l < "$AB_OUT/hashes_$v.txt") hash lines, $(cmp -s "$AB_OUT/hashes_base.txt" "$AB_OUT/hashes_$v.txt" && echo EQUAL || echo DIFFERENT) to base's"
done | tee "$AB_OUT/hash_summary.txt"
ab_paired_tails $D "base bal" "B2_T65_H1 B2_T1000_H4_fastdecay" 60 19100000
echo "== tails at $(ab_el) s"; ab_pack
OUT=$AB_OUT BENCH_ENV="KDA_BENCH_CHUNKED_ONLY=1" BENCH_TIMEOUT=40 TEST_TIMEOUT=150 \
  timeout 230 bash tools/gpu/ab_bench.sh $D kda "base bal" 3 "bal" > "$AB_OUT/ab_stdout.txt" 2>&1
echo "== ab rc=$? at $(ab_el) s"; cat "$AB_OUT/ab_stdout.txt"; ab_pack
AB_NCU_UNTIL=300 ab_ncu_time $D "base bal"
[ "$(ab_el)" -lt 310 ] && {
  KDA_BENCH_CHUNKED_ONLY=1 KDA_BENCH_CASES=0 timeout 40 ncu --clock-control none \
    --import-source no --section WarpStateStats --section SourceCounters \
    -k regex:KdaChunkGradKernel -c 1 -o /tmp/grad $D/bal/cakegrad_kda_bench > "$AB_OUT/ncu_grad.log" 2>&1
  timeout 30 ncu -i /tmp/grad.ncu-rep --page source --csv --print-source sass > "$AB_OUT/ncu_src.csv" 2>/dev/null
  gzip -f "$AB_OUT/ncu_src.csv"; }
ab_pack; echo "== done at $(ab_el) s"
