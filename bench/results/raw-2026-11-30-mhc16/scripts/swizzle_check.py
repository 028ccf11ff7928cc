#!/usr/bin/env python3
"""mhc16: host emulation of the cluster kernel's X stage addressing (C = 4096: kG = 4).

Places a stage the way the tensor copies do (old: one box {256 ch, 128 rows}, no swizzle; new:
4 boxes {64 ch, 128 rows}, CU_TENSOR_MAP_SWIZZLE_128B: 16-byte chunk bits 4..6 of the shared
address XOR bits 7..9, boxes 1024-byte aligned), then evaluates the multiply's and the U warps'
load addresses with the kernel's expressions and checks (1) each lane reads the (token, stream,
chunk) it read before, (2) the shared wavefronts of every warp-wide 16-byte load: per quarter-warp
(8 lanes), the most distinct 16-byte addresses falling in one 16-byte bank group (4 banks).
Prints the counts; exits 1 on any mismatch.
"""
import sys

STAGE_TOK, STREAMS, SLICE_CH = 32, 4, 256
STREAM_CHUNKS = SLICE_CH // 8          # 32
ROW_BYTES = STREAMS * SLICE_CH * 2     # 2048 (old layout: [tok][stream][256 ch])
BOX_CH, BOX_ROWS, LINE = 64, 4 * STAGE_TOK, 128
BOX_BYTES = BOX_ROWS * LINE            # 16384
KG, SPLIT, NTILES, KN = 4, 2, 4, 2
WARP_CHUNKS = STREAM_CHUNKS // SPLIT   # 16
U_THREADS = 128


def old_place():
    m = {}
    for tok in range(STAGE_TOK):
        for a in range(STREAMS):
            for c8 in range(STREAM_CHUNKS):
                m[tok * ROW_BYTES + 16 * (a * STREAM_CHUNKS + c8)] = (tok, a, c8)
    return m


def new_place(stage_base):
    m = {}
    for j in range(SLICE_CH // BOX_CH):
        bj = stage_base + j * BOX_BYTES
        for r in range(BOX_ROWS):
            tok, a = divmod(r, 4)
            for cc in range(8):
                line = bj + r * LINE
                m[line + 16 * (cc ^ ((line >> 7) & 7))] = (tok, a, 8 * j + cc)
    return m


def wavefronts(addrs):
    total = 0
    for qw in range(4):
        groups = {}
        for ad in addrs[8 * qw:8 * qw + 8]:
            groups.setdefault((ad >> 4) & 7, set()).add(ad)
        total += max(len(v) for v in groups.values())
    return total


def multiply_loads(new, stage_base):
    """Yields (addresses of the 32 lanes, expected (tok, stream, c8) per lane) per LDS.128."""
    for warp in range(8):
        stream, part = warp // SPLIT, warp % SPLIT
        for n0 in range(0, NTILES, KN):
            for gi in range(KG):
                for n in range(KN):
                    addrs, want = [], []
                    for lane in range(32):
                        g, q = lane // 4, lane % 4
                        tok = 8 * (n0 + n) + g
                        if new:  # the kernel's xo, box, and bit-6 flip
                            xo = (4 * g + stream) * LINE + 16 * (q ^ (4 * (g & 1) + stream))
                            box = part * (WARP_CHUNKS // 8) + gi // 2
                            ad = stage_base + box * BOX_BYTES + 32 * (n0 + n) * LINE + (xo ^ (64 * (gi % 2)))
                        else:
                            c = stream * STREAM_CHUNKS + part * WARP_CHUNKS + 4 * gi + q
                            ad = tok * ROW_BYTES + 16 * c
                        addrs.append(ad)
                        want.append((tok, stream, part * WARP_CHUNKS + 4 * gi + q))
                    yield addrs, want


def u_loads(new, stage_base):
    for uw in range(U_THREADS // 32):
        for k in range(8):          # item slot b0 + b
            for a in range(STREAMS):
                addrs, want = [], []
                for lane in range(32):
                    utid = 32 * uw + lane
                    c8 = utid % STREAM_CHUNKS
                    it = utid + k * U_THREADS
                    tok = it // STREAM_CHUNKS
                    if new:
                        tok0 = utid // STREAM_CHUNKS
                        xo = (c8 // 8) * BOX_BYTES + 4 * tok0 * LINE + 16 * ((c8 % 8) ^ (4 * (tok0 & 1)))
                        row = stage_base + 4 * (k * (U_THREADS // STREAM_CHUNKS)) * LINE
                        ad = row + a * LINE + (xo ^ (16 * a))
                    else:
                        ad = tok * ROW_BYTES + 16 * (a * STREAM_CHUNKS + c8)
                    addrs.append(ad)
                    want.append((tok, a, c8))
                yield addrs, want


bad = 0
for name, new in (("old (one box, no swizzle)", False), ("new (4 boxes, 128B swizzle)", True)):
    for stage in range(3):
        base = stage * 65536
        place = new_place(base) if new else old_place()
        if not new and stage:
            continue
        for what, gen in (("multiply", multiply_loads), ("U warps", u_loads)):
            n = wf = 0
            hist = {}
            for addrs, want in gen(new, base):
                got = [place.get(ad) for ad in addrs]
                if got != want:
                    bad += 1
                w = wavefronts(addrs)
                hist[w] = hist.get(w, 0) + 1
                n += 1
                wf += w
            print(f"{name:28s} stage {stage} {what:8s}: {n:3d} warp LDS.128 a stage-CTA, "
                  f"{wf:4d} wavefronts ({wf / n:.1f} each; histogram {dict(sorted(hist.items()))})")
print("address mismatches:", bad)
sys.exit(1 if bad else 0)
