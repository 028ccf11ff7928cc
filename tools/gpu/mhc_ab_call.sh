#!/usr/bin/env bash
# Runs ON the GPU machine: one A/B call of mHC kernel builds, the form of the thirty-third
# session's calls (bench/results/raw-2026-12-01-s33/mhc70 .. mhc74), so that a call's script is one
# line. NAME is what tools/gpu/build_ab_carry.sh packed here (mhc family): carry [".carry/NAMEx"].
#   1. ab_mhc_bench (tools/gpu/ab_extras.sh): the hash gate MhcKernels.*HashesForCrossBuildComparison
#      (KEEP=1: a variant with other bits is reported and kept, for new bits by design), 3
#      alternating bench rounds at T in TS, and the mHC suite and ab_bench.sh's sanitizer tools
#      (SANITIZE_TOOLS) on each variant in CHECK;
#   2. for each variant, whether its dX hashes and the rest of its hash lines equal the first's;
#   3. ncu times (SpeedOfLight) of the kernels matching KERNELS (a regex; default backward_finish's
#      token and column kernels) for every variant, at T = 16384 (the bench's --profile), at
#      ncu's locked clocks unless NCU_CLOCKS=none (the bench's clocks: where a kernel is bound by
#      memory or by issue can differ between the two, bench/results/mhc_h200.md, thirty-fourth
#      session); with the DRAM, L2 and L1/TEX throughputs: backward_finish's column kernel is
#      bound by L2 throughput, not by DRAM (bench/results/mhc_h200.md, thirty-fifth session);
#   4. the logs as one archive, $OUT/NAME.tgz (the device tool returns a limited number of files).
# Usage: bash tools/gpu/mhc_ab_call.sh NAME "base cand ..." "cand ..."=CHECK [KEEP=0]
#        [TS=4096,16384] [KERNELS='MhcBwd(Token|Columns)']
# HIDE (a grep pattern, default forward_) drops the bench rows of functions the call is not about.
set -uo pipefail
[ $# -ge 3 ] || { sed -n 2,19p "$0" >&2; exit 2; }
name=$1 variants=$2 check=$3 keep=${4:-0} ts=${5:-4096,16384} kernels=${6:-'MhcBwd(Token|Columns)'}
source tools/gpu/ab_extras.sh
tar xJf ".carry/${name}x/${name}.tar.xz" -C .carry
ab_call "$name"
keep_env=()
[ "$keep" = 1 ] && keep_env=(HASH_KEEP=1)
export "${keep_env[@]}" HASH_FILTER='MhcKernels.*HashesForCrossBuildComparison'
ab_mhc_bench "$D" "$variants" "$check" "$ts" "${HIDE:-forward_}"
first=${variants%% *}
for v in $variants; do
  [ "$v" = "$first" ] && continue
  h0=$AB_OUT/ab/hashes_$first.txt h1=$AB_OUT/ab/hashes_$v.txt
  if diff <(grep -o "dX [0-9a-f]*" "$h0") <(grep -o "dX [0-9a-f]*" "$h1") > /dev/null; then
    echo "$v: dX hashes equal $first's"
  else
    echo "$v: dX hashes DIFFER from $first's"
  fi
  if diff <(sed 's/dX [0-9a-f]*//' "$h0") <(sed 's/dX [0-9a-f]*//' "$h1") > /dev/null; then
    echo "$v: the other hashes equal $first's"
  else
    echo "$v: the other hashes DIFFER from $first's"
  fi
done
for v in $variants; do
  timeout 60 ncu --clock-control "${NCU_CLOCKS:-base}" --kernel-name "regex:$kernels" \
    --section SpeedOfLight \
    "$D/$v/cakegrad_mhc_bench" --profile 2>&1 |
    grep -E "^  [A-Za-z_]|Duration|DRAM Through|L2 Cache Through|L1/TEX Cache Through" |
    sed "s/^/$v /"
done
tar czf "${OUT:-/tmp/out}/$name.tgz" -C "$AB_OUT" .
echo "== done at $(ab_el) s"
