# Sourced (from the repository root) by the KDA emulation scripts that set a candidate's accuracy
# beside a base revision's: both need the chunked forward's sources of one version staged and
# compiled the same way.
# stage_sources OUT TAG [REV]: the kernel sources of REV (else the working tree) into
# OUT/TAG/src, the emulator's transform of the forward into OUT/TAG/fwd_emu.inc, and the FP64
# Prepare of the chunked backward's math test (the records' reference) into OUT/TAG/prep.inc.
stage_sources() {
  local out=$1 tag=$2 rev=${3:-} f
  mkdir -p "$out/$tag/src"
  # kda_cluster_launch.cuh (from 0656857 on) includes kda_common.cuh beside it: staged with it.
  for f in kda_chunked_forward.cu kda_chunked_forward.cuh kda_common.cuh kda_mma.cuh \
    kda_cluster_launch.cuh; do
    if [ -n "$rev" ]; then
      git cat-file -e "$rev:kernels/cuda/$f" 2> /dev/null || continue
      git show "$rev:kernels/cuda/$f" > "$out/$tag/src/$f"
    else cp "kernels/cuda/$f" "$out/$tag/src/$f"; fi
  done
  python3 tools/emu/emu_transform.py forward "$out/$tag/src/kda_chunked_forward.cu" \
    > "$out/$tag/fwd_emu.inc"
  awk '/^constexpr int C = 64;/{f=1} /^\/\/ The per-chunk pass \(KdaChunkGradKernel\)/{f=0} f' \
    tests/kernels/kda_chunked_backward_math_test.cc > "$out/$tag/prep.inc"
}
# build_driver OUT TAG DRIVER EXE [SOURCES...]: DRIVER against the staged version (its own
# kda_*.cuh first, then the tree's other headers), as OUT/TAG/EXE.
# Revisions whose checkpoint pass runs as 2-CTA clusters too get KDA_EMU_MC_CHECKPOINT (earlier
# ones reject that instance: kda_emu_fwd_inputs.h then runs it plain, as their device did).
build_driver() {
  local out=$1 tag=$2 driver=$3 exe=$4 defs=()
  shift 4
  grep -q "LaunchStateMc<kRows, true>" "$out/$tag/src/kda_chunked_forward.cu" &&
    defs+=(-DKDA_EMU_MC_CHECKPOINT)
  g++ -std=c++20 -O2 -w "${defs[@]}" -I"$out/$tag/src" -Ikernels/include -Ikernels -Ikernels/cuda \
    -I/usr/local/cuda/include -Itools/emu -I"$out/$tag" "$driver" "$@" -o "$out/$tag/$exe" \
    -lpthread
}
# for_base_and_new OUT BASE_REV DRIVER EXE [SOURCES...]: DRIVER staged, built and run for BASE_REV
# (when not empty) and then for the working tree, so that a candidate's lines print under the
# base's; fails if either run fails.
for_base_and_new() {
  local out=$1 base=$2 driver=$3 exe=$4 tag rev rc=0
  shift 4
  for tag in ${base:+base} new; do
    rev=""
    [ "$tag" = base ] && rev=$base
    stage_sources "$out" "$tag" "$rev"
    build_driver "$out" "$tag" "$driver" "$exe" "$@"
    echo "== $tag"
    "$out/$tag/$exe" || rc=1
  done
  return $rc
}
