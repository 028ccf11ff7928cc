"""On the GPU, against a daemon with its default per-GPU workspace (256 MiB): the cakegrad.nn
modules train at shapes whose workspaces exceed the daemon's, because they bring their own.

* A direct KDA forward without a workspace at (B=1, T=8192, H=32) must be refused with
  ResourceExhaustedError (so the daemon's workspace really is too small for this shape);
* KDACore, MHCBlock and ShortConvolution at large shapes then run forward and backward
  through their shared workspaces, twice, with bitwise equal outputs and gradients;
* KDACore's output and gradients equal, bit for bit, the direct calls given explicit
  workspaces of exactly the queried size.

    python tests/gpu/python/module_workspaces.py --address unix:/tmp/cakegrad.sock
Prints one line per check and MODULE_WORKSPACES PASSED / FAILED last.
"""

from __future__ import annotations

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, os.path.join(REPO, "client", "python"))

import torch  # noqa: E402
from torch import nn  # noqa: E402

import cakegrad  # noqa: E402
import cakegrad.nn as cnn  # noqa: E402
from cakegrad._workspace import allocate  # noqa: E402
from cakegrad.kda_backward import (RecurrentKDABackwardWorkspace,  # noqa: E402
                                   recurrent_kda_backward, recurrent_kda_forward)

failures: list[str] = []


def check(ok: bool, what: str) -> None:
    print(f"{'ok  ' if ok else 'FAIL'} {what}", flush=True)
    if not ok:
        failures.append(what)


def same(a, b) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype and torch.equal(
        a.contiguous().view(torch.uint8), b.contiguous().view(torch.uint8))


def run_twice(name, make_inputs, module, dev):
    """Forward + backward of module twice on the same inputs; returns the first run's
    (output, input grads, parameter grads) after checking the second run's bits."""
    runs = []
    for _ in range(2):
        inputs = [t.detach().clone().requires_grad_(t.is_floating_point()) for t in make_inputs]
        module.zero_grad(set_to_none=True)
        out = module(*inputs)
        out = out[0] if isinstance(out, tuple) else out
        w = torch.randn(out.shape, generator=torch.Generator(dev).manual_seed(7),
                        device=dev)
        (out.float() * w).sum().backward()
        if dev == "cuda":
            torch.cuda.synchronize()
        grads = [t.grad for t in inputs if t.requires_grad]
        pgrads = [p.grad.clone() for p in module.parameters()]
        runs.append((out.detach(), grads, pgrads))
    (o1, g1, p1), (o2, g2, p2) = runs
    finite = all(torch.isfinite(t.float()).all() for t in (o1, *g1, *p1))
    bits = same(o1, o2) and all(same(a, b) for a, b in zip(g1 + p1, g2 + p2))
    check(finite, f"{name}: output and gradients finite")
    check(bits, f"{name}: two runs bitwise equal")
    return runs[0]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--address", required=True)
    parser.add_argument("--cpu_smoke", action="store_true",
                        help="tiny shapes on CPU tensors against a host-backend daemon: checks "
                             "this script, not the workspaces")
    args = parser.parse_args()
    client = cakegrad.connect(args.address)
    torch.manual_seed(0)
    dev = "cpu" if args.cpu_smoke else "cuda"
    small = args.cpu_smoke

    B, T, H = (1, 70, 2) if small else (1, 8192, 32)
    dims = dict(tokens=B * T, heads=H, batch=B, num_docs=0)
    need_fwd = client.workspace_size("kda_forward", **dims)
    need_bwd = client.workspace_size("kda_backward", **dims)
    print(f"kda (1, {T}, {H}) workspace: forward {need_fwd} B, backward {need_bwd} B")
    q, k, v, g = (torch.randn(B, T, H, 128, device=dev).bfloat16() for _ in range(4))
    beta = torch.randn(B, T, H, device=dev).bfloat16()
    core = cnn.KDACore(H, device=dev)
    params = (core.A_log.detach(), core.dt_bias.detach())
    if small:
        print("skip direct kda_forward without a workspace: the host backend has no workspace "
              "of its own to refuse it")
    else:
        try:
            recurrent_kda_forward(q, k, v, g, beta, *params)
            check(False, "direct kda_forward without a workspace is refused (it ran: the "
                         "daemon's workspace is not smaller than this shape needs)")
        except cakegrad.ResourceExhaustedError as e:
            check("workspace" in str(e), f"direct kda_forward without a workspace refused: {e}")

    o, (dq, dk, dv, dg, dbeta), (dA, ddt) = run_twice(f"KDACore ({B}, {T}, {H})",
                                                       [q, k, v, g, beta], core, dev)
    o_direct, _ = recurrent_kda_forward(q, k, v, g, beta, *params,
                                        workspace=allocate(need_fwd, dev))
    check(same(o, o_direct), "KDACore output == direct forward with an exact-size workspace")
    do = (torch.randn(o.shape, generator=torch.Generator(dev).manual_seed(7), device=dev)
          ).bfloat16()
    direct = recurrent_kda_backward(q, k, v, g, beta, *params, None, do, None,
                                    workspace=RecurrentKDABackwardWorkspace(dev))
    check(all(same(a, b) for a, b in zip((dq, dk, dv, dg, dbeta, dA, ddt), direct[:7])),
          "KDACore gradients == direct backward with its own workspace")
    del o, dq, dk, dv, dg, dbeta, direct, q, k, v, g, beta

    T_mhc, C = (9, 256) if small else (65536, 4096)
    print(f"mhc_backward_finish (T={T_mhc}, C={C}) workspace: "
          f"{client.workspace_size('mhc_backward_finish', tokens=T_mhc, channels=C)} B")
    block = cnn.MHCBlock(nn.Identity(), C, device=dev)
    X = torch.randn(T_mhc, 4, C, device=dev).bfloat16()
    run_twice(f"MHCBlock (T={T_mhc}, C={C})", [X], block, dev)
    del X

    S, C = (40, 24) if small else (65536, 12288)
    print(f"conv1d_backward (S={S}, C={C}) workspace: "
          f"{client.workspace_size('conv1d_backward', tokens=S, channels=C)} B")
    conv = cnn.ShortConvolution(C, bias=True, device=dev)
    cu = torch.tensor([0, S // 60, S // 60, S * 3 // 5, S], dtype=torch.int32, device=dev)
    x = torch.randn(S, C, device=dev).bfloat16()
    run_twice(f"ShortConvolution (S={S}, C={C})", [x, cu], conv, dev)

    print(f"MODULE_WORKSPACES {'FAILED' if failures else 'PASSED'}"
          + (f": {len(failures)} checks failed" if failures else ""))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
