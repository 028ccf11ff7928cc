#!/usr/bin/env bash
# kda56 (nineteenth session): base = main 216aee4 (kda55 merged); nx = the grad kernel's last warp
# asks L2 for the token rows (q, k, g, dO) of the CTA one wave later while warps 0-3 sum the gates;
# nxp = nx + the same in the chunk preparation (q, k, g, v; 2 CTAs an SM), which the forward uses
# too. Cache hints only: same bits expected (hash lines). 3 alternating bench rounds (forward and
# chunked backward), the suite and sanitizers on nxp, per-kernel ncu times of base and nxp, the
# grad kernel's SASS stall profile on nxp.
# Device call: {"command": "tar xJf .carry/kda56x/kda56.tar.xz -C .carry && bash .carry/kda56/run.sh",
#   "carry": [".carry/kda56x"], "timeout_s": 400}
set -uo pipefail
source tools/gpu/ab_extras.sh
ab_call kda56
for v in base nx nxp; do
  timeout 60 $D/$v/cakegrad_gpu_kda_tests --gtest_filter='KdaKernels.*HashesForCrossBuildComparison' \
    2>&1 | grep hashes > "$AB_OUT/hashes_$v.txt"
  echo "$v: $(wc -l < "$AB_OUT/hashes_$v.txt") hash lines, $(cmp -s "$AB_OUT/hashes_base.txt" "$AB_OUT/hashes_$v.txt" && echo EQUAL || echo DIFFERENT) to base's"
done | tee "$AB_OUT/hash_summary.txt"
echo "== hashes at $(ab_el) s"
OUT=$AB_OUT BENCH_TIMEOUT=40 TEST_TIMEOUT=150 \
  timeout 240 bash tools/gpu/ab_bench.sh $D kda "base nx nxp" 3 "nxp" > "$AB_OUT/ab_stdout.txt" 2>&1
echo "== ab rc=$? at $(ab_el) s"; grep -v "sequential" "$AB_OUT/ab_stdout.txt"; ab_pack
for v in base nxp; do
  KDA_BENCH_CHUNKED_ONLY=1 KDA_BENCH_CASES=0 timeout 40 ncu --metrics gpu__time_duration.sum \
    -k regex:Kda --launch-skip 36 -c 6 $D/$v/cakegrad_kda_bench > "$AB_OUT/ncu_kernels_$v.txt" 2>&1
  echo "$v:"; grep -E "Kda[A-Za-z]*Kernel|gpu__time_duration" "$AB_OUT/ncu_kernels_$v.txt" | paste - - | \
    sed -E 's/\(.*gpu__time_duration.sum/ /; s/ +/ /g' | head -6
done
[ "$(ab_el)" -lt 330 ] && {
  KDA_BENCH_CHUNKED_ONLY=1 KDA_BENCH_CASES=0 timeout 60 ncu --clock-control none \
    --import-source no --section SpeedOfLight --section WarpStateStats --section SchedulerStats \
    --section SourceCounters -k regex:KdaChunkGradKernel -c 1 -o /tmp/grad $D/nxp/cakegrad_kda_bench > "$AB_OUT/ncu_grad.log" 2>&1
  timeout 20 ncu -i /tmp/grad.ncu-rep --page details > "$AB_OUT/ncu_grad.txt" 2>&1
  timeout 40 ncu -i /tmp/grad.ncu-rep --page source --csv --print-source sass > "$AB_OUT/ncu_src.csv" 2>/dev/null
  gzip -f "$AB_OUT/ncu_src.csv"; }
ab_pack; echo "== done at $(ab_el) s"
