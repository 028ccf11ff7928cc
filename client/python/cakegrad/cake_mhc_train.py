"""mHC, manifold-constrained hyper-connections with n = 4 streams (SPEC.md section 1, seed
page 000).

Shapes: ``X`` BF16 [T, 4, C]; ``fn`` FP32 [24, 4C]; ``scale`` FP32 [3]; ``base`` FP32 [24];
``B``, ``U``, ``dU``, ``dB`` BF16 [T, C]; ``Y``, ``dY``, ``dX`` BF16 [T, 4, C]; ``stats``
FP32 [T, 64]; ``grad_stats`` FP32 [T, 32]. C is a multiple of 256 in [256, 16384].

A training step: ``U, stats = forward_prepare(X, ...)``; the branch maps U to B;
``Y = forward_finish(X, B, stats)``. Backward: ``dB, grad_stats = backward_prepare(X, dY,
B, stats)``; the branch's backward maps dB to dU; ``dX, dfn, dscale, dbase =
backward_finish(X, dY, dU, B, fn, scale, base, stats, grad_stats)``.
"""

from __future__ import annotations

from ._call import Call
from .client import get_client
from .errors import InvalidArgumentError
from .v1 import mhc_pb2

_X_LAYOUT = "BF16 [T, 4, C]"


def _options(rms_eps: float, hc_eps: float, sinkhorn_iters: int) -> mhc_pb2.MhcOptions:
    return mhc_pb2.MhcOptions(rms_eps=float(rms_eps), hc_eps=float(hc_eps),
                              sinkhorn_iters=int(sinkhorn_iters))


def cake_mhc_train_forward_prepare(X, fn, scale, base, *, rms_eps: float = 1e-5,
                                   hc_eps: float = 1e-6, sinkhorn_iters: int = 20,
                                   U=None, stats=None):
    """The branch input ``U[t, c] = bf16(sum_a pre_a X[t, a, c])`` and the FP32 [T, 64]
    record of the forward. Returns ``(U, stats)``."""
    call = Call("mhc_forward_prepare", X, "X")
    T, _, C = call.dims("X", X, 3, _X_LAYOUT)
    U = call.empty((T, C), "bfloat16") if U is None else U
    stats = call.empty((T, 64), "float32") if stats is None else stats
    req = mhc_pb2.MhcForwardPrepareRequest(options=_options(rms_eps, hc_eps, sinkhorn_iters))
    call.set(req, "x", X, name="X")
    call.set(req, "fn", fn)
    call.set(req, "scale", scale)
    call.set(req, "base", base)
    call.set(req, "u", U, name="U", output=True)
    call.set(req, "stats", stats, output=True)
    call.run("mhc_forward_prepare", req)
    return U, stats


def cake_mhc_train_forward_stats(X, fn, scale, base, *, rms_eps: float = 1e-5,
                                 hc_eps: float = 1e-6, sinkhorn_iters: int = 20, stats=None):
    """The FP32 [T, 64] record alone, bitwise equal to forward_prepare's (to recompute it
    in the backward instead of saving it). Returns ``stats``."""
    call = Call("mhc_forward_stats", X, "X")
    T = call.dims("X", X, 3, _X_LAYOUT)[0]
    stats = call.empty((T, 64), "float32") if stats is None else stats
    req = mhc_pb2.MhcForwardStatsRequest(options=_options(rms_eps, hc_eps, sinkhorn_iters))
    call.set(req, "x", X, name="X")
    call.set(req, "fn", fn)
    call.set(req, "scale", scale)
    call.set(req, "base", base)
    call.set(req, "stats", stats, output=True)
    call.run("mhc_forward_stats", req)
    return stats


def cake_mhc_train_forward_finish(X, B, stats, *, Y=None):
    """``Y[t, b, c] = bf16(sum_a R[a][b] X[t, a, c] + post_b B[t, c])``. Returns ``Y``."""
    call = Call("mhc_forward_finish", X, "X")
    call.dims("X", X, 3, _X_LAYOUT)
    Y = call.empty(tuple(X.shape), "bfloat16") if Y is None else Y
    req = mhc_pb2.MhcForwardFinishRequest()
    call.set(req, "x", X, name="X")
    call.set(req, "b", B, name="B")
    call.set(req, "stats", stats)
    call.set(req, "y", Y, name="Y", output=True)
    call.run("mhc_forward_finish", req)
    return Y


def cake_mhc_train_backward_prepare(X, dY, B, stats, *, dB=None, grad_stats=None):
    """The branch output's gradient ``dB[t, c] = bf16(sum_b post_b dY[t, b, c])`` and the
    FP32 [T, 32] record backward_finish needs. Returns ``(dB, grad_stats)``."""
    call = Call("mhc_backward_prepare", X, "X")
    T, _, C = call.dims("X", X, 3, _X_LAYOUT)
    dB = call.empty((T, C), "bfloat16") if dB is None else dB
    grad_stats = call.empty((T, 32), "float32") if grad_stats is None else grad_stats
    req = mhc_pb2.MhcBackwardPrepareRequest()
    call.set(req, "x", X, name="X")
    call.set(req, "dy", dY, name="dY")
    call.set(req, "b", B, name="B")
    call.set(req, "stats", stats)
    call.set(req, "db", dB, name="dB", output=True)
    call.set(req, "grad_stats", grad_stats, output=True)
    call.run("mhc_backward_prepare", req)
    return dB, grad_stats


def cake_mhc_train_backward_finish(X, dY, dU, B, fn, scale, base, stats, grad_stats, *,
                                   rms_eps: float = 1e-5, hc_eps: float = 1e-6,
                                   sinkhorn_iters: int = 20, accumulate: bool = False,
                                   workspace=None, dX=None, dfn=None, dscale=None,
                                   dbase=None):
    """Input gradient and parameter gradients after the branch backward produced dU (seed
    page 000). Returns ``(dX, dfn, dscale, dbase)``. accumulate=True adds the fixed-order
    sums to the passed dfn, dscale and dbase (all three required)."""
    call = Call("mhc_backward_finish", X, "X")
    T, _, C = call.dims("X", X, 3, _X_LAYOUT)
    if accumulate and (dfn is None or dscale is None or dbase is None):
        missing = [n for n, v in (("dfn", dfn), ("dscale", dscale), ("dbase", dbase))
                   if v is None]
        raise InvalidArgumentError(f"accumulate=True needs dfn, dscale and dbase "
                                   f"(missing: {', '.join(missing)})",
                                   operator="mhc_backward_finish")
    dX = call.empty((T, 4, C), "bfloat16") if dX is None else dX
    dfn = call.empty((24, 4 * C), "float32") if dfn is None else dfn
    dscale = call.empty((3,), "float32") if dscale is None else dscale
    dbase = call.empty((24,), "float32") if dbase is None else dbase
    req = mhc_pb2.MhcBackwardFinishRequest(options=_options(rms_eps, hc_eps, sinkhorn_iters),
                                           accumulate=bool(accumulate))
    call.set(req, "x", X, name="X")
    call.set(req, "dy", dY, name="dY")
    call.set(req, "du", dU, name="dU")
    call.set(req, "b", B, name="B")
    call.set(req, "fn", fn)
    call.set(req, "scale", scale)
    call.set(req, "base", base)
    call.set(req, "stats", stats)
    call.set(req, "grad_stats", grad_stats)
    call.set(req, "workspace", workspace)
    call.set(req, "dx", dX, name="dX", output=True)
    call.set(req, "dfn", dfn, output=True)
    call.set(req, "dscale", dscale, output=True)
    call.set(req, "dbase", dbase, output=True)
    call.run("mhc_backward_finish", req)
    return dX, dfn, dscale, dbase


def cake_mhc_train_backward_workspace_bytes(num_tokens: int, hidden_size: int = 4096) -> int:
    """Bytes of the caller-owned backward_finish workspace for T = num_tokens, C =
    hidden_size (the daemon's GetWorkspaceSize)."""
    return get_client().workspace_size("mhc_backward_finish", tokens=int(num_tokens),
                                       channels=int(hidden_size))


def cake_mhc_train_backward_workspace(num_tokens: int, hidden_size: int = 4096, *,
                                      device=None):
    """A uint8 workspace for cake_mhc_train_backward_finish (no zeroing needed) on
    ``device`` ("cuda", "cuda:1", "cpu" for a shared CPU tensor, "numpy"; default: the CUDA
    device when there is one)."""
    from ._workspace import allocate

    return allocate(cake_mhc_train_backward_workspace_bytes(num_tokens, hidden_size), device)
