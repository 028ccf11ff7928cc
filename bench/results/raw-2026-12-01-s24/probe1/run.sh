#!/usr/bin/env bash
# probe1 (twenty-fourth session): the stream-read ceilings of tools/gpu/probes/stream_read_probe.cu
# on the H200, then ncu's L2 view (throughput, sectors by source, DRAM bytes) of three of them.
set -uo pipefail
export PATH=$PATH:/usr/local/cuda/bin
O=${OUT:-/tmp/out}
mkdir -p "$O"
nvcc -arch=sm_90a -O2 -std=c++17 -I kernels/include -I kernels/cuda -I kernels \
  -o /tmp/stream_read_probe tools/gpu/probes/stream_read_probe.cu 2>&1 | tee "$O/build.txt"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$O/gpu.txt"
for r in 1 2; do /tmp/stream_read_probe | tee "$O/probe_run$r.txt"; done
M=gpu__time_duration.sum,dram__bytes_read.sum,lts__t_sectors_srcunit_tex.sum
M=$M,lts__t_sectors_srcunit_ltcfabric.sum,lts__t_sectors_srcunit_tex_lookup_hit.sum
M=$M,lts__throughput.avg.pct_of_peak_sustained_elapsed,dram__throughput.avg.pct_of_peak_sustained_elapsed
# Each case is 18 launches (3 warm-up + 15 timed); --launch-skip counts the matching kernel's.
prof() {  # NAME KERNEL SKIP
  timeout 60 ncu --clock-control none --cache-control none --metrics "$M" -k "$2" \
    --launch-skip "$3" -c 1 /tmp/stream_read_probe > "$O/ncu_$1.txt" 2>&1
  echo "== $1"; grep -E "^    [a-z]" "$O/ncu_$1.txt" | sed -E 's/ +/ /g'
}
prof ldg8 LdgKernel 21
prof ring_stats RingKernel 3
prof ring_allstreams RingKernel 75
prof bulk64k BulkKernel 3
echo done
