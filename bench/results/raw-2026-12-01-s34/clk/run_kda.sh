#!/usr/bin/env bash
# clk, second call: the KDA chunked backward's kernels at the bench's clocks (ncu --clock-control
# none), cases 0, 1, 2; the first call's KDA regex caught only forward launches. Same carry:
# {"command": "bash bench/results/raw-2026-12-01-s34/clk/run_kda.sh", "carry": [".carry/gpu.tar.xz"]}
set -uo pipefail
export PATH=$PATH:/usr/local/cuda/bin
tar xJf .carry/gpu.tar.xz
B=$PWD/.carry/gpu/bin out=${OUT:-/tmp/out}/clk_kda
mkdir -p "$out"
secs=(--section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats
      --section SchedulerStats --section MemoryWorkloadAnalysis --section Occupancy)
re='KdaChunk(PrepKernel<512, 1|StateKernel<[0-9]+, 1|Dstate|Grad|ParamReduce)'
KDA_BENCH_CHUNKED_ONLY=1 KDA_BENCH_CASES=0,1,2 timeout 400 ncu --clock-control none \
  --kernel-name-base demangled "${secs[@]}" -k "regex:$re" -c 15 "$B/cakegrad_kda_bench" \
  > "$out/kda_bwd.txt" 2>&1
grep -E "^  [A-Za-z_].*\(|^    (Duration|SM Frequency|DRAM Throughput|Issue Slots Busy|Compute \(SM\) Throughput)" \
  "$out/kda_bwd.txt" | sed -E 's/\(FwdArgs.*|\(const .*//; s/ +/ /g' | head -100
tar czf "${OUT:-/tmp/out}/clk_kda.tgz" -C "${OUT:-/tmp/out}" clk_kda && rm -rf "$out"
