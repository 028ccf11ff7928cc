"""Attributes an ncu SASS source page (executed instructions, stall samples) to lines of one CUDA
source file, through the line table of the same build: a line-level profile of a kernel whose
inlined helpers would otherwise scatter it (every instruction counts for the outermost line of
SOURCE it was inlined into). The ncu rows and the object's SASS must be the same code: the script
checks the opcodes row by row and stops on a mismatch.

Usage: ncu -i REPORT.ncu-rep --page source --csv --print-source sass | gzip > src.csv.gz  (GPU)
       python3 bench/ncu_sass_lines.py OBJECT.o KERNEL_SUBSTRING src.csv.gz SOURCE.cu [TOP]
OBJECT.o is the -lineinfo object of the profiled commit (e.g. build/kernels/CMakeFiles/
cakegrad_cuda_kda.dir/cuda/kda_chunked_backward.cu.o); KERNEL_SUBSTRING picks the function from
the mangled names (e.g. KdaChunkPrepKernelILi512ELb1E); cuobjdump and nvdisasm come from PATH or
the CUDA toolkit.
"""
import collections
import csv
import gzip
import os
import re
import shutil
import subprocess
import sys
import tempfile


def tool(name):
    found = shutil.which(name) or os.path.join("/usr/local/cuda/bin", name)
    return found


def sass_with_lines(obj, kernel, source):
    """(opcode text, line of SOURCE or None) per instruction of the kernel, in address order."""
    with tempfile.TemporaryDirectory() as d:
        subprocess.run([tool("cuobjdump"), "-xelf", "all", os.path.abspath(obj)], cwd=d,
                       check=True, capture_output=True)
        cubins = [f for f in os.listdir(d) if f.endswith(".cubin")]
        if len(cubins) != 1:
            sys.exit(f"expected one cubin in {obj}, found {cubins}")
        text = subprocess.run([tool("nvdisasm"), "-gi", os.path.join(d, cubins[0])], check=True,
                              capture_output=True, text=True).stdout.split("\n")
    starts = [i for i, l in enumerate(text) if l.startswith(".text.") and kernel in l]
    if len(starts) != 1:
        sys.exit(f"{len(starts)} functions match {kernel!r}")
    out, cur = [], None
    for l in text[starts[0] + 1:]:
        if l.startswith(".text.") or l.startswith("\t.section"):
            break
        m = re.search(r'## File "([^"]+)", line (\d+)(.*)', l)
        if m:
            f, ln, rest = m.group(1), int(m.group(2)), m.group(3)
            cur = ln if f.endswith(source) else None
            for of, ol in re.findall(r'inlined at "([^"]+)", line (\d+)', rest):
                if of.endswith(source):
                    cur = int(ol)
            continue
        m = re.match(r"\s*/\*([0-9a-f]{4,})\*/\s+(.*?);", l)
        if m:
            out.append((m.group(2).strip(), cur))
    return out


def opcode(text):
    parts = text.split()
    op = parts[1] if parts[0].startswith("@") else parts[0]
    return op.split(".")[0]


def num(x):
    try:
        return float(x.replace(",", ""))
    except ValueError:
        return 0.0


def main():
    if len(sys.argv) < 5:
        sys.exit(__doc__)
    obj, kernel, csv_path, source = sys.argv[1:5]
    top = int(sys.argv[5]) if len(sys.argv) > 5 else 40
    sass = sass_with_lines(obj, kernel, os.path.basename(source))
    opener = gzip.open if csv_path.endswith(".gz") else open
    with opener(csv_path, "rt") as f:
        rows = list(csv.reader(f))
    hdr = rows[1]
    ix = {h: i for i, h in enumerate(hdr)}
    data = [r for r in rows[2:] if len(r) >= len(hdr)]
    if len(data) != len(sass):
        sys.exit(f"ncu has {len(data)} instructions, the object {len(sass)}: not the same build")
    inst, samp = collections.Counter(), collections.Counter()
    for n, (r, (op, ln)) in enumerate(zip(data, sass)):
        if opcode(r[ix["Source"]]) != opcode(op):
            sys.exit(f"instruction {n}: ncu {r[ix['Source']]!r}, object {op!r}: not the same build")
        inst[ln] += num(r[ix["Instructions Executed"]])
        samp[ln] += num(r[ix["Warp Stall Sampling (All Samples)"]])
    ti, ts = sum(inst.values()) or 1.0, sum(samp.values()) or 1.0
    src = open(source).read().split("\n")
    print(f"{kernel}: {ti:.0f} warp instructions, {ts:.0f} stall samples; top lines of {source}")
    for ln, v in sorted(inst.items(), key=lambda x: -x[1])[:top]:
        code = src[ln - 1].strip()[:90] if ln else "(other files)"
        print(f"{ln}: inst {100 * v / ti:5.2f}%  samples {100 * samp[ln] / ts:5.2f}%  | {code}")


if __name__ == "__main__":
    main()
