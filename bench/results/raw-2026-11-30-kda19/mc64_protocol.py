"""A randomised model of the 64-row cluster pass's copy / mbarrier protocol (kda-s19,
KdaChunkStateKernel<64, false, true>): two CTAs, each as three actors (the chain warps, the o
warps, the lead's warp, which also does o work), every multicast copy landing in each CTA at an
arbitrary later point. Checks: no deadlock; every read sees its chunk's data with no copy in
flight into it (RAW); no copy is issued into a buffer part that a reader of either CTA is still
inside (WAR) or that another copy is still filling (WAW). mbarrier semantics as PTX: a phase
completes when its pending arrivals and its tx-count are both 0; try_wait.parity(P) succeeds once
the phase of parity P has completed (current phase parity != P)."""
import random, sys

KB = 1024
class Bar:
    def __init__(s, count=1): s.phase, s.pending, s.tx, s.count = 0, count, 0, count
    def _check(s):
        if s.pending == 0 and s.tx == 0:
            s.phase += 1; s.pending = s.count
    def arrive_expect(s, b): s.tx += b; s.pending -= 1; s._check()
    def arrive(s): s.pending -= 1; s._check()
    def complete_tx(s, b):
        s.tx -= b
        s._check()
    def done(s, parity): return (s.phase & 1) != parity

class Err(Exception): pass

def run(chunks, seed, variant="good"):
    rng = random.Random(seed)
    bars = [dict(full_w=Bar(), full_q=Bar(), full_kd=[Bar(), Bar()], empty=Bar(), full_m=Bar(),
                 empty_m=Bar()) for _ in range(2)]
    # buffer parts: name -> [chunk held, copies in flight, readers inside]
    parts = ["W0", "W1", "Q0", "Q1", "K0hi", "K0lo", "G0", "K1hi", "K1lo", "G1", "M"]
    buf = [{p: [None, 0, 0] for p in parts} for _ in range(2)]
    landings = []  # (cta, part, chunk, barrier getter, bytes)

    def issue(src, part, chunk, bar_of, nbytes):
        for cta in range(2):
            st = buf[cta][part]
            if st[2]: raise Err(f"WAR: rank {src} issues {part}({chunk}) while CTA {cta} reads it")
            if st[1]: raise Err(f"WAW: {part}({chunk}) into CTA {cta} while a copy fills it")
            st[1] += 1
            landings.append((cta, part, chunk, bar_of, nbytes))

    def mc_wq(r, which, c):
        b = bars[r]["full_w" if which == "W" else "full_q"]
        b.arrive_expect(32 * KB)
        issue(r, f"{which}{r}", c, (lambda cta, w=which: bars[cta]["full_w" if w == "W" else "full_q"]), 16 * KB)

    def mc_kd(r, c, k):
        bars[r]["full_kd"][k].arrive_expect(2 * 16 * KB + 512)
        bo = lambda cta, k=k: bars[cta]["full_kd"][k]
        if r == 0: issue(r, f"K{k}hi", c, bo, 16 * KB)
        else:
            issue(r, f"K{k}lo", c, bo, 16 * KB)
            issue(r, f"G{k}", c, bo, 512)

    def mc_m(r, c):
        bars[r]["full_m"].arrive_expect(16 * KB)
        if r == 0: issue(r, "M", c, lambda cta: bars[cta]["full_m"], 16 * KB)

    def begin_read(r, ps, c, who):
        for p in ps:
            st = buf[r][p]
            if st[0] != c or st[1]:
                raise Err(f"RAW: CTA {r} {who} reads {p} for chunk {c}: holds {st[0]}, {st[1]} in flight")
            st[2] += 1
    def end_read(r, ps):
        for p in ps: buf[r][p][2] -= 1

    # Actor programs as generators yielding ("sync", name) / ("wait", barrier, parity) / None.
    def chain(r):
        yield ("cluster",)
        for c in range(chunks):
            yield ("sync", 1)
            yield ("wait", lambda: bars[r]["full_w"], c & 1)
            begin_read(r, ["W0", "W1"], c, "chain"); yield None
            end_read(r, ["W0", "W1"])
            k = c & 1
            yield ("wait", lambda k=k: bars[r]["full_kd"][k], (c >> 1) & 1)
            yield ("sync", 2)
            begin_read(r, [f"K{k}hi", f"K{k}lo", f"G{k}"], c, "chain S1"); yield None
            end_read(r, [f"K{k}hi", f"K{k}lo", f"G{k}"])
            yield ("sync", 3)
        yield ("cluster",)
    def owarps(r, lead):
        yield ("cluster",)
        if lead and chunks > 0:
            mc_wq(r, "W", 0); mc_wq(r, "Q", 0); mc_kd(r, 0, 0); mc_m(r, 0)
        for c in range(chunks):
            yield ("sync", 1)
            if lead and c > 0:
                if r == 0: yield ("wait", lambda: bars[0]["empty_m"], (c - 1) & 1)
                mc_m(r, c)
            yield ("wait", lambda: bars[r]["full_q"], c & 1)
            begin_read(r, ["Q0", "Q1"], c, "o"); yield None
            end_read(r, ["Q0", "Q1"])
            k = c & 1
            yield ("wait", lambda k=k: bars[r]["full_kd"][k], (c >> 1) & 1)
            yield ("sync", 2)
            if lead and c + 1 < chunks:
                bars[r ^ 1]["empty"].arrive(); yield None
                yield ("wait", lambda: bars[r]["empty"], c & 1)
                mc_wq(r, "Q", c + 1)
                mc_kd(r, c + 1, (k + 1) & 1 if variant != "kd_single" else k)
                mc_wq(r, "W", c + 1)
                if variant == "m_early": mc_m(r, c + 1)
            yield ("wait", lambda: bars[r]["full_m"], c & 1)
            begin_read(r, ["M"], c, "o M U"); yield None
            end_read(r, ["M"])
            yield ("sync", 3)
            if lead and r == 1 and c + 1 < chunks and variant != "no_empty_m":
                bars[0]["empty_m"].arrive()
        yield ("cluster",)

    actors = []
    for r in range(2):
        actors += [(r, "chain", chain(r)), (r, "o", owarps(r, False)), (r, "lead", owarps(r, True))]
    state = {i: None for i in range(len(actors))}  # pending op of each actor
    finished = set()
    def step(i):
        try: state[i] = next(actors[i][2])
        except StopIteration: finished.add(i); state[i] = "done"
    for i in range(len(actors)): step(i)
    while len(finished) < len(actors):
        ready = []
        for i, op in state.items():
            if op == "done": continue
            r = actors[i][0]
            if op is None: ready.append(i)
            elif op[0] == "wait":
                if op[1]().done(op[2]): ready.append(i)
            elif op[0] == "sync":  # all three actors of the CTA at the same barrier
                if all(state[j] == op for j in range(len(actors)) if actors[j][0] == r): ready.append(i)
            elif op[0] == "cluster":
                if all(state[j] == ("cluster",) for j in range(len(actors))): ready.append(i)
        choices = [("a", i) for i in ready] + [("l", j) for j in range(len(landings))]
        if not choices:
            raise Err("deadlock: " + ", ".join(f"{actors[i][0]}/{actors[i][1]}:{state[i]}" for i in state if state[i] != "done"))
        kind, x = rng.choice(choices)
        if kind == "l":
            cta, part, chunk, bar_of, nbytes = landings.pop(x)
            st = buf[cta][part]; st[0] = chunk; st[1] -= 1
            bar_of(cta).complete_tx(nbytes)
        else:
            op = state[x]
            if op is not None and op[0] in ("sync", "cluster"):
                group = [j for j in range(len(actors)) if state[j] == op and (op[0] == "cluster" or actors[j][0] == actors[x][0])]
                for j in group: step(j)
            else:
                step(x)
    if landings: raise Err("copies still in flight at exit")

def sweep(variant, seeds):
    fails = 0; first = None
    for chunks in range(0, 7):
        for seed in range(seeds):
            try: run(chunks, seed, variant)
            except Err as e:
                fails += 1; first = first or f"chunks {chunks} seed {seed}: {e}"
    return fails, first

if __name__ == "__main__":
    seeds = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    for v in ["good", "m_early", "kd_single", "no_empty_m"]:
        f, first = sweep(v, seeds)
        print(f"{v:11s}: {f} of {7 * seeds} random schedules fail" + (f"; first: {first}" if first else ""))
