#!/usr/bin/env bash
# kda64 (twentieth session): base = 76660c3 (kda62 merged: checkpoint pass with BF16x6 in the
# chain warps); ow = the next commit (its three small terms on the idle o warps at 16 and 64 rows).
# 60 paired dA_log draws at (2, 65, 1), the hash gate (new bits: kept), 3 alternating chunked-only
# bench rounds, the suite + sanitizers on ow, ncu per-kernel times of one backward per bench case.
# Build here: EXTRA=bench/results/raw-2026-11-30-s20/kda64/run.sh bash tools/gpu/build_ab_carry.sh \
#   kda64 kda kernels/cuda/kda_chunked_forward.cu base=git:76660c3 ow=git:HEAD
# Device call: {"command": "tar xJf .carry/kda64x/kda64.tar.xz -C .carry && bash .carry/kda64/run.sh",
#   "carry": [".carry/kda64x"], "timeout_s": 420}
set -uo pipefail
D=.carry/kda64
AB_OUT=$(mktemp -d)
source tools/gpu/ab_extras.sh
ab_start kda64
ab_paired_tails $D "base ow" "B2_T65_H1" 60 22200000
echo "== tails at $(ab_el) s"; ab_pack
OUT=$AB_OUT BENCH_ENV="KDA_BENCH_CHUNKED_ONLY=1" BENCH_TIMEOUT=40 TEST_TIMEOUT=150 \
  HASH_FILTER='KdaKernels.ChunkedBackwardHashesForCrossBuildComparison' HASH_KEEP=1 \
  timeout 240 bash tools/gpu/ab_bench.sh $D kda "base ow" 3 "ow" > "$AB_OUT/ab_stdout.txt" 2>&1
echo "== ab rc=$? at $(ab_el) s"; cat "$AB_OUT/ab_stdout.txt"; ab_pack
for v in base ow; do
  for c in 0 1 2; do
    [ "$(ab_el)" -lt 330 ] || break
    KDA_BENCH_CHUNKED_ONLY=1 KDA_BENCH_CASES=$c timeout 30 ncu --metrics gpu__time_duration.sum \
      -k regex:Kda --launch-skip 36 -c 6 "$D/$v/cakegrad_kda_bench" > "$AB_OUT/ncu_${v}_$c.txt" 2>&1
    echo "$v case $c:"
    grep -E "Kda[A-Za-z]*Kernel|gpu__time_duration" "$AB_OUT/ncu_${v}_$c.txt" | paste - - |
      sed -E 's/\(.*gpu__time_duration.sum/ /; s/ +/ /g' | grep -v PROF | head -6
  done
done | tee "$AB_OUT/ncu_summary.txt"
ab_pack; echo "== done at $(ab_el) s"
