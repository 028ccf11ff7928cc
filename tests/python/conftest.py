"""Fixtures: a real daemon on a temporary socket with --backend=host, and a client.

CAKEGRAD_DAEMON names the daemon binary (default: build/server/cakegradd in the repo); the
tests skip, saying so, when it does not exist. CAKEGRAD_DAEMON=fake runs
tests/python/fake_daemon.py instead (client development without the C++ build; it proves
nothing about the daemon).

A test whose operator the daemon answers UNIMPLEMENTED (an operator family whose host
reference has not landed) is reported as xfailed, naming UNIMPLEMENTED, not failed.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(REPO, "client", "python"))
sys.path.insert(0, HERE)

import cakegrad  # noqa: E402


def _daemon_command(socket_path: str) -> list[str]:
    binary = os.environ.get("CAKEGRAD_DAEMON", os.path.join(REPO, "build", "server", "cakegradd"))
    if binary == "fake":
        return [sys.executable, os.path.join(HERE, "fake_daemon.py"), f"--socket={socket_path}",
                "--backend=host"] + [f"--unimplemented={u}" for u in
                                     filter(None, [os.environ.get("CAKEGRAD_FAKE_UNIMPLEMENTED")])]
    if not os.path.exists(binary):
        pytest.skip(f"daemon binary {binary} not found: build it (cmake --build build --target "
                    "cakegradd) or set CAKEGRAD_DAEMON to its path")
    return [binary, f"--socket={socket_path}", "--backend=host"]


@pytest.fixture(scope="session")
def daemon_address():
    """Starts one daemon for the test session; yields its address ("unix:PATH")."""
    with running_daemon() as (address, _):
        yield address


@contextlib.contextmanager
def running_daemon():
    """A daemon on a temporary socket for the duration of the block; yields (its address,
    its Popen)."""
    tmp = tempfile.mkdtemp(prefix="cakegrad-pytest-")
    socket_path = os.path.join(tmp, "cakegrad.sock")
    log_path = os.path.join(tmp, "daemon.log")
    log = open(log_path, "wb")
    proc = subprocess.Popen(_daemon_command(socket_path), stdout=log, stderr=subprocess.STDOUT)
    address = "unix:" + socket_path
    deadline = time.monotonic() + 60
    while True:
        if proc.poll() is not None:
            log.close()
            with open(log_path, errors="replace") as f:
                pytest.fail(f"daemon exited with {proc.returncode} at start:\n{f.read()[-4000:]}")
        if os.path.exists(socket_path):
            try:
                cakegrad.Client(address, connect_timeout=5).close()
                break
            except cakegrad.DaemonUnavailableError:
                pass
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"daemon did not listen on {socket_path} within 60 s (log: {log_path})")
        time.sleep(0.1)
    try:
        yield address, proc
    finally:
        stop_daemon(proc)
        log.close()
        with open(log_path, errors="replace") as f:
            tail = f.read()[-4000:]
        shutil.rmtree(tmp, ignore_errors=True)
    # SIGTERM must end the daemon cleanly; a sanitized build (tools/ci/sanitize_tests.sh) also
    # exits non-zero here when it found leaks at exit.
    if proc.returncode != 0:
        pytest.fail(f"daemon exited with {proc.returncode} after SIGTERM:\n{tail}")


def stop_daemon(proc: subprocess.Popen) -> None:
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@pytest.fixture(scope="session")
def client(daemon_address):
    """The session-wide client; the test modules make it the default for each test."""
    c = cakegrad.connect(daemon_address, client_name="pytest")
    yield c
    c.close()


@pytest.fixture
def fresh_client(daemon_address):
    """A client of its own (its own session), closed after the test."""
    c = cakegrad.Client(daemon_address, client_name="pytest-fresh")
    yield c
    c.close()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if call.excinfo is not None and call.excinfo.errisinstance(cakegrad.UnimplementedError):
        report.outcome = "skipped"
        report.wasxfail = f"daemon answers UNIMPLEMENTED: {call.excinfo.value}"
