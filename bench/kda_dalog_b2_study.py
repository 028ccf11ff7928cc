#!/usr/bin/env python3
"""dA_log tail of the chunked KDA backward at (B, T, H) = (2, 65, 1) with initial state (CPU study,
sixth session). The shape of Shapes/KdaChunkedBackwardAccuracy.MatchesFp64Reference/B2_T65_H1:
two documents of 65 tokens (a 64-token chunk and a 1-token chunk each), one head, so dA_log is
one number summed over both documents. Test distributions (tests/gpu/kda_kernels_test.cu):
q, k, v, g, beta, dO BF16 N(0,1); A_log U(-1,1); dt_bias N(0,0.5); initial_state N(0,0.1);
dfinal_state N(0,1); scale 1/sqrt(128), lower_bound -5.

Reuses bench/kda_dalog_tail_study.py's matrix-form emulation (chunked_dalog and its knobs); a
draw is two "heads" there (the two documents) sharing A_log and dt_bias, and the draw's dA_log is
their sum. Usage: ~/.cache/cakegrad/python-venv/bin/python bench/kda_dalog_b2_study.py [draws]
(env BATCH, SEED0, ONLY=comma-separated config indices).
"""

from __future__ import annotations

import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kda_dalog_tail_study as st  # noqa: E402

F32, F64, D = st.F32, st.F64, st.D
bf, ref = st.bf, st.ref


def draws(n, T, seed, init=True):
    """n draws of (2, T, 1): heads 2 i and 2 i + 1 are draw i's two documents."""
    gen = torch.Generator().manual_seed(seed)
    H = 2 * n
    q, k, v, g, do = (bf(torch.randn(T, H, D, generator=gen, dtype=F64)) for _ in range(5))
    beta = bf(torch.randn(T, H, generator=gen, dtype=F64))
    A_log = (torch.rand(n, generator=gen, dtype=F64) * 2 - 1).to(F32).to(F64)
    dt_bias = (torch.randn(n, D, generator=gen, dtype=F64) * 0.5).to(F32).to(F64)
    dfinal = torch.randn(H, D, D, generator=gen, dtype=F64).to(F32).to(F64)
    s0 = (torch.randn(H, D, D, generator=gen, dtype=F64) * 0.1).to(F32).to(F64)
    d = dict(q=q, k=k, v=v, g=g, do=do, beta=beta, A_log=A_log.repeat_interleave(2),
             dt_bias=dt_bias.repeat_interleave(2, 0), dfinal=dfinal, T=T, H=H)
    if init:
        d["s0"] = s0
    return d


def check_reference(d):
    """Draw 0 of this file's FP64 chunked algorithm against autograd of the FP64 forward."""
    pick = lambda x: x[:, 0:2].transpose(0, 1).unsqueeze(2)  # noqa: E731  [2, T, 1, D]
    gr = ref.kda_backward(pick(d["q"]), pick(d["k"]), pick(d["v"]), pick(d["g"]),
                          d["beta"][:, 0:2].transpose(0, 1).unsqueeze(2), d["A_log"][0:1],
                          d["dt_bias"][0:1], d["s0"][0:2].unsqueeze(1) if "s0" in d else None,
                          pick(d["do"]), d["dfinal"][0:2].unsqueeze(1), None, st.SCALE, st.LB)
    dal, ddt, _ = st.chunked_dalog(d, **st.EXACT)
    return (float((dal[0] + dal[1] - gr[5][0]).abs() / gr[5][0].abs()),
            float((ddt[0] + ddt[1] - gr[6][0]).norm() / gr[6][0].norm()))


KERNEL = dict(wu_grad="uv", gmm=("U", "dUs", "dW", "P"))  # main's per-chunk pass, modelled
CONFIGS = [
    ("main (Uv re-solved; U, dU state, dW, P BF16x3)", KERNEL),
    ("main, per-chunk BF16x3 products FP32", dict(wu_grad="uv")),
    ("main + state pass FP32", dict(KERNEL, up=("state",))),
    ("main + fwd f32", dict(KERNEL, fwd="f32")),
    ("main + records f32", dict(KERNEL, rec="f32")),
    ("main + records f32 + state pass FP32", dict(KERNEL, rec="f32", up=("state",))),
    ("main + chain f64", dict(KERNEL, chain="f64")),
    ("main + grad f64 (BF16x3 kept)", dict(KERNEL, grad="f64")),
    ("main + G f64", dict(KERNEL, G="f64")),
    ("main + decays exact", dict(KERNEL, dec="exact")),
    ("main + partials f64", dict(KERNEL, part="f64")),
    ("main + dgl cumsums f64", dict(KERNEL, dglsum="f64")),
    ("main + W re-solved too", dict(KERNEL, wu_grad=True)),
    ("main, U only FP32", dict(KERNEL, gmm=("dUs", "dW", "P"))),
    ("main, dU state FP32", dict(KERNEL, gmm=("U", "dW", "P"))),
    ("main, dW FP32", dict(KERNEL, gmm=("U", "dUs", "P"))),
    ("main, P FP32", dict(KERNEL, gmm=("U", "dUs", "dW"))),
    # 17-21: the combinations (sixth session's findings, bench/results/kda_h200.md)
    ("main + W, state pass FP32 (fwd wu, state)", dict(KERNEL, up=("wu", "state"))),
    ("main + decays exact (G hi + lo)", dict(KERNEL, dec="exact")),
    ("main + W, state FP32 + decays exact", dict(KERNEL, up=("wu", "state"), dec="exact")),
    ("main + W, state FP32 + decays exact + per-chunk FP32",
     dict(wu_grad="uv", up=("wu", "state"), dec="exact")),
    ("main + fwd f32 + decays exact + per-chunk FP32", dict(wu_grad="uv", fwd="f32", dec="exact")),
    # 22-25: which kernel needs which piece
    ("main + W, state FP32 (record-split W, Kdec) + decays exact",
     dict(KERNEL, up=("wu", "state"), dec="exact", state_rec=True)),
    ("main + W, state FP32 + decays exact in preparation / state only",
     dict(KERNEL, up=("wu", "state"), dec="fwd")),
    ("main + W, state FP32 + decays exact in the per-chunk pass only",
     dict(KERNEL, up=("wu", "state"), dec="grad")),
    ("main + W, state FP32 (record-split) + decays exact + per-chunk FP32",
     dict(wu_grad="uv", up=("wu", "state"), dec="exact", state_rec=True)),
]


def main():
    torch.set_num_threads(1)
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 40
    T = int(os.environ.get("T", "65"))
    init = os.environ.get("NOINIT") is None
    batch = int(os.environ.get("BATCH", "10"))
    only = os.environ.get("ONLY")
    cfgs = [c for i, c in enumerate(CONFIGS) if only is None or str(i) in only.split(",")]
    t0 = time.time()
    print(f"# reference check (draw 0): this FP64 chunked vs autograd: dA_log, ddt_bias "
          f"{check_reference(draws(1, T, 777, init))}", flush=True)
    res = {name: [] for name, _ in cfgs}
    exacts, conds = [], []
    for b0 in range(0, n, batch):
        d = draws(batch, T, 5000 + int(os.environ.get("SEED0", "0")) + b0, init)
        ex, _, terms = st.chunked_dalog(d, **st.EXACT)
        ex2 = ex.view(-1, 2).sum(1)
        exacts.append(ex2)
        conds.append(terms.abs().sum((1, 2, 3)).view(-1, 2).sum(1) / ex2.abs())
        for name, kw in cfgs:
            dal, _, _ = st.chunked_dalog(d, **kw)
            res[name].append(((dal.view(-1, 2).sum(1) - ex2) / ex2).abs())
        print(f"# {b0 + batch} draws, {time.time() - t0:.0f} s", flush=True)
    cond = torch.cat(conds)
    print("\n| config | draws | median | p90 | p99 | max | > 3e-5 | > 1e-4 |")
    print("|---|---|---|---|---|---|---|---|")
    for name, _ in cfgs:
        print(st.summary(name, torch.cat(res[name])))
    base = torch.cat(res[cfgs[0][0]])
    order = base.argsort(descending=True)[:6]
    print(f"\nWorst draws of the first config (median cond {float(cond.median()):.0f}):")
    exact = torch.cat(exacts)
    for i in order.tolist():
        print(f"  draw {i}: {float(base[i]):.1e} dA_log {float(exact[i]):+.3e} cond "
              f"{float(cond[i]):.0f}")
    for name, _ in cfgs:
        r = torch.cat(res[name])
        print(f"  {name:55s} " + " ".join(f"{float(r[i]):.1e}" for i in order.tolist()))


if __name__ == "__main__":
    main()
