#!/usr/bin/env bash
# Nineteenth session's final build (main, SOURCE in .carry/gpu/SOURCE): every family's suite,
# the daemon, Python, sanitizers on KDA (the grad kernel changed: kda55, kda57-58), benches with mHC's
# PyTorch reference; then per-kernel times of the chunked backward.
# Device call: {"command": "bash bench/results/raw-2026-11-30-s19/final/run.sh",
#   "carry": [".carry/gpu.tar.xz", "client/python/cakegrad/v1"], "timeout_s": 540}
set -uo pipefail
S=$(date +%s); el() { echo $(($(date +%s) - S)); }
tar xJf .carry/gpu.tar.xz
OUT=${OUT:-/tmp/out}
PYTHON_FIRST=1 STEPS=5 SKIP="6 7" FAMILIES="conv1d mhc kda" TORCH_FAMILIES=mhc SANITIZE_FAMILIES="kda" \
  timeout 420 bash tools/gpu/run_all_gpu.sh
echo "== run_all rc=$? at $(el) s"
B=.carry/gpu/bin/cakegrad_kda_bench
p=$OUT/prof; mkdir -p $p
for c in 0 1 2; do
  [ $(el) -lt 470 ] || break
  KDA_BENCH_CHUNKED_ONLY=1 KDA_BENCH_CASES=$c timeout 30 ncu --metrics gpu__time_duration.sum \
    -k regex:Kda --launch-skip 36 -c 6 $B > "$p/ncu_kernels_case$c.txt" 2>&1
  echo "case $c:"; grep -E "Kda[A-Za-z]*Kernel|gpu__time_duration" "$p/ncu_kernels_case$c.txt" | paste - - | \
    sed -E 's/\(.*//; s/ +/ /g' | head -8
done
echo "== done at $(el) s"
