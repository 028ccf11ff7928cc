#!/usr/bin/env bash
# Runs ON the GPU machine: one A/B call of the chunked KDA backward, the form of the twenty-ninth
# session's calls (bench/results/raw-2026-12-01-s29/kda86 .. kda92), so that a call's as-run
# script is one line. DIR holds the variants that tools/gpu/build_ab_carry.sh packed (kda family).
#   1. tools/gpu/ab_bench.sh with the hash gate KdaKernels.ChunkedBackwardHashesForCrossBuildComparison
#      (KEEP=1: a variant with other bits is reported and kept; for new bits by design), ROUNDS
#      alternating chunked-only bench rounds, and for each variant in CHECK the KDA suite and
#      the compute-sanitizer tools of ab_bench.sh (SANITIZE_TOOLS);
#   2. the worst chunked FP32 gradients (dA_log, ddt_bias, dinitial_state) of CHECK's suites;
#      With SEQ_REF (a test log or a .tgz of final_build_call.sh's logs holding one), each CHECK
#      variant's sequential backward hashes are compared with the reference's: for changes the
#      sequential kernels share (kda_common.cuh, kda_backward.cu), which the hash gate does not see;
#   3. ncu times of KdaChunkGradKernel at bench case 0 (1, 8192, 32) for every variant, while the
#      call stays under NCU_UNTIL seconds (default 330).
# Usage: bash tools/gpu/kda_ab_call.sh DIR "base cand ..." [ROUNDS=3] ["cand ..."=CHECK] [KEEP=0]
set -uo pipefail
[ $# -ge 2 ] || { sed -n 2,15p "$0" >&2; exit 2; }
dir=$1 variants=$2 rounds=${3:-3} check=${4:-} keep=${5:-0}
export LD_LIBRARY_PATH=$PWD/$dir/lib:${LD_LIBRARY_PATH:-}
start=$(date +%s)
elapsed() { echo $(($(date +%s) - start)); }
keep_env=()
[ "$keep" = 1 ] && keep_env=(HASH_KEEP=1)
env "${keep_env[@]}" HASH_FILTER='KdaKernels.ChunkedBackwardHashesForCrossBuildComparison' \
  BENCH_ENV="KDA_BENCH_CHUNKED_ONLY=1" TEST_TIMEOUT="${TEST_TIMEOUT:-240}" \
  bash tools/gpu/ab_bench.sh "$dir" kda "$variants" "$rounds" "$check"
out=${OUT:-/tmp/cakegrad-out}/ab
for v in $check; do
  echo "== $v: worst chunked FP32 gradients"
  grep -E 'rel-L2' "$out/tests_$v.log" | grep -E ' (dA_log|ddt_bias|dinitial_state) ' |
    sed -E 's/.*rel-L2 ([0-9.e+-]+).*/\1 &/' | sort -g | tail -3 | cut -d' ' -f2-
done
if [ -n "${SEQ_REF:-}" ]; then
  ref=/tmp/kda_seq_ref.txt
  case $SEQ_REF in
    *.tgz) tar xzf "$SEQ_REF" -O ./gpu_kda_tests.log | grep 'kda seq bwd hashes' > "$ref" ;;
    *) grep 'kda seq bwd hashes' "$SEQ_REF" > "$ref" ;;
  esac
  for v in $check; do
    if [ ! -s "$ref" ]; then
      echo "== $v: no sequential hashes in $SEQ_REF"
    elif grep 'kda seq bwd hashes' "$out/tests_$v.log" | cmp -s - "$ref"; then
      echo "== $v: sequential hashes EQUAL $SEQ_REF's ($(wc -l < "$ref") lines)"
    else
      echo "== $v: sequential hashes DIFFER from $SEQ_REF's"
    fi
  done
fi
echo "== ncu at $(elapsed) s"
for v in $variants; do
  [ "$(elapsed)" -lt "${NCU_UNTIL:-330}" ] || break
  KDA_BENCH_CHUNKED_ONLY=1 KDA_BENCH_CASES=0 timeout 40 ncu --metrics gpu__time_duration.sum \
    -k regex:KdaChunkGradKernel -c 1 "$dir/$v/cakegrad_kda_bench" > "/tmp/ncu_$v.txt" 2>&1
  grep -E "gpu__time_duration" "/tmp/ncu_$v.txt" | sed "s/^/$v case0 /"
done
echo "== done at $(elapsed) s"
