#!/usr/bin/env bash
# kda42 (prepared in the fifteenth session, never run): the [dKb | dVb] back substitution with the
# later tokens' y values held in registers, bitwise main's by construction (same FMAs, same order).
#   h1: tokens 32-63 held (their rows unrolled; the grad kernel's SASS 8528 -> 9280 instructions);
#   h3: tokens 48-63 held.
# Hash gate (offsets 0 1), 3 alternating rounds, suite + sanitizers on h1, ncu grad-kernel time.
set -uo pipefail
D=.carry/kda42
final=${OUT:-/tmp/out}; mkdir -p "$final"; out=$(mktemp -d)
export PATH=$PATH:/usr/local/cuda/bin
S=$(date +%s); el() { echo $(($(date +%s) - S)); }
pack() { tar czf "$final/kda42.tgz" -C "$out" .; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
OUT=$out HASH_FILTER='KdaKernels.*HashesForCrossBuildComparison' HASH_OFFSETS="0 1" \
  BENCH_ENV="KDA_BENCH_CHUNKED_ONLY=1" BENCH_TIMEOUT=40 TEST_TIMEOUT=200 \
  timeout 330 bash tools/gpu/ab_bench.sh $D kda "base h1 h3" 3 "h1" > "$out/ab_stdout.txt" 2>&1
echo "== ab rc=$? at $(el) s"; cat "$out/ab_stdout.txt"; pack
for v in base h1 h3; do
  [ "$(el)" -lt 360 ] || break
  KDA_BENCH_CHUNKED_ONLY=1 KDA_BENCH_CASES=0 timeout 40 ncu --metrics gpu__time_duration.sum \
    -k regex:KdaChunkGrad --launch-skip 6 -c 1 $D/$v/cakegrad_kda_bench > "$out/ncu_${v}_0.txt" 2>&1
  echo "ncu $v case 0: $(grep -E 'gpu__time_duration' "$out/ncu_${v}_0.txt" | tail -1)"
done | tee "$out/ncu_summary.txt"
pack; echo "== done at $(el) s"
