"""Recurrent KDA (Kimi Delta Attention), head dimension K = V = 128 (SPEC.md section 3, seed
page 004).

``q``, ``k``, ``v``, ``g``, ``o``, ``do`` and their gradients: BF16 [B, T, H, 128];
``beta``, ``dbeta`` BF16 [B, T, H]; ``A_log`` FP32 [H]; ``dt_bias`` FP32 [H, 128]; states
FP32 value-first [N, H, 128, 128]. With ``cu_seqlens`` (INT32 or INT64 [N + 1]; a list is
accepted too) B must be 1 and the N documents are packed along T; without it N = B.
"""

from __future__ import annotations

from collections.abc import Sequence

from . import _dtypes
from ._call import Call
from .client import get_client
from .errors import InvalidArgumentError
from .v1 import kda_pb2

_LAYOUT = "BF16 [B, T, H, 128]"
_GRAD_NAMES = ("dq", "dk", "dv", "dg", "dbeta", "dA_log", "ddt_bias", "dinitial_state")
_GRAD_FIELDS = ("dq", "dk", "dv", "dg", "dbeta", "da_log", "ddt_bias", "dinitial_state")


def _options(scale, lower_bound) -> kda_pb2.KdaOptions:
    opts = kda_pb2.KdaOptions(lower_bound=float(lower_bound))
    if scale is not None:
        opts.scale = float(scale)
    return opts


def _num_states(call: Call, q, cu_seqlens) -> int:
    B = call.dims("q", q, 4, _LAYOUT)[0]
    if cu_seqlens is None:
        return B
    return int(cu_seqlens.shape[0]) - 1


class RecurrentKDABackwardWorkspace:
    """Reusable scratch for :func:`recurrent_kda_backward`, sized by the daemon for the
    largest shapes it has seen (``max_tokens`` = B * T, ``heads``, ``batch``, ``num_docs``).
    A call with larger shapes grows it (a new allocation), so size it for the largest call
    up front to keep the buffer stable. ``device``: as for the other workspaces ("cuda",
    "cpu", "numpy"; default: the CUDA device when there is one)."""

    def __init__(self, device=None, *, max_tokens: int = 0, heads: int = 0, batch: int = 1,
                 num_docs: int = 0):
        self.device = device
        self.buffer = None
        self.nbytes = 0
        self._shape = (0, 0, 0, 0)
        if max_tokens or heads:
            self.reserve(max_tokens, heads, batch, num_docs)

    def reserve(self, tokens: int, heads: int, batch: int = 1, num_docs: int = 0):
        """Makes the buffer large enough for these shapes; returns it."""
        shape = (int(tokens), int(heads), int(batch), int(num_docs))
        grown = tuple(max(a, b) for a, b in zip(shape, self._shape))
        if self.buffer is None or grown != self._shape:
            nbytes = get_client().workspace_size("kda_backward", tokens=grown[0], heads=grown[1],
                                                 batch=grown[2], num_docs=grown[3])
            if self.buffer is None or nbytes > self.nbytes:
                from ._workspace import allocate

                self.buffer = allocate(nbytes, self.device)
                self.nbytes = nbytes
            self._shape = grown
        return self.buffer

    def _for_call(self, q, cu_seqlens, num_states: int):
        B, T, H = (int(s) for s in q.shape[:3])
        if self.device is None:
            self.device = "numpy" if _dtypes.is_numpy(q) else q.device
        return self.reserve(B * T, H, B, num_states if cu_seqlens is not None else 0)


def recurrent_kda_forward(q, k, v, g, beta, A_log, dt_bias, initial_state=None,
                          cu_seqlens=None, scale: float | None = None,
                          lower_bound: float = -5.0, workspace=None,
                          out: Sequence | None = None):
    """The recurrence's output and final state. Returns ``(o, final_state)``: BF16 o of q's
    shape and FP32 [N, H, 128, 128] final_state. ``out``: optional preallocated (o,
    final_state). ``scale`` None means 1 / sqrt(128). ``workspace``: optional uint8 buffer of
    at least ``get_client().workspace_size("kda_forward", tokens=B * T, heads=H, batch=B,
    num_docs=N)`` bytes (N only with cu_seqlens), on q's device; without one the daemon's
    own workspace is used, which may be too small for long sequences."""
    call = Call("kda_forward", q, "q")
    B, T, H, K = call.dims("q", q, 4, _LAYOUT)
    cu_seqlens = call.index_tensor("cu_seqlens", cu_seqlens)
    N = _num_states(call, q, cu_seqlens)
    if out is not None:
        if len(out) != 2:
            raise InvalidArgumentError(f"argument 'out': expected (o, final_state), got "
                                       f"{len(out)} tensors", operator="kda_forward")
        o, final_state = out
    else:
        o = call.empty((B, T, H, K), "bfloat16")
        final_state = call.empty((N, H, K, K), "float32")
    req = kda_pb2.KdaForwardRequest(options=_options(scale, lower_bound))
    for field, x in (("q", q), ("k", k), ("v", v), ("g", g), ("beta", beta)):
        call.set(req, field, x)
    call.set(req, "a_log", A_log, name="A_log")
    call.set(req, "dt_bias", dt_bias)
    call.set(req, "initial_state", initial_state)
    call.set(req, "cu_seqlens", cu_seqlens)
    call.set(req, "workspace", workspace)
    call.set(req, "o", o, output=True)
    call.set(req, "final_state", final_state, output=True)
    call.run("kda_forward", req)
    return o, final_state


def recurrent_kda_backward(q, k, v, g, beta, A_log, dt_bias, initial_state, do, dfinal_state,
                           cu_seqlens=None, scale: float | None = None,
                           lower_bound: float = -5.0,
                           workspace=None,
                           out: Sequence | None = None):
    """All gradients of loss = sum(do * o) + sum(dfinal_state * final_state) (seed page 004).
    Returns ``(dq, dk, dv, dg, dbeta, dA_log, ddt_bias, dinitial_state)``.

    ``initial_state`` / ``dfinal_state`` may be None, meaning zeros (a forward without an
    initial state; a loss that does not use the final state). ``out``: eight preallocated
    gradients in return order. ``scale`` None means 1 / sqrt(128). ``workspace``: a
    :class:`RecurrentKDABackwardWorkspace` (grown to fit) or a uint8 buffer of at least the
    "kda_backward" workspace size; None: the daemon's own, which may be too small for long
    sequences."""
    call = Call("kda_backward", q, "q")
    B, T, H, K = call.dims("q", q, 4, _LAYOUT)
    cu_seqlens = call.index_tensor("cu_seqlens", cu_seqlens)
    N = _num_states(call, q, cu_seqlens)
    if initial_state is None:
        initial_state = call.zeros((N, H, K, K), "float32")
    if dfinal_state is None:
        dfinal_state = call.zeros((N, H, K, K), "float32")
    if out is not None:
        if len(out) != 8:
            raise InvalidArgumentError(f"argument 'out': expected the eight gradients "
                                       f"{', '.join(_GRAD_NAMES)}, got {len(out)} tensors",
                                       operator="kda_backward")
        grads = tuple(out)
    else:
        grads = (call.empty((B, T, H, K), "bfloat16"), call.empty((B, T, H, K), "bfloat16"),
                 call.empty((B, T, H, K), "bfloat16"), call.empty((B, T, H, K), "bfloat16"),
                 call.empty((B, T, H), "bfloat16"), call.empty((H,), "float32"),
                 call.empty((H, K), "float32"), call.empty((N, H, K, K), "float32"))
    req = kda_pb2.KdaBackwardRequest(options=_options(scale, lower_bound))
    for field, x in (("q", q), ("k", k), ("v", v), ("g", g), ("beta", beta)):
        call.set(req, field, x)
    call.set(req, "a_log", A_log, name="A_log")
    call.set(req, "dt_bias", dt_bias)
    call.set(req, "initial_state", initial_state)
    call.set(req, "do", do)
    call.set(req, "dfinal_state", dfinal_state)
    call.set(req, "cu_seqlens", cu_seqlens)
    if isinstance(workspace, RecurrentKDABackwardWorkspace):
        workspace = workspace._for_call(q, cu_seqlens, N)
    elif workspace is not None and not (_dtypes.is_torch_tensor(workspace)
                                        or _dtypes.is_numpy(workspace)):
        raise InvalidArgumentError("argument 'workspace': expected a "
                                   "RecurrentKDABackwardWorkspace or a uint8 buffer, got "
                                   f"{type(workspace).__name__}", operator="kda_backward")
    call.set(req, "workspace", workspace)
    for field, name, x in zip(_GRAD_FIELDS, _GRAD_NAMES, grads):
        call.set(req, field, x, name=name, output=True)
    call.run("kda_backward", req)
    return grads
