#!/usr/bin/env bash
# mhc27 (twenty-second session): a diagnostic build. Where does the side SMs' share of the
# forwards lose? globaltimer / smid stamps of every cluster CTA and side CTA (start, end of work,
# end of its final wait) and of the first coefficient and side-finish blocks, for one call of
# each forward at T = 4096 and 16384 (MhcDiag.Timeline), in two builds: pdl (mhc26's one stream,
# the side kernel programmatic after the cluster kernel) and fork (the side kernel on a forked
# stream after the fork, as mhc24, but persistent). Then 2 alternating bench rounds with base.
set -uo pipefail
source tools/gpu/ab_extras.sh
ab_call mhc27
for v in pdl fork; do
  echo "== $v"
  timeout 120 $D/$v/cakegrad_gpu_mhc_tests --gtest_filter='MhcDiag.*' 2>&1 | grep -E "diag|PASS|FAIL" | tee "$AB_OUT/diag_$v.txt"
done
OUT=$AB_OUT BENCH_ENV="MHC_BENCH_T=4096,8192,16384" BENCH_TIMEOUT=60 \
  timeout 200 bash tools/gpu/ab_bench.sh $D mhc "base pdl fork" 2 \
  > "$AB_OUT/ab_stdout.txt" 2>&1
echo "== ab rc=$? at $(ab_el) s"; grep -v "backward_\|forward_finish" "$AB_OUT/ab_stdout.txt"
ab_pack; echo "== done at $(ab_el) s"
