#!/usr/bin/env bash
# kda92: dA's tiles in pairs sharing their row block (each k-step splits the A tiles once for two
# tiles; new bits: the k-sums split at other steps) without (p, 50a67c3) and with (ppf, 118f9fe)
# the B operands one step ahead, against main b5d7f0d (base). Hash gate kept (new bits by design;
# p and ppf must equal each other), 3 alternating bench rounds (chunked only), both candidates'
# KDA suites and sanitizers (the validation of the one merged), ncu times of the grad kernel.
# Device call: {"command": "tar xJf .carry/kda92x/kda92.tar.xz -C .carry && bash .carry/kda92/run.sh",
#   "carry": [".carry/kda92x"], "timeout_s": 400}
set -uo pipefail
C=.carry/kda92
export LD_LIBRARY_PATH=$PWD/$C/lib:${LD_LIBRARY_PATH:-}
S=$(date +%s); el() { echo $(($(date +%s) - S)); }
HASH_FILTER='KdaKernels.ChunkedBackwardHashesForCrossBuildComparison' HASH_KEEP=1 \
  BENCH_ENV="KDA_BENCH_CHUNKED_ONLY=1" TEST_TIMEOUT=200 \
  bash tools/gpu/ab_bench.sh $C kda "base p ppf" 3 "p ppf"
O=${OUT:-/tmp/cakegrad-out}/ab
echo "== p vs ppf hash lines"; diff <(grep hashes "$O/hashes_p.txt") <(grep hashes "$O/hashes_ppf.txt") > /dev/null && echo EQUAL || echo DIFFER
echo "== accuracy (worst chunked FP32 gradients) of p"
grep -E 'rel-L2' "$O/tests_p.log" | grep -E ' (dA_log|ddt_bias|dinitial_state) ' | sed -E 's/.*rel-L2 ([0-9.e+-]+).*/\1 &/' | sort -g | tail -3 | cut -d' ' -f2-
echo "== ncu at $(el) s"
for v in base p ppf; do
  [ "$(el)" -lt 330 ] || break
  KDA_BENCH_CHUNKED_ONLY=1 KDA_BENCH_CASES=0 timeout 40 ncu --metrics gpu__time_duration.sum \
    -k regex:KdaChunkGradKernel -c 1 $C/$v/cakegrad_kda_bench > /tmp/ncu_$v.txt 2>&1
  grep -E "gpu__time_duration" /tmp/ncu_$v.txt | sed "s/^/$v case0 /"
done
echo "== done at $(el) s"
