"""The public Triton KDA kernels, timed and checked on the same GPU as ours.

Issue #5 compares our chunked KDA backward with "the best public Triton kernels (chunked, BF16
states)" and asks for both their time and their accuracy in the results file. This script
measures them instead of quoting them: flash-linear-attention's `chunk_kda` (the `fla-core`
wheel, carried to the GPU machine because nothing can be fetched there) at kda_bench.cu's three
cases, with SPEC section 3's gate (lower_bound * sigmoid(exp(A_log) * (g + dt_bias)), FLA's
`safe_gate`), sigmoid(beta), L2-normalised q and k (eps 1e-6 inside the root in both), value-first
FP32 states, an initial state and dfinal_state, the issue's input distributions.

For each case it prints the median forward and backward times (CUDA events, after warm-up) and
every output's rel-L2 against an FP64 reference of SPEC's recurrence run on the same GPU
(`Fp64Reference`: checkpointed segments, so that T = 32768 fits), with SPEC's limits (BF16 outputs
5e-3, FP32 outputs 1e-4). The reference is checked against tests/python/torch_reference.py on the
CPU by `--self-check` (no FLA needed).

    python3 bench/kda_public_bench.py --json $OUT/public.json     # on the GPU machine
    python3 bench/kda_public_bench.py --self-check                 # anywhere (CPU)

tools/gpu/public_call.sh is the device call that runs it beside our own bench.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time

import torch
from torch.utils.checkpoint import checkpoint

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_util import print_errors, rel_l2, times_ms, write_rows  # noqa: E402

F64 = torch.float64
DIM = 128
LOWER_BOUND = -5.0
SCALE = 1.0 / math.sqrt(DIM)

# kda_bench.cu's cases: (name, T, H, documents); several documents are packed with equal lengths.
CASES = [
    ("B1 T8192 H32", 8192, 32, 1),
    ("B1 T32768 H16", 32768, 16, 1),
    ("16 docs x 2048 H16 (packed)", 32768, 16, 16),
]
BF16_OUT = ("o", "dq", "dk", "dv", "dg", "dbeta")
FP32_OUT = ("final_state", "dA_log", "ddt_bias", "dinitial_state")
LIMIT = {**{n: 5e-3 for n in BF16_OUT}, **{n: 1e-4 for n in FP32_OUT}}
# The differentiable inputs, in the order of their gradients in GRADS.
INPUTS = ("q", "k", "v", "g", "beta", "A_log", "dt_bias", "initial_state")
GRADS = ("dq", "dk", "dv", "dg", "dbeta", "dA_log", "ddt_bias", "dinitial_state")


def make_inputs(T: int, H: int, docs: int, seed: int, device) -> dict:
    """Issue #5's distributions: q, k, v, g, beta, do, dfinal_state ~ N(0, 1); A_log ~ U(-1, 1);
    dt_bias ~ N(0, 0.5); initial_state ~ N(0, 0.1). B = 1; `docs` equal documents when > 1."""
    gen = torch.Generator(device="cpu").manual_seed(seed)

    def normal(shape, std=1.0, dtype=torch.bfloat16):
        return (torch.randn(shape, generator=gen) * std).to(dtype).to(device)

    inp = {
        "q": normal((1, T, H, DIM)),
        "k": normal((1, T, H, DIM)),
        "v": normal((1, T, H, DIM)),
        "g": normal((1, T, H, DIM)),
        "beta": normal((1, T, H)),
        "do": normal((1, T, H, DIM)),
        "A_log": (torch.rand(H, generator=gen) * 2 - 1).to(device),
        "dt_bias": normal((H, DIM), 0.5, torch.float32),
        "initial_state": normal((docs, H, DIM, DIM), 0.1, torch.float32),
        "dfinal_state": normal((docs, H, DIM, DIM), 1.0, torch.float32),
    }
    inp["cu_seqlens"] = (torch.arange(docs + 1, dtype=torch.int64) * T // docs).to(device)
    return inp


def documents(inp: dict) -> list[tuple[int, int]]:
    return list(zip(inp["cu_seqlens"][:-1].tolist(), inp["cu_seqlens"][1:].tolist()))


def _segment(S, decay, bt, kh, v, qh):
    """SPEC's per-token recurrence over one segment of one document; S is [H, V, K]."""
    outs = []
    for t in range(decay.shape[0]):
        S = S * decay[t].unsqueeze(1)
        u = bt[t].unsqueeze(1) * (v[t] - torch.einsum("hvk,hk->hv", S, kh[t]))
        S = S + u.unsqueeze(2) * kh[t].unsqueeze(1)
        outs.append(SCALE * torch.einsum("hvk,hk->hv", S, qh[t]))
    return S, torch.stack(outs)


def Fp64Reference(inp: dict, segment: int = 256) -> dict:
    """o, final_state and the eight gradients of sum(do o) + sum(dfinal_state final_state), all
    in FP64 on the inputs' device. Segments of `segment` tokens are checkpointed, so memory holds
    one segment's per-token states at a time."""
    x = {n: inp[n].to(F64).requires_grad_() for n in INPUTS}
    a = torch.exp(x["A_log"]).unsqueeze(1)
    gate = LOWER_BOUND * torch.sigmoid(a * (x["g"][0] + x["dt_bias"]))
    decay = torch.exp(gate)
    bt = torch.sigmoid(x["beta"][0])
    qh = x["q"][0] / torch.sqrt((x["q"][0] ** 2).sum(-1, keepdim=True) + 1e-6)
    kh = x["k"][0] / torch.sqrt((x["k"][0] ** 2).sum(-1, keepdim=True) + 1e-6)
    v = x["v"][0]
    outs, finals = [], []
    for n, (a, e) in enumerate(documents(inp)):
        S = x["initial_state"][n]
        for s in range(a, e, segment):
            s1 = min(e, s + segment)
            S, o = checkpoint(_segment, S, decay[s:s1], bt[s:s1], kh[s:s1], v[s:s1], qh[s:s1],
                              use_reentrant=False)
            outs.append(o)
        finals.append(S)
    o = torch.cat(outs).unsqueeze(0)
    final = torch.stack(finals)
    loss = (o * inp["do"].to(F64)).sum() + (final * inp["dfinal_state"].to(F64)).sum()
    grads = torch.autograd.grad(loss, [x[n] for n in INPUTS])
    out = {"o": o.detach(), "final_state": final.detach()}
    out.update(dict(zip(GRADS, (g.detach() for g in grads))))
    return out


class Fla:
    """flash-linear-attention's chunk_kda with SPEC's options; leaves keep their grads."""

    def __init__(self):
        from fla.ops.kda import chunk_kda  # imported here: --self-check needs no FLA

        self.chunk_kda = chunk_kda

    @staticmethod
    def leaves(inp: dict) -> dict:
        return {n: inp[n].detach().clone().requires_grad_() for n in INPUTS}

    def forward(self, inp: dict, leaves: dict):
        docs = inp["initial_state"].shape[0]
        o, final = self.chunk_kda(
            q=leaves["q"], k=leaves["k"], v=leaves["v"], g=leaves["g"], beta=leaves["beta"],
            scale=SCALE, initial_state=leaves["initial_state"], output_final_state=True,
            use_qk_l2norm_in_kernel=True, use_gate_in_kernel=True,
            use_beta_sigmoid_in_kernel=True, safe_gate=True, lower_bound=LOWER_BOUND,
            state_v_first=True, cu_seqlens=inp["cu_seqlens"] if docs > 1 else None,
            A_log=leaves["A_log"], dt_bias=leaves["dt_bias"].view(-1))
        return o, final

    @staticmethod
    def backward(inp: dict, leaves: dict, o, final, retain: bool) -> dict:
        grads = torch.autograd.grad([o, final], [leaves[n] for n in INPUTS],
                                    [inp["do"], inp["dfinal_state"]], retain_graph=retain)
        return dict(zip(GRADS, grads))


def run_case(name, T, H, docs, args, fla) -> dict:
    inp = make_inputs(T, H, docs, args.seed + T * H + docs, "cuda")
    row = {"case": name, "T": T, "H": H, "docs": docs}
    t0 = time.time()
    leaves = fla.leaves(inp)
    o, final = fla.forward(inp, leaves)
    grads = fla.backward(inp, leaves, o, final, retain=True)
    torch.cuda.synchronize()
    row["first_call_s"] = round(time.time() - t0, 1)  # Triton compilation and autotuning
    row["fwd_ms"], row["fwd_queued_ms"] = times_ms(lambda: fla.forward(inp, leaves), args.warmup,
                                                   args.reps)
    row["bwd_ms"], row["bwd_queued_ms"] = times_ms(
        lambda: fla.backward(inp, leaves, o, final, retain=True), args.warmup, args.reps)
    if not args.no_accuracy:
        t0 = time.time()
        ref = Fp64Reference(inp, args.segment)
        torch.cuda.synchronize()
        row["reference_s"] = round(time.time() - t0, 1)
        got = {"o": o.detach(), "final_state": final.detach()}
        got.update({n: g.reshape(ref[n].shape) for n, g in grads.items()})
        row["rel_l2"] = {n: rel_l2(got[n], ref[n]) for n in (*BF16_OUT, *FP32_OUT)}
    return row


def print_row(row: dict) -> None:
    print(f"{row['case']}: forward {row['fwd_ms']:.3f} ms ({row['fwd_queued_ms']:.3f} queued), "
          f"backward {row['bwd_ms']:.3f} ms ({row['bwd_queued_ms']:.3f} queued); first call "
          f"{row['first_call_s']} s, reference {row.get('reference_s', '-')} s")
    print_errors(row.get("rel_l2", {}), LIMIT)


def self_check() -> int:
    """The segmented FP64 reference against tests/python/torch_reference.py (CPU, small shapes,
    packed documents, segments shorter than a document)."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                    "python"))
    import torch_reference as tr

    worst = 0.0
    for T, H, docs, seg in ((37, 2, 1, 16), (50, 1, 3, 7), (9, 2, 3, 64)):
        inp = make_inputs(T, H, docs, 7 + T, "cpu")
        ref = Fp64Reference(inp, seg)
        cu = inp["cu_seqlens"] if docs > 1 else None
        o, final = tr.kda_forward(inp["q"], inp["k"], inp["v"], inp["g"], inp["beta"],
                                  inp["A_log"], inp["dt_bias"], inp["initial_state"], cu)
        want = dict(zip(GRADS, tr.kda_backward(
            inp["q"], inp["k"], inp["v"], inp["g"], inp["beta"], inp["A_log"], inp["dt_bias"],
            inp["initial_state"], inp["do"], inp["dfinal_state"], cu)))
        want.update({"o": o, "final_state": final})
        for n, w in want.items():
            e = rel_l2(ref[n], w)
            worst = max(worst, e)
            print(f"T={T} H={H} docs={docs} segment={seg} {n}: {e:.1e}")
    print(f"worst rel-L2 {worst:.1e}")
    return 0 if worst < 1e-12 else 1


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--self-check", action="store_true", help="check the FP64 reference (CPU)")
    p.add_argument("--cases", default="012", help="which of the three cases, e.g. 02")
    p.add_argument("--reps", type=int, default=20, help="timed calls per median")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--segment", type=int, default=256, help="reference checkpoint length")
    p.add_argument("--seed", type=int, default=20261202)
    p.add_argument("--no-accuracy", action="store_true", help="times only")
    p.add_argument("--json", help="write the rows here as well")
    args = p.parse_args()
    if args.self_check:
        return self_check()
    if not torch.cuda.is_available():
        print("kda_public_bench: no CUDA device; run it on the GPU machine (or --self-check)")
        return 2
    import fla

    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}, "
          f"fla {getattr(fla, '__version__', '?')}")
    import triton

    print(f"triton {triton.__version__}")
    fla_ops = Fla()
    rows = []
    for i, (name, T, H, docs) in enumerate(CASES):
        if str(i) not in args.cases:
            continue
        rows.append(run_case(name, T, H, docs, args, fla_ops))
        print_row(rows[-1])
        write_rows(args.json, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
