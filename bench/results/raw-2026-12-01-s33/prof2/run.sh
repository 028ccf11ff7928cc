#!/usr/bin/env bash
# prof2 (thirty-third session): line-level ncu source counters of mHC kernels at T = 16384,
# C = 4096 (mhc bench --profile) from mhc73's imm build: backward_finish's column kernel, the
# forwards' split-K stats kernel and forward_prepare's cluster kernel with U. Map with the
# -lineinfo objects of 65ec53d (bench/ncu_sass_lines.py). The call ran these steps inline (git show
# c598d63:bench/results/raw-2026-12-01-s33/prof2/run.sh; its ncu lacked -f, so its second run
# exported the first run's reports of the same binary); tools/gpu/ncu_source_profile.sh holds them
# now.
# Device call: {"command": "bash bench/results/raw-2026-12-01-s33/prof2/run.sh",
#   "carry": [".carry/mhc73x"], "timeout_s": 300}
set -uo pipefail
tar xJf .carry/mhc73x/mhc73.tar.xz -C .carry
O=${OUT:-/tmp/out}
B=.carry/mhc73/imm/cakegrad_mhc_bench
bash tools/gpu/ncu_source_profile.sh column 'MhcBwdColumnsTc' $B --profile
bash tools/gpu/ncu_source_profile.sh splitk 'MhcFwdClusterKernel<.*bool.0>' $B --profile
bash tools/gpu/ncu_source_profile.sh cluster_u 'MhcFwdClusterKernel<.*bool.1>' $B --profile
# The device tool returns a limited number of files: one archive holds them all.
tar czf /tmp/prof2.tgz -C "$O" . && rm -rf "${O:?}"/* && mv /tmp/prof2.tgz "$O/"
