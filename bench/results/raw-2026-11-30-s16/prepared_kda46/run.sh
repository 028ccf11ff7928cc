#!/usr/bin/env bash
# kda46 (prepared in the sixteenth session, never run): the grad kernel's staging with every global
# read issued before any wait, without growing the code: token rows by cp.async to their places
# (raw g and v into their own G / uvs slots), -W's parts by cp.async and re-split in place, Kdec^T
# and M to registers (staged before the cp.async wait), beta by threads 0-63. Bitwise main's.
# Hash gate (offsets 0 1), 3 alternating rounds, suite + sanitizers on st2, the dA_log tail on
# st2 (it must look like main's: kda43 / kda44), ncu grad-kernel time.
set -uo pipefail
source tools/gpu/ab_extras.sh
ab_call kda46
OUT=$AB_OUT HASH_FILTER='KdaKernels.*HashesForCrossBuildComparison' HASH_OFFSETS="0 1" \
  BENCH_ENV="KDA_BENCH_CHUNKED_ONLY=1" BENCH_TIMEOUT=40 TEST_TIMEOUT=200 \
  timeout 300 bash tools/gpu/ab_bench.sh $D kda "base st2" 3 "st2" > "$AB_OUT/ab_stdout.txt" 2>&1
echo "== ab rc=$? at $(ab_el) s"; cat "$AB_OUT/ab_stdout.txt"; ab_pack
ab_dalog_tail $D st2 B2_T1000_H4_fastdecay 100
ab_dalog_tail $D st2 B2_T65_H1 100
ab_pack
ab_ncu_time $D "base st2"
ab_pack; echo "== done at $(ab_el) s"
