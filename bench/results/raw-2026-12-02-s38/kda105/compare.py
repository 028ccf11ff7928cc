"""Sets the H200's gate-gradient parts of one head (KDA_STUDY_DUMP, branch kda-dump-study) beside
the host emulator's for the same inputs (EMU_STUDY_DUMP, which also holds the exact dgl from the
FP64 reference and dA_log's weights w = x lb sigmoid'(x)), chunk by chunk (B = 2 documents of T).
Usage: python3 compare.py GPU_DUMP EMU_DUMP T"""
import sys

import numpy as np

NAMES = ["X1 (Q Gam)", "X2 (Kb)", "X3 (row pairs)", "X4 (col pairs)", "Y", "X", "z", "dgl", "dx"]


def load(fn, with_exact):
    with open(fn, "rb") as f:
        tok, H, head = np.frombuffer(f.read(24), dtype=np.int64)
        parts = np.frombuffer(f.read(9 * tok * 128 * 4), dtype=np.float32).reshape(9, tok, 128)
        extra = None
        if with_exact:
            extra = np.frombuffer(f.read(2 * tok * 128 * 8), dtype=np.float64).reshape(2, tok, 128)
    return int(tok), int(H), int(head), parts.astype(np.float64), extra


def assemble(parts, T):
    """dgl_t = sum_{s >= t} X_s + sum_{s < t} Y_s + z per chunk of 64, in FP64."""
    tok = parts.shape[1]
    out = np.zeros((tok, 128))
    pair = np.zeros((tok, 128))
    for d0 in range(0, tok, T):
        for c0 in range(d0, d0 + T, 64):
            c1 = min(c0 + 64, d0 + T)
            X, Y, z = parts[5, c0:c1], parts[4, c0:c1], parts[6, c0:c1]
            P = parts[2, c0:c1] + parts[3, c0:c1]
            rev = np.cumsum(X[::-1], axis=0)[::-1]
            ex = np.vstack([np.zeros((1, 128)), np.cumsum(Y, axis=0)[:-1]])
            out[c0:c1] = rev + ex + z
            pair[c0:c1] = np.cumsum(P[::-1], axis=0)[::-1]
    return out, pair


def main():
    gtok, gH, ghead, g, _ = load(sys.argv[1], False)
    etok, eH, ehead, e, extra = load(sys.argv[2], True)
    T = int(sys.argv[3])
    assert (gtok, gH, ghead) == (etok, eH, ehead), "different problems"
    dgl_ex, w = extra
    sabs = np.sum(np.abs(w * dgl_ex))
    exact = np.sum(w * dgl_ex)
    print(f"head {ghead}: exact dA_log {exact:.6e}, sum|terms| {sabs:.3e}")
    for name, p in (("H200", g), ("emulator", e)):
        err = np.sum(w * p[7]) - exact
        werr = np.sum(np.abs(w * (p[7] - dgl_ex))) / sabs
        a, _ = assemble(p, T)
        print(f"  {name:9s} via its dgl: error {err:+.3e} ({err / abs(exact):+.2e} rel), "
              f"weighted |dgl error| / sum|terms| {werr:.2e}, FP64-assembled from its parts: "
              f"error {np.sum(w * a) - exact:+.3e}")
    print("  part: weighted |H200 - emulator| / weighted |emulator| (weights |w|, then with the "
          "reverse chunk sums that dgl takes of it)")
    aw = np.abs(w)
    for c, name in enumerate(NAMES):
        d = np.sum(aw * np.abs(g[c] - e[c])) / max(np.sum(aw * np.abs(e[c])), 1e-300)
        print(f"    {name:15s} {d:.2e}")
    # The contribution of each part's H200-emulator difference to dA_log through dgl.
    print("  dA_log difference (H200 - emulator) carried by each part through dgl:")
    for c in (0, 1, 2, 3, 4, 6):
        h = e.copy()
        h[c] = g[c]
        h[5] = h[0] + h[1] + h[2] + h[3]
        a_h, _ = assemble(h, T)
        a_e, _ = assemble(e, T)
        print(f"    {NAMES[c]:15s} {np.sum(w * (a_h - a_e)):+.3e}")


main()
