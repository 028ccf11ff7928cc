#!/usr/bin/env bash
# kda47 (seventeenth session): the grad kernel's Uv forward solve on all 16 warps (uv1: warp w owns
# columns 8 w .. 8 w + 7, the four lanes of a column take a 4-row block's rows, the block's own
# rows by shuffles; uv1b: the same with the long sum unrolled by 4 instead of 2). Bitwise main's
# by construction (same operations per row, same order); host emulator hashes equal main's.
# Hash gate (offsets 0 1), 3 alternating rounds, suite + sanitizers on uv1, ncu grad-kernel time.
# Build the carry here: bash bench/results/raw-2026-11-30-s17/kda47/prepare.sh
set -uo pipefail
source tools/gpu/ab_extras.sh
ab_call kda47
OUT=$AB_OUT HASH_FILTER='KdaKernels.*HashesForCrossBuildComparison' HASH_OFFSETS="0 1" \
  BENCH_ENV="KDA_BENCH_CHUNKED_ONLY=1" BENCH_TIMEOUT=40 TEST_TIMEOUT=200 \
  timeout 330 bash tools/gpu/ab_bench.sh $D kda "base uv1 uv1b" 3 "uv1" > "$AB_OUT/ab_stdout.txt" 2>&1
echo "== ab rc=$? at $(ab_el) s"; cat "$AB_OUT/ab_stdout.txt"; ab_pack
ab_ncu_time $D "base uv1 uv1b"
ab_pack; echo "== done at $(ab_el) s"
