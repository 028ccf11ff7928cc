"""Splits an ncu SASS source page into the stretches between barriers (BAR.SYNC) and prints, per
stretch, its share of the stall samples and of the executed warp instructions, its top stall
reasons and opcodes: a phase-level profile of a kernel whose phases are separated by
__syncthreads (the KDA chunk preparation). Stretches under 0.5% of the samples are left out.

Usage: ncu -i REPORT.ncu-rep --page source --csv --print-source sass > src.csv
       python3 bench/ncu_sass_segments.py src.csv
"""
import csv,sys,collections
f=sys.argv[1]
rows=list(csv.reader(open(f)))
hdr=rows[1]; data=rows[2:]
ix={h:i for i,h in enumerate(hdr)}
stalls=[h for h in hdr if h.startswith('stall_') and 'Not Issued' not in h]
def num(x):
    try: return float(x.replace(',',''))
    except: return 0.0
tot_s=collections.Counter(); tot_samples=0; tot_inst=0
segs=[]; cur={'start':None,'samples':0,'inst':0,'st':collections.Counter(),'ops':collections.Counter(),'n':0}
for r in data:
    if len(r)<len(hdr): continue
    src=r[ix['Source']].strip(); s=num(r[ix['Warp Stall Sampling (All Samples)']]); ie=num(r[ix['Instructions Executed']])
    op=src.split()[0] if src else ''
    if op.startswith('@'): op=src.split()[1]
    opb=op.split('.')[0]
    if cur['start'] is None: cur['start']=r[ix['Address']][-5:]
    cur['samples']+=s; cur['inst']+=ie; cur['n']+=1; cur['ops'][opb]+=ie
    for h in stalls:
        v=num(r[ix[h]]); cur['st'][h[6:]]+=v; tot_s[h[6:]]+=v
    tot_samples+=s; tot_inst+=ie
    if opb=='BAR':
        cur['end']=r[ix['Address']][-5:]; segs.append(cur)
        cur={'start':None,'samples':0,'inst':0,'st':collections.Counter(),'ops':collections.Counter(),'n':0}
cur['end']='end'; segs.append(cur)
print('total samples',tot_samples,'warp-inst',tot_inst)
print('stalls:',', '.join(f'{k} {100*v/tot_samples:.1f}%' for k,v in tot_s.most_common(10)))
for i,sg in enumerate(segs):
    if sg['samples']<0.005*tot_samples: continue
    print(f"seg{i:2d} {sg['start']}-{sg['end']} n={sg['n']:4d} samp {100*sg['samples']/tot_samples:5.1f}% inst {100*sg['inst']/tot_inst:5.1f}% |",
          ' '.join(f'{k}:{100*v/max(1,sg["samples"]):.0f}' for k,v in sg['st'].most_common(4)),'|',
          ' '.join(f'{k}:{100*v/max(1,sg["inst"]):.0f}' for k,v in sg['ops'].most_common(6)))
