#!/usr/bin/env bash
# prof3 (thirty-third session): ncu (full set, source counters) of backward_finish's column and
# token kernels at T = 16384, C = 4096 (mhc bench --profile) from the final build 7c5099e
# (.carry/gpu.tar.xz), for the next instruction cuts. Map with the -lineinfo object of 7c5099e
# (bench/ncu_sass_lines.py). The call ran these steps inline (git show
# c598d63:bench/results/raw-2026-12-01-s33/prof3/run.sh); tools/gpu/ncu_source_profile.sh holds
# them now.
# Device call: {"command": "bash bench/results/raw-2026-12-01-s33/prof3/run.sh",
#   "carry": [".carry/gpu.tar.xz"], "timeout_s": 240}
set -uo pipefail
[ -x .carry/gpu/bin/cakegrad_mhc_bench ] || tar xJf .carry/gpu.tar.xz
export LD_LIBRARY_PATH=$PWD/.carry/gpu/lib:${LD_LIBRARY_PATH:-}
O=${OUT:-/tmp/out}
for k in MhcBwdColumnsTc MhcBwdToken; do
  SECTIONS="--set full" bash tools/gpu/ncu_source_profile.sh "$k" "$k" \
    .carry/gpu/bin/cakegrad_mhc_bench --profile
done
# The device tool returns a limited number of files: one archive holds them all.
tar czf /tmp/prof3.tgz -C "$O" . && rm -rf "${O:?}"/* && mv /tmp/prof3.tgz "$O/"
