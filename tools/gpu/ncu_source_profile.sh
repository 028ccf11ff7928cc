#!/usr/bin/env bash
# Runs ON the GPU machine: a line-level ncu profile of one kernel launch, for
# bench/ncu_sass_lines.py here (with the -lineinfo object of the same build).
#   bash tools/gpu/ncu_source_profile.sh TAG KERNEL_REGEX BIN [ARGS ...]
# profiles the first launch matching KERNEL_REGEX (demangled names) of BIN ARGS with the warp-state,
# scheduler and source-counter sections (SECTIONS overrides them, e.g. "--set full") and writes
# into $OUT: ncu_TAG.txt (details), src_TAG.csv.gz (the SASS source page) and segments_TAG.txt
# (bench/ncu_sass_segments.py), printing the duration, issue and DRAM lines and the stall summary.
# NCU_CLOCKS=none profiles at the clocks the bench runs at instead of ncu's locked base clocks.
set -uo pipefail
[ $# -ge 3 ] || { sed -n 2,9p "$0" >&2; exit 2; }
tag=$1 regex=$2
shift 2
export PATH=$PATH:/usr/local/cuda/bin
out=${OUT:-/tmp/out}
mkdir -p "$out"
read -r -a sections <<< "${SECTIONS:---section SpeedOfLight --section WarpStateStats --section SchedulerStats}"
timeout 150 ncu -f --clock-control "${NCU_CLOCKS:-base}" --import-source no \
  --kernel-name-base demangled "${sections[@]}" \
  --section SourceCounters -k "regex:$regex" -c 1 -o "/tmp/$tag" "$@" > "$out/ncu_$tag.log" 2>&1
timeout 30 ncu -i "/tmp/$tag.ncu-rep" --page details > "$out/ncu_$tag.txt" 2>&1
timeout 60 ncu -i "/tmp/$tag.ncu-rep" --page source --csv --print-source sass > "/tmp/$tag.csv" \
  2>/dev/null
gzip -c "/tmp/$tag.csv" > "$out/src_$tag.csv.gz"
python3 bench/ncu_sass_segments.py "/tmp/$tag.csv" > "$out/segments_$tag.txt" 2>&1
echo "== $tag"
grep -E "Duration|Issue Slots Busy|DRAM Throughput" "$out/ncu_$tag.txt" | head -3
head -2 "$out/segments_$tag.txt"
