#!/usr/bin/env bash
# Call prof94 (fortieth session): where the forwards' C = 4096 kernel waits, line by line, on main
# (8bed7ab's kernels, unchanged since 0e44c86): forward_prepare's cluster instance (Lb1E) and
# forward_stats' split-K instance (Lb0E), one launch each at T = 16384 at the bench's clocks,
# (the demangled names say (bool)1 / (bool)0; a first run matching true / false profiled
# nothing) with warp-state sampling, then attributed to mhc_forward.cu's lines on the device (it has
# cuobjdump / nvdisasm; this machine has not).
# Carry: .carry/prof94 = the kernels-only RelWithDebInfo build's mhc bench (stripped) and the
# -lineinfo object mhc_forward.cu.o of the same build (/tmp/ab-build, main's tree):
#   ninja -C /tmp/ab-build cakegrad_mhc_bench; mkdir -p .carry/prof94;
#   cp /tmp/ab-build/kernels/CMakeFiles/cakegrad_cuda_mhc.dir/cuda/mhc_forward.cu.o .carry/prof94/;
#   cp /tmp/ab-build/bench/cakegrad_mhc_bench .carry/prof94/; strip .carry/prof94/cakegrad_mhc_bench
# Device call: {"command": "bash bench/results/raw-2026-12-02-s40/prof94/run.sh", "carry": [".carry/prof94"]}
set -uo pipefail
P=.carry/prof94
export NCU_CLOCKS=none
for v in prep:'MhcFwdClusterKernel.*bool.1' stats:'MhcFwdClusterKernel.*bool.0'; do
  tag=${v%%:*} re=${v#*:}
  bash tools/gpu/ncu_source_profile.sh "$tag" "$re" "$P/cakegrad_mhc_bench" --profile
  mangled=$([ "$tag" = prep ] && echo Lb1EEEv14CUtensorMap_stPKfS8_S8_PfPtlffS9_l: ||
    echo Lb0EEEv14CUtensorMap_stPKfS8_S8_PfPtlffS9_l:)
  python3 bench/ncu_sass_lines.py "$P/mhc_forward.cu.o" "$mangled" "$OUT/src_$tag.csv.gz" \
    kernels/cuda/mhc_forward.cu 40 > "$OUT/lines_$tag.txt" 2>&1
  head -50 "$OUT/lines_$tag.txt"
  grep -E "stall|Warp Cycles|Eligible|Issued Warp" "$OUT/ncu_$tag.txt" | head -12
done
tar czf /tmp/prof94.tgz -C "$OUT" . && mv /tmp/prof94.tgz "$OUT/"
