"""Issue 6 item 4, on the H200: two trainer processes share one daemon (--backend=cuda).

Each trainer runs --steps optimizer steps of a small model that uses all three modules of
cakegrad.nn (an mHC block whose branch is ShortConvolution -> projections -> KDACore ->
projection, over packed documents) on CUDA tensors, and at every step checks:

* per operator, SPEC.md's tolerances: each module's gradients (parameters and inputs)
  against the float64 PyTorch implementation of SPEC's math (tests/python/torch_reference.py)
  evaluated on the very BF16/FP32 tensors the daemon received and the upstream gradients
  it was given (captured with hooks);
* end to end: every parameter gradient against the same model computed in pure PyTorch in
  float64 from the same parameters and data. The daemon's model rounds activations and
  gradients to BF16 between operators, so this check uses a looser bound (E2E_TOL).

When both trainers have exited, GetServerStatus must report no regions (rank 0 exits
normally, its client closing the session; rank 1 leaves with os._exit, so only the dropped
session stream tells the daemon).

Every step also records a digest of each tensor the daemon produced and of every gradient, so
that two runs can be compared bit for bit (tests/gpu/python/compare_trainer_runs.py). With
--gpus split each trainer gets its own GPU (CUDA_VISIBLE_DEVICES set to one GPU, so each
sees it as cuda:0 while the daemon knows it by another ordinal: routing is by UUID); with
--gpus same (the default) both share the first visible GPU.

    python tests/gpu/python/two_trainers.py --address unix:/tmp/cakegrad.sock --steps 20 \
        --out $OUT [--gpus split]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, os.path.join(REPO, "client", "python"))
sys.path.insert(0, os.path.join(REPO, "tests", "python"))

C, H, T = 256, 2, 96
DOCS = [0, 17, 18, 60, 96]  # packed documents, one of a single token
MHC_OPTS = dict(rms_eps=1e-5, hc_eps=1e-6, sinkhorn_iters=20)
# End to end, the BF16 roundings between operators move the gradients of the float64 model:
# measured with a float64 daemon (the host backend) about 6e-3 rel-L2 over all parameters
# together, up to ~7e-2 for a small reduction such as dA_log at some steps. These bounds
# catch structural errors (a missing term, a wrong sign or order: O(1)); the per-operator
# checks hold SPEC's tolerances.
E2E_TOL_ALL = 2e-2
E2E_TOL_EACH = 0.25


def digest(t) -> str:
    """The first 16 hex digits of the SHA-256 of a tensor's bytes."""
    import torch

    raw = t.detach().contiguous().cpu().reshape(-1).view(torch.uint8).numpy().tobytes()
    return hashlib.sha256(raw).hexdigest()[:16]


def rel(a, b) -> float:
    import torch_reference as ref

    return ref.rel_l2(a, b)


# -- the model -------------------------------------------------------------------------------

def build_model(device):
    import torch
    from torch import nn

    import cakegrad.nn as cnn

    class Branch(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = cnn.ShortConvolution(C, bias=True, device=device)
            self.proj = nn.Parameter(torch.randn(4 * H * 128 + H, C, device=device) / C ** 0.5)
            self.kda = cnn.KDACore(H, device=device)
            self.out = nn.Parameter(torch.randn(C, H * 128, device=device) / (H * 128) ** 0.5)
            self.captured = {}

        def forward(self, U, cu_seqlens):
            cap = self.captured
            cap["U"] = U
            U.register_hook(lambda g: cap.__setitem__("dU", g))
            h = self.conv(U, cu_seqlens)
            cap["h"] = h
            h.register_hook(lambda g: cap.__setitem__("dh", g))
            p = h.float() @ self.proj.t()
            q, k, v, g = (t.bfloat16().contiguous() for t in
                          p[:, :4 * H * 128].reshape(T, 4, H, 128).unbind(1))
            beta = p[:, 4 * H * 128:].bfloat16().contiguous()
            kda_in = [t[None] for t in (q, k, v, g, beta)]
            cap["kda_in"] = kda_in
            cap["dkda_in"] = [None] * 5
            for i, t in enumerate(kda_in):
                t.register_hook(lambda grad, i=i: cap["dkda_in"].__setitem__(i, grad))
            o = self.kda(*kda_in, cu_seqlens=cu_seqlens)
            cap["o"] = o
            o.register_hook(lambda grad: cap.__setitem__("do", grad))
            B = o.reshape(T, H * 128).float() @ self.out.t()
            cap["B"] = B.bfloat16()  # what the block hands the daemon (it casts to BF16)
            # The block's dB (BF16), widened exactly by the cast's backward.
            B.register_hook(lambda grad: cap.__setitem__("dB", grad))
            return B

    branch = Branch()
    block = cnn.MHCBlock(branch, C, device=device, **MHC_OPTS)
    with torch.no_grad():
        block.base.add_(torch.randn(24, device=device) * 0.3)
    return block, branch


def reference_grads(block, branch, X, cu, target):
    """Every parameter's gradient of the same loss, the model in float64 (CPU)."""
    import torch

    import torch_reference as ref
    from torch_reference import f64

    P = {name: f64(p).requires_grad_() for name, p in block.named_parameters()}
    X64 = f64(X)
    mhc = ref.mhc_forward(X64, P["fn"], P["scale"], P["base"], **MHC_OPTS)
    U = mhc["U"]
    h = torch.nn.functional.silu(ref.conv1d_preactivation(
        U, P["branch.conv.weight"], cu, P["branch.conv.bias"]))
    p = h @ P["branch.proj"].t()
    q, k, v, g = p[:, :4 * H * 128].reshape(T, 4, H, 128).unbind(1)
    beta = p[:, 4 * H * 128:]
    o, _ = ref.kda_forward(q[None], k[None], v[None], g[None], beta[None],
                           P["branch.kda.A_log"], P["branch.kda.dt_bias"], None, cu)
    B = o.reshape(T, H * 128) @ P["branch.out"].t()
    Y = ref.mhc_forward(X64, P["fn"], P["scale"], P["base"], B, **MHC_OPTS)["Y"]
    loss = ((Y - f64(target)) ** 2).mean()
    loss.backward()
    return {name: t.grad for name, t in P.items()}, loss.item()


def per_operator_errors(block, branch, X, dY, cu):
    """Each module's gradients against SPEC's float64 math on the tensors it was given.
    Returns {check: (rel-L2, tolerance)}."""
    import torch

    import torch_reference as ref
    from cakegrad.cake_mhc_train import cake_mhc_train_forward_stats

    cap = branch.captured
    out = {}
    # conv1d ("bf16" SiLU' policy): x = U, dy = dh.
    dx, dw, db = ref.conv1d_backward(cap["U"], branch.conv.weight, cu, cap["dh"],
                                     branch.conv.bias, "bf16")
    # U's only consumer is the conv: its gradient dU is the conv's dx.
    out["conv1d dx"] = (rel(cap["dU"], dx), 2e-3)
    out["conv1d dweight"] = (rel(branch.conv.weight.grad, dw), 1e-4)
    out["conv1d dbias"] = (rel(branch.conv.bias.grad, db), 1e-4)
    # KDA: the eight gradients (no initial state: dinitial_state unused, final state unused).
    grads = ref.kda_backward(*cap["kda_in"], branch.kda.A_log, branch.kda.dt_bias, None,
                             cap["do"], None, cu)
    for name, got, exact in zip(("dq", "dk", "dv", "dg", "dbeta"), cap["dkda_in"], grads[:5]):
        out[f"kda {name}"] = (rel(got, exact), 5e-3)
    out["kda dA_log"] = (rel(branch.kda.A_log.grad, grads[5]), 1e-4)
    out["kda ddt_bias"] = (rel(branch.kda.dt_bias.grad, grads[6]), 1e-4)
    # mHC backward_prepare + backward_finish on the saved record (forward_stats is bitwise
    # forward_prepare's), the block's dY and the branch's dU.
    with torch.no_grad():
        stats = cake_mhc_train_forward_stats(X, block.fn, block.scale, block.base, **MHC_OPTS)
    dB, grad_stats = ref.mhc_backward_prepare(X, dY, cap["B"], stats)
    dX, dfn, dscale, dbase = ref.mhc_backward_finish(X, dY, cap["dU"], block.fn, block.scale,
                                                     block.base, stats, grad_stats, **MHC_OPTS)
    out["mhc dB"] = (rel(cap["dB"], dB), 4e-3)
    out["mhc dX"] = (rel(cap["dX"], dX), 4e-3)
    out["mhc dfn"] = (rel(block.fn.grad, dfn), 1e-5)
    out["mhc dscale"] = (rel(block.scale.grad, dscale), 1e-5)
    out["mhc dbase"] = (rel(block.base.grad, dbase), 1e-5)
    return out


def trainer(rank: int, address: str, steps: int, out_dir: str, device_kind: str) -> int:
    import torch

    import cakegrad
    from cakegrad import _cuda

    torch.manual_seed(1000 + rank)
    # The float64 references run on the CPU as many small ops; two trainers with one thread per
    # core each oversubscribe the machine (15 s of checking per step on the H200 host).
    torch.set_num_threads(max(1, min(4, (os.cpu_count() or 2) // 4)))
    client = cakegrad.connect(address, client_name=f"two_trainers-rank{rank}")
    preflight = {}
    if device_kind == "cuda":
        device = torch.device("cuda", 0)
        torch.cuda.set_device(device)
        preflight_uuid = _cuda.gpu_uuid(0)
        print(f"rank {rank} on GPU {preflight_uuid} (CUDA_VISIBLE_DEVICES="
              f"{os.environ.get('CUDA_VISIBLE_DEVICES', '')})", flush=True)
        # Preflight: the driver's IPC handle is torch's _share_cuda_() handle (DESIGN.md).
        probe = torch.empty(1 << 20, device=device)
        mem = _cuda.describe(probe)
        kind, handle, offset, _ = _cuda.torch_share_handle(probe)
        preflight = {"handle_equal": handle == mem.handle, "kind": kind.decode(),
                     "offset_equal":
                         probe.untyped_storage().data_ptr() - mem.region_start == offset,
                     "gpu": preflight_uuid}
        print(f"rank {rank} preflight {preflight}", flush=True)
    else:
        device = torch.device("cpu")  # a host-backend daemon: checks the script, not CUDA

    block, branch = build_model(device)
    opt = torch.optim.AdamW(block.parameters(), lr=1e-3)
    cu = torch.tensor(DOCS, dtype=torch.int32, device=device)
    log = open(os.path.join(out_dir, f"trainer{rank}.jsonl"), "w")
    failures = 0
    for step in range(steps):
        t_wall0 = time.time()
        X = (torch.randn(T, 4, C, device=device)).bfloat16().requires_grad_()
        target = torch.randn(T, 4, C, device=device).bfloat16()
        opt.zero_grad(set_to_none=True)
        cap = branch.captured
        Y = block(X, cu)
        Y.register_hook(lambda grad: cap.__setitem__("dY", grad))
        loss = ((Y.float() - target.float()) ** 2).mean()
        t0 = time.perf_counter()
        loss.backward()
        if device.type == "cuda":
            torch.cuda.synchronize()
        step_s = time.perf_counter() - t0
        cap["dX"] = X.grad
        t1 = time.perf_counter()
        per_op = per_operator_errors(block, branch, X.detach(), cap["dY"], cu)
        ref_grads, ref_loss = reference_grads(block, branch, X.detach(), cu, target)
        check_s = time.perf_counter() - t1
        named = list(block.named_parameters())
        e2e = {name: rel(p.grad, ref_grads[name]) for name, p in named}
        e2e["all"] = rel(torch.cat([p.grad.double().flatten().cpu() for _, p in named]),
                         torch.cat([ref_grads[name].flatten() for name, _ in named]))
        # What the daemon computed (forward and backward of every operator) and every gradient.
        digests = {"loss": digest(loss), "Y": digest(Y), "conv1d y": digest(cap["h"]),
                   "kda o": digest(cap["o"]), "conv1d dx": digest(cap["dU"]),
                   "mhc dX": digest(cap["dX"]), "mhc dB": digest(cap["dB"])}
        digests.update({f"kda {n}": digest(t) for n, t in
                        zip(("dq", "dk", "dv", "dg", "dbeta"), cap["dkda_in"])})
        digests.update({f"grad {name}": digest(p.grad) for name, p in block.named_parameters()})
        bad = [k for k, (e, tol) in per_op.items() if not (e <= tol)]
        bad += [f"e2e {k}" for k, e in e2e.items()
                if not (e <= (E2E_TOL_ALL if k == "all" else E2E_TOL_EACH))]
        failures += bool(bad)
        record = {"rank": rank, "step": step, "t_start": t_wall0, "t_end": time.time(),
                  "gpu": preflight.get("gpu", ""), "digests": digests,
                  "loss": loss.item(), "ref_loss": ref_loss,
                  "backward_s": step_s, "check_s": check_s, "regions": len(client.list_regions()),
                  "per_op": {k: [e, tol] for k, (e, tol) in per_op.items()}, "e2e": e2e,
                  "failed": bad}
        log.write(json.dumps(record) + "\n")
        log.flush()
        worst = max(per_op.items(), key=lambda kv: kv[1][0] / kv[1][1])
        print(f"rank {rank} step {step:2d} loss {loss.item():.5f} (fp64 {ref_loss:.5f}) "
              f"regions {record['regions']} worst/tol {worst[0]} {worst[1][0]:.2e}/"
              f"{worst[1][1]:.0e} e2e all {e2e['all']:.2e} "
              f"backward {step_s:.3f} s check {check_s:.1f} s "
              f"{'FAIL ' + ','.join(bad) if bad else 'ok'}", flush=True)
        opt.step()
    summary = {"rank": rank, "steps": steps, "failed_steps": failures, "preflight": preflight}
    with open(os.path.join(out_dir, f"trainer{rank}.json"), "w") as f:
        json.dump(summary, f)
    ok = failures == 0 and all(v is True or v == "c" or k == "gpu" for k, v in preflight.items())
    print(f"rank {rank} done: {summary}", flush=True)
    return 0 if ok else 1


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--address", required=True)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--out", default="/tmp/cakegrad-out")
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"],
                        help="cpu: against a --backend=host daemon, to check the script itself")
    parser.add_argument("--gpus", default="same", choices=["same", "split"],
                        help="split: trainer r alone on the r-th visible GPU")
    parser.add_argument("--rank", type=int, default=None, help="internal: run one trainer")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    if args.rank is not None:
        rc = trainer(args.rank, args.address, args.steps, args.out, args.device)
        if args.rank == 1:
            sys.stdout.flush()
            os._exit(rc)  # no atexit: the daemon learns of the end from the dropped stream
        return rc

    # Trainer 0 uses SYNC completion, trainer 1 EVENT completion (no host waits), unless the
    # environment already chose one for both.
    visible = [d for d in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if d]

    def env(rank: int) -> dict:
        e = dict(os.environ)
        e.setdefault("CAKEGRAD_COMPLETION", "event" if rank == 1 else "sync")
        if args.gpus == "split":
            e["CUDA_VISIBLE_DEVICES"] = visible[rank] if visible else str(rank)
        elif visible:
            e["CUDA_VISIBLE_DEVICES"] = visible[0]
        return e

    procs = [subprocess.Popen([sys.executable, __file__, "--address", args.address,
                               "--steps", str(args.steps), "--out", args.out,
                               "--device", args.device, "--rank", str(r)], env=env(r))
             for r in (0, 1)]
    rcs = [p.wait() for p in procs]
    import cakegrad

    with cakegrad.Client(args.address, client_name="two_trainers-check") as checker:
        deadline = time.monotonic() + 15
        while True:
            status = checker.server_status()
            if status.regions == 0 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
    print(f"trainers exited {rcs}; daemon status after: sessions={status.sessions} "
          f"regions={status.regions} mapped_bytes={status.mapped_bytes} "
          f"served={status.requests_served} failed={status.requests_failed}")
    ok = rcs == [0, 0] and status.regions == 0
    print("TWO_TRAINERS " + ("PASSED" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
