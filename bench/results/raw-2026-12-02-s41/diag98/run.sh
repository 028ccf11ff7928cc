#!/usr/bin/env bash
# Call diag98 (forty-first session): timing-only diagnostics of forward_prepare's C = 4096 cluster
# kernel (wrong results by design; only the with-U kernel is changed, forward_stats is main's):
#   nosq:  the MMA warps skip sq's two MMAs a (k group, token tile) (a quarter of their MMAs)
#   nomma: the MMA warps skip every MMA (their shared loads kept)
#   nou:   the U warps compute and store no U (pre, sums, refills kept)
# Which chain bounds the stage (2.9 us against the split-K kernel's 2.1): if nomma is far faster,
# the MMA warps' multiply; if not, the U warps' chain and the buffer cycle.
# Build (main fc13df8; the variants' sources are made by diag98/make_variants.py):
#   python3 bench/results/raw-2026-12-02-s41/diag98/make_variants.py /tmp/diag
#   EXTRA=bench/results/raw-2026-12-02-s41/diag98/run.sh bash tools/gpu/build_ab_carry.sh diag98 mhc
#   kernels/cuda/mhc_forward.cu base=tree nosq=/tmp/diag/nosq.cu nomma=/tmp/diag/nomma.cu
#   nou=/tmp/diag/nou.cu
# Device call: {"command": "bash bench/results/raw-2026-12-02-s41/diag98/run.sh", "carry": [".carry/diag98x"]}
ROUNDS=3 HIDE='backward_' NCU_CLOCKS=none bash tools/gpu/mhc_ab_call.sh diag98 \
  "base nosq nomma nou" "" 1 4096,16384 'MhcFwd(Cluster|Coef)' 2>&1 |
  grep -E "forward_|PASSED|FAILED|SUMMARY|hashes|Duration|Throughput|rc=|ERROR|error"
