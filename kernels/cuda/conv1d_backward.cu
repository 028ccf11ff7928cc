// Backward of the causal depthwise conv1d (width 4) + SiLU, two launches on the caller's stream:
//   1. the main kernel recomputes pre, writes dx and one FP32 partial row per token tile of
//      dweight[:, 0..3] and dbias into the workspace;
//   2. the reduce kernel, launched programmatically dependent on it (PDL), sums the partial rows
//      of every channel in a fixed order: FP32 under "bf16", FP64 under "fp32".
// Every sum runs in an order fixed by (S, C), so outputs are bitwise reproducible whatever the
// workspace held, the stream, or the vector width the pointers' alignment allowed.
#include <climits>

#include "conv1d_common.cuh"
#include "pdl_launch.h"

namespace cakegrad::kernels {
namespace conv1d {
namespace {

constexpr int kReduceThreads = 256;
constexpr int kReduceCols = 32;  // one warp-wide coalesced column strip per CTA
constexpr int kReduceGroups = kReduceThreads / kReduceCols;
static_assert(kReduceThreads % kReduceCols == 0 && kReduceCols == 32, "a warp per row group");

// SiLU'(p) = s (1 + p (1 - s)), s = sigmoid(p) from the SFU (exp's argument rounding plus a few
// ulps: ~1e-7 relative for the preactivations that occur, ~2e-8 on dweight's sums).
//
// "fp32" promises every dx within one BF16 ulp, and 1 + p (1 - s) cancels near its zero
// p0 = -1.27846454276...: s's error becomes a relative error of SiLU' beyond a BF16 ulp for
// |p - p0| < ~1e-5 (one dx element in ~47M on the H200, a document's last token, whose dx is a
// single term). Within 2^-5 of p0 the factor is its Taylor polynomial in d = p - p0
// (f'(p0) = 1 exactly), p0 carried as hi + lo so that d, and the factor, keep full relative
// precision (worst 2e-7 against 50-digit values); outside, the cancellation costs at most
// ~3e-6 relative. (The accurate sigmoid this policy used before cost five instructions per
// element and did not cure the cancellation; the kernel is issue-bound.)
// "bf16" reads SiLU' from a table instead (SiluGradFromTable).
constexpr float kSiluGradZeroHi = -1.278464556e+00f;
constexpr float kSiluGradZeroLo = 1.297928254e-08f;
constexpr float kSiluGradC2 = -1.089058518e-01f;
constexpr float kSiluGradC3 = -4.888293147e-02f;  // the d^4 term is below 2e-7 relative

__device__ __forceinline__ float SiluGrad(float p) {
  const float s = SigmoidFast(p);
  const float q = __fmaf_rn(-p, s, p);  // p (1 - s)
  const float d = __fadd_rn(__fadd_rn(p, -kSiluGradZeroHi), -kSiluGradZeroLo);
  const float poly = __fmaf_rn(d, __fmaf_rn(d, kSiluGradC3, kSiluGradC2), 1.0f);
  return fabsf(d) < 0x1p-5f ? __fmul_rn(s, __fmul_rn(d, poly)) : __fmaf_rn(s, q, s);
}

// "bf16": SiLU'(bf16(pre)) for V values from the shared-memory table (conv1d_traits.h), correctly
// rounded. The SFU sigmoid plus the Taylor form near SiLU''s zero cost ~14 instructions an
// element (the walk fell from 40.3 to 30.8 SASS instructions an element with this); here, per
// pair, the magnitudes' distances from kSiluTabLo are clamped by one 16x2 add-max and one min,
// and each half becomes a byte offset (the sign at bit 15 as it is, the distance times 4 below
// it): 7 instructions a pair.
template <int V>
__device__ __forceinline__ void SiluGradFromTable(const float (&pre)[V], const unsigned char* tab,
                                                  float (&g)[V]) {
  // Per 16-bit lane, as signed values (a magnitude is at most 0x7fff, so no lane overflows):
  // min(max(a - lo, 0), hi - lo) (VIADDMNMX, VIMNMX on sm_90).
  constexpr uint32_t kMinusLo2 = (0x10000u - kSiluTabLo) * 0x10001u;
  constexpr uint32_t kSpan2 = (kSiluTabHi - kSiluTabLo) * 0x10001u;
  static_assert(kSiluTabSignBytes == 0x8000, "the sign bit (15) as it is");
  static_assert((kSiluTabHalf - 1) * 4 < kSiluTabSignBytes, "16-bit offsets per half");
  if constexpr (V == 1) {
    const uint32_t u = __bfloat16_as_ushort(__float2bfloat16_rn(pre[0]));
    const uint32_t a = min(max(u & 0x7fffu, kSiluTabLo), kSiluTabHi);
    g[0] = *reinterpret_cast<const float*>(tab + (((a - kSiluTabLo) << 2) + (u & 0x8000u)));
  } else {
#pragma unroll
    for (int i = 0; i < V; i += 2) {
      const uint32_t u = PackBf16x2(pre[i], pre[i + 1]);
      const uint32_t d = __vmins2(__viaddmax_s16x2(u & 0x7fff7fffu, kMinusLo2, 0u), kSpan2);
      const uint32_t off = (d << 2) + (u & 0x80008000u);
      g[i] = *reinterpret_cast<const float*>(tab + (off & 0xffffu));
      g[i + 1] = *reinterpret_cast<const float*>(tab + (off >> 16));
    }
  }
}

// The paired route (16-byte aligned rows, C > 128 and a multiple of 128, so that a warp is one
// segment of 128 channels and every lane runs): the warp's two 256-byte rows of a step (x, dy)
// arrive by one 16-byte cp.async.cg per lane (lanes 0-15 x, 16-31 dy) instead of two 8-byte
// cp.async.ca per thread, into the same ring slots (lane l fills the 8-byte entries of threads
// 2 (l % 16) and 2 (l % 16) + 1), so the walk reads them as before. Half the copy instructions,
// no select of a safe address per tensor, and the rows bypass L1; each step pays a __syncwarp
// between RingWait and the reads. On the H200, with the marks sized by the tiling (a 164 KB
// carveout): 2% ("bf16") and 6-7% ("fp32") faster at 32768 x 4096; with the static marks (196 KB)
// "bf16" was 6% slower instead (conv1d_h200.md, 2026-11-29 22:53 UTC).
__device__ __forceinline__ void PairedCopy(void* dst, const uint16_t* src, bool valid,
                                           const uint16_t* safe) {
  CpAsyncZfill<16>(dst, valid ? src : safe, valid);
}

// One thread's walk over its segment (see the kernel). Step i handles token r = s0 - 3 + i: it
// asks the rings for the token of step i + kAhead (pointers xn, dyn), pushes x[r] into the
// window, computes dpre[r] (i >= 3), accumulates dweight/dbias (3 <= i < L + 3) and writes
// dx[r - 3] (i >= 6) at dxo. `lim`: steps whose token exists; `store_lim`: steps whose dx row
// exists. kBoundaries: whether a document starts inside the segment's window (rare with long
// documents); only then does a start reset the x window (dropping the terms before the
// document from pre and dweight) and mask dx's look-ahead terms from the next document. `tab`:
// SiLU''s table in shared memory ("bf16" only).
//
// kPaired (see PairedCopy): xn is this lane's half row (x or dy), pw its slot-0 destination; dyn
// is unused; one copy group, wait and warp barrier serve two steps.
template <int V, class Ring, bool kRoundPre, bool kBoundaries, bool kPaired>
__device__ __forceinline__ void BwdWalk(const uint32_t* marks, int mbase, int lim, int store_lim,
                                        int64_t C, const uint16_t* xn, const uint16_t* dyn,
                                        const uint16_t* x_safe, const uint16_t* dy_safe,
                                        uint16_t* dxo, const unsigned char* tab, Ring& xr,
                                        Ring& dyr, unsigned char* pw,
                                        const float (&w)[kConv1dWidth][V], const float (&b)[V],
                                        float (&acc)[kPartialRows][V]) {
  constexpr int L = BwdTraits::kSegLen;
  constexpr int kSteps = L + 2 * kHalo;
  constexpr int U = Ring::kUnroll;
  constexpr int D = Ring::kAhead;
  constexpr int R = Ring::kSlots;
  static_assert(!kPaired || U % 2 == 0, "the paired route waits once per two steps");
  // xw[i & 3] = x[r], dp[i & 3] = dpre[r]; `starts` holds the start bits of the last three
  // tokens.
  float xw[4][V] = {}, dp[4][V] = {};
  uint32_t starts = 0;
  // Not unrolled further: one U-step body indexes the windows and ring slots with constants.
#pragma unroll 1
  for (int g = 0; g < kSteps; g += U) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int i = g + u;
      const int j = u & 3;
      float xc[V], dyc[V];
      if constexpr (kPaired) {
        // The other lanes' copies into this thread's slots are visible after theirs landed (the
        // slot a step refills was read four steps earlier, before the previous barrier).
        if (u % 2 == 0) {
          RingWait<Ring, 2>();
          __syncwarp();
        }
      } else {
        RingWait<Ring>();
      }
      Unpack<V>(xr.Get(u % R), xc);
      Unpack<V>(dyr.Get(u % R), dyc);
      const bool next = i + D < lim;
      if constexpr (kPaired) {
        PairedCopy(pw + Ring::SlotOffset((u + D) % R), xn, next, x_safe);
      } else {
        xr.Issue((u + D) % R, xn, next, x_safe);
        dyr.Issue((u + D) % R, dyn, next, dy_safe);
        dyn += C;
      }
      if (!kPaired || u % 2 == 1) RingCommit<Ring>();
      xn += C;
      if (i >= kSteps) continue;
      if constexpr (kBoundaries) {
        const uint32_t st = MarkAt(marks, mbase + i);
        if (st) {
#pragma unroll
          for (int v = 0; v < V; ++v) {
            xw[(j + 1) & 3][v] = 0.0f;
            xw[(j + 2) & 3][v] = 0.0f;
            xw[(j + 3) & 3][v] = 0.0f;
          }
        }
        starts = ((starts << 1) | st) & 7u;
      }
#pragma unroll
      for (int v = 0; v < V; ++v) xw[j][v] = xc[v];
      if (i < kHalo) continue;

      // pre = b + w0 x[r-3] + w1 x[r-2] + w2 x[r-1] + w3 x[r], in this order (the tests replay
      // it on the host to tell the policy's rounding apart from kernel error).
      float pre[V];
#pragma unroll
      for (int v = 0; v < V; ++v) {
        pre[v] = __fmaf_rn(w[0][v], xw[(j + 1) & 3][v], b[v]);
        pre[v] = __fmaf_rn(w[1][v], xw[(j + 2) & 3][v], pre[v]);
        pre[v] = __fmaf_rn(w[2][v], xw[(j + 3) & 3][v], pre[v]);
        pre[v] = __fmaf_rn(w[3][v], xw[j][v], pre[v]);
      }
      float g[V];
      if constexpr (kRoundPre) {
        SiluGradFromTable<V>(pre, tab, g);
      } else {
#pragma unroll
        for (int v = 0; v < V; ++v) g[v] = SiluGrad(pre[v]);
      }
#pragma unroll
      for (int v = 0; v < V; ++v) dp[j][v] = __fmul_rn(dyc[v], g[v]);

      if (i < L + kHalo) {
#pragma unroll
        for (int v = 0; v < V; ++v) {
#pragma unroll
          for (int k = 0; k < kConv1dWidth; ++k) {
            acc[k][v] = __fmaf_rn(dp[j][v], xw[(j + 1 + k) & 3][v], acc[k][v]);
          }
          acc[kConv1dWidth][v] = __fadd_rn(acc[kConv1dWidth][v], dp[j][v]);
        }
      }
      if (i < 2 * kHalo) continue;
      // dx[r-3] = w3 dpre[r-3] + w2 dpre[r-2] + w1 dpre[r-1] + w0 dpre[r].
      if (i < store_lim) {
        // Terms of a token in a later document are dropped: starts at r-2, r-1, r.
        const bool t1 = !kBoundaries || (starts & 4u) == 0;
        const bool t2 = !kBoundaries || (starts & 6u) == 0;
        const bool t3 = !kBoundaries || starts == 0;
        float dx[V];
#pragma unroll
        for (int v = 0; v < V; ++v) {
          dx[v] = __fmul_rn(w[3][v], dp[(j + 1) & 3][v]);
          if (t1) dx[v] = __fmaf_rn(w[2][v], dp[(j + 2) & 3][v], dx[v]);
          if (t2) dx[v] = __fmaf_rn(w[1][v], dp[(j + 3) & 3][v], dx[v]);
          if (t3) dx[v] = __fmaf_rn(w[0][v], dp[j][v], dx[v]);
        }
        StoreRaw<V>(dxo, Pack<V>(dx));
      }
      dxo += C;
    }
  }
}

// Shared memory of the main kernel. The rings' slots are interleaved (slot s of x, then slot s
// of dy, kPairBytes a pair). Under "bf16" SiLU''s table comes first, its halves 32 KB apart
// (conv1d_traits.h), with as many slot pairs as fit between them (4 of 12 when V = 4) and the
// rest after it: the same 80 KB as the table (31.5 KB) after the rings at 16 KB apart. Under
// "fp32" the slots start at 0. The per-segment partial sums alias the start once the walk is done
// (after a block barrier), or, with no ring in shared memory, fill the table's gap. Then the
// tile's document-start marks, sized by the call's tiling: 35 words when C >= 256, where a
// static array sized for C <= 8 took 1089 (4.3 KB a CTA). Two "bf16" CTAs then fit a 164 KB
// shared-memory carveout (~161 KB with the per-CTA reserve) instead of 196 KB, which leaves the
// SM 92 KB of L1, not 60.
template <int V, class Ring, bool kRoundPre>
struct BwdSmem {
  static constexpr int kRingSlots = Ring::kAsync ? Ring::kSlots : 0;
  static constexpr int kSlotBytes = BwdTraits::kThreads * static_cast<int>(sizeof(RawT<V>));
  static constexpr int kPairBytes = 2 * kSlotBytes;
  static constexpr int kGapFit = kRoundPre ? kSiluTabGapBytes / kPairBytes : 0;
  static constexpr int kGapSlots = kGapFit < kRingSlots ? kGapFit : kRingSlots;
  static constexpr int kRing = kRoundPre ? kSiluTabGapBegin : 0;  // slot 0 of x
  static constexpr int kJump =
      kRoundPre ? kSiluTabSmemBytes - (kSiluTabGapBegin + kGapSlots * kPairBytes) : 0;
  using PlacedRing = typename Ring::template Placed<kPairBytes, kGapSlots, kJump>;
  static constexpr int kRingEnd =
      kRing + kRingSlots * kPairBytes + (kRingSlots > kGapSlots ? kJump : 0);
  static constexpr int kTabEnd = kRoundPre ? kSiluTabSmemBytes : 0;
  static constexpr int kRedBytes =
      kPartialRows * BwdTraits::kThreads * V * static_cast<int>(sizeof(float));
  static constexpr bool kRedInGap = kRoundPre && !Ring::kAsync;
  static constexpr int kRed = kRedInGap ? kSiluTabGapBegin : 0;
  static_assert(!kRedInGap || kRedBytes <= kSiluTabGapBytes, "the partial sums fit the gap");
  static constexpr int kEnd0 = kRingEnd > kTabEnd ? kRingEnd : kTabEnd;
  static constexpr int kEnd = kEnd0 > kRed + kRedBytes ? kEnd0 : kRed + kRedBytes;
  static constexpr int kMarks = (kEnd + 15) / 16 * 16;
};

// SiLU''s table (conv1d_traits.h), positive half then negative: data of the library, generated
// once (tools/gen/conv1d_silu_table.py, 60-digit arithmetic, one rounding), so that the backward
// stays two launches. A table kernel per call cost a third launch and, in FP64, rounded some
// entries twice (0.5 + 1.5 ulp ties near p = 0).
__device__ __align__(16) const float kSiluGradTable[kSiluTabEntries] = {
#include "conv1d_silu_table.inc"
};

// Starts the copy of SiLU''s table into shared memory (positive half at 0, negative half
// kSiluTabSignBytes further) as one cp.async group; the caller waits for it.
template <int kThreads>
__device__ __forceinline__ void CopySiluTable(unsigned char* tab, int tid) {
  constexpr int kHalfChunks = kSiluTabHalf / 4;  // 16-byte chunks of a half
  static_assert(kSiluTabHalf % 4 == 0, "a chunk never straddles the halves");
#pragma unroll
  for (int e = tid; e < 2 * kHalfChunks; e += kThreads) {
    const int at = e < kHalfChunks ? e * 16 : (e - kHalfChunks) * 16 + kSiluTabSignBytes;
    CpAsync<16>(tab + at, kSiluGradTable + 4 * e);
  }
  CpAsyncCommit();
}

// kPaired: the paired copy route (PairedCopy; the host picks it only when the rows are 16-byte
// aligned, tl.vx == 32 and C is a multiple of 128, so that a warp's lanes all run).
template <int V, class Ring, bool kRoundPre, int kMinBlocks, bool kPaired>
__global__ void __launch_bounds__(BwdTraits::kThreads, kMinBlocks)
    Conv1dBwdMainKernel(const __grid_constant__ Conv1dBwdParams p, const Tiling tl) {
  static_assert(!kPaired || (V == 4 && Ring::kAsync), "the paired route is V = 4 in shared memory");
  using Tr = BwdTraits;
  constexpr int L = Tr::kSegLen;
  // kHalo tokens of x history, L tokens of dpre + dweight, kHalo more dpre for dx's look-ahead.
  constexpr int kSteps = L + 2 * kHalo;
  constexpr int D = Ring::kAhead;
  extern __shared__ __align__(16) unsigned char smem[];
  using Sm = BwdSmem<V, Ring, kRoundPre>;
  using PRing = typename Sm::PlacedRing;
  float* red = reinterpret_cast<float*>(smem + Sm::kRed);
  unsigned char* tab = smem;
  uint32_t* marks = reinterpret_cast<uint32_t*>(smem + Sm::kMarks);
  const int mark_words = MarkWords(tl.tile_tokens);

  const bool cu64 = p.seqlens_dtype == DType::kINT64;
  CheckCuSeqlens(p.cu_seqlens, cu64, p.num_docs, p.S, p.device_status);

  const int tid = static_cast<int>(threadIdx.x);
  const int vi = tid & (tl.vx - 1);
  const int si = tid >> tl.vx_log2;
  const int64_t ctile = blockIdx.x % tl.num_ctiles;
  const int64_t ttile = blockIdx.x / tl.num_ctiles;
  const int64_t C = p.C, S = p.S;
  const int64_t c0 = (ctile * tl.vx + vi) * V;
  const int64_t t_tile = ttile * tl.tile_tokens;
  const int64_t s0 = t_tile + static_cast<int64_t>(si) * L;
  const bool run = c0 < C && s0 < S;
  // Tokens from s0 - kHalo on that exist (capped: only the comparison with step counts matters).
  const int avail = static_cast<int>(S - (s0 - kHalo) < kSteps ? S - (s0 - kHalo) : kSteps);

  // "bf16": SiLU''s table goes out first, as 16-byte cp.async copies in a group of its own, so
  // that its one L2 round trip overlaps the rings' first copies and the document search. A load /
  // store loop (four batches of round trips a thread) held every CTA at its start: ~4% of the
  // warps' stall samples at 32768 x 4096 (ncu, 2026-11-30).
  if constexpr (kRoundPre) CopySiluTable<Tr::kThreads>(tab, tid);

  // Step i's token lands in slot i % kSlots, asked for kAhead steps ahead; the first kAhead go
  // out before the document search so that their latency overlaps it.
  PRing xr, dyr;
  xr.Init(smem + Sm::kRing, tid);
  dyr.Init(smem + Sm::kRing + Sm::kSlotBytes, tid);
  const uint16_t* x_safe = p.x;  // a valid address for the zero-filling copies
  const uint16_t* dy_safe = p.dy;
  // kPaired: lane l copies channels [c_warp + 8 (l % 16), + 8) of x (l < 16) or dy.
  const int lane = tid & 31;
  const bool lane_x = lane < 16;
  const int64_t c_lane = ctile * tl.vx * V + (lane & 15) * 8;
  const uint16_t* lane_src = lane_x ? p.x : p.dy;
  unsigned char* pw = smem + Sm::kRing + (lane_x ? 0 : Sm::kSlotBytes) +
                      ((tid & ~31) + 2 * (lane & 15)) * static_cast<int>(sizeof(RawT<V>));
#pragma unroll
  for (int j = 0; j < D; ++j) {
    const int64_t r = s0 - kHalo + j;
    const int64_t off = (r >= 0 ? r : 0) * C;
    if constexpr (kPaired) {
      PairedCopy(pw + PRing::SlotOffset(j), lane_src + off + c_lane,
                 run && r >= 0 && j < avail && (lane_x || j >= kHalo), x_safe);
    } else {
      xr.Issue(j, p.x + off + c0, run && r >= 0 && j < avail, x_safe);
      dyr.Issue(j, p.dy + off + c0, run && j >= kHalo && j < avail, dy_safe);
    }
    if (!kPaired || j % 2 == 1) RingCommit<Ring>();
  }
  MarkDocStarts<Tr::kThreads>(p.cu_seqlens, cu64, p.num_docs, t_tile - kHalo,
                              tl.tile_tokens + 2 * kHalo, marks, mark_words);
  if constexpr (kRoundPre) {
    // The table's group is older than the rings' prefill groups: wait for it alone, then make
    // every thread's part visible to the whole CTA.
    constexpr int kPrefillGroups = Ring::kAsync ? (kPaired ? D / 2 : D) : 0;
    CpAsyncWait<kPrefillGroups>();
    __syncthreads();
  }

  float acc[kPartialRows][V] = {};  // dweight[:, 0..3], dbias over this segment
  if (run) {
    float w[kConv1dWidth][V], b[V];
    LoadChannelParams<V>(p.weight, p.weight_dtype, p.bias, p.bias_dtype, c0, true, w, b);
    const int mbase = si * L;
    const int lim = avail;
    const int store_lim = avail + kHalo < kSteps ? avail + kHalo : kSteps;
    // The token of step kAhead (kPaired: this lane's half row of x or dy).
    const uint16_t* xn =
        kPaired ? lane_src + (s0 - kHalo + D) * C + c_lane : p.x + (s0 - kHalo + D) * C + c0;
    const uint16_t* dyn = p.dy + (s0 - kHalo + D) * C + c0;
    uint16_t* dxo = p.dx + s0 * C + c0;  // the dx row of step 6
    if (AnyMark(marks, mbase + 1, kSteps - 1)) {
      BwdWalk<V, PRing, kRoundPre, true, kPaired>(marks, mbase, lim, store_lim, C, xn, dyn, x_safe,
                                                  dy_safe, dxo, tab, xr, dyr, pw, w, b, acc);
    } else {
      BwdWalk<V, PRing, kRoundPre, false, kPaired>(marks, mbase, lim, store_lim, C, xn, dyn, x_safe,
                                                   dy_safe, dxo, tab, xr, dyr, pw, w, b, acc);
    }
  }
  // The last copies of every thread (zero fills past the end included) land before the rings'
  // memory is reused for the partial sums.
  RingDrain<Ring>();
  // The reduce kernel may start launching; its griddepcontrol.wait still waits for this whole
  // grid (and its memory) to finish.
  cudaTriggerProgrammaticLaunchCompletion();
  if constexpr (Ring::kAsync) __syncthreads();
  static_assert(Ring::kAsync || Sm::kRedInGap || !kRoundPre, "no barrier: the sums alias nothing");

  // Sum the tile's segments per channel in segment order, then write the tile's partial rows.
  const int segs = tl.segs;
  const int cb = tl.vx * V;  // channels of this CTA
  const int rows = p.dbias != nullptr ? kPartialRows : kConv1dWidth;
#pragma unroll
  for (int k = 0; k < kPartialRows; ++k) {
#pragma unroll
    for (int v = 0; v < V; ++v) red[(k * segs + si) * cb + vi * V + v] = acc[k][v];
  }
  __syncthreads();
  float* ws = static_cast<float*>(p.workspace);
  for (int e = tid; e < rows * cb; e += Tr::kThreads) {
    const int k = e / cb, cc = e - k * cb;
    const int64_t c = ctile * cb + cc;
    if (c >= C) continue;
    // "fp32" promises ~2e-7 on dweight: its segment sum runs in FP64 too.
    using SegAcc = std::conditional_t<kRoundPre, float, double>;
    SegAcc sum = SegAcc(0);
    for (int s = 0; s < segs; ++s) sum += SegAcc(red[(k * segs + s) * cb + cc]);
    ws[(ttile * kPartialRows + k) * C + c] = static_cast<float>(sum);
  }
}

struct ReduceArgs {
  const float* ws;      // [num_ttiles][kPartialRows][C] FP32 partial rows
  void* dweight;        // [C, 4] output
  DType dweight_dtype;  // kFP32 or kBF16
  void* dbias;          // [C] output or nullptr
  DType dbias_dtype;    // kFP32 or kBF16
  int64_t C;            // channels
  int64_t num_ttiles;   // partial rows per column
  int32_t rows;         // 5 with dbias, else 4
};

template <typename Acc>
__device__ __forceinline__ void StoreGrad(void* out, DType dtype, int64_t i, Acc v) {
  const float f = static_cast<float>(v);
  if (dtype == DType::kBF16) {
    static_cast<uint16_t*>(out)[i] = __bfloat16_as_ushort(__float2bfloat16_rn(f));
  } else {
    static_cast<float*>(out)[i] = f;
  }
}

// Column j = k * C + c of the partial rows: each warp sums its block of tiles in order, then
// warp 0 adds the blocks in order. Acc is float ("bf16" policy) or double ("fp32").
template <typename Acc>
__global__ void __launch_bounds__(kReduceThreads)
    Conv1dBwdReduceKernel(const __grid_constant__ ReduceArgs a) {
  __shared__ Acc part[kReduceGroups][kReduceCols];
  const int lane = static_cast<int>(threadIdx.x) % kReduceCols;
  const int grp = static_cast<int>(threadIdx.x) / kReduceCols;
  const int64_t j = static_cast<int64_t>(blockIdx.x) * kReduceCols + lane;
  const int64_t cols = a.rows * a.C;
  const int64_t chunk = (a.num_ttiles + kReduceGroups - 1) / kReduceGroups;
  const int64_t t_begin = grp * chunk;
  const int64_t t_end = t_begin + chunk < a.num_ttiles ? t_begin + chunk : a.num_ttiles;
  const int64_t stride = kPartialRows * a.C;

  // Everything above ran while the main kernel was finishing; the partial rows are read only
  // after it completed.
  cudaGridDependencySynchronize();

  Acc sum = Acc(0);
  if (j < cols) {
    const float* src = a.ws + j;
    int64_t t = t_begin;
    for (; t + 4 <= t_end; t += 4) {
      const float v0 = __ldcg(src + t * stride), v1 = __ldcg(src + (t + 1) * stride);
      const float v2 = __ldcg(src + (t + 2) * stride), v3 = __ldcg(src + (t + 3) * stride);
      sum += Acc(v0);
      sum += Acc(v1);
      sum += Acc(v2);
      sum += Acc(v3);
    }
    for (; t < t_end; ++t) sum += Acc(__ldcg(src + t * stride));
  }
  part[grp][lane] = sum;
  __syncthreads();
  if (grp != 0 || j >= cols) return;
  Acc total = part[0][lane];
#pragma unroll
  for (int g = 1; g < kReduceGroups; ++g) total += part[g][lane];
  const int64_t k = j / a.C, c = j - k * a.C;
  if (k < kConv1dWidth) {
    StoreGrad(a.dweight, a.dweight_dtype, c * kConv1dWidth + k, total);
  } else {
    StoreGrad(a.dbias, a.dbias_dtype, c, total);
  }
}

// Turns the SiLU' policy into a template constant; the default branch names the value.
template <typename F>
Status DispatchPolicy(SiluGradPreactivation policy, F&& f) {
  switch (policy) {
    case SiluGradPreactivation::kBF16:
      return f(std::true_type{});
    case SiluGradPreactivation::kFP32:
      return f(std::false_type{});
    default:
      return InvalidArgument("conv1d: unsupported silu_grad_preactivation value " +
                             std::to_string(static_cast<int>(policy)));
  }
}

Status CheckBackwardArgs(const Conv1dBwdParams& p) {
  Status s = CheckCommonArgs(p.S, p.C, p.num_docs, p.x, p.weight, p.weight_dtype, p.bias,
                             p.bias_dtype, p.cu_seqlens, p.seqlens_dtype);
  if (!s.ok()) return s;
  if (p.dweight == nullptr || !IsParamDType(p.dweight_dtype)) {
    return InvalidArgument("conv1d: dweight must be a non-null float32 or bfloat16 [C, 4]");
  }
  if ((p.bias != nullptr) != (p.dbias != nullptr)) {
    return InvalidArgument(p.bias != nullptr ? "conv1d: bias is given, so dbias is required"
                                             : "conv1d: dbias needs bias");
  }
  if (p.dbias != nullptr && !IsParamDType(p.dbias_dtype)) {
    return InvalidArgument("conv1d: dbias must be float32 or bfloat16");
  }
  if (p.S > 0 && (p.dy == nullptr || p.dx == nullptr)) {
    return InvalidArgument("conv1d: dy and dx must be non-null when S > 0");
  }
  const int64_t need = BackwardWorkspaceBytes(p.S, p.C);
  if (need > 0 && (p.workspace == nullptr || p.workspace_bytes < need ||
                   !Aligned(p.workspace, alignof(float)))) {
    return InvalidArgument("conv1d: workspace needs " + std::to_string(need) +
                           " bytes (4-byte aligned), got " + std::to_string(p.workspace_bytes));
  }
  return OkStatus();
}

Status ZeroParameterGrads(const Conv1dBwdParams& p, cudaStream_t stream) {
  Status s =
      CudaStatus(cudaMemsetAsync(
                     p.dweight, 0,
                     static_cast<size_t>(p.C * kConv1dWidth * DTypeBytes(p.dweight_dtype)), stream),
                 "zeroing dweight");
  if (!s.ok() || p.dbias == nullptr) return s;
  return CudaStatus(
      cudaMemsetAsync(p.dbias, 0, static_cast<size_t>(p.C * DTypeBytes(p.dbias_dtype)), stream),
      "zeroing dbias");
}

// The paired route (PairedCopy) on 16-byte aligned rows: every warp must be one segment of
// 32 x 4 channels (vx == 32, so C > 128) with all of them present.
bool PairedRouteFits(const Conv1dBwdParams& p) {
  constexpr int64_t kWarpChannels = 32 * 4;
  return MakeTiling<BwdTraits>(p.S, p.C, 4).vx == 32 && p.C % kWarpChannels == 0;
}

// Both launches of one backward call for one kernel configuration.
template <int V, class Ring, int kMinBlocks, bool kPaired = false>
Status LaunchBackward(const Conv1dBwdParams& p, cudaStream_t stream) {
  return DispatchPolicy(p.policy, [&](auto round_pre) -> Status {
    constexpr bool kRoundPre = decltype(round_pre)::value;
    using Acc = std::conditional_t<kRoundPre, float, double>;
    const Tiling tl = MakeTiling<BwdTraits>(p.S, p.C, V);
    const int64_t blocks = tl.num_ctiles * tl.num_ttiles;
    if (blocks > INT_MAX) return InvalidArgument("conv1d: S * C too large for one launch");
    const int smem = BwdSmem<V, Ring, kRoundPre>::kMarks +
                     MarkWords(tl.tile_tokens) * static_cast<int>(sizeof(uint32_t));
    auto* kernel = Conv1dBwdMainKernel<V, Ring, kRoundPre, kMinBlocks, kPaired>;
    if (smem > 40 * 1024) {  // near or beyond the default 48 KB (this kernel has no static part)
      // Per call (not once): the attribute belongs to the device current now.
      Status a = CudaStatus(
          cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem),
          "backward main kernel shared memory");
      if (!a.ok()) return a;
    }
    kernel<<<static_cast<unsigned>(blocks), BwdTraits::kThreads, smem, stream>>>(p, tl);
    Status launched = CudaStatus(cudaGetLastError(), "backward main kernel launch");
    if (!launched.ok()) return launched;

    const ReduceArgs ra{static_cast<const float*>(p.workspace),
                        p.dweight,
                        p.dweight_dtype,
                        p.dbias,
                        p.dbias_dtype,
                        p.C,
                        tl.num_ttiles,
                        p.dbias != nullptr ? kPartialRows : kConv1dWidth};
    cudaLaunchAttribute attr;
    const cudaLaunchConfig_t cfg = ProgrammaticLaunchConfig(
        dim3(static_cast<unsigned>((ra.rows * p.C + kReduceCols - 1) / kReduceCols)),
        dim3(kReduceThreads), 0, stream, &attr);
    return CudaStatus(cudaLaunchKernelEx(&cfg, Conv1dBwdReduceKernel<Acc>, ra),
                      "backward reduce kernel launch (PDL)");
  });
}

}  // namespace
}  // namespace conv1d

Status Conv1dBackwardCuda(const Conv1dBwdParams& p, cudaStream_t stream) {
  using namespace conv1d;  // NOLINT(build/namespaces): the family's internals, in one function
  Status s = CheckBackwardArgs(p);
  if (!s.ok()) return s;
  if (p.S == 0) return ZeroParameterGrads(p, stream);
  constexpr int T = BwdTraits::kThreads;
  constexpr int kBlocks = 512 / T;  // CTAs per SM at 128 registers
  // The 16-byte route runs the 8-byte kernel too: four channels per thread fit in 128
  // registers (two 256-thread CTAs, 16 warps per SM), which measured 1.1-1.3x faster than eight
  // channels at 230 registers (8 warps per SM) on the H200; the tiling (hence every output bit) is
  // the same.
  switch (ChooseVec(p.C, p.x, p.dy, p.dx)) {
    case 8:
      if (PairedRouteFits(p)) return LaunchBackward<4, SmemRing<4, 8, T>, kBlocks, true>(p, stream);
      [[fallthrough]];
    case 4:
      return LaunchBackward<4, SmemRing<4, 8, T>, kBlocks>(p, stream);
    case 2:
      return LaunchBackward<2, SmemRing<2, 8, T>, kBlocks>(p, stream);
    case 1:
      return LaunchBackward<1, RegRing<1, 4>, kBlocks>(p, stream);
    default:
      return Internal("conv1d: unsupported vector width");
  }
}

}  // namespace cakegrad::kernels
