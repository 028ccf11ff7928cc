"""Writes diag98's timing-only variants of kernels/cuda/mhc_forward.cu into DIR (argv[1])."""
import pathlib
import sys

out = pathlib.Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)
src = pathlib.Path("kernels/cuda/mhc_forward.cu").read_text()
SQ = """          MmaBf16(sqa[n], b[n].x, 0u, b[n].y, 0u, b[n].x, b[n].y);
          MmaBf16(sqa[n], b[n].z, 0u, b[n].w, 0u, b[n].z, b[n].w);"""
MMA = """#pragma unroll
          for (int mt = 0; mt < Tr::kMTiles; ++mt) {
            MmaBf16(acc[n][mt], fa[gi][mt][0].x, fa[gi][mt][1].x, fa[gi][mt][0].y, fa[gi][mt][1].y,
                    b[n].x, b[n].y);
            MmaBf16(acc[n][mt], fa[gi][mt][0].z, fa[gi][mt][1].z, fa[gi][mt][0].w, fa[gi][mt][1].w,
                    b[n].z, b[n].w);
          }"""
U = "        if (t < T) __stcs(reinterpret_cast<uint4*>(U + t * C + ch0 + 8 * c8), Pack8(u));"
for s in (SQ, MMA, U):
    assert src.count(s) == 1
no_sq = src.replace(SQ, "          if constexpr (!kWithU) {\n" + SQ + "\n          }")
(out / "nosq.cu").write_text(no_sq)
keep_loads = ("          if constexpr (kWithU) {\n            acc[n][0][0] += __uint_as_float(b[n].x ^ "
              "b[n].y ^ b[n].z ^ b[n].w ^ fa[gi][0][0].x);\n          } else {\n" + MMA +
              "\n          }")
(out / "nomma.cu").write_text(no_sq.replace(MMA, keep_loads))
(out / "nou.cu").write_text(src.replace(U, U.replace("t < T", "t < 0")))

# diag99: the X buffer refilled by the MMA warps right after its MMAs (as forward_stats does),
# the U warps reading whatever the buffer then holds (wrong U by design): the time the with-U
# kernel would take if the U warps kept their X in registers and released the buffer at once.
LOOP = """      if (next) multiply(s + 1);
      sync();  // wpart holds stage s + 1
"""
REFILL_U = """    if (utid == 0) {
      const int64_t sn = s + Tr::kStages;"""
WAIT_U = """    // Already complete (the MMA warps saw it); makes the tensor copy's data visible here.
    MbarWait(&full_bar[s % Tr::kStages], static_cast<uint32_t>((s / Tr::kStages) & 1));
    const unsigned char* xs = xbuf"""
FIRST = """      multiply(0);
      sync();
"""
for s in (LOOP, REFILL_U, WAIT_U, FIRST):
    assert src.count(s) == 1, s
early = (src.replace(LOOP, LOOP + "      if (next) stage_x(s + 1 + Tr::kStages);\n")
         .replace(FIRST, FIRST + "      stage_x(Tr::kStages);\n")
         .replace(REFILL_U, REFILL_U.replace("utid == 0", "utid < 0"))
         .replace(WAIT_U, WAIT_U.replace("    MbarWait(", "    if (utid < 0) MbarWait(")))
(out / "early.cu").write_text(early)
(out / "early_nomma.cu").write_text(early.replace(SQ, "          if constexpr (!kWithU) {\n" + SQ +
                                                  "\n          }").replace(MMA, keep_loads))
