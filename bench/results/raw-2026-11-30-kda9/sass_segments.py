# Static SASS of one kernel of a cubin split at BAR.SYNC (kda9); usage: python3 sass_segments.py FILE.cubin KdaChunkPrep
"""Static SASS of one kernel of a cubin, split at BAR.SYNC: instructions per stretch and the opcodes."""
import re, subprocess, sys, collections
cubin, kname = sys.argv[1], sys.argv[2]
out = subprocess.run(['/tmp/cuobj/nvidia/cu13/bin/cuobjdump', '-sass', cubin], capture_output=True, text=True).stdout
funcs = re.split(r'\n\s+Function : ', out)
for f in funcs[1:]:
    name = f.split('\n', 1)[0].strip()
    if kname not in name: continue
    ins = re.findall(r'/\*[0-9a-f]{4,}\*/\s+([^;]*);', f)
    segs = [[]]
    for i in ins:
        segs[-1].append(i)
        if 'BAR.SYNC' in i: segs.append([])
    print(name[:90], 'total', len(ins))
    for j, s in enumerate(segs):
        ops = collections.Counter(re.sub(r'^@!?U?P\w+\s+', '', x).split()[0].split('.')[0] for x in s if x.strip())
        print(f'  seg{j:2d} n={len(s):5d}', ' '.join(f'{k}:{v}' for k, v in ops.most_common(40)))
