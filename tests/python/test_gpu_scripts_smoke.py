"""The GPU-only scripts under tests/gpu/python, run here on tiny CPU shapes against the
host-backend daemon, so that a change to the package cannot leave them broken until the next
device run."""

from __future__ import annotations

import os
import subprocess
import sys

from conftest import REPO


def test_module_workspaces_script_cpu_smoke(daemon_address):
    script = os.path.join(REPO, "tests", "gpu", "python", "module_workspaces.py")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [os.path.join(REPO, "client", "python"), os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, script, "--address", daemon_address, "--cpu_smoke"],
                          capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "MODULE_WORKSPACES PASSED" in done.stdout, done.stdout
