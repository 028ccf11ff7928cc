"""PyTorch timings of the conv1d (width 4) + SiLU math, for comparison with bench/kernels/conv1d_bench.

Same shapes as the CUDA bench (S=32768, C=4096 and S=65536, C=12288, 16 documents of random
lengths, packed), eager and torch.compile. The packed causal convolution is written with
shifted copies and per-token document masks; the backward is the explicit gradient formula
(dpre, dx, dweight, dbias), not autograd. Median of CUDA-event times after warm-up.

Run on the GPU machine: python3 bench/conv1d_torch_ref.py [--no-compile]
"""

import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_util import median_ms  # noqa: E402

WIDTH = 4
ITERS = 10
WARMUP = 3


def positions(cu, S):
    """Token index within its document, for every packed token."""
    idx = torch.arange(S, device=cu.device)
    doc = torch.searchsorted(cu[1:], idx, right=True)
    return idx - cu[doc]


def shift_down(t, s):
    """t[i - s] (zero for i < s)."""
    return torch.nn.functional.pad(t, (0, 0, s, 0))[: t.shape[0]] if s else t


def shift_up(t, s):
    """t[i + s] (zero past the end)."""
    return torch.nn.functional.pad(t, (0, 0, 0, s))[s:] if s else t


def preactivation(x, w, b, pos):
    xf = x.float()
    pre = b.expand_as(xf).clone() if b is not None else torch.zeros_like(xf)
    for k in range(WIDTH):
        s = WIDTH - 1 - k
        pre = pre + w[:, k] * shift_down(xf, s) * (pos >= s).unsqueeze(1)
    return pre


def forward(x, w, b, pos):
    return torch.nn.functional.silu(preactivation(x, w, b, pos)).to(torch.bfloat16)


def backward(x, w, b, dy, pos, round_pre):
    xf = x.float()
    pre = preactivation(x, w, b, pos)
    p = pre.to(torch.bfloat16).float() if round_pre else pre
    sg = torch.sigmoid(p)
    dpre = dy.float() * sg * (1 + p * (1 - sg))
    dx = torch.zeros_like(dpre)
    dw = []
    for k in range(WIDTH):
        s = WIDTH - 1 - k
        # dpre[t + s] belongs to t's document iff pos[t + s] >= s.
        ahead_ok = shift_up((pos >= s).unsqueeze(1).float(), s)
        dx = dx + w[:, k] * shift_up(dpre, s) * ahead_ok
        dw.append((dpre * shift_down(xf, s) * (pos >= s).unsqueeze(1)).sum(0))
    db = dpre.sum(0) if b is not None else None
    return dx.to(torch.bfloat16), torch.stack(dw, 1), db


def time_us(fn):
    return median_ms(fn, WARMUP, ITERS) * 1e3


def main():
    compile_too = "--no-compile" not in sys.argv
    dev = torch.device("cuda")
    gen = torch.Generator().manual_seed(20261129)
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}")
    print("| impl | op | S | C | policy | median us | GB/s (floor bytes) |")
    print("|------|----|---|---|--------|-----------|--------------------|")
    for S, C in ((32768, 4096), (65536, 12288)):
        cuts = sorted(torch.randint(0, S + 1, (15,), generator=gen).tolist())
        cu = torch.tensor([0] + cuts + [S], device=dev)
        pos = positions(cu, S)
        x = torch.randn(S, C, generator=gen).to(torch.bfloat16).to(dev)
        dy = torch.randn(S, C, generator=gen).to(torch.bfloat16).to(dev)
        w = (0.5 * torch.randn(C, WIDTH, generator=gen)).to(dev)
        b = (0.5 * torch.randn(C, generator=gen)).to(dev)
        n = S * C
        impls = [("eager", forward, backward)]
        if compile_too:
            impls.append(("compile", torch.compile(forward), torch.compile(backward)))
        for name, fwd, bwd in impls:
            t0 = time.time()
            us = time_us(lambda: fwd(x, w, b, pos))
            print(f"| {name} | forward | {S} | {C} | - | {us:.0f} | {4 * n / us / 1e3:.0f} |",
                  flush=True)
            for policy in ("bf16", "fp32"):
                if name == "compile" and policy == "fp32":
                    continue  # one compiled backward per shape keeps the run short
                us = time_us(lambda: bwd(x, w, b, dy, pos, policy == "bf16"))
                print(f"| {name} | backward | {S} | {C} | {policy} | {us:.0f} | "
                      f"{6 * n / us / 1e3:.0f} |", flush=True)
            print(f"  ({name} at S={S} C={C} took {time.time() - t0:.0f} s including compile)",
                  flush=True)
        del x, dy
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
