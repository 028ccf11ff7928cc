#!/usr/bin/env bash
# mhc68: backward_finish column kernel, dfn A operand by movmatrix from dxmap fragments (6cba058,
# branch mhc-dfn-movmatrix) against main e402996 (dfn in two row tiles). Hash gate (dfn bits change
# by design), bench 3 rounds, suite and both sanitizers on mov, ncu of both column kernels.
set -uo pipefail
C=.carry/mhc68
S=$(date +%s)
HASH_FILTER='MhcKernels.BackwardHashesForCrossBuildComparison' HASH_KEEP=1 BENCH_TIMEOUT=40 TEST_TIMEOUT=300 \
  bash tools/gpu/ab_bench.sh $C mhc "base mov" 3 mov 2>&1 | grep -E "backward_finish|copy|EQUAL|DIFFER|PASSED|FAILED|SUMMARY|rc="
for v in mov; do diff <(sed 's/dfn [0-9a-f]*//' ${OUT:-/tmp}/ab/hashes_base.txt) <(sed 's/dfn [0-9a-f]*//' ${OUT:-/tmp}/ab/hashes_$v.txt) > /dev/null && echo "$v: hashes but dfn equal base's" || echo "$v: hashes other than dfn DIFFER"; done
for v in base mov; do timeout 60 ncu --kernel-name regex:MhcBwdColumns --section SpeedOfLight $C/$v/cakegrad_mhc_bench --profile 2>&1 | grep -E "Duration|DRAM Through" | sed "s/^/$v /"; done
grep -h "rel-L2 T=16384 C=4096\|rel-L2 T=4097 C=4096\|cancellation" ${OUT:-/tmp}/ab/tests_mov.log | head -6
echo "== done at $(($(date +%s) - S)) s"
