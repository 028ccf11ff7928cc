#!/usr/bin/env python3
"""Chunked KDA backward (SPEC section 3, issue #5): algorithm check, emulated numerics, floors.

CPU-only study (torch CPU, 1 thread), the backward counterpart of bench/kda_chunked_study.py,
whose chunk preparation (prepare_chunks), operand roundings (MM) and inputs (make_inputs) it
reuses. No GPU is involved: every number here is an emulation or an arithmetic floor.

Algorithm (per document and head; chunks of C = 64 tokens, decay sub-chunks of 16 with the
reference at the sub-chunk's first token, exactly as the forward). Forward quantities per chunk,
as in the forward study: Q, K normalised, b = sigmoid(beta), G = cumsum of the log-gates in the
chunk, Gam = exp(G), gC = exp(G_C) (G_C = G at the chunk's last token),
    A = strict_tril(diag(b) Araw), Araw[t,i] = sum_k K_t K_i exp(G_t - G_i)   M likewise with Q_t
    Tinv = (I + A)^-1, Kb = diag(b) (K Gam), Vb = diag(b) V, W = Tinv Kb, Uv = Tinv Vb
    U = Uv - W S0^T, S1 = S0 gC + U^T Kdec (Kdec = K exp(G_C - G)), O = scale (Qg S0^T + M U).
Backward, given dO' = scale dO and dS1 (the gradient of the chunk-end state):
  pass 1 (forward recompute, sequential over chunks): FP32 chunk-start states S0 (checkpoints).
  pass 2 (reverse chain, sequential over chunks, separable over state rows v):
      dU  = M^T dO' + Kdec dS1^T
      dS0 = dS1 gC + dO'^T Qg - dU^T W          (dS0 of chunk j is dS1 of chunk j - 1)
      writes dS1 per chunk (FP32 checkpoints); dinitial_state = dS0 of the first chunk.
  pass 3 (parallel over chunks): U = Uv - W S0^T (recomputed), then
      dQg = dO' S0, dM = tril(dO' U^T), dW = -dU S0, dKdec = U dS1,
      dKb = Tinv^T dW, dVb = Tinv^T dU (dUv = dU),
      dA = -strict_tril(dKb W^T + dVb Uv^T)     (= -Tinv^T dTinv Tinv^T with
                                                 dTinv = dW Kb^T + dUv Vb^T, folded so that no
                                                 C x C x C product is needed),
      intra-chunk dK, dQ from dAr = diag(b) dA and dM, per row sub-chunk J with the forward's
      factors er = exp(G_J - r_J) (<= 1), ec = exp(r_J - G_cols):
          row side   dX_J    += er * (dP[J, cols] (Y_cols ec))
          column side dY_cols += ec * (dP[J, cols]^T (X_J er))
      and the gate gradient, in a form without avoidable cancellation ("stable"; the textbook
      form is kept behind naive_gate=True for comparison): a decayed pair product
      sum_k X_t Y_i exp(G_t - G_i) contributes X * dX - Y * dY to dG, a factor exp(G) (Qg, Kb)
      contributes x * dx, and dlog-gate_t = reverse cumsum of dG within the chunk
      + exclusive forward cumsum of Kdec * dKdec (Kdec_s depends on the gates after s)
      + sum_v dS1 S0 gC (the state decay, every token of the chunk). M's diagonal (weight 1, whose
      two sides cancel exactly in dG) is applied elementwise to dQ and dK, outside the products.
  then per token (CUDA-core FP32 work): L2-norm chain rules for q and k, the gate chain through
  gl = lower_bound * sigmoid(exp(A_log) (g + dt_bias)), dbeta through the sigmoid, and the
  per-head reductions dA_log, ddt_bias (FP32 per-chunk partials, FP64 across chunks, as the
  daemon's fixed-order reduce would do).

Precision emulation: the forward study's operand roundings (fp32, tf32, bf16, bf16x3, 3xtf32;
products of rounded operands accumulated in FP32), plus bf16x3e (one operand exactly BF16 -- dO
-- the other split into three BF16 parts: FP32-exact products in three BF16 passes), per product
class:
    forward recompute:  kk (A), solve (Tinv merges), wu (W, Uv), state (W S0^T, U^T Kdec: the
                        recompute pass and U in pass 3), out (M)
    backward:           dstate (the reverse chain: Kdec dS1^T, dO^T Qg, dU^T W)
                        dout   (M^T dO, dO S0, dO U^T; dO unscaled, exactly BF16)
                        dwu    (dW, dKdec, Tinv^T dW, Tinv^T dU, dKb W^T + dVb Uv^T)
                        dkk    (the four decayed intra-chunk products from dA and dM, blocks
                                left of the 16 x 16 diagonal)
                        dkkd   (the same four products, 16 x 16 diagonal blocks)
Non-matmul work (norms, gates, exps, cumsums, diagonal-block solves, state decays, the
elementwise gate terms) is FP32; states and state gradients are carried in FP32.

Usage: ~/.cache/cakegrad/python-venv/bin/python bench/kda_chunked_backward_study.py [--quick]
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kda_chunked_study as fs  # noqa: E402  (also puts tests/python on the path)
from kda_chunked_study import D, F32, F64, MM, make_inputs, prepare_chunks, ref  # noqa: E402

FWD_CLASSES = ("kk", "solve", "wu", "state", "out")
BWD_CLASSES = ("dstate", "dout", "dwu", "dkk", "dkkd")
CLASSES = FWD_CLASSES + BWD_CLASSES
GRADS = ("dq", "dk", "dv", "dg", "dbeta", "dA_log", "ddt_bias", "dinit")
BF16_GRADS, FP32_GRADS = GRADS[:5], GRADS[5:]
BF16_LIMIT, FP32_LIMIT = 5e-3, 1e-4


class MMB(MM):
    """MM plus "bf16x3e": for products where one operand is exactly BF16 (the upstream gradient
    dO is a BF16 input), the other operand is split into three BF16 parts (b1 + b2 + b3 carry
    24 significand bits, FP32's), so three BF16 passes give products as exact as FP32 ones. It
    needs the exact operand unscaled: scale is applied to the FP32 result."""

    def __init__(self, kind: str):
        if kind == "bf16x3e":
            self.kind, self.flops = kind, 0
        else:
            super().__init__(kind)

    def __call__(self, a, b):
        if self.kind != "bf16x3e":
            return super().__call__(a, b)
        m, k = a.shape[-2:]
        self.flops += 2 * m * b.shape[-1] * k * math.prod(
            torch.broadcast_shapes(a.shape[:-2], b.shape[:-2]))
        a, b = a.to(F32), b.to(F32)
        r = fs.round_bf16
        if torch.equal(r(a), a):
            b1 = r(b)
            b2 = r(b - b1)
            b3 = r(b - b1 - b2)
            return torch.cat([a, a, a], -1) @ torch.cat([b1, b2, b3], -2)
        assert torch.equal(r(b), b), "bf16x3e needs one operand exact in BF16"
        a1 = r(a)
        a2 = r(a - a1)
        a3 = r(a - a1 - a2)
        return torch.cat([a1, a2, a3], -1) @ torch.cat([b, b, b], -2)


class BScheme:
    def __init__(self, name: str, default: str, **per_class):
        self.name = name
        self.kinds = {c: per_class.get(c, default) for c in CLASSES}
        self.fp64 = default == "fp64"

    def mms(self):
        return {c: MMB(k) for c, k in self.kinds.items()}


# -- the chunked backward --------------------------------------------------------------------------


def decayed_pair_grads(dP, X, Y, G, sub, mm_off, mm_diag):
    """Gradients of P[t,i] = sum_k X_t[k] Y_i[k] exp(G_t[k] - G_i[k]) (lower triangular, masked
    into dP) w.r.t. the undecayed X and Y, per row sub-chunk J with the forward's reference
    r_J = G at J's first token, so every operand factor stays in [e^-75, e^75]:
        dX_J    = exp(G_J - r_J) * (dP[J, :J_end] (Y exp(r_J - G))[:J_end])
        dY_:J_end += exp(r_J - G) * (dP[J, :J_end]^T (X_J exp(G_J - r_J))).
    The sub x sub diagonal blocks (J, J) and the blocks left of them (J, < J) are separate
    product classes (mm_diag, mm_off): the near-diagonal pairs carry most of the gate
    gradient's cancellation."""
    C = X.shape[-2]
    dX = torch.zeros_like(X)
    dY = torch.zeros_like(Y)
    for jb in range(C // sub):
        rows, diag, off = (slice(jb * sub, (jb + 1) * sub), slice(jb * sub, (jb + 1) * sub),
                           slice(0, jb * sub))
        r = G[..., jb * sub:jb * sub + 1, :]
        er = torch.exp(G[..., rows, :] - r)
        Xr = X[..., rows, :] * er
        for cols, mm in ((diag, mm_diag), (off, mm_off)):
            if cols.stop == cols.start:
                continue
            ec = torch.exp(r - G[..., cols, :])
            blk = dP[..., rows, cols]
            dX[..., rows, :] += er * mm(blk, Y[..., cols, :] * ec)
            dY[..., cols, :] += ec * mm(blk.transpose(-1, -2), Xr)
    return dX, dY


def chunked_backward(q, k, v, g, beta, A_log, dt_bias, initial_state, do, dfinal_state,
                     cu_seqlens=None, scale=None, lower_bound=-5.0, *, C=64, sub=16,
                     scheme: BScheme, stats: dict | None = None, round_bf16: bool = True,
                     naive_gate: bool = False, partials: str = "fp32"):
    """The eight gradients (dq, dk, dv, dg, dbeta as BF16 values, dA_log, ddt_bias, dinit as the
    FP32 values; all returned in float64). naive_gate: the textbook gate-gradient assembly
    (M's diagonal inside the decayed products, Kdec's term as dG_C minus a reverse cumsum), kept
    to show what the stable form below buys."""
    wd = F64 if scheme.fp64 else F32
    mm = scheme.mms()
    B, T, H, K = q.shape
    scale = 1.0 / math.sqrt(K) if scale is None else scale
    P = prepare_chunks(q, k, v, g, beta, A_log, dt_bias, cu_seqlens, lower_bound, C=C, sub=sub,
                       wd=wd, mm=mm)
    N, J, L = P["N"], P["J"], P["L"]
    bidx, tidx, valid, chunks = P["bidx"], P["tidx"], P["valid"], P["chunks"]
    Qc, Kc, Vc, Bc, G, GC = P["Qc"], P["Kc"], P["Vc"], P["Bc"], P["G"], P["GC"]
    Gam, Kdec, Qg, A, Mq = P["Gam"], P["Kdec"], P["Qg"], P["A"], P["Mq"]
    Tinv, W, Uv = P["Tinv"], P["W"], P["Uv"]
    gC = torch.exp(GC)                                            # [N,H,J,1,K]
    tr = lambda x: x.transpose(-1, -2)  # noqa: E731

    # pass 1: forward recompute of the chunk-start states (FP32 checkpoints)
    S = (torch.zeros(N, H, D, D, dtype=wd) if initial_state is None
         else initial_state.to(wd).clone())
    S0 = torch.empty(N, H, J, D, D, dtype=wd)
    for j in range(J):
        S0[:, :, j] = S
        Uj = Uv[:, :, j] - mm["state"](W[:, :, j], tr(S))
        S = S * gC[:, :, j] + mm["state"](tr(Uj), Kdec[:, :, j])

    # pass 2: reverse chain over chunks; dS is what flows from chunk j + 1 into chunk j.
    # dO stays unscaled (exactly BF16) as a matmul operand; scale multiplies the FP32 results.
    dOc = chunks(do.to(wd))                                       # [N,H,J,C,V]
    MtdO = scale * mm["dout"](tr(Mq), dOc)                        # parallel, off the chain
    dS = (torch.zeros(N, H, D, D, dtype=wd) if dfinal_state is None
          else dfinal_state.to(wd).clone())
    dS1 = torch.empty(N, H, J, D, D, dtype=wd)
    dU = torch.empty_like(Uv)
    for j in reversed(range(J)):
        dS1[:, :, j] = dS
        dU[:, :, j] = MtdO[:, :, j] + mm["dstate"](Kdec[:, :, j], tr(dS))
        dS = (dS * gC[:, :, j] + scale * mm["dstate"](tr(dOc[:, :, j]), Qg[:, :, j])
              - mm["dstate"](tr(dU[:, :, j]), W[:, :, j]))
    dinit = dS

    # pass 3: everything else, parallel over chunks
    U = Uv - mm["state"](W, tr(S0))
    dQg = scale * mm["dout"](dOc, S0)                             # [C,V] x [V,K]
    dM = torch.tril(scale * mm["dout"](dOc, tr(U)))
    dW = -mm["dwu"](dU, S0)
    dKdec = mm["dwu"](U, dS1)                                     # [C,V] x [V,K]
    dKb = mm["dwu"](tr(Tinv), dW)
    dVb = mm["dwu"](tr(Tinv), dU)
    dA = -torch.tril(mm["dwu"](dKb, tr(W)) + mm["dwu"](dVb, tr(Uv)), -1)
    Bk = Bc.unsqueeze(-1)
    dAr = Bk * dA                                                 # w.r.t. Araw
    # dbeta from A: sum_i dA[t,i] Araw[t,i] = sum_i dA[t,i] A[t,i] / b_t (a kernel keeps Araw;
    # padded tokens have b = 0 and no gradient)
    db = torch.where(Bc > 0, (dA * A).sum(-1) / torch.where(Bc > 0, Bc, 1), 0)
    dKA_row, dKA_col = decayed_pair_grads(dAr, Kc, Kc, G, sub, mm["dkk"], mm["dkkd"])
    # M's diagonal (weight exp(0) = 1) is applied elementwise: in the gate gradient its two
    # sides (Q * dQ and K * dK) cancel exactly, and leaving them in the products would make dG
    # the small difference of two large, separately rounded numbers
    dMd = torch.diagonal(dM, 0, -2, -1).unsqueeze(-1)             # [N,H,J,C,1]
    if naive_gate:
        dMd = torch.zeros_like(dMd)
    dQM, dKM = decayed_pair_grads(dM if naive_gate else torch.tril(dM, -1), Qc, Kc, G, sub,
                                  mm["dkk"], mm["dkkd"])

    ex = torch.exp(GC - G)                                        # Kdec / K
    dQ = Gam * dQg + dQM + dMd * Kc
    dK = Bk * Gam * dKb + dKA_row + dKA_col + dKM + dMd * Qc + ex * dKdec
    dV = Bk * dVb
    db = db + (dKb * Kc * Gam).sum(-1) + (dVb * Vc).sum(-1)
    # gate. Terms that depend on G_t = sum_{u<=t} gl_u go through a reverse cumsum: the factors
    # Gam of Qg and Kb, and the decayed pairs of A and M (X * dX - Y * dY, exp(G_t - G_i)).
    # Kdec_s = K_s exp(sum_{u>s} gl_u) gives gl_u the exclusive forward cumsum of
    # Kdec * dKdec (not dG_C minus a reverse cumsum: near the chunk start that difference is
    # ~20x smaller than its terms and loses the FP32 accuracy of dA_log / ddt_bias), and the state
    # decay S0 gC gives every token of the chunk sum_v dS1 S0 gC.
    Kb = Bk * Kc * Gam
    dG = (dQg * Qg + dKb * Kb + Kc * dKA_row - Kc * dKA_col + Qc * dQM - Kc * dKM)
    kd = dKdec * Kdec
    dG_kdec = torch.cumsum(kd, -2) - kd                           # exclusive cumsum
    dG_state = (dS1 * S0).sum(-2).unsqueeze(-2) * gC
    dGC = dG_state + kd.sum(-2, keepdim=True)
    if naive_gate:  # -Kdec * dKdec into dG_t, +sum_t Kdec * dKdec into dG_C
        dGl = torch.flip(torch.cumsum(torch.flip(dG - kd, [-2]), -2), [-2]) + dGC
    else:
        dGl = torch.flip(torch.cumsum(torch.flip(dG, [-2]), -2), [-2]) + dG_kdec + dG_state

    # per token: chunks -> tokens, then norm / gate / sigmoid chain rules (FP32)
    def tokens(xc):  # [N,H,J,C,(d)] -> [B,T,H,(d)], valid tokens only
        perm = (0, 2, 3, 1, 4) if xc.dim() == 5 else (0, 2, 3, 1)
        xt = xc.permute(*perm).reshape(N, L, H, *xc.shape[4:])
        out = torch.zeros(B, T, H, *xc.shape[4:], dtype=xc.dtype)
        out[bidx[valid], tidx[valid]] = xt[valid]
        return out

    dqh, dkh, dv, dgl, dbt = (tokens(x) for x in (dQ, dK, dV, dGl, db))
    qf, kf, gf, bf = (x.to(wd) for x in (q, k, g, beta))
    nq = torch.sqrt((qf * qf).sum(-1, keepdim=True) + 1e-6)
    nk = torch.sqrt((kf * kf).sum(-1, keepdim=True) + 1e-6)
    qh, kh = qf / nq, kf / nk
    dq = (dqh - qh * (qh * dqh).sum(-1, keepdim=True)) / nq
    dk = (dkh - kh * (kh * dkh).sum(-1, keepdim=True)) / nk
    ea = torch.exp(A_log.to(wd)).unsqueeze(1)                     # [H,1]
    x = ea * (gf + dt_bias.to(wd))
    sg = torch.sigmoid(x)
    dx = dgl * lower_bound * sg * (1 - sg)
    dg = ea * dx
    bt = torch.sigmoid(bf)
    dbeta = dbt * bt * (1 - bt)
    # per-head reductions over tokens. The per-token terms ea * dx and x * dx are FP32; their sums
    # cancel heavily (sum |terms| / |sum| up to ~6000 for dA_log at T = 16384), so the
    # accumulation itself matters: partials="fp64" accumulates everything in FP64 (per-chunk FP64
    # partials, then the fixed-order FP64 reduce), "fp32" forms FP32 partial sums per 64-token
    # block first (the naive kernel choice) and only combines those in FP64.
    nblk = -(-T // 64)
    pad = nblk * 64 - T
    acc = F64 if partials == "fp64" else wd
    dxp = torch.nn.functional.pad(ea * dx, (0, 0, 0, 0, 0, pad)).view(B, nblk, 64, H, D)
    xp = torch.nn.functional.pad(x * dx, (0, 0, 0, 0, 0, pad)).view(B, nblk, 64, H, D)
    ddt_bias = dxp.to(acc).sum(2).to(F64).sum((0, 1))             # [H, K]
    dA_log = xp.to(acc).sum((2, 4)).to(F64).sum((0, 1))           # [H]

    if stats is not None:
        stats["flops"] = {c: m.flops for c, m in mm.items()}
        stats["dG"], stats["dGl"], stats["dGC"] = dG, dGl, dGC
        stats["tokens"] = N * L * H
    r = ref.bf16_round if (round_bf16 and not scheme.fp64) else (lambda t: t.to(F64))
    return (r(dq), r(dk), r(dv), r(dg), r(dbeta), dA_log.to(F64), ddt_bias.to(F64),
            dinit.to(F64))


# -- FP64 references -------------------------------------------------------------------------------


def reference_backward(ins, init, do, dfinal, cu=None, scale=None, lower_bound=-5.0, seg=None):
    """torch_reference.kda_backward (autograd of the FP64 sequential forward). For long single
    documents (B = 1, no cu_seqlens) with seg set, the same autograd run segment by segment:
    the FP64 forward gives the states at segment starts, then each segment (last first) is
    differentiated with loss = sum(do * o) + sum(dS_next * final), its initial state's gradient
    becoming dS_next of the segment before. Mathematically identical (the chain rule split at
    the segment boundaries), it keeps autograd's saved tensors to one segment (T = 16384 in one
    graph would need ~10 GB)."""
    if seg is None or ins[0].shape[1] <= seg:  # one autograd graph
        return [None if x is None else x.detach()
                for x in ref.kda_backward(*ins, init, do, dfinal, cu, scale, lower_bound)]
    assert cu is None and ins[0].shape[0] == 1
    q, k, v, g, beta, A_log, dt_bias = ins
    T = q.shape[1]
    starts = list(range(0, T, seg))
    states = []
    S = init
    with torch.no_grad():
        for a in starts:
            states.append(S)
            _, S = ref.kda_forward(q[:, a:a + seg], k[:, a:a + seg], v[:, a:a + seg],
                                   g[:, a:a + seg], beta[:, a:a + seg], A_log, dt_bias, S, None,
                                   scale, lower_bound)
    dS = dfinal
    parts = {n: [] for n in ("dq", "dk", "dv", "dg", "dbeta")}
    dA_log = torch.zeros_like(A_log)
    ddt = torch.zeros_like(dt_bias)
    for a, S0 in reversed(list(zip(starts, states))):
        leaves = [x[:, a:a + seg].clone().requires_grad_() for x in (q, k, v, g, beta)]
        leaves += [A_log.clone().requires_grad_(), dt_bias.clone().requires_grad_()]
        S0 = S0.clone().requires_grad_()
        o, fin = ref.kda_forward(*leaves, S0, None, scale, lower_bound)
        loss = (o * do[:, a:a + seg]).sum()
        if dS is not None:
            loss = loss + (fin * dS).sum()
        gr = torch.autograd.grad(loss, leaves + [S0])
        for n, x in zip(parts, gr[:5]):
            parts[n].insert(0, x)
        dA_log += gr[5]
        ddt += gr[6]
        dS = gr[7]
    return [torch.cat(parts[n], 1) for n in parts] + [dA_log, ddt, dS]


def grad_inputs(ins, init, seed, N, with_init=True, with_dfinal=True):
    """do ~ N(0,1) in BF16 (an upstream BF16 gradient), dfinal_state ~ N(0, 0.1^2) FP32."""
    gen = torch.Generator().manual_seed(1000 + seed)
    B, T, H, _ = ins[0].shape
    do = torch.randn(B, T, H, D, generator=gen).to(torch.bfloat16).to(F64)
    dfinal = (torch.randn(N, H, D, D, generator=gen) * 0.1).to(F32).to(F64)
    return (init if with_init else None), do, (dfinal if with_dfinal else None)


def rel_errors(got, exact):
    return [ref.rel_l2(a, e) for a, e in zip(got, exact)]


# -- 1. the algorithm in FP64 ----------------------------------------------------------------------


def fp64_check():
    print("## 1. Algorithm check: chunked backward in FP64 vs torch_reference.kda_backward\n")
    print("Max rel-L2 over the eight gradients (and the worst one). C = 64, sub-chunk 16.\n")
    print("| case | init | dfinal | max rel-L2 | worst gradient |")
    print("|---|---|---|---|---|")
    exact64 = BScheme("fp64", "fp64")
    cases = []
    H = 2
    # (name, T, B, docs lengths or None, init, dfinal, scale, lower_bound, dt_mean)
    for T, B, lens, wi, wf, sc, lb, dtm in [
            (200, 1, None, True, True, None, -5.0, 0.0),
            (64, 1, None, False, False, None, -5.0, 0.0),
            (1, 1, None, True, True, None, -5.0, 0.0),
            (130, 2, None, True, True, 2.5, -0.3, 0.0),
            (130, 2, None, False, True, None, -5.0, 0.0),
            (300, 1, None, True, True, None, -5.0, -6.0),
            (None, 1, [0, 1, 64, 63, 65, 128, 7, 0, 129], True, True, None, -5.0, 0.0),
            (None, 1, [0, 1, 64, 63, 65, 128, 7, 0, 129], False, False, None, -5.0, 0.0),
            (None, 1, [5, 0, 191, 1], False, True, 0.3, -1.0, -6.0)]:
        if lens is not None:
            T = sum(lens)
            N = len(lens)
            cu = torch.tensor([0] + list(torch.tensor(lens).cumsum(0)), dtype=torch.int64)
        else:
            N, cu = B, None
        seed = 50 + len(cases)
        ins, init = make_inputs(T, H, N=N, seed=seed, dt_mean=dtm)
        if B == 2:  # make_inputs builds B = 1; draw a second batch row
            ins2, _ = make_inputs(T, H, N=N, seed=seed + 500, dt_mean=dtm)
            ins = [torch.cat([a, b]) if i < 5 else a for i, (a, b) in enumerate(zip(ins, ins2))]
        init_, do, dfinal = grad_inputs(ins, init, seed, N, wi, wf)
        name = (f"B={B}, T={T}" if lens is None else f"packed {lens}") + \
            (f", scale {sc}" if sc else "") + (f", lower_bound {lb}" if lb != -5.0 else "") + \
            (", slow decay" if dtm else "")
        ex = reference_backward(ins, init_, do, dfinal, cu, sc, lb)
        got = chunked_backward(*ins, init_, do, dfinal, cu, sc, lb, scheme=exact64)
        errs = rel_errors(got, ex)
        worst = max(range(8), key=lambda i: errs[i])
        print(f"| {name} | {'yes' if wi else 'no'} | {'yes' if wf else 'no'} | "
              f"{max(errs):.1e} | {GRADS[worst]} |", flush=True)
        cases.append(max(errs))
    # the segmented reference (used at T = 16384) against the one-graph reference
    ins, init = make_inputs(1024, H, seed=77)
    init_, do, dfinal = grad_inputs(ins, init, 77, 1)
    e1 = reference_backward(ins, init_, do, dfinal)
    e2 = reference_backward(ins, init_, do, dfinal, seg=256)
    got = chunked_backward(*ins, init_, do, dfinal, scheme=exact64)
    ec, es = max(rel_errors(got, e1)), max(rel_errors(e2, e1))
    print(f"| B=1, T=1024 | yes | yes | {ec:.1e} | (segmented reference vs one graph: "
          f"{es:.1e}) |")
    cases.append(max(ec, es))
    print(f"\nWorst over the algorithm checks: {max(cases):.1e} "
          f"({'meets' if max(cases) <= 1e-12 else 'MISSES'} 1e-12)\n", flush=True)
    return max(cases)


# -- 2. emulated precision -------------------------------------------------------------------------

SCHEMES = [
    BScheme("fp32 (CUDA cores)", "fp32"),
    BScheme("tf32", "tf32"),
    BScheme("bf16", "bf16"),
    BScheme("3xtf32", "3xtf32"),
    BScheme("bf16x3", "bf16x3"),
    BScheme("bf16x3 + dkk, dkkd 3xtf32", "bf16x3", dkk="3xtf32", dkkd="3xtf32"),
    BScheme("bf16x3 + dout bf16x3e", "bf16x3", dout="bf16x3e"),
    BScheme("bf16x3 + dout bf16x3e + dkk, dkkd 3xtf32 (recommended)", "bf16x3", dout="bf16x3e",
            dkk="3xtf32", dkkd="3xtf32"),
    BScheme("bf16x3 + dout bf16x3e + dkk, dkkd fp32", "bf16x3", dout="bf16x3e", dkk="fp32",
            dkkd="fp32"),
]
RECOMMENDED = SCHEMES[7]
# relative cost of a product class per scheme, in single-pass BF16 tensor-core units
COST = {"bf16": 1, "tf32": 2, "bf16x3e": 3, "bf16x3": 3, "3xtf32": 6}


def fmt(x):
    return "NaN" if x != x else f"{x:.1e}"


def make_cases(quick: bool):
    """(name, ins, init, do, dfinal, cu, reference gradients); H = 2, init and dfinal given."""
    H = 2
    Ts = [64, 1024, 4096] if quick else [64, 1024, 4096, 16384]
    spec = [(f"T={T}", T, None, 0.0, 10 + i) for i, T in enumerate(Ts)]
    lens = [1000, 37, 1, 2047, 1011]
    spec.append((f"packed {len(lens)} docs T={sum(lens)}", sum(lens), lens, 0.0, 20))
    Tslow = 4096 if quick else 16384
    spec.append((f"slow decay T={Tslow}", Tslow, None, -6.0, 30))
    cases = []
    for name, T, lens, dtm, seed in spec:
        N = 1 if lens is None else len(lens)
        cu = (None if lens is None else
              torch.tensor([0] + list(torch.tensor(lens).cumsum(0)), dtype=torch.int64))
        ins, init = make_inputs(T, H, N=N, seed=seed, dt_mean=dtm)
        init, do, dfinal = grad_inputs(ins, init, seed, N)
        t0 = time.time()
        ex = reference_backward(ins, init, do, dfinal, cu, seg=None if cu is not None else 1024)
        # conditioning of the two token reductions: sum |terms| / |sum| (per head / channel)
        ea = torch.exp(ins[5]).unsqueeze(1)
        xg = ea * (ins[3] + ins[6])
        dx = ex[3] / ea
        c_a = ((dx * xg).abs().sum((0, 1, 3)) / (dx * xg).sum((0, 1, 3)).abs()).max()
        c_d = (dx.abs().sum((0, 1)) / dx.sum((0, 1)).abs()).median()
        print(f"# reference {name}: {time.time() - t0:.1f} s; sum|terms|/|sum|: dA_log "
              f"{c_a:.0f} (worst head), ddt_bias {c_d:.0f} (median channel)", flush=True)
        cases.append((name, ins, init, do, dfinal, cu, ex))
    return cases


def run_scheme(scheme, cases, **kw):
    """Per case, the rel-L2 of each of the eight gradients."""
    out = []
    for name, ins, init, do, dfinal, cu, ex in cases:
        got = chunked_backward(*ins, init, do, dfinal, cu, scheme=scheme, **kw)
        out.append(rel_errors(got, ex))
    return out


def verdict(rows):
    """(max BF16-output error, max FP32-output error, meets) over the cases."""
    mb = max(r[i] for r in rows for i in range(5))
    mf = max(r[i] for r in rows for i in range(5, 8))
    return mb, mf, (mb <= BF16_LIMIT and mf <= FP32_LIMIT)


def print_max_table(results, first="scheme"):
    print(f"| {first} | " + " | ".join(GRADS) + " | max BF16 / FP32 outputs | meets SPEC |")
    print("|---|" + "---|" * len(GRADS) + "---|---|")
    for name, rows in results:
        mb, mf, ok = verdict(rows)
        cells = [fmt(max(r[i] for r in rows)) for i in range(8)]
        if ok:
            note = f"yes (FP32 x{FP32_LIMIT / mf:.0f} margin)" if mf > 0 else "yes"
        else:
            over = [f"FP32 x{mf / FP32_LIMIT:.1f} over" if mf > FP32_LIMIT else "",
                    f"BF16 x{mb / BF16_LIMIT:.1f} over" if mb > BF16_LIMIT else ""]
            note = "no (" + ", ".join(x for x in over if x) + ")"
        print(f"| {name} | " + " | ".join(cells) + f" | {fmt(mb)} / {fmt(mf)} | {note} |")


def print_case_table(name, rows, cases):
    print(f"\nPer case, **{name}** (rel-L2 of each gradient):\n")
    print("| case | " + " | ".join(GRADS) + " |")
    print("|---|" + "---|" * len(GRADS))
    for (cname, *_), r in zip(cases, rows):
        print(f"| {cname} | " + " | ".join(fmt(x) for x in r) + " |")


def precision_study(quick: bool):
    cases = make_cases(quick)
    # the sensitivity sweeps skip only T = 64 (the long cases are where dA_log is hardest)
    sens_cases = [c for c in cases if c[0] != "T=64"]
    print("\n## 2. Emulated precision: rel-L2 vs FP64, max over the cases\n")
    print("Cases: " + ", ".join(c[0] for c in cases) + "; H = 2, initial_state and "
          "dfinal_state given, C = 64, sub-chunk 16. BF16 outputs (dq, dk, dv, dg, dbeta) rounded "
          f"once, limit {BF16_LIMIT}; FP32 outputs (dA_log, ddt_bias, dinit), limit {FP32_LIMIT}."
          "\n")
    results = []
    t0 = time.time()
    for sc in SCHEMES:
        results.append((sc.name, run_scheme(sc, cases)))
        print(f"# {sc.name}: done ({time.time() - t0:.0f} s)", flush=True)
    print()
    print_max_table(results)
    base = dict(results)

    print("\n## 3. Gate-gradient assembly: naive vs stable (max over the cases)\n")
    cmp = (SCHEMES[0], SCHEMES[4], RECOMMENDED)
    naive = [(f"{sc.name}, naive gate", run_scheme(sc, cases, naive_gate=True)) for sc in cmp]
    print_max_table(naive + [(f"{sc.name}, stable gate", base[sc.name]) for sc in cmp])

    # sensitivity: FP32-accurate 3xtf32 everywhere, one class lowered
    print("\n## 4. Which classes need the split: 3xtf32 everywhere, one class lowered; cases "
          + ", ".join(c[0] for c in sens_cases) + "\n")
    sens = []
    single = {}
    for cl in CLASSES:
        lows = ("bf16x3e", "bf16x3", "tf32", "bf16") if cl == "dout" else ("bf16x3", "tf32", "bf16")
        for low in lows:
            rows = run_scheme(BScheme(f"{cl} = {low}", "3xtf32", **{cl: low}), sens_cases)
            sens.append((f"{cl} = {low}", rows))
            single[(cl, low)] = verdict(rows)
        print(f"# sensitivity {cl}: done ({time.time() - t0:.0f} s)", flush=True)
    print()
    print_max_table(sens, "lowered class")

    # combination: each class at the cheapest precision whose single lowering kept the FP32
    # outputs >= 4x under their limit and the BF16 outputs under theirs
    lowered = {}
    for cl in CLASSES:
        for low in sorted([x for x in ("bf16", "tf32", "bf16x3e", "bf16x3") if (cl, x) in single],
                          key=COST.get):
            mb, mf, ok = single[(cl, low)]
            if ok and mf <= FP32_LIMIT / 4:
                lowered[cl] = low
                break
        else:
            lowered[cl] = "3xtf32"
    mixed = BScheme("mixed: " + ", ".join(f"{c} {k}" for c, k in lowered.items()), "3xtf32",
                    **lowered)
    mixed_rows = run_scheme(mixed, cases)
    print("\n## 5. The combination of the cheapest passing class precisions (all cases)\n")
    print_max_table([(mixed.name, mixed_rows)])
    for name in ("fp32 (CUDA cores)", "bf16x3", "tf32", RECOMMENDED.name):
        print_case_table(name, base[name], cases)
    print_case_table(mixed.name, mixed_rows, cases)
    print(f"\n# precision study {time.time() - t0:.0f} s", flush=True)
    verdicts = {}
    for name, rows in results + [(mixed.name, mixed_rows)]:
        mb, mf, ok = verdict(rows)
        verdicts[name] = f"{'yes' if ok else 'no'} (FP32 {fmt(mf)}, BF16 {fmt(mb)})"
    return mixed, verdicts


# -- 3. FLOPs, bytes and floors -------------------------------------------------------------------


def design_products(C=64, d=D):
    """The kernel design's matmuls: (pass, product, class, FLOP per token per head), dense C x C
    tiles (FMA = 2). Pass 3 recomputes the chunk preparation (A, Tinv, W, Uv, M) and U, dU from
    its inputs and the checkpoints instead of reading them back (a recompute of the preparation
    costs ~68k FLOP per token-head, re-reading the forward's 148 KB chunk record 2.3 KB)."""
    Cd, dd = 2 * C * d, 2 * d * d
    prep = [("A", "kk", Cd), ("Tinv merges", "solve", 2 * C * C / 3), ("W, Uv", "wu", 2 * Cd),
            ("M", "out", Cd)]
    return ([("1 recompute", p, c, f) for p, c, f in prep]
            + [("1 recompute", "W S0^T, U^T Kdec", "state", 2 * dd),
               ("2 chain", "Kdec dS1^T, dO'^T Qg, dU^T W", "dstate", 3 * dd),
               ("2 chain", "M^T dO' (off the chain)", "dout", Cd)]
            + [("3 parallel", p, c, f) for p, c, f in prep]
            + [("3 parallel", "U = Uv - W S0^T", "state", dd),
               ("3 parallel", "dU = M^T dO' + Kdec dS1^T", "dout", Cd),
               ("3 parallel", "dU (Kdec dS1^T part)", "dstate", dd),
               ("3 parallel", "dQg = dO' S0, dM = dO' U^T", "dout", dd + Cd),
               ("3 parallel", "dW, dKdec", "dwu", 2 * dd),
               ("3 parallel", "Tinv^T dW, Tinv^T dU, dKb W^T + dVb Uv^T", "dwu", 4 * Cd),
               ("3 parallel", "decayed dK, dQ from dA, dM (4), left of the diagonal", "dkk",
                4 * 2 * (C - 16) * d),
               ("3 parallel", "decayed dK, dQ from dA, dM (4), 16 x 16 diagonal blocks", "dkkd",
                4 * 2 * 16 * d)])


def floors(candidates, quick_verdicts):
    C = 64
    prods = design_products(C)
    per_class = {c: sum(f for _, _, cl, f in prods if cl == c) for c in CLASSES}
    print("\n## 6. FLOP per token per head of the backward design (C = 64, dense tiles)\n")
    print("| pass | products | class | FLOP |")
    print("|---|---|---|---|")
    for p, name, cl, f in prods:
        print(f"| {p} | {name} | {cl} | {f:,.0f} |")
    total = sum(per_class.values())
    print("\nPer class: " + ", ".join(f"{c} {v:,.0f}" for c, v in per_class.items())
          + f"; total {total:,.0f} (sequential FP32 recurrence backward: {20 * D * D:,})")
    cf, sfu = fs.fwd_cuda_core(C)
    # bytes per token-head (B) and per (document, head)
    tok_min = 18 * D + 4                       # q k v g do + beta in, dq dk dv dg + dbeta out
    ckpt = 4 * 4 * D * D / C                   # S0 and dS1 checkpoints, FP32, written + read
    tok_design = tok_min + 10 * D + 2 + 2 * D  # pass 3 re-reads q k v g beta and do
    record = 3 * 147968 / C                    # forward's chunk record: written, read by pass 1
    #                                            state pass and by pass 2
    per_doc = 3 * 4 * D * D                    # initial_state, dfinal_state in, dinit out
    print(f"\nBytes per token-head: token tensors {tok_min} B, checkpoints S0 + dS1 (written and "
          f"read once) {ckpt:.0f} B -> minimal {tok_min + ckpt:.0f} B; the design as sketched "
          f"adds pass 3's re-read of q k v g beta do ({tok_design - tok_min} B) and the forward "
          f"chunk record through DRAM (written, read twice: {record:.0f} B) -> "
          f"{tok_design + ckpt + record:.0f} B; plus 192 KiB per (document, head) of states.")
    print(f"Non-matmul work: forward estimate x3 = {3 * cf:,.0f} CUDA-core FLOP and "
          f"{3 * sfu:,.0f} SFU ops per token-head.")

    shapes = [("B=1, T=8192, H=32", 1, 8192, 32, 2.6), ("B=1, T=32768, H=16", 1, 32768, 16, 5.6),
              ("16 docs x 2048, H=16", 16, 2048, 16, 5.3)]

    def tc_time(kinds):
        t = 0.0
        cc = 0.0
        for c, f in per_class.items():
            k = kinds[c]
            if k == "fp32":
                cc += f / fs.RATE["fp32"]
            elif k == "bf16x3e":  # three BF16 passes
                t += f * 3 / fs.RATE["bf16"]
            else:
                t += f * fs.MULT[k] / fs.RATE[fs.BASE[k]]
        return t, cc

    print("\n## 7. Backward floors on the H200 (ms): max(tensor-core time, CUDA-core + SFU time, "
          "bytes at 4.27 TB/s); minimal bytes / design bytes\n")
    print("| scheme | meets (emulated) | " + " | ".join(s[0] for s in shapes) + " |")
    print("|---|---|" + "---|" * len(shapes))
    for sc in candidates:
        ttc, tcc = tc_time(sc.kinds)
        tcc += 3 * cf / fs.RATE["fp32"] + 3 * sfu / fs.SFU_RATE
        cells = []
        for _, N, Td, H, tgt in shapes:
            th = N * Td * H
            b_min = th * (tok_min + ckpt) + N * H * per_doc
            b_des = th * (tok_design + ckpt + record) + N * H * per_doc
            f_min = max(th * ttc, th * tcc, b_min / fs.BW_COPY) * 1e3
            f_des = max(th * ttc, th * tcc, b_des / fs.BW_COPY) * 1e3
            cells.append(f"{f_min:.3f} / {f_des:.3f} (tc {th * ttc * 1e3:.3f}; target x"
                         f"{tgt / f_des:.1f})")
        ok = quick_verdicts.get(sc.name)
        print(f"| {sc.name} | {ok} | " + " | ".join(cells) + " |")
    print("\n(target / design floor in brackets; targets 2.6 / 5.6 / 5.3 ms)")

    print("\n## 8. Sequential chains per (document, head), C = 64\n")
    print("| shape | chains | steps per pass (pass 1 + pass 2) | bf16x3 FLOP per step, pass 1 / "
          "pass 2 | throughput per chain, V over 8 SMs |")
    print("|---|---|---|---|---|")
    per_sm = fs.RATE["bf16"] / 132
    for s, N, Td, H, _ in shapes:
        steps = -(-Td // C)
        s1, s2 = 3 * 2 * 2 * C * D * D, 3 * 3 * 2 * C * D * D
        print(f"| {s} | {N * H} | {steps} + {steps} | {s1 / 1e6:.1f} M / {s2 / 1e6:.1f} M | "
              f"{steps * (s1 + s2) / 8 / per_sm * 1e3:.3f} ms + {2 * steps} x per-step latency |")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="T up to 4096 only")
    args = ap.parse_args()
    torch.set_num_threads(1)  # the machine's 2 cores are shared with a build
    t0 = time.time()
    worst64 = fp64_check()
    mixed, verdicts = precision_study(args.quick)
    candidates = [SCHEMES[i] for i in (0, 3, 4, 5, 6, 7, 8, 1, 2)]
    if all(mixed.kinds != sc.kinds for sc in candidates):
        candidates.insert(5, mixed)
    floors(candidates, verdicts)
    print(f"\n# FP64 algorithm check worst {worst64:.1e}; total {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
