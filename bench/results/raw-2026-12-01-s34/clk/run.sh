#!/usr/bin/env bash
# clk (thirty-fourth session): what bounds each hot kernel at the clocks the bench runs at. ncu
# locks the SM clock by default (~1.35-1.59 GHz), where a kernel looks more issue-bound than it
# is at the bench's ~1.98 GHz; --clock-control none leaves the clocks alone. Main's build (6a4704f
# kernels; bash tools/gpu/package_for_gpu.sh), carry [".carry/gpu.tar.xz"]:
# {"command": "bash bench/results/raw-2026-12-01-s34/clk/run.sh", "carry": [".carry/gpu.tar.xz"]}
set -uo pipefail
export PATH=$PATH:/usr/local/cuda/bin
tar xJf .carry/gpu.tar.xz
B=$PWD/.carry/gpu/bin out=${OUT:-/tmp/out}/clk
mkdir -p "$out"
secs=(--section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats
      --section SchedulerStats --section MemoryWorkloadAnalysis)
prof() {  # TAG REGEX COUNT CMD...
  local tag=$1 regex=$2 count=$3
  shift 3
  timeout 200 ncu --clock-control none "${secs[@]}" -k "regex:$regex" -c "$count" "$@" \
    > "$out/$tag.txt" 2>&1
  echo "== $tag"
  grep -E "^  [A-Za-z_].*\(|^    (Duration|SM Frequency|DRAM Throughput|Memory Throughput|Issue Slots Busy|Compute \(SM\) Throughput)" \
    "$out/$tag.txt" | sed -E 's/\(const .*\)//; s/ +/ /g' | head -60
}
prof mhc_bwd 'MhcBwd(Token|Columns)' 2 "$B/cakegrad_mhc_bench" --profile
prof mhc_fwd 'MhcFwd' 6 "$B/cakegrad_mhc_bench" --profile
KDA_BENCH_CHUNKED_ONLY=1 KDA_BENCH_CASES=0 prof kda_case0 'Kda' 12 "$B/cakegrad_kda_bench"
tar czf "${OUT:-/tmp/out}/clk.tgz" -C "${OUT:-/tmp/out}" clk && rm -rf "$out"
