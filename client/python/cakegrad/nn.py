"""Autograd modules whose forward and backward run on the cakegrad daemon.

* :class:`MHCBlock`: mHC around any branch module: forward_prepare -> branch ->
  forward_finish; backward: backward_prepare -> the branch's backward -> backward_finish.
* :class:`ShortConvolution`: width-4 depthwise causal conv1d + SiLU over packed documents
  (``cu_seqlens``), or a [B, T, C] batch.
* :class:`KDACore`: the recurrent KDA attention core (head dimension 128).

They hold their parameters in FP32 (the conv weight may be BF16) and take BF16
activations (other float dtypes are cast, through autograd). With a daemon running the
cuda backend they take CUDA tensors; with the host backend CPU tensors (copied into shared
memory per call unless they already live there: see cakegrad.shm). A model built from them
trains with ``loss.backward()`` as usual.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from .cake_causal_conv1d_train import (cake_causal_conv1d_train_backward,
                                       cake_causal_conv1d_train_forward)
from .cake_mhc_train import (cake_mhc_train_backward_finish, cake_mhc_train_backward_prepare,
                             cake_mhc_train_forward_finish, cake_mhc_train_forward_prepare)
from ._workspace import shared_workspace
from .client import get_client
from .kda_backward import recurrent_kda_backward, recurrent_kda_forward

_BF16 = torch.bfloat16


def _bf16(x: torch.Tensor) -> torch.Tensor:
    return x.to(_BF16).contiguous()


def _workspace(operator: str, like: torch.Tensor, **dims):
    """The modules bring their own workspace (one per thread, device and stream, shared by
    every module) so that no shape depends on how large the daemon's own one was made."""
    return shared_workspace(get_client(), operator, like, **dims)


# -- mHC -------------------------------------------------------------------------------------

class _MhcTape:
    """What backward_prepare (run in the finish node's backward) hands to backward_finish
    (run in the prepare node's backward, strictly later: it needs the branch's dU)."""

    __slots__ = ("options", "dY", "B", "grad_stats")

    def __init__(self, options: dict):
        self.options = options
        self.dY = self.B = self.grad_stats = None


class _MhcPrepare(torch.autograd.Function):
    @staticmethod
    def forward(ctx, X, fn, scale, base, tape):
        U, stats = cake_mhc_train_forward_prepare(X, fn, scale, base, **tape.options)
        ctx.save_for_backward(X, fn, scale, base, stats)
        ctx.tape = tape
        return U, stats

    @staticmethod
    def backward(ctx, dU, _dstats):
        X, fn, scale, base, stats = ctx.saved_tensors
        tape = ctx.tape
        if tape.dY is None:
            raise RuntimeError("MHCBlock: the mHC stats were used outside the block's "
                               "forward_finish; backward_finish has no dY")
        T, _, C = X.shape
        dX, dfn, dscale, dbase = cake_mhc_train_backward_finish(
            X, tape.dY, _bf16(dU), tape.B, fn, scale, base, stats, tape.grad_stats,
            workspace=_workspace("mhc_backward_finish", X, tokens=T, channels=C),
            **tape.options)
        tape.dY = tape.B = tape.grad_stats = None
        return dX, dfn, dscale, dbase, None


class _MhcFinish(torch.autograd.Function):
    @staticmethod
    def forward(ctx, X, B, stats, tape):
        Y = cake_mhc_train_forward_finish(X, B, stats)
        ctx.save_for_backward(X, B, stats)
        ctx.tape = tape
        return Y

    @staticmethod
    def backward(ctx, dY):
        X, B, stats = ctx.saved_tensors
        dY = _bf16(dY)
        dB, grad_stats = cake_mhc_train_backward_prepare(X, dY, B, stats)
        tape = ctx.tape
        tape.dY, tape.B, tape.grad_stats = dY, B, grad_stats
        # X's gradient comes whole from backward_finish (prepare's node). stats gets a zero
        # gradient: it exists so that prepare's backward runs after this one.
        return None, dB, torch.zeros_like(stats), None


class MHCBlock(nn.Module):
    """Y = mHC(X, branch): n = 4 residual streams of width ``hidden_size`` (a multiple of
    256) around ``branch``, a module mapping the BF16 [T, C] branch input U to the [T, C]
    branch output B (cast to BF16). ``forward(X, *args, **kwargs)`` takes X [T, 4, C] (or
    [..., 4, C], flattened to tokens) and passes the extra arguments to the branch (for
    example cu_seqlens)."""

    def __init__(self, branch: nn.Module, hidden_size: int, *, rms_eps: float = 1e-5,
                 hc_eps: float = 1e-6, sinkhorn_iters: int = 20, device=None):
        super().__init__()
        self.branch = branch
        self.hidden_size = hidden_size
        self.options = dict(rms_eps=rms_eps, hc_eps=hc_eps, sinkhorn_iters=sinkhorn_iters)
        kw = dict(dtype=torch.float32, device=device)
        self.fn = nn.Parameter(torch.empty(24, 4 * hidden_size, **kw))
        self.scale = nn.Parameter(torch.empty(3, **kw))
        self.base = nn.Parameter(torch.empty(24, **kw))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Small mapping weights; pre = post = about 1 / 2 and 1; H_res near the identity."""
        with torch.no_grad():
            self.fn.normal_(0.0, 1.0 / math.sqrt(4 * self.hidden_size))
            self.scale.fill_(0.1)
            self.base.zero_()
            self.base[8:].view(4, 4).fill_diagonal_(2.0)

    def forward(self, X: torch.Tensor, *args, **kwargs) -> torch.Tensor:
        shape = X.shape
        X = _bf16(X.reshape(-1, 4, self.hidden_size))
        tape = _MhcTape(self.options)
        U, stats = _MhcPrepare.apply(X, self.fn, self.scale, self.base, tape)
        B = _bf16(self.branch(U, *args, **kwargs))
        return _MhcFinish.apply(X, B, stats, tape).reshape(shape)

    def extra_repr(self) -> str:
        return f"hidden_size={self.hidden_size}, " + ", ".join(
            f"{k}={v}" for k, v in self.options.items())


# -- causal conv1d ---------------------------------------------------------------------------

class _Conv1d(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, cu_seqlens, policy):
        y = cake_causal_conv1d_train_forward(x, weight, cu_seqlens, bias)
        ctx.save_for_backward(x, weight, bias, cu_seqlens)
        ctx.policy = policy
        return y

    @staticmethod
    def backward(ctx, dy):
        x, weight, bias, cu_seqlens = ctx.saved_tensors
        S, C = x.shape
        grads = cake_causal_conv1d_train_backward(
            x, weight, cu_seqlens, _bf16(dy), bias=bias, silu_grad_preactivation=ctx.policy,
            workspace=_workspace("conv1d_backward", x, tokens=S, channels=C))
        dbias = grads[2] if bias is not None else None
        return grads[0], grads[1], dbias, None, None


class ShortConvolution(nn.Module):
    """Width-4 depthwise causal convolution + SiLU (the short convolution of linear-attention
    layers). ``forward(x, cu_seqlens=None)``: x BF16 [S, C] packed documents delimited by
    cu_seqlens (None: one document), or [B, T, C] (each row a document; with cu_seqlens B
    must be 1). ``silu_grad_preactivation``: "bf16" (default) or "fp32", as in
    cake_causal_conv1d_train_backward. ``dtype``: the parameters' dtype (FP32 or BF16)."""

    def __init__(self, hidden_size: int, kernel_size: int = 4, *, bias: bool = False,
                 silu_grad_preactivation: str = "bf16", dtype=torch.float32, device=None):
        super().__init__()
        if kernel_size != 4:
            raise ValueError(f"kernel_size must be 4 (the daemon's width), got {kernel_size}")
        self.hidden_size = hidden_size
        self.silu_grad_preactivation = silu_grad_preactivation
        self.weight = nn.Parameter(torch.empty(hidden_size, 4, dtype=dtype, device=device))
        self.bias = (nn.Parameter(torch.empty(hidden_size, dtype=dtype, device=device))
                     if bias else None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """As torch.nn.Conv1d with groups = channels: U(-1/2, 1/2) for fan-in 4."""
        with torch.no_grad():
            self.weight.uniform_(-0.5, 0.5)
            if self.bias is not None:
                self.bias.uniform_(-0.5, 0.5)

    def forward(self, x: torch.Tensor, cu_seqlens: torch.Tensor | None = None) -> torch.Tensor:
        shape = x.shape
        if x.dim() == 3:
            if cu_seqlens is not None and shape[0] != 1:
                raise ValueError(f"with cu_seqlens the batch must be 1, got x of shape "
                                 f"{list(shape)}")
            if cu_seqlens is None:
                cu_seqlens = torch.arange(0, shape[0] * shape[1] + 1, shape[1],
                                          dtype=torch.int32, device=x.device)
            x = x.reshape(-1, shape[-1])
        elif x.dim() != 2:
            raise ValueError(f"x must be [S, C] or [B, T, C], got shape {list(shape)}")
        if cu_seqlens is None:
            cu_seqlens = torch.tensor([0, x.shape[0]], dtype=torch.int32, device=x.device)
        cu_seqlens = cu_seqlens.to(x.device)
        y = _Conv1d.apply(_bf16(x), self.weight, self.bias, cu_seqlens,
                          self.silu_grad_preactivation)
        return y.reshape(shape)

    def extra_repr(self) -> str:
        return (f"{self.hidden_size}, kernel_size=4, bias={self.bias is not None}, "
                f"silu_grad_preactivation={self.silu_grad_preactivation!r}")


# -- KDA -------------------------------------------------------------------------------------

def _kda_dims(q: torch.Tensor, cu_seqlens) -> dict:
    B, T, H = (int(s) for s in q.shape[:3])
    docs = 0 if cu_seqlens is None else int(cu_seqlens.shape[0]) - 1
    return dict(tokens=B * T, heads=H, batch=B, num_docs=docs)


class _Kda(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, g, beta, A_log, dt_bias, initial_state, cu_seqlens, scale,
                lower_bound):
        o, final_state = recurrent_kda_forward(
            q, k, v, g, beta, A_log, dt_bias, initial_state, cu_seqlens, scale, lower_bound,
            workspace=_workspace("kda_forward", q, **_kda_dims(q, cu_seqlens)))
        ctx.save_for_backward(q, k, v, g, beta, A_log, dt_bias, initial_state, cu_seqlens)
        ctx.options = (scale, lower_bound)
        ctx.set_materialize_grads(False)
        return o, final_state

    @staticmethod
    def backward(ctx, do, dfinal_state):
        q, k, v, g, beta, A_log, dt_bias, initial_state, cu_seqlens = ctx.saved_tensors
        if do is None:
            do = torch.zeros_like(q)
        grads = recurrent_kda_backward(
            q, k, v, g, beta, A_log, dt_bias, initial_state, _bf16(do),
            None if dfinal_state is None else dfinal_state.float().contiguous(), cu_seqlens,
            *ctx.options, workspace=_workspace("kda_backward", q, **_kda_dims(q, cu_seqlens)))
        dinit = grads[7] if initial_state is not None else None
        return (*grads[:7], dinit, None, None, None)


class KDACore(nn.Module):
    """The recurrent KDA attention core, head dimension 128: ``forward(q, k, v, g, beta,
    initial_state=None, cu_seqlens=None, output_final_state=False)`` with q, k, v, g
    [B, T, H, 128], beta [B, T, H] (raw gate and beta logits, cast to BF16) returns o
    [B, T, H, 128] BF16, and the FP32 [N, H, 128, 128] final state when asked. Parameters:
    A_log [H] and dt_bias [H, 128] (FP32)."""

    def __init__(self, num_heads: int, head_dim: int = 128, *, scale: float | None = None,
                 lower_bound: float = -5.0, device=None):
        super().__init__()
        if head_dim != 128:
            raise ValueError(f"head_dim must be 128, got {head_dim}")
        self.num_heads = num_heads
        self.scale = scale
        self.lower_bound = lower_bound
        self.A_log = nn.Parameter(torch.empty(num_heads, dtype=torch.float32, device=device))
        self.dt_bias = nn.Parameter(torch.empty(num_heads, 128, dtype=torch.float32,
                                                device=device))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """A = exp(A_log) uniform in [1, 16]; dt_bias small."""
        with torch.no_grad():
            self.A_log.uniform_(0.0, math.log(16.0))
            self.dt_bias.uniform_(-0.5, 0.5)

    def forward(self, q, k, v, g, beta, initial_state=None, cu_seqlens=None,
                output_final_state: bool = False):
        if cu_seqlens is not None:
            cu_seqlens = cu_seqlens.to(q.device)
        if initial_state is not None:
            initial_state = initial_state.float().contiguous()
        o, final_state = _Kda.apply(_bf16(q), _bf16(k), _bf16(v), _bf16(g), _bf16(beta),
                                    self.A_log, self.dt_bias, initial_state, cu_seqlens,
                                    self.scale, self.lower_bound)
        return (o, final_state) if output_final_state else o

    def extra_repr(self) -> str:
        return f"num_heads={self.num_heads}, scale={self.scale}, lower_bound={self.lower_bound}"
