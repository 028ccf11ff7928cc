#!/usr/bin/env bash
# kda46 (prepared in the sixteenth session, never run): the grad kernel's staging with every global
# read issued before any wait, without growing the code: token rows by cp.async to their places
# (raw g and v into their own G / uvs slots), -W's parts by cp.async and re-split in place, Kdec^T
# and M to registers (staged before the cp.async wait), beta by threads 0-63. Bitwise main's.
# Hash gate (offsets 0 1), 3 alternating rounds, suite + sanitizers on st2, ncu grad-kernel time.
set -uo pipefail
D=.carry/kda46
final=${OUT:-/tmp/out}; mkdir -p "$final"; out=$(mktemp -d)
export PATH=$PATH:/usr/local/cuda/bin
S=$(date +%s); el() { echo $(($(date +%s) - S)); }
pack() { tar czf "$final/kda46.tgz" -C "$out" .; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
OUT=$out HASH_FILTER='KdaKernels.*HashesForCrossBuildComparison' HASH_OFFSETS="0 1" \
  BENCH_ENV="KDA_BENCH_CHUNKED_ONLY=1" BENCH_TIMEOUT=40 TEST_TIMEOUT=200 \
  timeout 300 bash tools/gpu/ab_bench.sh $D kda "base st2" 3 "st2" > "$out/ab_stdout.txt" 2>&1
echo "== ab rc=$? at $(el) s"; cat "$out/ab_stdout.txt"; pack
for v in base st2; do
  [ "$(el)" -lt 360 ] || break
  KDA_BENCH_CHUNKED_ONLY=1 KDA_BENCH_CASES=0 timeout 40 ncu --metrics gpu__time_duration.sum \
    -k regex:KdaChunkGrad --launch-skip 6 -c 1 $D/$v/cakegrad_kda_bench > "$out/ncu_${v}_0.txt" 2>&1
  echo "ncu $v case 0: $(grep -E 'gpu__time_duration' "$out/ncu_${v}_0.txt" | tail -1)"
done | tee "$out/ncu_summary.txt"
pack; echo "== done at $(el) s"
