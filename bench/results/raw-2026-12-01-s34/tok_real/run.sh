#!/usr/bin/env bash
# tok_real (thirty-fourth session): ncu source counters of backward_finish's token kernel at the
# bench's clocks (NCU_CLOCKS=none, the new option of tools/gpu/ncu_source_profile.sh; this call
# was also its first run). Main's build (bash tools/gpu/package_for_gpu.sh), carry
# [".carry/gpu.tar.xz"]. lines_token.txt maps the counters to source lines, here:
#   PATH=$PATH:/tmp/cuobj/nvidia/cu13/bin python3 bench/ncu_sass_lines.py \
#     build/kernels/CMakeFiles/cakegrad_cuda_mhc.dir/cuda/mhc_backward.cu.o MhcBwdTokenKernel \
#     src_tok_real.csv.gz kernels/cuda/mhc_backward.cu 25
set -uo pipefail
tar xJf .carry/gpu.tar.xz && mkdir -p /tmp/o
OUT=/tmp/o NCU_CLOCKS=none SECTIONS="--section SpeedOfLight --section WarpStateStats --section SchedulerStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis" \
  bash tools/gpu/ncu_source_profile.sh tok_real 'MhcBwdToken' "$PWD/.carry/gpu/bin/cakegrad_mhc_bench" --profile
grep -E "SM Frequency|Stall|Pipe Util|Issued Warp" /tmp/o/ncu_tok_real.txt | head -30
tar czf "$OUT/tok_real.tgz" -C /tmp/o .
