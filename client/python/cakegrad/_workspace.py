"""Caller-owned workspace buffers (uint8), on a CUDA device or in shared memory."""

from __future__ import annotations

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
