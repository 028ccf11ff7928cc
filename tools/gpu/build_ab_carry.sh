#!/usr/bin/env bash
# Run here (the development machine): builds the variants of one kernel source file for an A/B
# call of tools/gpu/ab_bench.sh and packs them small enough to carry (the working tree and the
# carry together must stay under the device tool's 64 MiB).
#   bash tools/gpu/build_ab_carry.sh NAME FAMILY FILE VARIANT=SOURCE ...
# FILE is the source the variants replace (e.g. kernels/cuda/kda_chunked_backward.cu), or several
# such paths separated by spaces (one quoted argument); SOURCE is a file path (single FILE only;
# FILE itself means its content as the call found it), git:REV (every FILE as committed at REV,
# empty where REV lacks it) or "tree" (every FILE as the call found it, absent where the tree
# lacks it: a source removed since REV). Each variant gets FILE's content, one
# kernels-only build (BUILD_DIR, default /tmp/ab-build, configured on first use) and its stripped
# family test and bench binaries in .carry/NAME/VARIANT/. FILE is restored afterwards, whatever
# happens. EXTRA (space-separated paths, e.g. the call's run script) are copied into .carry/NAME
# too. The result is .carry/NAMEx/NAME.tar.xz; carry [".carry/NAMEx"] and unpack it there with
# `tar xJf .carry/NAMEx/NAME.tar.xz -C .carry` before `bash tools/gpu/ab_bench.sh .carry/NAME ...`.
set -euo pipefail
[ $# -ge 4 ] || { sed -n 2,13p "$0" >&2; exit 2; }
name=$1 family=$2 file=$3
shift 3
cd "$(git rev-parse --show-toplevel)"
case $family in conv1d | mhc | kda) ;; *) echo "FAMILY must be conv1d, mhc or kda" >&2; exit 2 ;; esac
read -r -a files <<< "$file"
for f in "${files[@]}"; do
  [ -f "$f" ] || git cat-file -e "HEAD:$f" 2>/dev/null || [ -n "$(git log -1 --format=%H -- "$f")" ] ||
    { echo "no such file: $f" >&2; exit 2; }
done
build=${BUILD_DIR:-/tmp/ab-build}
if [ ! -f "$build/build.ninja" ]; then
  cmake -S . -B "$build" -G Ninja -DCAKEGRAD_KERNELS_ONLY=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
saved=$(mktemp -d)
for i in "${!files[@]}"; do [ ! -f "${files[$i]}" ] || cp "${files[$i]}" "$saved/$i"; done
restore() {
  for i in "${!files[@]}"; do
    if [ -f "$saved/$i" ]; then cp "$saved/$i" "${files[$i]}"; else rm -f "${files[$i]}"; fi
  done
}
trap 'restore; rm -rf "$saved"' EXIT
out=.carry/$name
rm -rf "$out" ".carry/${name}x"
for spec in "$@"; do
  v=${spec%%=*} src=${spec#*=}
  case $src in
    git:*)
      # A FILE new since REV is left empty there (it compiles to nothing).
      for f in "${files[@]}"; do git show "${src#git:}:$f" > "$f" 2>/dev/null || : > "$f"; done ;;
    tree) restore ;;
    *)
      [ ${#files[@]} -eq 1 ] || { echo "a file SOURCE needs a single FILE" >&2; exit 2; }
      if [ "$(realpath "$src")" = "$(realpath "$file")" ]; then restore; else cp "$src" "$file"; fi ;;
  esac
  ninja -C "$build" "cakegrad_gpu_${family}_tests" "cakegrad_${family}_bench" > "$build/ab_$v.log" 2>&1 ||
    { tail -20 "$build/ab_$v.log" >&2; echo "variant $v failed to build" >&2; exit 1; }
  mkdir -p "$out/$v"
  cp "$build/tests/cakegrad_gpu_${family}_tests" "$build/bench/cakegrad_${family}_bench" "$out/$v/"
  strip "$out/$v/"*
  echo "$v: $(md5sum < "$out/$v/cakegrad_${family}_bench" | cut -c1-12) from $src"
done
for f in ${EXTRA:-}; do cp "$f" "$out/"; done
mkdir -p ".carry/${name}x"
tar cJf ".carry/${name}x/$name.tar.xz" -C .carry "$name"
echo "packed .carry/${name}x/$name.tar.xz ($(du -h ".carry/${name}x/$name.tar.xz" | cut -f1))"
