#!/usr/bin/env bash
# probe2 (twenty-fourth session): stream_read_probe with the plain-load forms (cache operators,
# L2 prefetch sizes, eviction hints) and backward_finish's token-kernel pattern, twice.
set -uo pipefail
export PATH=$PATH:/usr/local/cuda/bin
O=${OUT:-/tmp/out}
mkdir -p "$O"
nvcc -arch=sm_90a -O2 -std=c++17 -I kernels/include -I kernels/cuda -I kernels \
  -o /tmp/stream_read_probe tools/gpu/probes/stream_read_probe.cu 2>&1 | tee "$O/build.txt"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$O/gpu.txt"
for r in 1 2; do /tmp/stream_read_probe | tee "$O/probe_run$r.txt"; done
echo done
