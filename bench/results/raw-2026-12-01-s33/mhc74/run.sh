#!/usr/bin/env bash
# mhc74 (thirty-third session): backward_finish's column kernel, instruction cuts on top of imm
# (mhc73): loop (the stage's slot, parity and dX base carried across stages), pred (+ rows past the
# chunk computed and their stores predicated, no branch), ord (+ dX's terms as one FMA chain a
# channel: new dX bits by design, HASH_KEEP=1). Against main 91ac911. 3 alternating rounds; suite
# and sanitizers on pred and ord; ncu of the column kernel of each.
# Built here: bash tools/gpu/build_ab_carry.sh mhc74 mhc kernels/cuda/mhc_backward.cu base=git:main
#   imm=git:mhc-col-imm loop=git:mhc-col-loop pred=git:mhc-col-pred ord=git:mhc-col-ord
# Device call: {"command": "bash bench/results/raw-2026-12-01-s33/mhc74/run.sh",
#   "carry": [".carry/mhc74x"], "timeout_s": 540}
set -uo pipefail
source tools/gpu/ab_extras.sh
tar xJf .carry/mhc74x/mhc74.tar.xz -C .carry
ab_call mhc74
HASH_KEEP=1 HASH_FILTER='MhcKernels.*HashesForCrossBuildComparison' \
  ab_mhc_bench $D "base imm loop pred ord" "pred ord" "4096,16384" 'forward_'
grep -h "EQUAL\|DIFFER\|dropped\|differ" $AB_OUT/ab/hash_gate.txt 2>/dev/null | head
for v in imm loop pred ord; do
  diff <(grep -o "dX [0-9a-f]*" $AB_OUT/ab/hashes_base.txt) <(grep -o "dX [0-9a-f]*" $AB_OUT/ab/hashes_$v.txt) > /dev/null && echo "$v: dX hashes equal" || echo "$v: dX hashes DIFFER"
  diff <(sed 's/dX [0-9a-f]*//' $AB_OUT/ab/hashes_base.txt) <(sed 's/dX [0-9a-f]*//' $AB_OUT/ab/hashes_$v.txt) > /dev/null && echo "$v: lines without dX equal" || echo "$v: lines without dX DIFFER"
done
grep -h "rel-L2 T=16384 C=4096\|rel-L2 T=4097" $AB_OUT/ab/tests_pred.log | head -3
for v in base imm loop pred ord; do
  timeout 60 ncu --kernel-name regex:MhcBwdColumns --section SpeedOfLight \
    $D/$v/cakegrad_mhc_bench --profile 2>&1 | grep -E "Duration|DRAM Through" | sed "s/^/$v /"
done
tar czf ${OUT:-/tmp/out}/mhc74.tgz -C $AB_OUT .
echo "== done at $(ab_el) s"
