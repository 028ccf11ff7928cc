#!/usr/bin/env bash
# Compares the sm_90a SASS of kernel files between a git revision and the working tree, here (no
# GPU): a change that leaves every kernel's SASS identical needs no device rerun. Prints, per file,
# "identical" or the differing kernels with their instruction counts, and ptxas' register / spill
# lines of the working tree's build. KEEP_SASS=1 keeps the SASS listings (the path is printed).
# Usage (repo root): bash tools/gpu/sass_compare.sh REV kernels/cuda/a.cu [kernels/cuda/b.cu ...]
# Needs cuobjdump and nvdisasm (CUDA toolkit, or the nvidia-cuda-cuobjdump and nvidia-cuda-nvdisasm
# wheels unzipped side by side: CUOBJDUMP=path/to/bin/cuobjdump).
set -euo pipefail
rev=$1
shift
cuobjdump=${CUOBJDUMP:-$(command -v cuobjdump || echo /tmp/cuobj/nvidia/cu13/bin/cuobjdump)}
export PATH="$PATH:$(dirname "$cuobjdump")"  # cuobjdump -sass runs nvdisasm
nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
work=$(mktemp -d)
trap '[ -n "${KEEP_SASS:-}" ] && echo "kept $work" || rm -rf "$work"' EXIT
mkdir -p "$work/old"
git archive "$rev" kernels | tar -x -C "$work/old"

flags=(-O3 -DNDEBUG --generate-code=arch=compute_90a,code=[sm_90a] --expt-relaxed-constexpr
       -std=c++17 -cubin)
# One kernel file's SASS, normalized: encodings, addresses and anonymous-namespace hashes dropped.
sass() {
  local root=$1 file=$2 out=$3
  "$nvcc" -I "$root/kernels/include" -I "$root/kernels/cuda" -I "$root/kernels" \
    -I "$root/kernels/reference" "${flags[@]}" -Xptxas -v "$root/$file" -o "$out.cubin" \
    2> "$out.ptxas"
  "$cuobjdump" -sass "$out.cubin" |
    sed 's#/\* 0x[0-9a-f]* \*/##; s#/\*[0-9a-f]*\*/##; s/_GLOBAL__N__[0-9a-f]*_[0-9]*_/GN_/g;
         s/[[:space:]]*$//' > "$out.sass"
}
param='s/c\[0x0\]\[0x[0-9a-f]*\]/c[0x0][P]/g'
status=0
for f in "$@"; do
  name=$(basename "$f")
  sass "$work/old" "$f" "$work/old_$name" &
  old_pid=$!
  sass "$PWD" "$f" "$work/new_$name"
  wait "$old_pid"
  grep -q "Function :" "$work/new_$name.sass" || { echo "$f: no kernels"; continue; }
  if cmp -s "$work/old_$name.sass" "$work/new_$name.sass"; then
    echo "$f: SASS identical to $rev"
  elif cmp -s <(sed "$param" "$work/old_$name.sass") <(sed "$param" "$work/new_$name.sass"); then
    # The same code reading its constant bank (the kernel parameters and launch constants) at
    # other offsets: a parameter struct changed layout.
    echo "$f: SASS identical to $rev up to kernel-parameter offsets (c[0x0][...])"
  else
    status=1
    echo "$f: SASS differs from $rev"
    # Per kernel: instruction count before -> after, for the kernels that differ.
    for side in old new; do
      awk '/Function :/{fn=$3} /^ *[A-Z@]/ && fn!="" {n[fn]++} END{for (k in n) print k, n[k]}' \
        "$work/${side}_$name.sass" | sort > "$work/${side}_$name.count"
    done
    # Registers and spill of the working tree's build (ptxas -v), by the same normalized names.
    awk '/Compiling entry function/ {match($0, /function .[^ ]*. for/); fn=substr($0, RSTART+10, RLENGTH-15)
                                     gsub(/_GLOBAL__N__[0-9a-f]*_[0-9]*_/, "GN_", fn)}
         /bytes spill stores/ {sp[fn]=$5 " B spill"}
         /Used [0-9]+ registers/ {match($0, /Used [0-9]+ registers/); print fn, substr($0, RSTART+5, RLENGTH-5) ", " sp[fn]}' \
      "$work/new_$name.ptxas" | sort > "$work/new_$name.regs"
    join -a1 -a2 -e0 -o 0,1.2,2.2 "$work/old_$name.count" "$work/new_$name.count" |
      awk '$2 != $3 {print $1, $2 " -> " $3 " instructions"}' | sort > "$work/diff_$name"
    join "$work/diff_$name" "$work/new_$name.regs" | sed 's/^/  /'
  fi
done
exit $status
