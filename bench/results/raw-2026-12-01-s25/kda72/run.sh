#!/usr/bin/env bash
# kda72: the sequential backward before (base: FP32, e89a6cf~1) and after (fp64: e89a6cf) at
# the few-head shapes where it is the default. KDA bench cases 0 (T = 8192) and 1 (T = 32768)
# with H = 1 and 2, two alternating rounds.
set -uo pipefail
C=.carry/kda72
export LD_LIBRARY_PATH=$PWD/$C/lib:${LD_LIBRARY_PATH:-}
for round in 1 2; do
  for v in base fp64; do
    for h in 1 2; do
      echo "== round $round $v H=$h"
      KDA_BENCH_CASES=01 KDA_BENCH_H=$h timeout 120 $C/$v/cakegrad_kda_bench 2>&1 | grep -E "bwd  median|bwd chunked  median|rel-L2"
    done
  done
done
