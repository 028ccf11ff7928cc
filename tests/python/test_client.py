"""Connection, session and shared-memory behaviour of the package."""

from __future__ import annotations

import gc
import os
import socket
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
import torch

import cakegrad
from cakegrad.cake_causal_conv1d_train import cake_causal_conv1d_train_forward


def test_daemon_not_running_is_a_clean_error(tmp_path):
    missing = tmp_path / "nobody.sock"
    start = time.monotonic()
    with pytest.raises(cakegrad.DaemonUnavailableError) as err:
        cakegrad.connect(str(missing))
    assert time.monotonic() - start < 5
    assert "not running" in str(err.value) and str(missing) in str(err.value)
    assert err.value.code_name == "UNAVAILABLE"
    assert isinstance(err.value, ConnectionError)


def test_stale_socket_is_a_clean_error(tmp_path):
    path = str(tmp_path / "stale.sock")
    s = socket.socket(socket.AF_UNIX)
    s.bind(path)  # bound, never listening: connecting is refused
    try:
        with pytest.raises(cakegrad.DaemonUnavailableError, match="nothing listens"):
            cakegrad.Client("unix:" + path)
    finally:
        s.close()


def test_address_from_environment(daemon_address, monkeypatch):
    monkeypatch.setenv("CAKEGRAD_ADDRESS", daemon_address)
    assert cakegrad.resolve_address() == daemon_address
    with cakegrad.Client() as c:
        assert c.target == daemon_address and c.session_id


def test_address_forms(monkeypatch):
    monkeypatch.delenv("CAKEGRAD_ADDRESS", raising=False)
    assert cakegrad.resolve_address() == "unix:" + cakegrad.DEFAULT_SOCKET
    assert cakegrad.resolve_address("/tmp/a.sock") == "unix:/tmp/a.sock"
    assert cakegrad.resolve_address("unix:///tmp/a.sock") == "unix:///tmp/a.sock"


def test_capabilities_and_status(client):
    caps = client.capabilities()
    assert caps.backend == "host"
    names = {op.name for op in caps.operators}
    assert {"conv1d_forward", "conv1d_backward"} <= names
    assert client.server_status().sessions >= 1


def test_regions_are_cached_and_released_with_the_session(fresh_client):
    cakegrad.set_default_client(fresh_client)
    x = cakegrad.shared_empty((8, 4), "bfloat16")
    x[...] = 1
    w = cakegrad.to_shared(torch.rand(4, 4))
    for _ in range(3):
        cake_causal_conv1d_train_forward(x, w, [0, 8])
    regions = fresh_client.list_regions()
    assert 1 <= len(regions) <= len(cakegrad.shm.pool().segments)
    before = fresh_client.server_status().regions
    fresh_client.close()
    with cakegrad.Client(fresh_client.target) as other:
        deadline = time.monotonic() + 5
        while other.server_status().regions > before - len(regions):
            assert time.monotonic() < deadline, "regions not released with the session"
            time.sleep(0.05)


def test_closed_client_raises_session_closed(fresh_client):
    fresh_client.close()
    cakegrad.set_default_client(fresh_client)
    with pytest.raises(cakegrad.SessionClosedError, match="connect"):
        cake_causal_conv1d_train_forward(torch.zeros(2, 3, dtype=torch.bfloat16),
                                         torch.zeros(3, 4), [0, 2])


def test_daemon_going_away_ends_the_session():
    from conftest import running_daemon, stop_daemon

    with running_daemon() as (address, proc):
        c = cakegrad.Client(address, client_name="pytest-goes-away")
        x = cakegrad.to_shared(torch.zeros(4, 3, dtype=torch.bfloat16))
        w = cakegrad.to_shared(torch.zeros(3, 4))
        cakegrad.set_default_client(c)
        try:
            cake_causal_conv1d_train_forward(x, w, [0, 4])
            stop_daemon(proc)
            with pytest.raises(cakegrad.DaemonUnavailableError) as err:
                cake_causal_conv1d_train_forward(x, w, [0, 4])
            assert isinstance(err.value, cakegrad.SessionClosedError) or \
                err.value.code_name == "UNAVAILABLE"
        finally:
            cakegrad.set_default_client(None)
            c.close()


def test_unknown_region_is_not_found(client):
    with pytest.raises(cakegrad.NotFoundError):
        client.unregister_region(987654321)


def test_shared_memory_pool():
    t = cakegrad.shared_empty((3, 5), torch.float32)
    assert isinstance(t, torch.Tensor) and t.dtype == torch.float32 and cakegrad.is_shared(t)
    a = cakegrad.shared_empty(7, "int32", like="numpy")
    assert isinstance(a, np.ndarray) and a.dtype == np.int32 and cakegrad.is_shared(a)
    plain = torch.ones(4)
    assert not cakegrad.is_shared(plain)
    s = cakegrad.to_shared(plain)
    assert cakegrad.is_shared(s) and torch.equal(s, plain) and cakegrad.to_shared(s) is s
    assert not cakegrad.is_shared(np.ones(3))
    with pytest.raises(TypeError, match="not supported"):
        cakegrad.shared_empty(3, torch.float64)
    # Blocks come back to the pool when their arrays are collected.
    pool = cakegrad.shm.pool()
    seg_count = len(pool.segments)
    for _ in range(50):
        big = cakegrad.shared_empty((4 << 20,), "float32")  # 16 MiB
        del big
        gc.collect()
    assert len(pool.segments) <= seg_count + 1
    assert all(seg.name.startswith(f"cakegrad-{os.getpid()}-") for seg in pool.segments)


def test_block_freed_by_a_collection_inside_an_allocation(monkeypatch):
    """A garbage collection may run inside any allocation, also inside the pool's locked
    allocation on the same thread; a block it frees must not wait for that lock (it did, and the
    suite hung in test_shared_memory_pool). A private pool, so that a deadlock stays there."""
    pool = cakegrad.shm.Pool()
    real_allocate = cakegrad.shm.Segment.allocate

    def allocate_after_a_collection(self, nbytes):
        gc.collect()
        return real_allocate(self, nbytes)

    done = threading.Event()

    def allocate_twice():
        cycle = [pool.allocate_bytes(1024)]
        cycle.append(cycle)  # freed by a collection only
        del cycle
        pool.allocate_bytes(16)  # the collection runs in here, with the pool's lock held
        done.set()

    gc.disable()
    try:
        monkeypatch.setattr(cakegrad.shm.Segment, "allocate", allocate_after_a_collection)
        worker = threading.Thread(target=allocate_twice, daemon=True)
        worker.start()
        worker.join(30)
    finally:
        gc.enable()
        for seg in pool.segments:
            seg.unlink()
    assert done.is_set(), "an allocation deadlocked on a block freed by a collection inside it"


def test_cuda_tensor_to_host_daemon_is_refused(client):
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    cakegrad.set_default_client(client)
    x = torch.zeros(2, 3, dtype=torch.bfloat16, device="cuda")
    with pytest.raises(cakegrad.FailedPreconditionError, match="host backend"):
        cake_causal_conv1d_train_forward(x, torch.zeros(3, 4, device="cuda"), [0, 2])


def test_numpy_only_without_torch(daemon_address):
    """torch is optional: numpy arrays on the host backend need only numpy (+ ml_dtypes)."""
    pytest.importorskip("ml_dtypes")
    code = f"""
import sys
sys.modules["torch"] = None  # import torch now fails
import numpy as np, ml_dtypes, cakegrad
from cakegrad.cake_causal_conv1d_train import (cake_causal_conv1d_train_backward,
                                               cake_causal_conv1d_train_forward)
cakegrad.connect({daemon_address!r})
x = np.ones((6, 3), dtype=ml_dtypes.bfloat16)
w = np.full((3, 4), 0.25, dtype=np.float32)
y = cake_causal_conv1d_train_forward(x, w, [0, 2, 6])
dx, dw = cake_causal_conv1d_train_backward(x, w, np.array([0, 2, 6], np.int64), y)
assert isinstance(y, np.ndarray) and y.dtype == x.dtype and cakegrad.is_shared(y)
assert dw.dtype == np.float32 and dw.shape == (3, 4)
print("ok", float(y.astype(np.float32)[5, 0]))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert out.returncode == 0, out.stderr[-3000:]
    # y = silu(4 * 0.25) at a token with three predecessors in its document.
    assert abs(float(out.stdout.split()[1]) - 0.7311) < 1e-2


def test_completion_mode_comes_from_the_environment(monkeypatch):
    from cakegrad.client import completion_mode

    monkeypatch.delenv("CAKEGRAD_COMPLETION", raising=False)
    assert completion_mode() == "sync"
    monkeypatch.setenv("CAKEGRAD_COMPLETION", " EVENT ")
    assert completion_mode() == "event"
    monkeypatch.setenv("CAKEGRAD_COMPLETION", "async")
    with pytest.raises(ValueError, match="CAKEGRAD_COMPLETION must be sync or event"):
        completion_mode()


def test_event_ring_hands_out_each_slot_once():
    from cakegrad.client import EventRing

    ring = EventRing(ready=[object()] * 3, done=[object()] * 3)
    slots = {ring.acquire() for _ in range(3)}
    assert slots == {0, 1, 2}
    ring.release(1)
    assert ring.acquire() == 1
