#!/usr/bin/env bash
# kda54 (eighteenth session, the last 258 s of device time): U from the checkpoint state pass
# (FP32 per chunk slot, a new workspace region) instead of the grad kernel's -W staging and its
# -W S0^T products (base: main with kda50-53 merged). New bits by design (no hash gate). Shorter
# than kda50-53 to fit: 40 paired draws per tail shape, 2 alternating bench rounds, the suite and
# both sanitizers on cand, no ncu.
set -uo pipefail
source tools/gpu/ab_extras.sh
ab_call kda54
ab_paired_tails $D "base cand" "B2_T65_H1 B2_T1000_H4_fastdecay" 40 11000000
echo "== tails at $(ab_el) s"; ab_pack
OUT=$AB_OUT BENCH_ENV="KDA_BENCH_CHUNKED_ONLY=1" BENCH_TIMEOUT=40 TEST_TIMEOUT=120 \
  timeout 150 bash tools/gpu/ab_bench.sh $D kda "base cand" 2 "cand" > "$AB_OUT/ab_stdout.txt" 2>&1
echo "== ab rc=$? at $(ab_el) s"; cat "$AB_OUT/ab_stdout.txt"; ab_pack
echo "== done at $(ab_el) s"
