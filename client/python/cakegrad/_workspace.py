"""Caller-owned workspace buffers (uint8), on a CUDA device or in shared memory."""

from __future__ import annotations

import threading
import weakref

from . import _dtypes, shm


def allocate(nbytes: int, device=None):
    """A uint8 buffer of nbytes. ``device``: a torch device or "cuda[:i]" (a CUDA tensor),
    "cpu" (a CPU tensor in shared memory), "numpy" (a numpy array in shared memory); None:
    CUDA when torch sees a GPU, else "cpu" (or "numpy" without torch)."""
    if device is None:
        if _dtypes.have_torch():
            import torch

            device = "cuda" if torch.cuda.is_available() else "cpu"
        else:
            device = "numpy"
    if str(device) == "numpy":
        return shm.shared_empty((nbytes,), "uint8", like="numpy")
    import torch

    device = torch.device(device)
    if device.type == "cpu":
        return shm.shared_empty((nbytes,), "uint8", like="torch")
    return torch.empty((nbytes,), dtype=torch.uint8, device=device)


# Shared workspaces of the nn modules. Without one a call uses the daemon's per-GPU
# workspace, which is sized at the daemon's start (--workspace_bytes / --workspace_for) and
# refuses larger shapes; a trainer should not need to know that. One buffer per thread, device
# and CUDA stream serves every module: calls made from one stream are ordered on it (SYNC
# completion waits, EVENT completion makes the stream wait for the daemon's done event), so
# consecutive calls can reuse the bytes, and a buffer that grows is freed into the caching
# allocator on that same stream.
_GRANULE = 2 << 20


class _ThreadBuffers(threading.local):
    def __init__(self):
        super().__init__()
        self.by_key: dict = {}


_buffers = _ThreadBuffers()
_sizes: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # client -> {query: bytes}
_sizes_lock = threading.Lock()


def _required_bytes(client, operator: str, dims: dict) -> int:
    query = (operator, tuple(sorted(dims.items())))
    with _sizes_lock:
        known = _sizes.setdefault(client, {})
        if query in known:
            return known[query]
    nbytes = client.workspace_size(operator, **dims)
    with _sizes_lock:
        _sizes[client][query] = nbytes
    return nbytes


def _placement(like):
    """(pool key, allocate() device) for buffers used with tensor ``like``."""
    if _dtypes.is_numpy(like):
        return ("numpy",), "numpy"
    if like.device.type == "cuda":
        import torch

        stream = torch.cuda.current_stream(like.device)
        return ("cuda", like.device.index, stream.cuda_stream), like.device
    return ("cpu",), "cpu"


def shared_workspace(client, operator: str, like, **dims):
    """A workspace of at least the bytes ``operator`` needs for ``dims`` (the fields of
    Client.workspace_size), placed like tensor ``like``, shared with this thread's other
    calls on the same device and stream. None when the operator needs none."""
    nbytes = _required_bytes(client, operator, dims)
    if nbytes == 0:
        return None
    key, device = _placement(like)
    buffer = _buffers.by_key.get(key)
    if buffer is None or buffer.shape[0] < nbytes:
        # Rounded up so that slowly growing shapes (packed batches) do not reallocate each step.
        buffer = allocate(-(-nbytes // _GRANULE) * _GRANULE, device)
        _buffers.by_key[key] = buffer
    return buffer
