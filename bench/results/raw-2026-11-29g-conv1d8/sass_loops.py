import re, sys, collections
# usage: loops.py file.sass FUNC_SUBSTR [hist]
txt = open(sys.argv[1]).read()
want = sys.argv[2]
funcs = re.split(r'\n\t\tFunction : ', txt)
for f in funcs[1:]:
    name = f.split('\n', 1)[0]
    if want not in name: continue
    ins = []
    for m in re.finditer(r'/\*([0-9a-f]{4,})\*/\s+([^;]*);', f):
        ins.append((int(m.group(1), 16), m.group(2).strip()))
    addr = {a: i for i, (a, _) in enumerate(ins)}
    print(name[:160], 'total', len(ins))
    for i, (a, s) in enumerate(ins):
        m = re.search(r'BRA\S*\s+(?:`?\(?\.L_x_\d+\)?|0x([0-9a-f]+))', s)
        m2 = re.search(r'0x([0-9a-f]+)', s) if 'BRA' in s else None
        if m2:
            t = int(m2.group(1), 16)
            if t <= a and t in addr:
                j = addr[t]
                body = ins[j:i + 1]
                print(f'  loop {t:#x}..{a:#x}: {len(body)} instr')
                if len(sys.argv) > 3 and len(body) > 300:
                    h = collections.Counter(re.sub(r'^@!?U?P\w+\s+', '', x).split()[0] for _, x in body)
                    for k, v in sorted(h.items(), key=lambda kv: -kv[1]): print(f'    {k:28s} {v}')
