"""The mHC forward (prepare + finish) and its autograd backward in PyTorch, eager and
torch.compile, timed on the GPU at the shapes of bench/kernels/mhc_bench.cu (T in {4096, 16384},
C = 4096, sinkhorn_iters = 20): the baseline the CUDA kernels are compared with.

    python3 bench/mhc_torch_ref.py            (on the GPU machine)
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_util import median_ms  # noqa: E402

C = 4096
ITERS = 20
RMS_EPS = 1e-5
HC_EPS = 1e-6


def forward(X, fn, scale, base, B):
    """Returns (U, Y) exactly as SPEC.md section 1 writes them, FP32 math, BF16 outputs."""
    T = X.shape[0]
    x = X.reshape(T, 4 * C).float()
    r = torch.rsqrt((x * x).sum(-1) / (4 * C) + RMS_EPS)
    z = x @ fn.t()
    m = r[:, None] * z
    g = torch.cat([scale[0].expand(4), scale[1].expand(4), scale[2].expand(16)])
    l = m * g + base
    pre = torch.sigmoid(l[:, :4]) + HC_EPS
    post = 2 * torch.sigmoid(l[:, 4:8])
    P = torch.softmax(l[:, 8:].reshape(T, 4, 4), -1) + HC_EPS
    P = P / (P.sum(-2, keepdim=True) + HC_EPS)
    for _ in range(ITERS - 1):
        P = P / (P.sum(-1, keepdim=True) + HC_EPS)
        P = P / (P.sum(-2, keepdim=True) + HC_EPS)
    Xf = X.float()
    U = (pre[:, :, None] * Xf).sum(1).bfloat16()
    Y = (torch.einsum("tab,tac->tbc", P, Xf) + post[:, :, None] * B.float()[:, None, :]).bfloat16()
    return U, Y


def main():
    torch.backends.cuda.matmul.allow_tf32 = False
    dev = "cuda"
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}")
    compiled = torch.compile(forward)
    print("| variant | T | forward (prepare+finish) ms | forward+backward ms |")
    print("|---|---|---|---|")
    for T in (4096, 16384):
        X = torch.randn(T, 4, C, device=dev).bfloat16().requires_grad_(False)
        B = torch.randn(T, C, device=dev).bfloat16()
        fn = (torch.randn(24, 4 * C, device=dev) * 1e-2)
        scale = torch.rand(3, device=dev) * 0.99 + 0.01
        base = torch.randn(24, device=dev)
        dU = torch.randn(T, C, device=dev).bfloat16()
        dY = torch.randn(T, 4, C, device=dev).bfloat16()
        for name, f in (("eager", forward), ("torch.compile", compiled)):
            with torch.no_grad():
                fwd = median_ms(lambda: f(X, fn, scale, base, B))

            def step():
                Xg = X.detach().float().requires_grad_(True)
                params = [t.detach().requires_grad_(True) for t in (fn, scale, base)]
                Bg = B.detach().float().requires_grad_(True)
                U, Y = f(Xg.bfloat16(), *params, Bg.bfloat16())
                torch.autograd.backward([U, Y], [dU, dY])

            both = median_ms(step, warmup=2, reps=10)
            print(f"| {name} | {T} | {fwd:.3f} | {both:.3f} |")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
