"""Host memory the daemon can read and write: a pool of POSIX shared-memory segments.

The host backend maps POSIX shared memory by name, so a CPU tensor or numpy array is
passed zero-copy only when it lives in one of this process's pool segments.
:func:`shared_empty` and :func:`to_shared` allocate there. Each segment is registered
with the daemon once per session (one region per segment) on first use.

Anything else handed to an operator on the host backend (an ordinary CPU tensor or numpy
array) is copied into a temporary pool block before the call, and an output passed in
that way is copied back after it: correct, but one extra copy per such tensor per call.

A block returns to the pool when the last array or tensor viewing it is garbage
collected. Segment names are unlinked at exit (and by Python's resource tracker if the
process dies), so nothing is left in /dev/shm.
"""

from __future__ import annotations

import atexit
import bisect
import collections
import os
import secrets
import threading
import weakref
from multiprocessing import shared_memory

import numpy as np

from . import _dtypes

_ALIGN = 256
_MIN_SEGMENT = 64 << 20
_SEGMENT_ROUND = 2 << 20


def _round_up(n: int, m: int) -> int:
    return (n + m - 1) // m * m


class Segment:
    """One shared-memory segment: a name the daemon can shm_open and a free list."""

    def __init__(self, size: int, index: int):
        self.name = f"cakegrad-{os.getpid()}-{index}-{secrets.token_hex(4)}"
        self.shm = shared_memory.SharedMemory(name=self.name, create=True, size=size)
        self.size = size
        base_view = np.frombuffer(self.shm.buf, dtype=np.uint8)
        self.base = base_view.ctypes.data
        del base_view
        # Free blocks as sorted offsets with their sizes; first fit, coalesced on free.
        self._free_offsets = [0]
        self._free_sizes = {0: size}

    @property
    def shm_name(self) -> str:
        """The name as shm_open takes it (with the leading slash)."""
        return "/" + self.name

    def allocate(self, nbytes: int) -> int | None:
        for off in self._free_offsets:
            size = self._free_sizes[off]
            if size >= nbytes:
                self._free_offsets.remove(off)
                del self._free_sizes[off]
                if size > nbytes:
                    rest = off + nbytes
                    bisect.insort(self._free_offsets, rest)
                    self._free_sizes[rest] = size - nbytes
                return off
        return None

    def free(self, off: int, nbytes: int) -> None:
        i = bisect.bisect_left(self._free_offsets, off)
        # Merge with the following free block.
        if i < len(self._free_offsets) and self._free_offsets[i] == off + nbytes:
            nxt = self._free_offsets.pop(i)
            nbytes += self._free_sizes.pop(nxt)
        # Merge with the preceding free block.
        if i > 0:
            prev = self._free_offsets[i - 1]
            if prev + self._free_sizes[prev] == off:
                self._free_sizes[prev] += nbytes
                return
        self._free_offsets.insert(i, off)
        self._free_sizes[off] = nbytes

    def contains(self, address: int, nbytes: int) -> bool:
        return self.base <= address and address + nbytes <= self.base + self.size

    def unlink(self) -> None:
        try:
            self.shm.unlink()
        except FileNotFoundError:
            pass


class Pool:
    """The process's shared-memory segments and their allocator (thread safe)."""

    def __init__(self):
        self.pid = os.getpid()
        self.segments: list[Segment] = []
        self._lock = threading.Lock()
        # Blocks whose arrays were collected, returned to their segments by the next allocation.
        self._released: collections.deque[tuple[Segment, int, int]] = collections.deque()

    def allocate_bytes(self, nbytes: int) -> np.ndarray:
        """A uint8 array of nbytes (aligned to 256 bytes) inside a pool segment."""
        size = _round_up(max(nbytes, 1), _ALIGN)
        with self._lock:
            while self._released:
                seg, off, freed = self._released.popleft()
                seg.free(off, freed)
            for seg in self.segments:
                off = seg.allocate(size)
                if off is not None:
                    break
            else:
                seg_size = max(_MIN_SEGMENT, _round_up(size, _SEGMENT_ROUND))
                seg = Segment(seg_size, len(self.segments))
                self.segments.append(seg)
                off = seg.allocate(size)
        block = np.ndarray((size,), dtype=np.uint8, buffer=seg.shm.buf, offset=off)
        weakref.finalize(block, self._free, seg, off, size)
        return block[:nbytes]

    def _free(self, seg: Segment, off: int, size: int) -> None:
        # A finalizer runs wherever a collection happens, also inside allocate_bytes on this
        # thread with self._lock held (taking the lock here deadlocked there): it only queues the
        # block (deque.append is atomic).
        self._released.append((seg, off, size))

    def find(self, address: int, nbytes: int) -> tuple[Segment, int] | None:
        """(segment, byte offset) when [address, address + nbytes) lies in a segment."""
        for seg in self.segments:
            if seg.contains(address, nbytes):
                return seg, address - seg.base
        return None

    def close(self) -> None:
        with self._lock:
            for seg in self.segments:
                seg.unlink()


_pool: Pool | None = None
_pool_lock = threading.Lock()


def pool() -> Pool:
    """This process's pool (a forked child gets a new one: it never allocates from its
    parent's segments)."""
    global _pool
    with _pool_lock:
        if _pool is None or _pool.pid != os.getpid():
            _pool = Pool()
        return _pool


@atexit.register
def _unlink_segments() -> None:
    if _pool is not None and _pool.pid == os.getpid():
        _pool.close()


def shared_empty(shape, dtype="bfloat16", *, like: str = "torch"):
    """An uninitialized array in shared memory that the host backend reads zero-copy.

    ``dtype``: a torch dtype, a numpy dtype or a name ("bfloat16", "float32", "int32",
    "int64", "uint8"). ``like``: "torch" (a CPU tensor; the default when torch is
    installed) or "numpy" (numpy bfloat16 needs the ml_dtypes package).
    """
    if isinstance(shape, int):
        shape = (shape,)
    shape = tuple(int(s) for s in shape)
    dt = _dtypes.resolve(dtype)
    nbytes = dt.itemsize * int(np.prod(shape, dtype=np.int64))
    block = pool().allocate_bytes(nbytes)
    if like == "numpy" or not _dtypes.have_torch():
        return block.view(dt.numpy_dtype()).reshape(shape)
    if like != "torch":
        raise ValueError(f"like must be 'torch' or 'numpy', got {like!r}")
    import torch

    return torch.from_numpy(block).view(dt.torch_dtype()).view(shape)


def to_shared(array):
    """A copy of ``array`` (a CPU tensor or numpy array) in shared memory, of the same
    kind, dtype and shape; returned as is when it already lives there."""
    if is_shared(array):
        return array
    if _dtypes.is_torch_tensor(array):
        if array.device.type != "cpu":
            raise ValueError("to_shared takes CPU tensors (CUDA tensors are shared as they are)")
        out = shared_empty(array.shape, array.dtype, like="torch")
        out.copy_(array)
        return out
    array = np.asarray(array)
    out = shared_empty(array.shape, array.dtype, like="numpy")
    np.copyto(out, array)
    return out


def is_shared(array) -> bool:
    """True when ``array`` (CPU tensor or numpy array) lies in this process's pool."""
    address, nbytes = _dtypes.host_address(array)
    if address is None:
        return False
    return pool().find(address, nbytes) is not None
