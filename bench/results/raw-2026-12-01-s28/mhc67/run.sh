#!/usr/bin/env bash
# mhc67: backward_finish's column kernel with dfn in two row tiles (e402996f750a3298c9451fc46521338c99223462, branch mhc-dfn-two-tiles)
# against main 65d05d6. Hash gate (dfn's bits change by design, the records and dX must not),
# bench 3 rounds, the suite and both sanitizers on the candidate, ncu of both column kernels.
set -uo pipefail
C=.carry/mhc67
S=$(date +%s)
HASH_FILTER='MhcKernels.BackwardHashesForCrossBuildComparison' HASH_KEEP=1 BENCH_TIMEOUT=40 TEST_TIMEOUT=300 \
  bash tools/gpu/ab_bench.sh $C mhc "base tiles" 3 tiles 2>&1 | grep -E "backward_finish|copy|EQUAL|DIFFER|PASSED|FAILED|SUMMARY|rc="
for v in base tiles; do diff <(sed 's/dfn [0-9a-f]*//' ${OUT:-/tmp}/ab/hashes_base.txt) <(sed 's/dfn [0-9a-f]*//' ${OUT:-/tmp}/ab/hashes_$v.txt) > /dev/null && echo "$v: hashes but dfn equal base's" || echo "$v: hashes other than dfn DIFFER"; done
for v in base tiles; do timeout 60 ncu --kernel-name regex:MhcBwdColumns --section SpeedOfLight $C/$v/cakegrad_mhc_bench --profile 2>&1 | grep -E "Duration|DRAM Through" | sed "s/^/$v /"; done
grep -h "rel-L2 T=16384 C=4096\|rel-L2 T=4097 C=4096\|cancellation" ${OUT:-/tmp}/ab/tests_tiles.log | head -6
echo "== done at $(($(date +%s) - S)) s"
