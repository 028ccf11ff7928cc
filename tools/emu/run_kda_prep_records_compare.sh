#!/usr/bin/env bash
# Compares the chunk records of the chunked KDA forward's preparation kernel between two versions
# of kernels/cuda/kda_chunked_forward.cu, byte for byte, on the host (tools/emu): a restructured
# kernel that keeps every record value must leave the workspace bitwise identical (then the
# forward's and the chunked backward's outputs are unchanged too).
# Usage (repo root): bash tools/emu/run_kda_prep_records_compare.sh [BASE_REV [THREADS...]]
# (default: main; THREADS: the working tree's thread-count instances to run, e.g. "256 384";
# none: the kernel's default instance).
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
base=${1:-main}
shift || true
threads=("$@")
[ ${#threads[@]} -gt 0 ] || threads=(default)
out=${OUT:-/tmp/kda_prep_emu}
mkdir -p "$out/base" "$out/new"
git show "$base:kernels/cuda/kda_chunked_forward.cu" > "$out/base/kda_chunked_forward.cu"
cp kernels/cuda/kda_chunked_forward.cu "$out/new/kda_chunked_forward.cu"
run() {  # run DIR TAG [g++ flags]
  local dir=$1 tag=$2
  shift 2
  python3 tools/emu/emu_transform.py forward "$out/$dir/kda_chunked_forward.cu" \
    > "$out/$dir/fwd_emu.inc"
  g++ -std=c++20 -O2 -w "$@" -Ikernels/include -Ikernels -Ikernels/cuda \
    -I/usr/local/cuda/include -Itools/emu -I"$out/$dir" tools/emu/kda_prep_records_emu.cc \
    -o "$out/$dir/prep_emu_$tag" -lpthread
  "$out/$dir/prep_emu_$tag" "$out/$dir/records_$tag.bin"
}
# A base from before ChunkSlotGrid launched the slots along x.
base_flags=()
grep -q ChunkSlotOfBlock "$out/base/kda_chunked_forward.cu" || base_flags=(-DPREP_SLOTS_ALONG_X)
run base default "${base_flags[@]}"
rc=0
for n in "${threads[@]}"; do
  if [ "$n" = default ]; then run new default; else run new "$n" -DPREP_THREADS="$n"; fi
  if cmp "$out/base/records_default.bin" "$out/new/records_$n.bin"; then
    echo "$n: records bitwise identical ($(stat -c %s "$out/new/records_$n.bin") bytes)"
  else
    echo "$n: records DIFFER"
    rc=1
  fi
done
exit $rc
