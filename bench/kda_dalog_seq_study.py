#!/usr/bin/env python3
"""dA_log tail of the sequential KDA backward at (B, T, H) = (2, 65, 1) with initial state (CPU
study, twenty-fifth session): which stage's FP32 rounding makes a draw miss SPEC's 1e-4.

Emulates kernels/cuda/kda_row_pass.cu (the recompute pass) (checkpoints, residual w) and kda_backward.cu in tensor
form, one precision knob per stage ("f32" = the kernels before e89a6cf, "f64" = since then):
  prep   the token vectors kh, qh, the decay d = exp(lb sigmoid(z)), bt = sigmoid(beta)
  fwd    the forward recurrence that produces the residual w (and the states the backward
         rebuilds from checkpoints)
  bwd    the backward's rebuilt states and the adjoint recurrence dS (with du)
  part   the per-token sums over rows X, Y, Z, W of each column (partials, then the cluster sum)
  store  the workspace's checkpoints (every 32 tokens) and residuals w
  dz     the gate's derivative sigmoid'(z) = sg (1 - sg): 'naive' (the FP32 kernel: 1 - sg after
         rounding sg, which loses sigmoid(-z)'s relative precision for large z), 'acc'
         (sigmoid(z) sigmoid(-z) in the prep precision), 'exact'
Draws follow tests/gpu/kda_kernels_test.cu's distributions; a draw is two documents sharing
A_log and dt_bias, and its dA_log is their sum. The exact value is every knob at FP64 (checked
against torch_reference.kda_backward, autograd of the FP64 forward, on draw 0).

Usage: ~/.cache/cakegrad/python-venv/bin/python bench/kda_dalog_seq_study.py [draws]
(env SEED0, BATCH).
"""

from __future__ import annotations

import math
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "python"))
import torch_reference as ref  # noqa: E402

F32, F64 = torch.float32, torch.float64
DT = {"f32": F32, "f64": F64}
D = 128
LB = -5.0
SCALE = float(torch.tensor(1.0 / math.sqrt(128.0), dtype=F32))


def bf(x):
    return x.to(torch.bfloat16).to(F64)


def draws(n, T, seed):
    """n draws of (2, T, 1) as 2n documents: doc 2i and 2i+1 belong to draw i."""
    gen = torch.Generator().manual_seed(seed)
    M = 2 * n
    q, k, v, g, do = (bf(torch.randn(M, T, D, generator=gen, dtype=F64)) for _ in range(5))
    beta = bf(torch.randn(M, T, generator=gen, dtype=F64))
    A_log = (torch.rand(n, generator=gen, dtype=F64) * 2 - 1).to(F32).to(F64)
    dt_bias = (torch.randn(n, D, generator=gen, dtype=F64) * 0.5).to(F32).to(F64)
    s0 = (torch.randn(M, D, D, generator=gen, dtype=F64) * 0.1).to(F32).to(F64)
    dfinal = torch.randn(M, D, D, generator=gen, dtype=F64).to(F32).to(F64)
    return dict(q=q, k=k, v=v, g=g, do=do, beta=beta, A_log=A_log.repeat_interleave(2),
                dt_bias=dt_bias.repeat_interleave(2, 0), s0=s0, dfinal=dfinal, T=T)


def seq_dalog(d, prep="f32", fwd="f32", bwd="f32", part="f32", dz="naive", parts=(),
              store="f32"):
    """dA_log of each document, summed over t and k: [M]. parts: pieces of prep computed in
    FP64 (rounded once to FP32 where an FP32 stage reads them) when prep is "f32": "norm" (kh,
    qh), "gate" (exp(A_log), z, sigmoid, d), "bt", "dzf" (the dz z product from FP32 dd)."""
    Fw, Bw, Pt = DT[fwd], DT[bwd], DT[part]
    T = d["T"]

    def prec(piece):
        return F64 if (prep == "f64" or piece in parts) else F32

    G, N, Bt, Z = prec("gate"), prec("norm"), prec("bt"), prec("dzf")
    exp_a = torch.exp(d["A_log"].to(G))[:, None]  # [M, 1]

    def norm(x):
        x = x.to(N)
        return x / torch.sqrt((x * x).sum(-1, keepdim=True) + 1e-6)

    kh, qh = norm(d["k"]), norm(d["q"])  # [M, T, D]
    z = exp_a[:, None] * (d["g"].to(G) + d["dt_bias"].to(G)[:, None, :])
    sg = torch.sigmoid(z)
    dec = torch.exp(LB * sg)
    bt = torch.sigmoid(d["beta"].to(Bt))  # [M, T]

    # Forward (recompute): the residual w of every token and a checkpoint every 32 tokens
    # (kda_layout.h), both stored at the store precision; the backward rebuilds its states there.
    St = DT[store]
    S = d["s0"].to(Fw)
    w = torch.empty(kh.shape, dtype=St)
    ck = {}
    for t in range(T):
        if t % 32 == 0:
            ck[t] = S.to(St)
        Sd = S * dec[:, t, None, :].to(Fw)
        wt = d["v"][:, t].to(Fw) - (Sd @ kh[:, t, :, None].to(Fw))[..., 0]
        w[:, t] = wt.to(St)
        S = Sd + (bt[:, t, None].to(Fw) * wt.to(St).to(Fw))[..., None] * kh[:, t, None, :].to(Fw)
    u = (bt[:, :, None].to(Bw) * w.to(Bw))  # [M, T, D]
    Sprev = []
    for t in range(T):
        if t % 32 == 0:
            S = ck[t].to(Bw)
        Sprev.append(S)
        S = S * dec[:, t, None, :].to(Bw) + u[:, t, :, None] * kh[:, t, None, :].to(Bw)

    dS = d["dfinal"].to(Bw)
    sdo = (SCALE * d["do"]).to(Bw)
    total = torch.zeros(d["q"].shape[0], dtype=F64)
    for t in reversed(range(T)):
        dS = dS + sdo[:, t, :, None] * qh[:, t, None, :].to(Bw)
        du = (dS @ kh[:, t, :, None].to(Bw))[..., 0]
        dpred = -bt[:, t, None].to(Bw) * du
        dsd = dS + dpred[..., None] * kh[:, t, None, :].to(Bw)
        # dd[k] = sum_v dsd[v, k] Sprev[v, k] (the kernel's Z)
        dd = (dsd.to(Pt) * Sprev[t].to(Pt)).sum(-2)
        if dz == "naive":  # the kernel: sg (1 - sg), 1 - sg rounded after the sigmoid
            sgp = sg[:, t] * (1 - sg[:, t])
        elif dz == "acc":  # sigmoid(z) sigmoid(-z) in the prep precision
            sgp = sg[:, t] * torch.sigmoid(-z[:, t])
        else:  # exact
            zz = z[:, t].to(F64)
            sgp = (torch.sigmoid(zz) * torch.sigmoid(-zz)).to(G)
        dzv = dd.to(Z) * dec[:, t].to(Z) * LB * sgp.to(Z)
        total += (dzv.to(F64) * z[:, t].to(Z).to(F64)).sum(-1)
        dS = dsd * dec[:, t, None, :].to(Bw)
    return total


def check_reference(d):
    i = slice(0, 2)
    # Two documents of one head as B = 2.
    pick = lambda n: d[n][i].unsqueeze(2)  # noqa: E731  [2, T, 1, D]
    gr = ref.kda_backward(pick("q"), pick("k"), pick("v"), pick("g"), d["beta"][i].unsqueeze(2),
                          d["A_log"][0:1], d["dt_bias"][0:1], d["s0"][i].unsqueeze(1),
                          pick("do"), d["dfinal"][i].unsqueeze(1), None, SCALE, LB)
    ex = seq_dalog({**{n: d[n][i] for n in ("q", "k", "v", "g", "do", "beta", "A_log",
                                             "dt_bias", "s0", "dfinal")}, "T": d["T"]},
                   "f64", "f64", "f64", "f64", "exact", store="f64")
    return float((ex.sum() - gr[5][0]).abs() / gr[5][0].abs())


CONFIGS = [
    dict(),
    dict(prep="f64"),
    dict(parts=("gate",)),
    dict(parts=("gate", "dzf")),
    dict(prep="f64", fwd="f64", bwd="f64", part="f64"),
    dict(prep="f64", fwd="f64", bwd="f64", part="f64", dz="exact"),
    dict(prep="f64", fwd="f64", bwd="f64", part="f64", dz="exact", store="f64"),
]


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 600
    batch = int(os.environ.get("BATCH", "100"))
    seed0 = int(os.environ.get("SEED0", "1"))
    T = 65
    errs = {i: [] for i in range(len(CONFIGS))}
    t0 = time.time()
    for b0 in range(0, n, batch):
        d = draws(min(batch, n - b0), T, seed0 + b0)
        if b0 == 0:
            print(f"reference check (draw 0, exact vs autograd): {check_reference(d):.2e}")
        exact = seq_dalog(d, "f64", "f64", "f64", "f64", "exact", store="f64").view(-1, 2).sum(-1)
        for i, cfg in enumerate(CONFIGS):
            got = seq_dalog(d, **cfg).view(-1, 2).sum(-1)
            errs[i].append(((got - exact).abs() / exact.abs()))
        print(f"  {b0 + batch} draws, {time.time() - t0:.0f} s", flush=True)
    print(f"{n} draws of (2, {T}, 1) with initial state; rel error of dA_log")
    print(f"{'config':48s} {'median':>9s} {'p99':>9s} {'max':>9s} {'>1e-4':>6s}")
    for i, cfg in enumerate(CONFIGS):
        e = torch.cat(errs[i])
        name = ", ".join(f"{k}={v}" for k, v in cfg.items()) or "all f32 (the kernels)"
        print(f"{name:48s} {e.median():9.2e} {e.quantile(0.99):9.2e} {e.max():9.2e} "
              f"{int((e > 1e-4).sum()):6d}")


if __name__ == "__main__":
    main()
