"""Packed width-4 depthwise causal convolution + SiLU (SPEC.md section 2, seed page 002).

``x``, ``y``, ``dy``, ``dx``: BF16 [S, C], the S tokens of N documents packed back to back;
``weight`` [C, 4] and ``bias`` [C] FP32 or BF16; ``cu_seqlens`` INT32 or INT64 [N + 1]
(a list is accepted too; a CPU tensor is moved to the CUDA device of the call).
"""

from __future__ import annotations

from ._call import Call
from .client import get_client
from .errors import InvalidArgumentError
from .v1 import conv1d_pb2

_POLICIES = {"bf16": conv1d_pb2.SILU_GRAD_PREACTIVATION_BF16,
             "fp32": conv1d_pb2.SILU_GRAD_PREACTIVATION_FP32}


def cake_causal_conv1d_train_forward(x, weight, cu_seqlens, bias=None, *, y=None):
    """y[t, c] = bf16(silu(bias[c] + sum_k weight[c, k] * x[t - 3 + k, c])), the terms before
    t's document start being zero. Returns y (BF16, x's shape)."""
    call = Call("conv1d_forward", x, "x")
    call.dims("x", x, 2, "BF16 [S, C]")
    cu_seqlens = call.index_tensor("cu_seqlens", cu_seqlens)
    if y is None:
        y = call.empty(x.shape, "bfloat16")
    req = conv1d_pb2.Conv1dForwardRequest()
    call.set(req, "x", x)
    call.set(req, "weight", weight)
    call.set(req, "cu_seqlens", cu_seqlens)
    call.set(req, "bias", bias)
    call.set(req, "y", y, output=True)
    call.run("conv1d_forward", req)
    return y


def cake_causal_conv1d_train_backward(x, weight, cu_seqlens, dy, *, bias=None,
                                      silu_grad_preactivation: str = "bf16", workspace=None,
                                      dx=None, dweight=None, dbias=None):
    """Training backward (seed page 002). Returns ``(dx, dweight)``, with a third element
    ``dbias`` only when ``bias`` is given. dweight / dbias are allocated in the parameter's
    dtype when not passed. S == 0 returns the empty dx and zero gradients."""
    call = Call("conv1d_backward", x, "x")
    S, C = call.dims("x", x, 2, "BF16 [S, C]")
    if silu_grad_preactivation not in _POLICIES:
        raise InvalidArgumentError(
            f"argument 'silu_grad_preactivation': expected 'bf16' or 'fp32', got "
            f"{silu_grad_preactivation!r}", operator="conv1d_backward")
    if dbias is not None and bias is None:
        raise InvalidArgumentError("argument 'dbias': given without bias",
                                   operator="conv1d_backward")
    cu_seqlens = call.index_tensor("cu_seqlens", cu_seqlens)
    if dx is None:
        dx = call.empty((S, C), "bfloat16")
    if dweight is None:
        dweight = call.empty(tuple(weight.shape), weight.dtype)
    if bias is not None and dbias is None:
        dbias = call.empty(tuple(bias.shape), bias.dtype)
    req = conv1d_pb2.Conv1dBackwardRequest(
        silu_grad_preactivation=_POLICIES[silu_grad_preactivation])
    call.set(req, "x", x)
    call.set(req, "weight", weight)
    call.set(req, "cu_seqlens", cu_seqlens)
    call.set(req, "dy", dy)
    call.set(req, "bias", bias)
    call.set(req, "workspace", workspace)
    call.set(req, "dx", dx, output=True)
    call.set(req, "dweight", dweight, output=True)
    call.set(req, "dbias", dbias, output=True)
    call.run("conv1d_backward", req)
    return (dx, dweight, dbias) if bias is not None else (dx, dweight)


def cake_causal_conv1d_train_backward_workspace_bytes(num_tokens: int, channels: int) -> int:
    """Bytes of the caller-owned backward workspace for S = num_tokens, C = channels: the
    maximum over every backward program of every route, so one buffer serves any call of
    that shape (the daemon's GetWorkspaceSize)."""
    return get_client().workspace_size("conv1d_backward", tokens=int(num_tokens),
                                       channels=int(channels))


def cake_causal_conv1d_train_backward_workspace(num_tokens: int, channels: int, *,
                                                device=None):
    """A uint8 workspace buffer of :func:`cake_causal_conv1d_train_backward_workspace_bytes`
    bytes (no zeroing needed) on ``device`` ("cuda", "cuda:1", "cpu" for a shared CPU
    tensor, "numpy" for a shared numpy array; default: the CUDA device when there is one)."""
    from ._workspace import allocate

    return allocate(cake_causal_conv1d_train_backward_workspace_bytes(num_tokens, channels),
                    device)
