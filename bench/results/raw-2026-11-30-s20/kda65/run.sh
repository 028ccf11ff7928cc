#!/usr/bin/env bash
# kda65 (twentieth session): base = 275c9e2 (kernels of 76660c3: the checkpoint pass with BF16x6 in
# 8 chain warps of two tiles at 64 rows); c16 = the next commit (all 16 warps on the chain, one tile
# each, at 64 rows). 60 paired dA_log draws at (2, 65, 1), the hash gate (new bits: kept),
# 3 alternating chunked-only bench rounds, the suite + sanitizers on c16, ncu per-kernel times.
# Build here: EXTRA=bench/results/raw-2026-11-30-s20/kda65/run.sh bash tools/gpu/build_ab_carry.sh \
#   kda65 kda kernels/cuda/kda_chunked_forward.cu base=git:275c9e2 c16=git:HEAD
# Device call: {"command": "tar xJf .carry/kda65x/kda65.tar.xz -C .carry && bash .carry/kda65/run.sh",
#   "carry": [".carry/kda65x"], "timeout_s": 420}
set -uo pipefail
D=.carry/kda65
AB_OUT=$(mktemp -d)
source tools/gpu/ab_extras.sh
ab_start kda65
ab_paired_tails $D "base c16" "B2_T65_H1" 60 22300000
echo "== tails at $(ab_el) s"; ab_pack
OUT=$AB_OUT BENCH_ENV="KDA_BENCH_CHUNKED_ONLY=1" BENCH_TIMEOUT=40 TEST_TIMEOUT=150 \
  HASH_FILTER='KdaKernels.ChunkedBackwardHashesForCrossBuildComparison' HASH_KEEP=1 \
  timeout 240 bash tools/gpu/ab_bench.sh $D kda "base c16" 3 "c16" > "$AB_OUT/ab_stdout.txt" 2>&1
echo "== ab rc=$? at $(ab_el) s"; cat "$AB_OUT/ab_stdout.txt"; ab_pack
for v in base c16; do
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
