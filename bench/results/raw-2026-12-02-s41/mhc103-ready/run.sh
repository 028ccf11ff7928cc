#!/usr/bin/env bash
# Call mhc103 (prepared in the forty-first session, NEVER RUN on a device): mhc102's question again
# without its shared atomics. forward_prepare's mbarrier exchange (mhc100's mbar) with three or four
# cpart parities, so that the exchange's latency chain (CTA sum, hand-over, 16 remote loads,
# hand-back) spans three or four stages instead of two. The shared memory comes from wpart: the two
# warps of a stream sum their partials into one slot through a named barrier of the two (part 1
# stores, part 0 adds its own: ids 3..10), which gives stats new bits in both forwards alike
# (KEEP=1; the suite checks accuracy and forward_stats' stats against forward_prepare's). The U
# warps' sum_empty arrive is released at cluster scope here (mhc100 / mhc102 used .release.cta,
# and racecheck reported the CTA sum's store against the remote loads; this says whether that
# was the reason).
#   pair2b: the paired slots, two parities (what the pairing costs alone)
#   mbar3b: three parities (branch mhc-mbar3b HEAD)
#   mbar4b: four parities
# Build (here; the branch's cluster_sync.cuh and kda_mma.cuh serve all four):
#   git checkout mhc-mbar3b
#   sed 's/kParities = 3;/kParities = 4;/' kernels/cuda/mhc_forward.cu > /tmp/diag/mbar4b.cu
#   sed 's/kParities = 3;/kParities = 2;/' kernels/cuda/mhc_forward.cu > /tmp/diag/pair2b.cu
#   EXTRA=bench/results/raw-2026-12-02-s41/mhc103-ready/run.sh bash tools/gpu/build_ab_carry.sh
#   mhc103 mhc kernels/cuda/mhc_forward.cu base=git:fc13df8 pair2b=/tmp/diag/pair2b.cu
#   mbar3b=tree mbar4b=/tmp/diag/mbar4b.cu
# Device call: {"command": "bash bench/results/raw-2026-12-02-s41/mhc103-ready/run.sh",
#   "carry": [".carry/mhc103x"], "timeout_s": 200} (~90 s of device time after the start)
# Read: pair2b against base (the pairing's cost), mbar3b / mbar4b against pair2b (the parities'
# gain), mbar3b's suite and four sanitizers (racecheck's hazard gone or not).
ROUNDS=3 HIDE='backward_\|forward_finish' NCU_CLOCKS=none bash tools/gpu/mhc_ab_call.sh mhc103 \
  "base pair2b mbar3b mbar4b" "mbar3b" 1 4096,16384 'MhcFwdCluster' 2>&1 |
  grep -E "forward_|PASSED|FAILED|SUMMARY|hashes|Duration|DRAM|rc=|ERROR|error|hazard|rel-L2 T=16384"
