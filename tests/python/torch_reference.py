"""Pure PyTorch float64 implementations of SPEC.md's math: the oracle of the Python tests.

Every function takes the operator's inputs (any dtype; BF16/FP32 values are widened
exactly) and computes in float64 without rounding, so "exact" means what SPEC.md section 0
says: the same formula evaluated in FP64 on the same BF16/FP32 inputs. Forwards are
differentiable; gradients come from torch.autograd where SPEC's backward is the gradient
of its forward, and from SPEC's explicit formulas where an operator's contract reads
saved records (the mHC stats) or rounds inside (the conv1d "bf16" SiLU' policy).
"""

from __future__ import annotations

import math

import torch

F64 = torch.float64


def f64(x) -> torch.Tensor:
    """A float64 copy of a tensor or numpy array (bfloat16 numpy through float32)."""
    if not isinstance(x, torch.Tensor):
        import numpy as np

        arr = np.asarray(x)
        if arr.dtype.name == "bfloat16":
            arr = arr.astype(np.float32)
        x = torch.from_numpy(np.ascontiguousarray(arr))
    return x.detach().to("cpu", F64)


def rel_l2(actual, exact) -> float:
    """||actual - exact|| / ||exact|| (0 when both are zero)."""
    a, e = f64(actual), f64(exact)
    num = torch.linalg.vector_norm(a - e).item()
    den = torch.linalg.vector_norm(e).item()
    return num / den if den > 0 else num


def bf16_round(x: torch.Tensor) -> torch.Tensor:
    """x rounded to BF16 (nearest even), back in float64."""
    return x.to(torch.float32).to(torch.bfloat16).to(F64)


def doc_starts(cu_seqlens, S: int) -> torch.Tensor:
    """For each of the S packed tokens, the index of its document's first token."""
    cu = [int(c) for c in f64(cu_seqlens).long().tolist()]
    start = torch.zeros(S, dtype=torch.long)
    for a, b in zip(cu[:-1], cu[1:]):
        start[a:b] = a
    return start


# -- causal conv1d, width 4, + SiLU (SPEC section 2) ------------------------------------------

def conv1d_preactivation(x, weight, cu_seqlens, bias=None) -> torch.Tensor:
    """pre[t, c] = bias[c] + sum_k weight[c, k] * x[t - 3 + k, c] within t's document."""
    S, C = x.shape
    start = doc_starts(cu_seqlens, S)
    t = torch.arange(S)
    pre = torch.zeros(S, C, dtype=F64) if bias is None else bias.expand(S, C).clone()
    for k in range(4):
        src = t - 3 + k
        valid = (src >= start).to(F64).unsqueeze(1)
        shifted = x[src.clamp(min=0)] * valid
        pre = pre + weight[:, k] * shifted
    return pre


def conv1d_forward(x, weight, cu_seqlens, bias=None) -> torch.Tensor:
    """y = silu(pre) in float64 (BF16 y is this rounded once)."""
    return torch.nn.functional.silu(conv1d_preactivation(
        f64(x), f64(weight), cu_seqlens, None if bias is None else f64(bias)))


def conv1d_backward(x, weight, cu_seqlens, dy, bias=None, silu_grad_preactivation="bf16"):
    """(dx, dweight, dbias) in float64 with SiLU' at p = bf16(pre) ("bf16") or pre ("fp32").

    pre is linear in (x, weight, bias), so dx, dweight, dbias are the adjoint of that map
    applied to dpre = dy * silu'(p), computed by autograd through conv1d_preactivation."""
    x64 = f64(x).requires_grad_()
    w64 = f64(weight).requires_grad_()
    b64 = None if bias is None else f64(bias).requires_grad_()
    pre = conv1d_preactivation(x64, w64, cu_seqlens, b64)
    p = pre.detach()
    if silu_grad_preactivation == "bf16":
        p = bf16_round(p)
    s = torch.sigmoid(p)
    dpre = f64(dy) * s * (1 + p * (1 - s))
    inputs = [x64, w64] + ([b64] if b64 is not None else [])
    grads = torch.autograd.grad(pre, inputs, dpre)
    return grads[0], grads[1], (grads[2] if b64 is not None else None)


def conv1d_dx_slack(x, weight, cu_seqlens, dy, bias=None, silu_grad_preactivation="bf16"):
    """SPEC's per-element allowance beyond the ulp bound: 2^-18 * sum_k |weight[c, k] *
    dpre[t + 3 - k, c]| (where the four terms nearly cancel)."""
    pre = conv1d_preactivation(f64(x), f64(weight), cu_seqlens,
                               None if bias is None else f64(bias))
    p = bf16_round(pre) if silu_grad_preactivation == "bf16" else pre
    s = torch.sigmoid(p)
    dpre_abs = (f64(dy) * s * (1 + p * (1 - s))).abs()
    x64 = torch.zeros_like(pre).requires_grad_()
    terms = conv1d_preactivation(x64, f64(weight).abs(), cu_seqlens)
    (abs_sum,) = torch.autograd.grad(terms, x64, dpre_abs)
    return abs_sum * 2.0 ** -18


# -- mHC, n = 4 (SPEC section 1) -----------------------------------------------------------------

_GROUP = torch.tensor([0] * 4 + [1] * 4 + [2] * 16)


def sinkhorn(L: torch.Tensor, iters: int, hc_eps: float) -> torch.Tensor:
    """SPEC's Sinkhorn on [..., 4, 4]: row softmax + eps, column step, then (iters - 1) times
    a row step and a column step."""
    P = torch.softmax(L, dim=-1) + hc_eps
    P = P / (P.sum(dim=-2, keepdim=True) + hc_eps)
    for _ in range(iters - 1):
        P = P / (P.sum(dim=-1, keepdim=True) + hc_eps)
        P = P / (P.sum(dim=-2, keepdim=True) + hc_eps)
    return P


def mhc_coefficients(l: torch.Tensor, hc_eps: float, iters: int):
    """(pre [T,4], post [T,4], R [T,4,4]) from the logits l [T, 24]."""
    pre = torch.sigmoid(l[:, 0:4]) + hc_eps
    post = 2 * torch.sigmoid(l[:, 4:8])
    R = sinkhorn(l[:, 8:24].reshape(-1, 4, 4), iters, hc_eps)
    return pre, post, R


def mhc_forward(X, fn, scale, base, B=None, *, rms_eps=1e-5, hc_eps=1e-6, sinkhorn_iters=20):
    """Float64 forward. Returns dict with U [T,C], Y [T,4,C] (when B is given), stats
    [T,64] in SPEC's layout, and m, r, pre, post, R. Differentiable in every input."""
    X, fn, scale, base = (t if t.dtype == F64 else f64(t) for t in (X, fn, scale, base))
    T, n, C = X.shape
    x = X.reshape(T, n * C)
    sq = (x * x).sum(dim=1)
    r = 1.0 / torch.sqrt(sq / (n * C) + rms_eps)
    z = x @ fn.t()
    m = r.unsqueeze(1) * z
    l = m * scale[_GROUP] + base
    pre, post, R = mhc_coefficients(l, hc_eps, sinkhorn_iters)
    U = torch.einsum("ta,tac->tc", pre, X)
    out = {"U": U, "m": m, "r": r, "pre": pre, "post": post, "R": R}
    stats = torch.cat([m, r.unsqueeze(1), pre, post, R.reshape(T, 16),
                       torch.zeros(T, 15, dtype=F64)], dim=1)
    out["stats"] = stats
    if B is not None:
        B = B if B.dtype == F64 else f64(B)
        out["Y"] = torch.einsum("tab,tac->tbc", R, X) + post.unsqueeze(2) * B.unsqueeze(1)
    return out


def _stats_parts(stats):
    s = f64(stats)
    T = s.shape[0]
    return s[:, 0:24], s[:, 24], s[:, 25:29], s[:, 29:33], s[:, 33:49].reshape(T, 4, 4)


def mhc_forward_finish(X, B, stats) -> torch.Tensor:
    """Y from the saved stats' R and post (float64)."""
    _, _, _, post, R = _stats_parts(stats)
    return torch.einsum("tab,tac->tbc", R, f64(X)) + post.unsqueeze(2) * f64(B).unsqueeze(1)


def mhc_backward_prepare(X, dY, B, stats):
    """(dB [T,C], grad_stats [T,32]) in float64 from the saved stats' post."""
    _, _, _, post, _ = _stats_parts(stats)
    X, dY, B = f64(X), f64(dY), f64(B)
    T = X.shape[0]
    dB = torch.einsum("tb,tbc->tc", post, dY)
    dpost = torch.einsum("tbc,tc->tb", dY, B)
    dR = torch.einsum("tbc,tac->tab", dY, X)
    grad_stats = torch.cat([dpost, dR.reshape(T, 16), torch.zeros(T, 12, dtype=F64)], dim=1)
    return dB, grad_stats


def mhc_backward_finish(X, dY, dU, fn, scale, base, stats, grad_stats, *, rms_eps=1e-5,
                        hc_eps=1e-6, sinkhorn_iters=20):
    """(dX, dfn, dscale, dbase) in float64 by SPEC's formulas: the logits are recomputed
    from the saved m, pre/post/R from the logits, r from the saved stats."""
    X, dY, dU, fn = f64(X), f64(dY), f64(dU), f64(fn)
    scale, base, gs = f64(scale), f64(base), f64(grad_stats)
    m, r, _, _, _ = _stats_parts(stats)
    T, n, C = X.shape
    x = X.reshape(T, n * C)
    l = (m * scale[_GROUP] + base).requires_grad_()
    pre, post, R = mhc_coefficients(l, hc_eps, sinkhorn_iters)
    dpre = torch.einsum("tc,tac->ta", dU, X)
    dpost, dR = gs[:, 0:4], gs[:, 4:20].reshape(T, 4, 4)
    (dl,) = torch.autograd.grad((pre * dpre).sum() + (post * dpost).sum() + (R * dR).sum(), l)
    pre, R = pre.detach(), R.detach()
    dbase = dl.sum(0)
    dscale = torch.zeros(3, dtype=F64).index_add_(0, _GROUP, (dl * m).sum(0))
    dm = dl * scale[_GROUP]
    z = x @ fn.t()
    dz = dm * r.unsqueeze(1)
    dr = (dm * z).sum(1)
    dsq = -0.5 * dr * r ** 3 / (n * C)
    dxmap = dz @ fn + 2 * x * dsq.unsqueeze(1)
    dfn = dz.t() @ x
    dX = (pre.unsqueeze(2) * dU.unsqueeze(1) + torch.einsum("tab,tbc->tac", R, dY)
          + dxmap.reshape(T, n, C))
    return dX, dfn, dscale, dbase


# -- recurrent KDA, K = V = 128 (SPEC section 3) -------------------------------------------------

def kda_forward(q, k, v, g, beta, A_log, dt_bias, initial_state=None, cu_seqlens=None,
                scale=None, lower_bound=-5.0):
    """(o [B,T,H,V], final_state [N,H,V,K]) in float64; differentiable in every input."""
    q, k, v, g, beta, A_log, dt_bias = (t if t.dtype == F64 else f64(t)
                                        for t in (q, k, v, g, beta, A_log, dt_bias))
    B, T, H, K = q.shape
    V = v.shape[-1]
    scale = 1.0 / math.sqrt(K) if scale is None else scale
    if cu_seqlens is None:
        docs = [(b, 0, T) for b in range(B)]
    else:
        cu = [int(c) for c in f64(cu_seqlens).long().tolist()]
        docs = [(0, a, e) for a, e in zip(cu[:-1], cu[1:])]
    if initial_state is not None and initial_state.dtype != F64:
        initial_state = f64(initial_state)
    gate = lower_bound * torch.sigmoid(torch.exp(A_log).unsqueeze(1) * (g + dt_bias))
    bt = torch.sigmoid(beta)
    qh = q / torch.sqrt((q * q).sum(-1, keepdim=True) + 1e-6)
    kh = k / torch.sqrt((k * k).sum(-1, keepdim=True) + 1e-6)
    outs = [[None] * T for _ in range(B)]
    finals = []
    for n, (b, a, e) in enumerate(docs):
        S = (torch.zeros(H, V, K, dtype=F64) if initial_state is None else initial_state[n])
        for t in range(a, e):
            S = S * torch.exp(gate[b, t]).unsqueeze(1)                       # [H, V, K]
            u = bt[b, t].unsqueeze(1) * (v[b, t] - torch.einsum("hvk,hk->hv", S, kh[b, t]))
            S = S + u.unsqueeze(2) * kh[b, t].unsqueeze(1)
            outs[b][t] = scale * torch.einsum("hvk,hk->hv", S, qh[b, t])
        finals.append(S)
    zero = torch.zeros(H, V, dtype=F64)
    o = torch.stack([torch.stack([ot if ot is not None else zero for ot in row])
                     for row in outs]) if T > 0 else torch.zeros(B, 0, H, V, dtype=F64)
    return o, torch.stack(finals)


def kda_backward(q, k, v, g, beta, A_log, dt_bias, initial_state, do, dfinal_state,
                 cu_seqlens=None, scale=None, lower_bound=-5.0):
    """The eight gradients of sum(do * o) + sum(dfinal_state * final_state), float64."""
    leaves = [f64(t).requires_grad_() for t in (q, k, v, g, beta, A_log, dt_bias)]
    B, T, H, K = leaves[0].shape
    N = B if cu_seqlens is None else int(f64(cu_seqlens).shape[0]) - 1
    init = (torch.zeros(N, H, K, K, dtype=F64) if initial_state is None
            else f64(initial_state)).requires_grad_()
    o, final = kda_forward(*leaves, init, cu_seqlens, scale, lower_bound)
    loss = (o * f64(do)).sum()
    if dfinal_state is not None:
        loss = loss + (final * f64(dfinal_state)).sum()
    return torch.autograd.grad(loss, leaves + [init], allow_unused=True)
