// KDA forward, chunked: the WY / UT form of the delta rule over chunks of 64 tokens, so that only
// T / 64 state steps per (document, head) are sequential, and the products run on tensor cores.
//
// Per chunk (start state S0, V x K; G_t = cumulative log-gates from the chunk start, per k;
// Gam_t = exp(G_t); K, Q the L2-normalised keys and queries; beta the sigmoid betas):
//   A  = strict_tril( beta_t (k_t Gam_t).(k_i / Gam_i) )    M  = tril( (q_t Gam_t).(k_i / Gam_i) )
//   W  = (I + A)^-1 (beta K Gam)                            Uv = (I + A)^-1 (beta V)
//   U  = Uv - W S0^T                                        S1 = S0 Gam_C + U^T (K Gam_C / Gam)
//   o  = bf16( scale ((Q Gam) S0^T + M U) )
// (bench/kda_chunked_study.py checks this form against the sequential recurrence to 1e-15.)
//
// Every product but Tinv's is BF16x3 on mma.sync (x = hi + lo in BF16, hi*hi + hi*lo + lo*hi with
// FP32 accumulation): SPEC's final_state limit (1e-4) rules out single-pass TF32 or BF16 on the
// state path (bench/results/kda_h200.md, CPU study). Two launches:
// 1. KdaChunkPrepKernel, one CTA per (chunk, head), all chunks in parallel: gates and their
//    cumulative sums (FP32); A and M per 16-token row sub-chunk J, the decay factors relative to
//    G at the middle of J's 32-token pair, so no factor exceeds e^80 for lower_bound >= -5;
//    Tinv = (I + A)^-1 in FP32 (16 x 16 diagonal blocks by forward substitution, block rows
//    merged); W = Tinv (beta K Gam), Uv = Tinv' V with Tinv' = Tinv diag(beta); K Gam_C / Gam
//    and Q Gam. It writes one record per chunk into the workspace, the state pass's operands
//    already split.
// 2. KdaChunkStateKernel, one CTA per (kRows state rows, head, document), walking the document's
//    chunks in order with its state slice in registers (FP32). U, S1 and o are separable over state
//    rows, so 2, 4 or 8 CTAs share a (document, head); with 8 (16-row slices) or 2 (64-row slices)
//    o has warps of its own beside the chain's. The forwards (every width) run as clusters of two
//    slices that share the record's common operands by TMA multicast (McBarriers).
// In checkpoint mode (a.checkpoints non-null: the chunked backward's recompute) the state pass
// stores every chunk-start state S0 (FP32, at the chunk's slot) and writes no output; there the
// preparation sums the gates in FP64 and writes a third BF16 part of Kdec^T, and the pass takes
// U^T Kdec in BF16x6, so that S0 is about FP32-exact (the backward's dA_log needs it).
// Chunks never straddle a document; a document's last chunk is padded with zero tokens (beta 0,
// gate 0), which leave the state unchanged. No atomics on outputs: bitwise reproducible.
#include <cuda_bf16.h>

#include <atomic>
#include <cstddef>
#include <string>
#include <type_traits>

#include "kda_chunked_forward.cuh"
#include "kda_cluster_launch.cuh"
#include "kda_mma.cuh"
#ifndef CAKEGRAD_KDA_HOST_EMU
#include "cp_async.cuh"
#include "pdl_launch.h"
#include "per_device_memo.h"
#endif

namespace cakegrad::kernels {
namespace kda_cuda {
namespace {

constexpr int kChunk = static_cast<int>(kda_layout::kChunk);

// Thread-count-independent shapes of the preparation.
struct PrepTraits {
  static constexpr int kSub = 16;  // row sub-chunk; decay reference per pair: factors <= e^80
  static constexpr int kSubs = kChunk / kSub;
  static constexpr int kHalf = kDim / 2;         // factor buffers hold K in two halves
  static constexpr int kGStride = kDim;          // 16-byte rows: vector loads of channel runs
  static constexpr int kHStride = kHalf + 8;     // BF16 factor rows over a K half: conflict-free
  static constexpr int kTStride = kChunk + 8;    // operand rows over tokens
  static constexpr int kKdTStride = kChunk + 2;  // Kdec^T staging (FP32, pairs along tokens)
  // A packed by sub-chunk: the rows of sub-chunk J keep columns 0 .. 16 J + 15 only (nothing
  // right of them is ever read), 10 KB instead of 18 KB, which is what lets both K halves of the
  // factors be live at once within two CTAs per SM.
  static constexpr int kAPacked = kSub * kSub * (kSubs * (kSubs + 1) / 2);
  // Raw BF16 values of the chunk, staged (cp.async) during Tinv into the part of the union the
  // solve and the right-hand side leave free, so the V blocks wait on no global load.
  static constexpr int kVStageOffset = 38912;
  static_assert(kChunk == 4 * 16 && kDim == 2 * kChunk, "4 token tiles; [K | V] in 4 blocks");
  static_assert(kSubs == 4 && kHalf == 4 * 16, "4 sub-chunks; 4 k-steps per K half");
};

// The thread-dependent part: 256 threads (8 warps), 384 or 512 (with __launch_bounds__(.., 2) 24 or
// 32 warps per SM instead of 16, at <= 80 or <= 64 registers). Every mapping below is written for
// any multiple of 128 threads, and every value is computed by the same expression whichever
// thread computes it, so the records are bitwise the same for every count.
template <int kThreadsT>
struct PrepThreads {
  static constexpr int kThreads = kThreadsT;
  static constexpr int kWarps = kThreads / 32;
  static constexpr int kTokPerWarp = (kChunk + kWarps - 1) / kWarps;  // prologue tokens per warp
  static_assert(kThreads % kDim == 0 && kThreads >= 2 * kDim, "whole channel rows per pass");
};

// Shared memory of the preparation, sized for two CTAs per SM. Phases: Kdec^T staging, then per
// sub-chunk the split decay factors of both K halves (A and M together on the tensor cores), then
// Tinv in FP32, then the right-hand side blocks of W = Tinv (beta K Gam), then Uv = Tinv' V from
// the staged V.
struct PrepSmem {
  uint16_t k[kChunk][kDim];               // raw BF16 keys of the chunk (0 for padding)
  float G[kChunk][PrepTraits::kGStride];  // log2-gates, then their cumulative sums (Decay2)
  // beta_t (k_t Gam_t).(k_i / Gam_i), strictly lower, packed by sub-chunk (PackedA).
  float A[PrepTraits::kAPacked];
  union {
    struct {
      uint16_t col[2][kChunk][PrepTraits::kHStride];             // k_i exp(r_P - G_i), hi and lo
      uint16_t krow[2][PrepTraits::kSub][PrepTraits::kHStride];  // k_t exp(G_t - r_P)
      uint16_t qrow[2][PrepTraits::kSub][PrepTraits::kHStride];  // q_t exp(G_t - r_P)
    } f[2];                                                      // K halves
    struct {
      float tinv[kChunk][PrepTraits::kTStride];  // (I + A)^-1, FP32
      float r[PrepTraits::kSub][kChunk];         // A[J, <J] Tinv[<J, <J]
    } s;
    struct {
      uint16_t rhs[2][kChunk][PrepTraits::kTStride];   // 64 columns of the right-hand side, ^T
      uint16_t tinv[2][kChunk][PrepTraits::kTStride];  // Tinv split: clear of s.tinv, s.r dead
    } w;
    float kdt[kDim][PrepTraits::kKdTStride];    // Kdec^T staging
    struct {                                    // the checkpoint instance's gate sums
      float kdt[kDim][PrepTraits::kKdTStride];  // (the staging, holding the sums' rounding errors)
      double seg[4][kDim];                      // per channel, the sums of its 4 16-token segments
    } scan;
    unsigned char v_stage_end[PrepTraits::kVStageOffset + kChunk * kDim * 2];
  } u;
  float rk[kChunk], rq[kChunk], bt[kChunk];  // 1 / |k|, 1 / |q|, sigmoid(beta); 0 for padding
};
static_assert(2 * (sizeof(PrepSmem) + 1024) <= 228 * 1024, "two preparation CTAs per SM");
static_assert(sizeof(PrepSmem::u.s.tinv) <= sizeof(PrepSmem::u.w.rhs) &&
                  sizeof(PrepSmem::u.s) <= PrepTraits::kVStageOffset &&
                  sizeof(PrepSmem::u.w) <= PrepTraits::kVStageOffset,
              "the Tinv split misses the FP32 Tinv; V staging misses the solve and W | Uv");

// A[t][col] of the packed A (col < 16 (t / 16 + 1)). Its row strides (16 to 64 floats) make the
// tile epilogue's 4 stores per lane up to 8-way bank conflicted: a few dozen cycles per tile,
// against the 8 KB the padding would cost.
__device__ __forceinline__ int PackedIndex(int t, int col) {
  const int J = t / PrepTraits::kSub;
  return kda_layout::PackedBlockStart(J) + (t % PrepTraits::kSub) * PrepTraits::kSub * (J + 1) +
         col;
}
__device__ __forceinline__ float& PackedA(PrepSmem& sm, int t, int col) {
  return sm.A[PackedIndex(t, col)];
}
static_assert(PrepTraits::kAPacked == kda_layout::kChunkPFloats, "P's record packs as A");

// Tinv' = Tinv diag(beta) split, in the A buffer once A is dead: plane (hi, lo) x the 10 blocks
// (mt, ks <= mt) of its block-lower triangle, 16 x 16 each, rows of two 16-byte pieces (exactly
// the buffer's 10 KB). The piece index is XORed with bit 2 of the row so that the 8 rows of an
// ldmatrix tile (32 bytes apart) fall in 8 different bank groups.
__device__ __forceinline__ uint16_t* TinvBPiece(PrepSmem& sm, int plane, int mt, int ks, int r,
                                                int q) {
  const int block = plane * 10 + mt * (mt + 1) / 2 + ks;
  return reinterpret_cast<uint16_t*>(sm.A) + (block * 16 + r) * 16 + 8 * (q ^ ((r >> 2) & 1));
}
static_assert(sizeof(PrepSmem::A) == 2 * 10 * 16 * 16 * 2, "Tinv' blocks fill the A buffer");
// The checkpoint instance's third BF16 part of Tinv' (Split3Pair's lo; hi and mid are the two
// planes above, bitwise), in TinvBPiece's layout at the start of the union: s.tinv's space, dead
// once the split has read it and not written again before W's first right-hand side (so that
// instance computes Uv before W).
__device__ __forceinline__ uint16_t* TinvBPiece3(PrepSmem& sm, int mt, int ks, int r, int q) {
  const int block = mt * (mt + 1) / 2 + ks;
  return reinterpret_cast<uint16_t*>(&sm.u) + (block * 16 + r) * 16 + 8 * (q ^ ((r >> 2) & 1));
}
static_assert(10 * 16 * 16 * 2 <= sizeof(PrepSmem::u.w.rhs), "the third part below W's tinv");

template <int kRows, bool kCheckpoint = false>
struct StateTraits {
  static constexpr int kVTiles = kRows / 16;  // 16-row tiles of the CTA's state slice
  // With 16-row slices (one CTA per SM, 4 chain warps: one per scheduler) o gets warps of its own,
  // which run (Q Gam) S0^T and M U beside the chain's U and S1 between the same barriers: the
  // chain warps' per-chunk instruction stream (the pass's critical path) loses the o products
  // (H200: -1.4% for this pass; its step is bound by latency and L2 reads, not by issue).
  // 64-row slices do the same with two state tiles per warp (8 chain and 8 o warps, 512 threads
  // as before, so 128 registers still suffice): the chain's second stretch (S1) no longer waits
  // behind M U and the o stores, whose single accumulator set makes them a 12-deep mma chain.
  // The checkpoint instance at 64 rows computes no o: its 16 warps all take the chain, one state
  // tile each, rather than 8 warps of two tiles beside 8 that only kept the barriers (H200, kda65:
  // the backward at (1, 8192, 32) -1.2%, though ncu puts the pass itself at ~0.89 ms either way,
  // still above the reverse chain's 0.78 beside it: its step is not bound by the warps' MMAs).
  static constexpr bool kOWarps = kRows == 16 || (kRows == 64 && !kCheckpoint);
  static constexpr int kVPerWarp = kRows == 64 && !kCheckpoint ? 2 : 1;  // state tiles a warp
  // warp = (token tile | K quarter, kVPerWarp state tiles)
  static constexpr int kRoleWarps = 4 * kVTiles / kVPerWarp;
  static constexpr int kWarps = (kOWarps ? 2 : 1) * kRoleWarps;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kSlices = kDim / kRows;  // CTAs per (document, head)
  static constexpr int kKStride = kDim + 8;     // BF16 rows over K: fragment loads conflict-free
  static constexpr int kTStride = kChunk + 8;   // BF16 rows over tokens: likewise
  static constexpr int kUvStride = kRows + 4;
  // Buffers of the group read first (-W, Q Gam, Uv): two where shared memory allows, so that
  // chunk c + 2's loads are in flight during all of chunk c + 1.
  static constexpr int kStages = kRows == 16 ? 2 : 1;
  // Three accumulator sets per BF16x3 product (independent mma chains) where the registers allow;
  // 16 warps (64 rows) get 128 registers per thread and accumulate into one set.
  static constexpr bool kSplitAcc = kRows <= 32 || kVPerWarp == 1;
  static_assert(kRows % 16 == 0 && kDim % kRows == 0 && kVTiles % kVPerWarp == 0,
                "16-row tiles, whole slices, whole tile groups per warp");
  static_assert(kChunk == 4 * 16 && kDim == 4 * 32, "4 token tiles of 16, 4 K quarters of 32");
};

template <int kRows>
struct StateSmem {
  using Tr = StateTraits<kRows>;
  uint16_t w[Tr::kStages][2][kChunk][Tr::kKStride];   // -W, hi and lo
  uint16_t qg[Tr::kStages][2][kChunk][Tr::kKStride];  // Q Gam
  float uv[Tr::kStages][kChunk][Tr::kUvStride];       // Uv, this CTA's columns
  uint16_t kd[2][kDim][Tr::kTStride];                 // (K Gam_C / Gam)^T
  uint16_t m[2][kChunk][Tr::kTStride];                // M
  float gc[kDim];                                     // Gam_C
  uint16_t s[2][kRows][Tr::kKStride];                 // S0 slice, hi and lo
  uint16_t u[2][kRows][Tr::kTStride];                 // U^T slice, hi and lo
};

// The 16-row forward pass as clusters of two slices (KdaChunkStateKernel's kMc): each CTA
// copies half of the record operands common to the slices (-W, Q Gam, Kdec^T, M, Gam_C) into
// both CTAs by TMA multicast, so that L2 serves them once per two slices: 8 slices of a
// (document, head) read each chunk's ~112 KB of them 8 times a step (ncu: L2 ~63% busy over the
// pass; H200, 2026-11-30: the pass 1.69 -> 1.52 ms, L2 67% -> 55% busy, the forward at
// (1, 32768, 16) -6%). Uv, different per slice, stays on cp.async. The TMA tiles are 64 BF16 x
// 128 rows with the 128-byte swizzle (conflict-free ldmatrix rows without padding), dense, each
// buffer at a multiple of 1024 bytes. Kdec^T | M and Gam_C are double-buffered and issued in the
// middle of the chunk before their use: single-buffered, they could only be issued once both CTAs
// had finished the chunk, so the copy's latency and the wait for the peer fell between the
// chunk's last barrier and the next one's second. The room comes from Q Gam, single-buffered: only
// the o warps read it, in the chunk's first stretch, so it is issued one chunk ahead (-W stays two
// ahead). H200, 2026-11-30 (kda18): the forward at (1, 32768, 16) 2.674 -> 2.406 ms; with the
// peer arrive's .release.cta (MbarArrivePeer) 2.143 ms, the pass 2.73 M -> 1.79 M cycles.
template <int kRows>
struct McSmem;
template <>
struct McSmem<16> {
  static constexpr int kTile = 128 * 64;  // elements of a TMA tile
  using Tr = StateTraits<16>;
  uint16_t w[2][2 * kTile];   // -W in buffer c % 2: column halves 0 .. 63, 64 .. 127; rows hi, lo
  uint16_t qg[2 * kTile];     // Q Gam, likewise
  uint16_t kd[2][3 * kTile];  // buffer c % 2: Kdec^T hi, Kdec^T lo (128 rows each), M hi | lo
  float gc[2][kDim];          // Gam_C, buffer c % 2
  float uv[Tr::kStages][kChunk][Tr::kUvStride];
  uint16_t s[2][16][Tr::kKStride];
  uint16_t u[2][16][Tr::kTStride];
};
static_assert(offsetof(McSmem<16>, qg) % 1024 == 0 && offsetof(McSmem<16>, kd) % 1024 == 0 &&
                  sizeof(McSmem<16>::w[0]) % 1024 == 0 && sizeof(McSmem<16>::kd[0]) % 1024 == 0,
              "every TMA tile 1024-byte aligned");
// The 64-row forward pass (the packed shape's: 2 slices a (document, head), so a cluster is one
// whole chain) the same way. Its S0, U^T and Uv slices take 70 KB, so the 16-row layout (262 KB
// here) does not fit the 227 KB a CTA may have, nor does it with -W and Q Gam single (231 KB).
// So -W and Q Gam are single-buffered and issued one chunk ahead, in the middle of the chunk;
// Kdec^T and Gam_C (the chain's S1 operands) stay double-buffered, issued at the same point; M,
// read by the o warps only, gets one buffer of its own, refilled at the top of the next chunk
// once both CTAs passed the chunk's last barrier (empty_m), so that the first stretch hides its
// copy. 220,224 bytes with the barriers and the alignment (the plain 64-row pass: 196,096).
template <>
struct McSmem<64> {
  static constexpr int kTile = McSmem<16>::kTile;
  using Tr = StateTraits<64>;
  uint16_t w[1][2 * kTile];   // -W: column halves 0 .. 63, 64 .. 127; rows hi, lo
  uint16_t qg[2 * kTile];     // Q Gam, likewise
  uint16_t kd[2][2 * kTile];  // buffer c % 2: Kdec^T hi, Kdec^T lo (128 rows each)
  uint16_t m[kTile];          // M hi | lo
  float gc[2][kDim];          // Gam_C, buffer c % 2
  float uv[Tr::kStages][kChunk][Tr::kUvStride];
  uint16_t s[2][64][Tr::kKStride];
  uint16_t u[2][64][Tr::kTStride];
};
static_assert(offsetof(McSmem<64>, qg) % 1024 == 0 && offsetof(McSmem<64>, kd) % 1024 == 0 &&
                  offsetof(McSmem<64>, m) % 1024 == 0 && sizeof(McSmem<64>::kd[0]) % 1024 == 0,
              "every TMA tile 1024-byte aligned");
// The 32-row forward pass ((1, 8192, 32): 4 slices a (document, head), clusters of two). Its chain
// warps run the o products too (no o warps), so the thread that issues the copies and waits for the
// peer is a chain thread: lane 0 of warp 0 (token tile 0, the least M U work). A producer warp of
// its own (288 threads, 161 registers) was slower on the H200 (2026-11-30, kda20: the forward at
// (1, 8192, 32) 0.990 ms against 0.950, the pass 696 K against 619 K cycles). -W and Q Gam are
// both read in the chunk's first stretch, so they are single-buffered and issued together one
// chunk ahead, in the middle of the chunk (after the second barrier, once the peer is there too);
// Kdec^T | M (one tile set, as at 16 rows) and Gam_C are double-buffered and issued at the same
// point. 201,776 bytes with the barriers and the alignment (the plain 32-row pass: 161,280); -W
// double-buffered as well would take 234,544, over the 232,448 a CTA may have.
template <>
struct McSmem<32> {
  static constexpr int kTile = McSmem<16>::kTile;
  using Tr = StateTraits<32>;
  uint16_t w[1][2 * kTile];   // -W: column halves 0 .. 63, 64 .. 127; rows hi, lo
  uint16_t qg[2 * kTile];     // Q Gam, likewise
  uint16_t kd[2][3 * kTile];  // buffer c % 2: Kdec^T hi, Kdec^T lo (128 rows each), M hi | lo
  float gc[2][kDim];          // Gam_C, buffer c % 2
  float uv[Tr::kStages][kChunk][Tr::kUvStride];
  uint16_t s[2][32][Tr::kKStride];
  uint16_t u[2][32][Tr::kTStride];
};
static_assert(offsetof(McSmem<32>, qg) % 1024 == 0 && offsetof(McSmem<32>, kd) % 1024 == 0 &&
                  sizeof(McSmem<32>::kd[0]) % 1024 == 0,
              "every TMA tile 1024-byte aligned");
struct McBarriers {
  uint64_t full_w[2];   // -W of buffer b landed: both CTAs' halves
  uint64_t full_q;      // Q Gam landed
  uint64_t full_kd[2];  // Kdec^T, M (64 rows: Kdec^T only), Gam_C of buffer b landed
  uint64_t empty;       // the peer passed chunk c's second barrier: its reads of -W (c), Q Gam (c)
                        // and Kdec^T | M, Gam_C (c - 1) are done
};
struct McBarriers64 : McBarriers {
  uint64_t full_m;   // M landed
  uint64_t empty_m;  // rank 0's: rank 1 passed chunk c's last barrier (its reads of M (c) done)
};
template <int kRows, bool kMc>
using StateSmemOf = std::conditional_t<kMc, McSmem<kRows>, StateSmem<kRows>>;
template <int kRows>
using McBarriersOf = std::conditional_t<kRows == 64, McBarriers64, McBarriers>;
// 1024 bytes for the tiles' alignment (the swizzle pattern follows address bits 7-9).
template <int kRows, bool kMc>
constexpr int kStateSmemBytes = static_cast<int>(sizeof(StateSmemOf<kRows, kMc>) +
                                                 (kMc ? sizeof(McBarriersOf<kRows>) + 1024 : 0));
// ---- kernel 1: chunk preparation ---------------------------------------------------------------

struct ChunkCtx {
  const FwdArgs* a;
  float* p_out;  // the checkpoint instance's P of this chunk (kda_layout::kChunkPFloats)
  int64_t t0;    // first token of the chunk
  int64_t h;
  int len;  // valid tokens in the chunk
};

__device__ __forceinline__ int64_t TokenBase(const ChunkCtx& c, int t) {
  return ((c.t0 + t) * c.a->s.H + c.h) * kDim;
}

// The preparation keeps its log-gates and their sums in log2 units (lower_bound log2(e) passed to
// UnpackToken: the same multiply), so each decay factor 2^(G_a - G_b) is one MUFU.EX2 without
// DecayExp's multiply by log2(e): ~45 k fewer multiplies per chunk. The cumulative sums' rounding
// is relative, so the decays keep their accuracy.
__device__ __forceinline__ float Decay2(float x) { return Ex2Ftz(x); }

__device__ __forceinline__ float Kh(const PrepSmem& sm, int t, int k) {
  return Bf16(sm.k[t][k]) * sm.rk[t];
}

// The staged V's 16-byte piece p (channels 8 p .. 8 p + 7) of token t: pieces swizzled by token,
// so that the 8 rows of an ldmatrix.trans tile (8 consecutive tokens, one piece) fall in 8
// different bank groups (unswizzled, the 256-byte rows put all 8 in one: 8-way conflicts).
__device__ __forceinline__ uint16_t* VPiece(uint16_t* vs, int t, int p) {
  return vs + t * kDim + 8 * (p ^ (t & 7));
}

// SplitPair with one paired conversion per half (bitwise the same values). The packed hi pair is
// used as it comes from the conversion, and its halves widen by a shift and a mask: rebuilding hi
// from the two halves cost ~2 more SASS instructions per pair (byte permutes).
__device__ __forceinline__ void PrepSplitPair(float x0, float x1, uint32_t* hi, uint32_t* lo) {
  const __nv_bfloat162 h = __floats2bfloat162_rn(x0, x1);  // x0 in the low half
  const uint32_t hu = reinterpret_cast<const uint32_t&>(h);
  const __nv_bfloat162 l =
      __floats2bfloat162_rn(x0 - __uint_as_float(hu << 16), x1 - __uint_as_float(hu & 0xffff0000u));
  *hi = hu;
  *lo = reinterpret_cast<const uint32_t&>(l);
}

__device__ __forceinline__ void StorePair(uint16_t* hi_base, uint16_t* lo_base, int row, int col,
                                          float x0, float x1) {
  uint32_t hi, lo;
  PrepSplitPair(x0, x1, &hi, &lo);
  *reinterpret_cast<uint32_t*>(hi_base + row + col) = hi;
  *reinterpret_cast<uint32_t*>(lo_base + row + col) = lo;
}

// Four adjacent outputs of a row times a matrix: out[c] = sum over l < len of a[l] b(l)[c], each
// its own fmaf chain in l order (len a multiple of 4; a and every b(l) 16-byte aligned). One
// float4 load of a serves four products, where one output per thread spent two shared loads per
// FMA (kda11: ~10% of the preparation's instructions).
template <class BRow>
__device__ __forceinline__ float4 RowTimesCols4(const float* a, int len, BRow b) {
  float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
  for (int l4 = 0; l4 < len; l4 += 4) {
    const float4 av = *reinterpret_cast<const float4*>(a + l4);
    const float al[4] = {av.x, av.y, av.z, av.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float4 bv = *reinterpret_cast<const float4*>(b(l4 + i));
      acc.x = fmaf(al[i], bv.x, acc.x);
      acc.y = fmaf(al[i], bv.y, acc.y);
      acc.z = fmaf(al[i], bv.z, acc.z);
      acc.w = fmaf(al[i], bv.w, acc.w);
    }
  }
  return acc;
}

// One K half of a 16 x 8 tile of (row factors) (column factors)^T, BF16x3: the 16 rows of the
// current sub-chunk against columns 8 nt .. 8 nt + 7, into the half's own three accumulators.
// The full tile is (a0 + b0) + ((a1 + b1) + (a2 + b2)) over the halves' sets a and b, each an
// independent mma chain of four k-steps: the order the single-pass version used.
__device__ __forceinline__ void HalfFactorTile(const uint16_t* row, const uint16_t* col, int nt,
                                               float (&acc)[3][4]) {
  constexpr int kS = PrepTraits::kHStride;
  constexpr int kRowLo = PrepTraits::kSub * kS, kColLo = kChunk * kS;
#pragma unroll
  for (int s = 0; s < 3; ++s) {
#pragma unroll
    for (int i = 0; i < 4; ++i) acc[s][i] = 0.f;
  }
#pragma unroll
  for (int ks = 0; ks < PrepTraits::kHalf / 16; ++ks) {
    uint32_t ah[4], al[4], bh[2], bl[2];
    LdmA<kS>(row, 0, ks * 16, ah);
    LdmA<kS>(row + kRowLo, 0, ks * 16, al);
    LdmB2<kS>(col, col + kColLo, nt * 8, ks * 16, bh, bl);
    Mma3(acc[0], acc[1], acc[2], ah, al, bh, bl);
  }
}

// A (into shared memory) and M (into the record) for the rows of sub-chunk J, columns
// 0 .. 16 J + 15, with the decay reference r_P = G[32 (J / 2) + 16]; M is zero right of that. One
// element pass builds the column factors (the pair's first sub-chunk only) and both row factors
// (keys for A, queries for M; the row decay computed once for both) of both K halves, then every
// warp takes up to two of the 4 (J + 1) tiles (A or M, 8 columns): two barriers per sub-chunk, and
// the early sub-chunks idle fewer warps.
template <int kThreads, bool kCheckpoint>
__device__ __forceinline__ void SubChunkProducts(const ChunkCtx& c, PrepSmem& sm, int J,
                                                 uint16_t* m_hi, uint16_t* m_lo) {
  using Tr = PrepTraits;
  using Th = PrepThreads<kThreads>;
  constexpr int kS = Tr::kHStride;
  constexpr int kPairs = Tr::kHalf / 2;        // channel pairs per half
  constexpr int kRowStep = kThreads / kPairs;  // rows per element pass
  constexpr int kRowIters = (Tr::kSub + kRowStep - 1) / kRowStep;
  constexpr int kSlots = (4 * Tr::kSubs + Th::kWarps - 1) / Th::kWarps;  // tiles per warp
  static_assert(kSlots * Th::kWarps >= 4 * Tr::kSubs, "every tile of the last sub-chunk taken");
  const int r0 = J * Tr::kSub, cols = r0 + Tr::kSub;
  // Decay reference: G at the middle of J's 32-token pair. The rows of the pair's first
  // sub-chunk lie at most 16 tokens before it (factors <= e^80), every column at most 15 after
  // it (<= e^75), and the products kept (i <= t) are <= 1; right of the diagonal no tile reaches a
  // column more than 15 tokens past the reference, so no product overflows either. The column
  // factors (the pair's 32 (P + 1) columns) are built once per pair, by its first sub-chunk:
  // 96 rows per chunk where a reference per sub-chunk needed 160.
  const int ref = (J / 2) * 2 * Tr::kSub + Tr::kSub;
  const int col_rows = (J & 1) ? 0 : r0 + 2 * Tr::kSub;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int g = lane >> 2, tq = lane & 3;
  const int p2 = 2 * (tid % kPairs);  // the thread's channel pair within a half (fixed)
  // Query loads first (unconditional, clamped), so that they are in flight during the columns.
  uint32_t qq[2][kRowIters];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
#pragma unroll
    for (int it = 0; it < kRowIters; ++it) {
      const int t = r0 + min(tid / kPairs + it * kRowStep, Tr::kSub - 1);
      qq[h][it] = *reinterpret_cast<const uint32_t*>(c.a->q + TokenBase(c, min(t, c.len - 1)) +
                                                     h * Tr::kHalf + p2);
      if (t >= c.len) qq[h][it] = 0u;
    }
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int kc = h * Tr::kHalf + p2;
    const float2 gr = *reinterpret_cast<const float2*>(&sm.G[ref][kc]);
#pragma unroll 4
    for (int i = tid / kPairs; i < col_rows; i += kRowStep) {
      const float2 gi = *reinterpret_cast<const float2*>(&sm.G[i][kc]);
      const uint32_t kk = *reinterpret_cast<const uint32_t*>(&sm.k[i][kc]);
      const float rk = sm.rk[i];
      StorePair(&sm.u.f[h].col[0][0][0], &sm.u.f[h].col[1][0][0], i * kS, p2,
                (Bf16(kk & 0xffff) * rk) * Decay2(gr.x - gi.x),
                (Bf16(kk >> 16) * rk) * Decay2(gr.y - gi.y));
    }
#pragma unroll
    for (int it = 0; it < kRowIters; ++it) {
      const int r = tid / kPairs + it * kRowStep, t = r0 + r;
      if (kRowIters * kRowStep == Tr::kSub || r < Tr::kSub) {
        const float2 gt = *reinterpret_cast<const float2*>(&sm.G[t][kc]);
        const float f0 = Decay2(gt.x - gr.x), f1 = Decay2(gt.y - gr.y);
        StorePair(&sm.u.f[h].krow[0][0][0], &sm.u.f[h].krow[1][0][0], r * kS, p2,
                  Kh(sm, t, kc) * f0, Kh(sm, t, kc + 1) * f1);
        StorePair(&sm.u.f[h].qrow[0][0][0], &sm.u.f[h].qrow[1][0][0], r * kS, p2,
                  Bf16(qq[h][it] & 0xffff) * sm.rq[t] * f0, Bf16(qq[h][it] >> 16) * sm.rq[t] * f1);
      }
    }
  }
  __syncthreads();
  const int tiles = 4 * (J + 1);  // (A | M) x 2 (J + 1) column tiles; tile = 2 nt + is_m
#pragma unroll
  for (int sl = 0; sl < kSlots; ++sl) {
    const int tile = warp + sl * Th::kWarps;
    if (tile < tiles) {
      const int nt = tile >> 1;
      float a[3][4], b[3][4];
      HalfFactorTile((tile & 1) ? &sm.u.f[0].qrow[0][0][0] : &sm.u.f[0].krow[0][0][0],
                     &sm.u.f[0].col[0][0][0], nt, a);
      HalfFactorTile((tile & 1) ? &sm.u.f[1].qrow[0][0][0] : &sm.u.f[1].krow[0][0][0],
                     &sm.u.f[1].col[0][0][0], nt, b);
      float out[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        out[i] = (a[0][i] + b[0][i]) + ((a[1][i] + b[1][i]) + (a[2][i] + b[2][i]));
      }
      if ((tile & 1) == 0) {
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
          const int t = r0 + g + 8 * hh, col = nt * 8 + 2 * tq;
          // Right of the diagonal the factors may overflow: those products are dropped, not
          // scaled. Pairs as 8-byte stores (the packed rows' strides conflict either way).
          *reinterpret_cast<float2*>(&PackedA(sm, t, col)) =
              make_float2(col < t ? sm.bt[t] * out[2 * hh] : 0.f,
                          col + 1 < t ? sm.bt[t] * out[2 * hh + 1] : 0.f);
          if constexpr (kCheckpoint) {  // P = A / beta as it is before the factor
            *reinterpret_cast<float2*>(c.p_out + PackedIndex(t, col)) =
                make_float2(col < t ? out[2 * hh] : 0.f, col + 1 < t ? out[2 * hh + 1] : 0.f);
          }
        }
      } else {
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
          const int t = r0 + g + 8 * hh, col = nt * 8 + 2 * tq;
          StorePair(m_hi, m_lo, t * kChunk, col, col <= t ? out[2 * hh] : 0.f,
                    col + 1 <= t ? out[2 * hh + 1] : 0.f);
        }
      }
    }
  }
  // M's zeros right of the pair's columns: groups of 8 column pairs (one 32-byte sector per row
  // and plane), e = (group, row, pair) with power-of-two strides; the runtime divisor (pairs per
  // row) of the plain row-major index cost a signed division per thread.
  if (cols < kChunk) {
    const unsigned groups = (kChunk - cols) / 16;
    for (unsigned e = tid; e < 128 * groups; e += kThreads) {
      StorePair(m_hi, m_lo, (r0 + ((e >> 3) & 15)) * kChunk, cols + 16 * (e >> 7) + 2 * (e & 7),
                0.f, 0.f);
    }
  }
  __syncthreads();  // the factors are consumed before the next sub-chunk's pass overwrites them
}

// The preparation's 16-warp instance: 32 warps per SM at <= 64 registers. On the H200 (fifth
// session, kda_h200.md) it beat the 8- and 12-warp instances by 2-4% at every bench shape, with
// bitwise the same records; the kernel is latency-bound, so more warps hide more of it.
constexpr int kPrepThreads = 512;

// kCheckpoint: the chunked backward's instance (a.checkpoints non-null). Its Uv takes Tinv' in
// three BF16 parts (about FP32-exact, where two parts round it to ~2^-17): the checkpoint state
// pass starts every chunk from that Uv, and the backward's per-chunk pass uses it as it is (it
// solved Uv again in FP32 for want of it; host emulator, bench/results/kda_h200.md 2026-11-30,
// eighteenth session). It also stores P = A / beta and the FP32 Tinv per chunk slot
// (a.chunk_p, a.chunk_tinv), which that pass used to compute again. The forward's records are
// unchanged.
template <int kThreads = kPrepThreads, bool kCheckpoint = false>
__global__ void __launch_bounds__(kThreads, 2)
    KdaChunkPrepKernel(const __grid_constant__ FwdArgs a, char* __restrict__ ws) {
  using Tr = PrepTraits;
  using Th = PrepThreads<kThreads>;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  PrepSmem& sm = *reinterpret_cast<PrepSmem*>(smem_raw);
  const int64_t slot = ChunkSlotOfBlock();  // ChunkSlotGrid
  const int64_t h = blockIdx.x;
  const int64_t H = a.s.H;

  int64_t bos, eos, chunk;
  if (!LocateChunkSlot(a.s, slot, &bos, &eos, &chunk)) return;  // a gap slot, or past the last
  ChunkCtx c;
  c.a = &a;
  c.p_out = kCheckpoint ? a.chunk_p + (slot * H + h) * kda_layout::kChunkPFloats : nullptr;
  c.t0 = bos + chunk * kChunk;
  c.h = h;
  c.len = static_cast<int>(min(int64_t{kChunk}, eos - c.t0));

  char* rec = ws + (slot * H + h) * kda_layout::kRecBytes;
  uint16_t* negw = reinterpret_cast<uint16_t*>(rec + kda_layout::kRecNegW);
  uint16_t* qg = reinterpret_cast<uint16_t*>(rec + kda_layout::kRecQg);
  uint32_t* kdt = reinterpret_cast<uint32_t*>(rec + kda_layout::kRecKdecT);
  uint16_t* mm = reinterpret_cast<uint16_t*>(rec + kda_layout::kRecM);
  float* uv = reinterpret_cast<float*>(rec + kda_layout::kRecUv);
  float* gamc = reinterpret_cast<float*>(rec + kda_layout::kRecGamC);

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  // Per token: norms, beta, log-gates (lane owns k = 4 lane .. 4 lane + 3); warp w takes tokens
  // w, w + kWarps, ... (with 12 warps the last round is partial).
  constexpr int kTokPerWarp = Th::kTokPerWarp;
  uint2 qraw[kTokPerWarp];  // the warp's tokens' q and 1 / |q|, kept for Q Gam
  float rqv[kTokPerWarp];
  {
    const float exp_a = expf(a.A_log[h]);
    const float lb2 = a.s.lower_bound * kLog2e;  // log2-gates
    const float4 dtb = reinterpret_cast<const float4*>(a.dt_bias + h * kDim)[lane];
    const float db[4] = {dtb.x, dtb.y, dtb.z, dtb.w};
    constexpr int kBatch = kTokPerWarp;  // tokens whose loads are in flight together: all
    static_assert(kTokPerWarp % kBatch == 0, "whole batches");
#pragma unroll
    for (int i0 = 0; i0 < kTokPerWarp; i0 += kBatch) {
      RawToken raw[kBatch];
#pragma unroll
      for (int i = 0; i < kBatch; ++i) {
        const int t = warp + Th::kWarps * (i0 + i);
        if (t < c.len) raw[i] = LoadToken(a.q, a.k, a.g, a.beta, c.t0 + t, H, h);
      }
#pragma unroll
      for (int i = 0; i < kBatch; ++i) {
        const int t = warp + Th::kWarps * (i0 + i);
        // Whole rounds (8 warps) need no check; with 12 warps the last round reaches past the
        // chunk.
        const bool in_chunk = Th::kTokPerWarp * Th::kWarps == kChunk || t < kChunk;
        float gl[4] = {0.f, 0.f, 0.f, 0.f};
        uint2 kraw = make_uint2(0u, 0u);
        if (t < c.len) {
          const RawToken& r = raw[i];
          kraw = r.k;
          const TokenLane tl = UnpackToken(r, db, exp_a, lb2);
#pragma unroll
          for (int j = 0; j < 4; ++j) gl[j] = tl.gl[j];
          qraw[i0 + i] = r.q;
          rqv[i0 + i] = tl.rq;
          if (lane == 0) {
            sm.rq[t] = tl.rq;
            sm.rk[t] = tl.rk;
            sm.bt[t] = GateSigmoid(r.beta);
          }
        } else {
          qraw[i0 + i] = make_uint2(0u, 0u);
          rqv[i0 + i] = 0.f;
        }
        if (in_chunk) {
          if (t >= c.len && lane == 0) {
            sm.rq[t] = 0.f;
            sm.rk[t] = 0.f;
            sm.bt[t] = 0.f;
          }
          *reinterpret_cast<float4*>(&sm.G[t][4 * lane]) = make_float4(gl[0], gl[1], gl[2], gl[3]);
          *reinterpret_cast<uint2*>(&sm.k[t][4 * lane]) = kraw;
        }
      }
    }
  }
  __syncthreads();
  if constexpr (kCheckpoint) {
    // In FP64, each G rounded once, as the backward's per-chunk pass does: an FP32 running sum
    // over 64 gates of up to -7.2 (log2 units) drifts by ~1e-5, which every decay inherits, and
    // dA_log on short documents with it (host emulator, bench/results/kda_h200.md, seventeenth and
    // twentieth sessions). Each sum's rounding error (FP32) goes to its channel's row of the
    // Kdec^T staging, the end's to the row's padding too, for Kdec's decays below. As a scan over
    // four 16-token segments (a thread each), 2 x 16 dependent steps: the 64-step loop with the
    // errors' conversions and stores made the preparation 9% slower (H200, kda68).
    static_assert(kThreads == 4 * kDim && kChunk == 64, "4 segments of 16 tokens per channel");
    const int k = tid % kDim, seg = tid / kDim, t0 = 16 * seg;
    double part = 0.0;
#pragma unroll
    for (int i = 0; i < 16; ++i) part += sm.G[t0 + i][k];
    sm.u.scan.seg[seg][k] = part;
    __syncthreads();
    double acc = 0.0;
    for (int j = 0; j < seg; ++j) acc += sm.u.scan.seg[j][k];
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      acc += sm.G[t0 + i][k];
      const float g = static_cast<float>(acc);
      sm.G[t0 + i][k] = g;
      sm.u.kdt[k][t0 + i] = static_cast<float>(acc - g);
    }
    if (seg == 3) sm.u.kdt[k][kChunk] = sm.u.kdt[k][kChunk - 1];
  } else if (tid < kDim) {
    float acc = 0.f;
#pragma unroll 8
    for (int t = 0; t < kChunk; ++t) {
      acc += sm.G[t][tid];
      sm.G[t][tid] = acc;
    }
  }
  __syncthreads();

  uint16_t* m_hi = mm;
  uint16_t* m_lo = mm + kChunk * kChunk;

  // Q Gam (pairs along k), Gam_C, and Kdec = K Gam_C / Gam staged transposed.
  {
    uint16_t* q_lo = qg + kChunk * kDim;
    // From the token phase's registers: warp = token, lane = 4 channels (8-byte stores).
#pragma unroll
    for (int i = 0; i < kTokPerWarp; ++i) {
      const int t = warp + Th::kWarps * i;
      if (Th::kTokPerWarp * Th::kWarps != kChunk && t >= kChunk) break;
      const float4 gg = *reinterpret_cast<const float4*>(&sm.G[t][4 * lane]);
      uint2 hi, lo;
      PrepSplitPair(Bf16(qraw[i].x & 0xffff) * rqv[i] * Decay2(gg.x),
                    Bf16(qraw[i].x >> 16) * rqv[i] * Decay2(gg.y), &hi.x, &lo.x);
      PrepSplitPair(Bf16(qraw[i].y & 0xffff) * rqv[i] * Decay2(gg.z),
                    Bf16(qraw[i].y >> 16) * rqv[i] * Decay2(gg.w), &hi.y, &lo.y);
      *reinterpret_cast<uint2*>(qg + t * kDim + 4 * lane) = hi;
      *reinterpret_cast<uint2*>(q_lo + t * kDim + 4 * lane) = lo;
    }
    const int k = tid % kDim;
    const float gl = sm.G[kChunk - 1][k];
    // Rows of kdt are 66 words apart: lanes 16 apart would share a bank at the same token
    // (2-way); the upper half-warp takes the next token instead (a rotation of the token loop).
    const int rot = (k >> 4) & 1;
    // The checkpoint instance's decays exp2(G_63 - G_t) from the FP64 sums (the FP32 difference
    // plus that of the rounding errors): G_t reaches ~-400 over a chunk, and the difference of two
    // rounded sums carried ~3e-5 into Kdec, which the checkpoint state pass turned into S0 error
    // and dA_log's cancellation amplified on short documents (host emulator,
    // bench/results/kda_h200.md, twentieth and twenty-first sessions).
    // Two loops: one loop with the error term under `if constexpr` reallocated the forward
    // instance's registers (same bits, other SASS); this way the forward's code is unchanged.
    static_assert(PrepTraits::kKdTStride > kChunk, "the end's rounding error in the padding");
    if constexpr (kCheckpoint) {
      const float gl_err = sm.u.kdt[k][kChunk];
#pragma unroll 8
      for (int t0 = tid / kDim; t0 < kChunk; t0 += kThreads / kDim) {
        const int t = (t0 + rot) % kChunk;
        const float d = (gl - sm.G[t][k]) + (gl_err - sm.u.kdt[k][t]);
        sm.u.kdt[k][t] = Kh(sm, t, k) * Decay2(d);
      }
    } else {
#pragma unroll 8
      for (int t0 = tid / kDim; t0 < kChunk; t0 += kThreads / kDim) {
        const int t = (t0 + rot) % kChunk;
        sm.u.kdt[k][t] = Kh(sm, t, k) * Decay2(gl - sm.G[t][k]);
      }
    }
    if (tid < kDim) gamc[tid] = Decay2(sm.G[kChunk - 1][tid]);
    __syncthreads();
    uint16_t* kd = reinterpret_cast<uint16_t*>(kdt);
    for (int e = tid; e < kDim * kChunk / 2; e += kThreads) {
      const int k = e / (kChunk / 2), t = 2 * (e % (kChunk / 2));
      const float2 x = *reinterpret_cast<const float2*>(&sm.u.kdt[k][t]);
      StorePair(kd, kd + kDim * kChunk, k * kChunk, t, x.x, x.y);
      if constexpr (kCheckpoint) {
        // The third part (Split3Pair's lo; its hi and mid are StorePair's hi and lo): with it the
        // checkpoint state pass multiplies Kdec^T to about FP32 accuracy, where hi + lo alone
        // (~2^-17) limited S0 and through it dA_log on short documents (host emulator,
        // bench/results/kda_h200.md, eighteenth session). Stored with the 128-byte swizzle of a
        // record tile (Swz128), so that one bulk copy lays it out in shared memory as the TMA
        // lays out hi and lo.
        uint32_t hi, mid, lo;
        Split3Pair(x.x, x.y, &hi, &mid, &lo);
        *reinterpret_cast<uint32_t*>(
            Swz128(a.chunk_kdt3 + (slot * H + h) * kDim * kChunk, k, t >> 3) + (t & 7)) = lo;
      }
    }
    __syncthreads();  // the staging buffer is reused below
  }

#pragma unroll 1
  for (int J = 0; J < Tr::kSubs; ++J) {
    SubChunkProducts<kThreads, kCheckpoint>(c, sm, J, m_hi, m_lo);
  }

  // Tinv = (I + A)^-1 in FP32: 16 x 16 diagonal blocks by forward substitution (one column per
  // thread), then block rows Tinv[J, <J] = -Tinv[J, J] (A[J, <J] Tinv[<J, <J]).
  uint16_t* vs =
      reinterpret_cast<uint16_t*>(reinterpret_cast<unsigned char*>(&sm.u) + Tr::kVStageOffset);
  // Padding tokens get zeros: their Tinv' columns are zero, and 0 x NaN would not be.
  for (int e = tid; e < kChunk * kDim / 8; e += kThreads) {
    const int t = e / (kDim / 8), p = e % (kDim / 8);
    if (t < c.len) {
      CpAsync<16>(VPiece(vs, t, p), a.v + TokenBase(c, t) + 8 * p);
    } else {
      *reinterpret_cast<uint4*>(VPiece(vs, t, p)) = make_uint4(0u, 0u, 0u, 0u);
    }
  }
  CpAsyncCommit();
  {
    float4* tv = reinterpret_cast<float4*>(&sm.u.s.tinv[0][0]);
    for (int e = tid; e < kChunk * Tr::kTStride / 4; e += kThreads) {
      tv[e] = make_float4(0.f, 0.f, 0.f, 0.f);
    }
    __syncthreads();
    if (tid < kChunk) {
      const int b = (tid / Tr::kSub) * Tr::kSub, j = tid % Tr::kSub;
      float x[Tr::kSub];
#pragma unroll
      for (int i = 0; i < Tr::kSub; ++i) {
        float acc = i == j ? 1.f : 0.f;
#pragma unroll
        for (int l = 0; l < i; ++l) acc = fmaf(-PackedA(sm, b + i, b + l), x[l], acc);
        x[i] = acc;
      }
#pragma unroll
      for (int i = 0; i < Tr::kSub; ++i) sm.u.s.tinv[b + i][b + j] = x[i];
    }
    __syncthreads();
    // Fixed-length (unrolled) sums: the extra terms multiply exact zeros of the triangular
    // factors and add +-0, so the result is bitwise the ragged sums'. A thread takes 4 adjacent
    // columns of one row (RowTimesCols4: the values are bitwise those of one output per thread).
    constexpr int kCols = 4;
#pragma unroll
    for (int J = 1; J < Tr::kSubs; ++J) {
      const int n = J * Tr::kSub, per_row = n / kCols, items = Tr::kSub * per_row;
#pragma unroll
      for (int e0 = 0; e0 < items; e0 += kThreads) {
        const int e = e0 + tid;
        if (e < items) {
          const int r = e / per_row, cc = kCols * (e % per_row);
          *reinterpret_cast<float4*>(&sm.u.s.r[r][cc]) =
              RowTimesCols4(&PackedA(sm, n + r, 0), n, [&](int l) { return &sm.u.s.tinv[l][cc]; });
        }
      }
      __syncthreads();
#pragma unroll
      for (int e0 = 0; e0 < items; e0 += kThreads) {
        const int e = e0 + tid;
        if (e < items) {
          const int r = e / per_row, cc = kCols * (e % per_row);
          const float4 acc = RowTimesCols4(&sm.u.s.tinv[n + r][n], Tr::kSub,
                                           [&](int l) { return &sm.u.s.r[l][cc]; });
          *reinterpret_cast<float4*>(&sm.u.s.tinv[n + r][cc]) =
              make_float4(-acc.x, -acc.y, -acc.z, -acc.w);
        }
      }
      __syncthreads();
    }
    // Split Tinv (for W), and Tinv' = Tinv diag(beta) (for Uv: V enters as the BF16 it is) into
    // the dead A buffer, packed by 16 x 16 block (TinvBPiece). W keeps Tinv itself: its exact unit
    // diagonal would become beta_t's BF16x2 split in Tinv' (W's error 2.4e-6 -> 5.5e-6 rel-L2 in
    // the host emulator, kda_prep_records_acc_emu.cc).
    constexpr int kSplitIters = kChunk * kChunk / 2 / kThreads;
    static_assert(!kCheckpoint || kSplitIters * kThreads == kChunk * kChunk / 2, "whole rounds");
    uint32_t third[kCheckpoint ? kSplitIters : 1];  // Tinv' third parts, stored after the barrier
    float* const tinv_out =
        kCheckpoint ? a.chunk_tinv + (slot * H + h) * kda_layout::kChunkPFloats : nullptr;
    auto split = [&](int e, uint32_t* lo3) {
      const int t = e / (kChunk / 2), j = 2 * (e % (kChunk / 2));
      const float x0 = sm.u.s.tinv[t][j], x1 = sm.u.s.tinv[t][j + 1];
      StorePair(&sm.u.w.tinv[0][0][0], &sm.u.w.tinv[1][0][0], t * Tr::kTStride, j, x0, x1);
      const int mt = t / 16, ks = j / 16;
      if (ks <= mt) {
        // The checkpoint instance's FP32 Tinv, packed as P: the backward's [dKb | dVb] product.
        if constexpr (kCheckpoint) {
          *reinterpret_cast<float2*>(tinv_out + PackedIndex(t, j)) = make_float2(x0, x1);
        }
        uint32_t hi, lo;
        if constexpr (kCheckpoint) {
          Split3Pair(x0 * sm.bt[j], x1 * sm.bt[j + 1], &hi, &lo, lo3);
        } else {
          PrepSplitPair(x0 * sm.bt[j], x1 * sm.bt[j + 1], &hi, &lo);
        }
        *reinterpret_cast<uint32_t*>(TinvBPiece(sm, 0, mt, ks, t % 16, (j % 16) / 8) + j % 8) = hi;
        *reinterpret_cast<uint32_t*>(TinvBPiece(sm, 1, mt, ks, t % 16, (j % 16) / 8) + j % 8) = lo;
      }
    };
    if constexpr (kCheckpoint) {  // unrolled: `third` stays in registers
#pragma unroll
      for (int i = 0; i < kSplitIters; ++i) split(tid + i * kThreads, &third[i]);
    } else {
      for (int e = tid; e < kChunk * kChunk / 2; e += kThreads) split(e, nullptr);
    }
    CpAsyncWait<0>();  // V staged
    __syncthreads();
    if constexpr (kCheckpoint) {  // s.tinv is read: its space takes the third parts
#pragma unroll
      for (int i = 0; i < kSplitIters; ++i) {
        const int e = tid + i * kThreads;
        const int t = e / (kChunk / 2), j = 2 * (e % (kChunk / 2));
        const int mt = t / 16, ks = j / 16;
        if (ks <= mt) {
          *reinterpret_cast<uint32_t*>(TinvBPiece3(sm, mt, ks, t % 16, (j % 16) / 8) + j % 8) =
              third[i];
        }
      }
      __syncthreads();
    }
  }

  const int g = lane >> 2, tq = lane & 3;

  // Uv = Tinv' V. V's values are exact in BF16, so each part of Tinv' times V is one product: two
  // (hi, lo) in the forward, three in the checkpoint instance (its third into lo's accumulators),
  // with the B fragments straight from the staged V by ldmatrix.trans: no right-hand side build
  // and no barrier. An item: the token tiles (3 - p, p) and 16 columns (two n-tiles), 16 items of
  // 5 k-steps each. The forward computes it after W, the checkpoint instance before (its third
  // parts lie where W's right-hand side goes).
  auto uv_product = [&]() {
    constexpr int kVItems = 2 * (kDim / 16);
    auto piece = [vs](int t, int j) -> const uint16_t* { return VPiece(vs, t, j); };
#pragma unroll 1
    for (int item = warp; item < kVItems; item += Th::kWarps) {
      const int lo_mt = item & 1, hi_mt = 3 - lo_mt, n0 = (item >> 1) * 16;
      float acc[2][2][2][4];  // [token tile: hi, lo][n-tile][Tinv' hi, lo][fragment]
#pragma unroll
      for (int m = 0; m < 2; ++m) {
#pragma unroll
        for (int n = 0; n < 2; ++n) {
#pragma unroll
          for (int i = 0; i < 4; ++i) acc[m][n][0][i] = acc[m][n][1][i] = 0.f;
        }
      }
      for (int ks = 0; ks <= hi_mt; ++ks) {
        uint32_t b[2][2];
        LdmBT4(piece, ks * 16, n0, b[0], b[1]);
        // Token tile mt's Tinv' hi and lo times both n-tiles, into acc[m].
        auto tile = [&](int m, int mt) {
          uint32_t ah[4], al[4];
          LdmAP([&](int r, int q) { return TinvBPiece(sm, 0, mt, ks, r, q); }, ah);
          LdmAP([&](int r, int q) { return TinvBPiece(sm, 1, mt, ks, r, q); }, al);
#pragma unroll
          for (int n = 0; n < 2; ++n) {
            Mma(acc[m][n][0], ah, b[n]);
            Mma(acc[m][n][1], al, b[n]);
          }
          if constexpr (kCheckpoint) {
            uint32_t a3[4];
            LdmAP([&](int r, int q) { return TinvBPiece3(sm, mt, ks, r, q); }, a3);
#pragma unroll
            for (int n = 0; n < 2; ++n) Mma(acc[m][n][1], a3, b[n]);
          }
        };
        tile(0, hi_mt);
        if (ks <= lo_mt) tile(1, lo_mt);
      }
#pragma unroll
      for (int m = 0; m < 2; ++m) {
        const int mt = m ? lo_mt : hi_mt;
#pragma unroll
        for (int n = 0; n < 2; ++n) {
          const int col = n0 + 8 * n + 2 * tq;
#pragma unroll
          for (int hh = 0; hh < 2; ++hh) {
            const int t = mt * 16 + g + 8 * hh;
            *reinterpret_cast<float2*>(uv + t * kDim + col) =
                make_float2(acc[m][n][0][2 * hh] + acc[m][n][1][2 * hh],
                            acc[m][n][0][2 * hh + 1] + acc[m][n][1][2 * hh + 1]);
          }
        }
      }
    }
  };
  if constexpr (kCheckpoint) {
    uv_product();
    __syncthreads();  // Uv has read the third parts: W's right-hand side takes their space
  }
  // W = Tinv (beta K Gam), 64 columns at a time, BF16x3. Tinv is lower triangular, so token tile mt
  // needs k-steps 0 .. mt only. A work item is kNt 8-column tiles for the token tiles (3 - p, p),
  // p in {0, 1}: 5 k-steps either way, so all items cost the same; the old mapping (one warp per
  // token tile and 32 columns) made the slowest warp take 16 k-step units of 4 tiles, this one
  // 10. kNt = 2 for 8 warps (8 items, as many accumulators as before); 1 for 12 warps (16 items,
  // half the accumulators: the 80-register budget).
  {
    uint16_t* w_lo = negw + kChunk * kDim;
    constexpr int kNt = Th::kWarps >= 12 ? 1 : 2;
    constexpr int kItems = 2 * (kChunk / 8) / kNt;
#pragma unroll 1
    for (int cb = 0; cb < kDim / kChunk; ++cb) {
      // kThreads = (kThreads / 64) token pairs x 64 columns. The stores are transposed (row cl,
      // 36 words apart): with one token pair per warp, lanes 8 apart hit the same bank (4-way
      // conflicts; ncu: 55% of the kernel's excess shared wavefronts). Each group of 8 lanes
      // starts at a different pair (rot) instead, so the 32 lanes cover the 32 banks; G and k are
      // still read conflict-free (banks follow col).
      constexpr int kPairsPerPass = kThreads / kChunk;
      constexpr int kIters = kChunk / (2 * kPairsPerPass);
      // 384 threads (6 pairs a pass) would leave 2 of the 32 pairs unwritten (helper kda13).
      static_assert(kIters * kPairsPerPass == kChunk / 2, "every token pair in whole passes");
      const int cl = tid % kChunk, col = cb * kChunk + cl;
      const int rot = (cl >> 3) & 3;
#pragma unroll
      for (int it = 0; it < kIters; ++it) {
        const int j = 2 * ((tid / kChunk + kPairsPerPass * it + rot) % (kChunk / 2));
        const float x0 = sm.bt[j] * (Kh(sm, j, col) * Decay2(sm.G[j][col]));
        const float x1 = sm.bt[j + 1] * (Kh(sm, j + 1, col) * Decay2(sm.G[j + 1][col]));
        StorePair(&sm.u.w.rhs[0][0][0], &sm.u.w.rhs[1][0][0], cl * Tr::kTStride, j, x0, x1);
      }
      __syncthreads();
#pragma unroll 1
      for (int item = warp; item < kItems; item += Th::kWarps) {
        const int lo_mt = item & 1, hi_mt = 3 - lo_mt, nt0 = (item >> 1) * kNt;
        // [token tile: hi, lo][column tile][BF16x3 set][fragment]
        float acc[2][kNt][3][4];
#pragma unroll
        for (int m = 0; m < 2; ++m) {
#pragma unroll
          for (int n = 0; n < kNt; ++n) {
#pragma unroll
            for (int i = 0; i < 4; ++i) acc[m][n][0][i] = acc[m][n][1][i] = acc[m][n][2][i] = 0.f;
          }
        }
        for (int ks = 0; ks <= hi_mt; ++ks) {
          uint32_t hh[4], hl[4], lh[4], ll[4];
          LdmA<Tr::kTStride>(&sm.u.w.tinv[0][0][0], hi_mt * 16, ks * 16, hh);
          LdmA<Tr::kTStride>(&sm.u.w.tinv[1][0][0], hi_mt * 16, ks * 16, hl);
          const bool lo = ks <= lo_mt;
          if (lo) {
            LdmA<Tr::kTStride>(&sm.u.w.tinv[0][0][0], lo_mt * 16, ks * 16, lh);
            LdmA<Tr::kTStride>(&sm.u.w.tinv[1][0][0], lo_mt * 16, ks * 16, ll);
          }
#pragma unroll
          for (int n = 0; n < kNt; ++n) {
            uint32_t bh[2], bl[2];
            LdmB2<Tr::kTStride>(&sm.u.w.rhs[0][0][0], &sm.u.w.rhs[1][0][0], (nt0 + n) * 8, ks * 16,
                                bh, bl);
            Mma3(acc[0][n][0], acc[0][n][1], acc[0][n][2], hh, hl, bh, bl);
            if (lo) Mma3(acc[1][n][0], acc[1][n][1], acc[1][n][2], lh, ll, bh, bl);
          }
        }
#pragma unroll
        for (int m = 0; m < 2; ++m) {
          const int mt = m ? lo_mt : hi_mt;
#pragma unroll
          for (int n = 0; n < kNt; ++n) {
            const float(&x)[3][4] = acc[m][n];
            const int col = cb * kChunk + (nt0 + n) * 8 + 2 * tq;
#pragma unroll
            for (int hh = 0; hh < 2; ++hh) {
              const int t = mt * 16 + g + 8 * hh;
              const float x0 = x[0][2 * hh] + (x[1][2 * hh] + x[2][2 * hh]);
              const float x1 = x[0][2 * hh + 1] + (x[1][2 * hh + 1] + x[2][2 * hh + 1]);
              StorePair(negw, w_lo, t * kDim, col, -x0, -x1);
            }
          }
        }
      }
      // Before the next block overwrites the right-hand side; Uv below reads neither it nor
      // anything the W items write.
      if (cb + 1 < kDim / kChunk) __syncthreads();
    }
  }

  if constexpr (!kCheckpoint) uv_product();
}

// ---- kernel 2: the state pass over chunks ------------------------------------------------------

// kCheckpoint: the chunked backward's recompute (a.checkpoints non-null), which stores every
// chunk-start state and no output; a separate instantiation, so the forward's code is unchanged.
// kMc: the pass (16, 32 or 64 rows; forward or checkpoint) launched as 2-CTA clusters
// (McBarriers, McMaps): the record operands common to the slices arrive by TMA multicast on
// mbarriers, issued by one thread of each CTA. The checkpoint instance writes no o: it copies
// neither Q Gam nor M and its o warps only keep the barriers (the forward's schedule otherwise).
template <int kRows, bool kCheckpoint, bool kMc = false>
__global__ void __launch_bounds__(StateTraits<kRows, kCheckpoint>::kThreads, 1)
    KdaChunkStateKernel(const __grid_constant__ FwdArgs a, const char* __restrict__ ws,
                        const __grid_constant__ McParam<kMc> maps = {}) {
  using Tr = StateTraits<kRows, kCheckpoint>;
  static_assert(Tr::kKStride == StateTraits<kRows>::kKStride &&
                    Tr::kTStride == StateTraits<kRows>::kTStride &&
                    Tr::kUvStride == StateTraits<kRows>::kUvStride &&
                    Tr::kStages == StateTraits<kRows>::kStages,
                "the shared layouts (sized by the forward's traits) fit both instances");
  static_assert(!kMc || (kRows == 16 && Tr::kStages == 2 && Tr::kOWarps) ||
                    (kRows == 64 && Tr::kStages == 1 && (Tr::kOWarps || kCheckpoint)) ||
                    (kRows == 32 && Tr::kStages == 1 && !Tr::kOWarps),
                "multicast: the 16-row (double-buffered group 1), 32- or 64-row pass");
  // The 64-row layout (McSmem<64>): -W single, M apart from Kdec^T with its own barriers.
  constexpr bool kMc64 = kMc && kRows == 64;
  // The 32-row layout (McSmem<32>): -W and Q Gam single, Kdec^T | M as at 16 rows; the copies
  // issued by a chain thread.
  constexpr bool kMc32 = kMc && kRows == 32;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  unsigned char* const smem = kMc ? AlignSmem1024(smem_raw) : smem_raw;
  using Sm = StateSmemOf<kRows, kMc>;
  Sm& sm = *reinterpret_cast<Sm*>(smem);
  // The chunked backward launches this pass behind the reverse chain and its grad kernel behind
  // this pass, each as a programmatic dependent: the next may begin once every CTA here has.
  if constexpr (kCheckpoint) cudaTriggerProgrammaticLaunchCompletion();
  const int slice = blockIdx.x;
  const int64_t h = blockIdx.y;
  const int64_t n = blockIdx.z;
  const int64_t H = a.s.H;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int g = lane >> 2, tq = lane & 3;
  // The chain's warps (U, S1 and the state; all warps without o warps) and o's warps.
  const bool chain = !Tr::kOWarps || warp < Tr::kRoleWarps, ow = !Tr::kOWarps || !chain;
  // Token tile of U and o, and K quarter of the state step; the kVP 16-row state tiles of both,
  // vt0 .. vt0 + kVP - 1. With two o warps per scheduler (warp % 4), the second takes the token
  // tiles in reverse, so that each scheduler's o warps do 1 + 4 = 2 + 3 k-steps of the causal
  // M U (the same accumulators in the same order, only another warp): with o on token tile
  // warp % 4 throughout, the last scheduler's tensor pipe got 4 + 4 k-steps and the first 1 + 1.
  constexpr int kVP = Tr::kVPerWarp;
  const int vg = (warp % Tr::kRoleWarps) >> 2, vt0 = kVP * vg;
  const int mt =
      Tr::kOWarps && Tr::kRoleWarps >= 8 && !chain && (vg & 1) ? 3 - (warp & 3) : warp & 3;
  const int v0 = slice * kRows;

  int64_t bos, eos;
  DocBounds(a.s, n, &bos, &eos);
  const int64_t chunks = (eos - bos + kChunk - 1) / kChunk;
  // Chunk c's slot and head: its record, checkpoint and U (kda_layout's slot rule).
  auto slot_head = [&](int64_t c) { return (bos / kChunk + n + c) * H + h; };
  const char* rec0 = ws + slot_head(0) * kda_layout::kRecBytes;
  auto record = [&](int64_t c) { return rec0 + c * H * kda_layout::kRecBytes; };

  // Group 1 (-W, Q Gam, Uv): read by the U / o products. Group 2 (Kdec^T, M, Gam_C): read after.
  // Every copy loop has a compile-time trip count and a piece index fixed per thread (the thread
  // count is a multiple of the pieces per row), so each copy is the thread's base address plus a
  // constant: the generic loop's division, modulo and 64-bit address arithmetic cost ~12
  // instructions per 16-byte copy, ~40% of the 16-row pass's instructions (ncu, 2026-11-30).
  constexpr int kT = Tr::kThreads;
  constexpr int kUvPieces = kRows * 4 / 16;
  static_assert(kT % 16 == 0 && kT % kUvPieces == 0 && (2 * kChunk * 16) % kT == 0 &&
                    (kChunk * kUvPieces) % kT == 0 && (2 * kDim * 8) % kT == 0 &&
                    (2 * kChunk * 8) % kT == 0 && kT >= kDim * 4 / 16,
                "whole copy rounds, one piece index per thread");
  // Rows of 16 pieces (-W, Q Gam: 256 bytes), of 8 pieces (Kdec^T, M: 128 bytes), Uv's pieces.
  const int r16 = tid / 16, p16 = tid % 16, r8 = tid / 8, p8 = tid % 8;
  const int ru = tid / kUvPieces, pu = tid % kUvPieces;
  const int64_t g16 = int64_t{r16} * kDim * 2 + 16 * p16, g8 = int64_t{r8} * kChunk * 2 + 16 * p8;
  const int64_t gu = (int64_t{ru} * kDim + v0) * 4 + 16 * pu;
  const int s16 = r16 * Tr::kKStride + 8 * p16, s8 = r8 * Tr::kTStride + 8 * p8;
  auto load_uv = [&](const char* rec, int b) {
    const char* u = rec + kda_layout::kRecUv + gu;
#pragma unroll
    for (int i = 0; i < kChunk * kUvPieces / kT; ++i) {
      constexpr int kStep = kT / kUvPieces;
      CpAsync<16>(&sm.uv[b][ru + i * kStep][4 * pu], u + i * kStep * kDim * 4);
    }
  };
  // Not in multicast mode (McSmem: other buffer shapes).
  auto load_group1 = [&](const char* rec, int b) {
    if constexpr (!kMc) {
      const char* w = rec + kda_layout::kRecNegW + g16;
      const char* q = rec + kda_layout::kRecQg + g16;
      uint16_t* sw = &sm.w[b][0][0][0] + s16;
      uint16_t* sq = &sm.qg[b][0][0][0] + s16;
#pragma unroll
      for (int i = 0; i < 2 * kChunk * 16 / kT; ++i) {
        constexpr int kStep = kT / 16;  // rows per round
        CpAsync<16>(sw + i * kStep * Tr::kKStride, w + i * kStep * kDim * 2);
        if (!kCheckpoint) CpAsync<16>(sq + i * kStep * Tr::kKStride, q + i * kStep * kDim * 2);
      }
      load_uv(rec, b);
    }
  };
  // `rows` rows of 8 pieces (kChunk BF16 a row), kT / 8 rows a round.
  auto copy_rows8 = [&](uint16_t* dst, const char* src, auto rows) {
    constexpr int kStep = kT / 8;
#pragma unroll
    for (int i = 0; i < decltype(rows)::value / kStep; ++i) {
      CpAsync<16>(dst + i * kStep * Tr::kTStride, src + i * kStep * kChunk * 2);
    }
  };
  // The checkpoint instance's third parts of Kdec^T (chunk c's, pre-swizzled as a record tile) and
  // of U^T live where the forward keeps M and Q Gam, which this instance never reads.
  auto kdt3_src = [&](int64_t c) {
    return reinterpret_cast<const char*>(a.chunk_kdt3 + slot_head(c) * kDim * kChunk);
  };
  auto load_group2 = [&](int64_t c) {
    if constexpr (!kMc) {
      const char* rec = record(c);
      copy_rows8(&sm.kd[0][0][0] + s8, rec + kda_layout::kRecKdecT + g8,
                 std::integral_constant<int, 2 * kDim>{});
      if constexpr (kCheckpoint) {
        copy_rows8(&sm.m[0][0][0] + s8, kdt3_src(c) + g8, std::integral_constant<int, kDim>{});
      } else {
        copy_rows8(&sm.m[0][0][0] + s8, rec + kda_layout::kRecM + g8,
                   std::integral_constant<int, 2 * kChunk>{});
      }
      if (tid < kDim * 4 / 16) CpAsync<16>(&sm.gc[4 * tid], rec + kda_layout::kRecGamC + 16 * tid);
    }
  };

  // Multicast mode: one thread of the first o warp (token tile 0: the least M U work; at 32 rows,
  // without o warps, of the first chain warp, likewise) issues this CTA's tiles (per chunk: one
  // column half of -W and of Q Gam each; rank 0 Kdec^T hi and M, rank 1 Kdec^T lo and Gam_C) and
  // handles the barriers. Row-wise bulk copies (641 a chunk) cost ~8 instructions each in a warp's
  // ELECT loop (their operands are uniform); tiles are 7 a chunk.
  McBarriersOf<kRows>& mb = *reinterpret_cast<McBarriersOf<kRows>*>(smem + sizeof(Sm));
  const uint32_t rank = kMc ? ClusterCtaRank() : 0, peer = rank ^ 1;
  const bool lead = kMc && warp == (Tr::kOWarps ? Tr::kRoleWarps : 0) && lane == 0;
  constexpr uint16_t kMcMask = 0x3;
  constexpr int kTile = McSmem<16>::kTile;
  // Kdec^T hi, lo (, M hi | lo). The checkpoint instance writes no o, so it copies neither M nor
  // Q Gam (43% of the record bytes a step), and its o warps only keep the barriers.
  constexpr int kKdTiles = kMc64 || kCheckpoint ? 2 : 3;
  constexpr uint32_t kMcBytesWq = 2 * kTile * 2;
  constexpr uint32_t kMcBytesKd = (kKdTiles + (kCheckpoint ? 1 : 0)) * kTile * 2 + kDim * 4;
  static_assert(kda_layout::kRecQg == kda_layout::kRecNegW + 2 * kChunk * kDim * 2 &&
                    kda_layout::kRecM == kda_layout::kRecKdecT + 2 * kDim * kChunk * 2,
                "-W | Q Gam and Kdec^T | M adjacent in the record");
  // The buffers of the tiles (multicast mode only).
  auto w_buf = [&](int b) -> uint16_t* {
    if constexpr (kMc) return sm.w[b];
    return nullptr;
  };
  auto kd_buf = [&](int b) -> uint16_t* {
    if constexpr (kMc) return sm.kd[b];
    return nullptr;
  };
  auto qg_buf = [&]() -> uint16_t* {
    if constexpr (kMc) return sm.qg;
    return nullptr;
  };
  auto m_buf = [&]() -> uint16_t* {
    if constexpr (kMc64) return sm.m;
    return nullptr;
  };
  auto gc_buf = [&](int b) -> float* {
    if constexpr (kMc) {
      return sm.gc[b];
    } else {
      return sm.gc;
    }
  };
  // The checkpoint instance's third part of Kdec^T in buffer b (one 128-row tile) and of U^T.
  auto kd3_tile = [&](int b) -> uint16_t* {
    if constexpr (kMc64) {
      return sm.qg + b * kTile;
    } else if constexpr (kMc) {
      return sm.kd[b] + 2 * kTile;
    } else {
      static_assert(sizeof(sm.m) >= kDim * Tr::kTStride * 2, "a 128-row plane fits M's buffer");
      return &sm.m[0][0][0];
    }
  };
  auto kd3_piece = [&](int b, int r, int q) -> const uint16_t* {
    if constexpr (kMc) {
      return Swz128(kd3_tile(b), r, q);
    } else {
      return Swz128<Tr::kTStride>(kd3_tile(b), r, q);
    }
  };
  auto u3_plane = [&]() -> uint16_t* {
    if constexpr (kMc64) {
      static_assert(sizeof(sm.m) >= kRows * Tr::kTStride * 2, "U^T's plane fits M's buffer");
      return sm.m;
    } else if constexpr (kMc) {
      static_assert(sizeof(sm.qg) >= kRows * Tr::kTStride * 2, "U^T's plane fits Q Gam's");
      return sm.qg;
    } else {
      static_assert(sizeof(sm.qg) >= kRows * Tr::kTStride * 2, "U^T's plane fits Q Gam's");
      return &sm.qg[0][0][0][0];
    }
  };

  // A tile of chunk c's record at (x, y) of `map`; the emulator copies it from emu_src instead.
  auto mc_tile = [&](uint16_t* dst, const CUtensorMap* map, int x, int y, int64_t c, uint64_t* bar,
                     const char* emu_src, int emu_row_bytes) {
    TmaTileMulticast(dst, map, x, y, static_cast<int>(slot_head(c)), bar, kMcMask, emu_src,
                     emu_row_bytes);
  };
  // -W (m = 0) or Q Gam (m = 1) of chunk c into dst: column halves 0 .. 63, 64 .. 127 of its 128
  // rows (hi, lo), rank `half` issuing half `half`.
  auto mc_wq = [&](int m, int64_t c, uint16_t* dst, uint64_t* bar) {
    if (kCheckpoint && m == 1) return;
    MbarArriveExpectTx(bar, kMcBytesWq);
    const char* rec = record(c);
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      if (!kMcBothRanks && static_cast<int>(rank) != half) continue;
      mc_tile(dst + half * kTile, MapOf(maps, 0), 64 * half, 2 * kChunk * m, c, bar,
              rec + kda_layout::kRecNegW + (2 * kChunk * m) * kDim * 2 + 128 * half, kDim * 2);
    }
  };
  // Kdec^T | M of chunk c into buffer b: the 384 rows of Kdec^T (hi, lo) and M (hi, lo) as three
  // tiles (64 rows: Kdec^T's two), and Gam_C.
  auto mc_kd = [&](int64_t c, int b) {
    MbarArriveExpectTx(&mb.full_kd[b], kMcBytesKd);
    const char* rec = record(c);
#pragma unroll
    for (int t = 0; t < kKdTiles; ++t) {
      if (!kMcBothRanks && static_cast<int>(rank) != (t == 1 ? 1 : 0)) continue;
      mc_tile(kd_buf(b) + t * kTile, MapOf(maps, 1), 0, 128 * t, c, &mb.full_kd[b],
              rec + kda_layout::kRecKdecT + 128 * t * kChunk * 2, kChunk * 2);
    }
    if (kCheckpoint && (kMcBothRanks || rank == 0)) {
      BulkMulticast(kd3_tile(b), kdt3_src(c), kTile * 2, &mb.full_kd[b], kMcMask);
    }
    if (kMcBothRanks || rank == 1) {
      BulkMulticast(gc_buf(b), rec + kda_layout::kRecGamC, kDim * 4, &mb.full_kd[b], kMcMask);
    }
  };
  // 64 rows: M (hi | lo) of chunk c, the third tile of the Kdec^T | M map, issued by rank 0.
  auto mc_m = [&](int64_t c) {
    if constexpr (kMc64 && !kCheckpoint) {
      MbarArriveExpectTx(&mb.full_m, kTile * 2);
      if (kMcBothRanks || rank == 0) {
        mc_tile(m_buf(), MapOf(maps, 1), 0, 2 * kDim, c, &mb.full_m, record(c) + kda_layout::kRecM,
                kChunk * 2);
      }
    }
  };
  if constexpr (kMc) {
    if (tid == 0) {
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        MbarInit(&mb.full_w[i], 1);  // the local expect_tx
        MbarInit(&mb.full_kd[i], 1);
      }
      MbarInit(&mb.full_q, 1);
      MbarInit(&mb.empty, 1);  // the peer's arrival
      if constexpr (kMc64) {
        MbarInit(&mb.full_m, 1);
        MbarInit(&mb.empty_m, 1);  // rank 1's arrival
      }
      MbarInitFence();
    }
    ClusterSync();  // both CTAs' barriers initialised before any copy or arrival reaches them
  }

  // The warp's state: rows 16 (vt0 + j) + g (+ 8) of the slice, columns 32 mt + 8 nt + 2 tq (+ 1).
  float st[kVP][4][4];
  {
    const float* init = a.initial_state == nullptr
                            ? nullptr
                            : a.initial_state + (n * H + h) * kDimSq + int64_t{v0} * kDim;
#pragma unroll
    for (int j = 0; j < kVP; ++j) {
      LoadStateTile(chain && init != nullptr ? init + 16 * (vt0 + j) * kDim + 32 * mt : nullptr,
                    st[j]);
    }
  }
  // S0 split into shared memory.
  auto store_state = [&]() {
#pragma unroll
    for (int j = 0; j < kVP; ++j) {
      StoreStateTileSplit<Tr::kKStride>(&sm.s[0][0][0], &sm.s[1][0][0], 16 * (vt0 + j), 32 * mt,
                                        st[j]);
    }
  };
  if (chain) store_state();
  // The FP32 state slice to global memory (a checkpoint, or final_state), `dst` at its row v0.
  auto write_state = [&](float* dst) {
#pragma unroll
    for (int j = 0; j < kVP; ++j) WriteStateTile(dst + 16 * (vt0 + j) * kDim + 32 * mt, st[j]);
  };
  // Commit order: 1(0), [empty, 1(1),] 2(0), then per chunk c: 1(c + kStages), 2(c + 1). So at
  // the top of chunk c exactly kWaitTop groups are newer than group 1 of chunk c.
  // Multicast mode commits Uv alone: 1(0), 1(1), then per chunk c: 1(c + 2); one newer at the top.
  // Its tiles: -W (0), -W (1), Q Gam (0), Kdec^T | M (0), then in chunk c (after the second
  // barrier): Q Gam (c + 1), Kdec^T | M (c + 1), -W (c + 2).
  // At 64 rows: Uv 1(0), then per chunk c: 1(c + 1), none newer at the top. Tiles -W (0), Q Gam
  // (0), Kdec^T (0), M (0), then in chunk c: M (c) at the top (c > 0), Q Gam (c + 1), Kdec^T
  // (c + 1) and -W (c + 1) after the second barrier.
  // At 32 rows: Uv as at 64 rows; tiles -W (0), Q Gam (0), Kdec^T | M (0), then in chunk c after
  // the second barrier: -W (c + 1), Q Gam (c + 1), Kdec^T | M (c + 1).
  constexpr int kWaitTop = kMc64 || kMc32 ? 0 : kMc ? 1 : Tr::kStages == 2 ? 3 : 1;
  if (kMc && chunks > 0) {
    load_uv(record(0), 0);
    CpAsyncCommit();
    if constexpr (Tr::kStages == 2) {
      if (chunks > 1) load_uv(record(1), 1);
      CpAsyncCommit();
    }
    if (lead) {
      mc_wq(0, 0, w_buf(0), &mb.full_w[0]);
      if (Tr::kStages == 2 && chunks > 1) mc_wq(0, 1, w_buf(1), &mb.full_w[1]);
      mc_wq(1, 0, qg_buf(), &mb.full_q);
      mc_kd(0, 0);
      mc_m(0);
    }
  } else if (chunks > 0) {
    load_group1(record(0), 0);
    CpAsyncCommit();
    if constexpr (Tr::kStages == 2) {
      CpAsyncCommit();
      if (chunks > 1) load_group1(record(1), 1);
      CpAsyncCommit();
    }
    load_group2(0);
    CpAsyncCommit();
  }

  for (int64_t c = 0; c < chunks; ++c) {
    const int b = static_cast<int>(c % Tr::kStages);
    // The Kdec^T | Gam_C buffer: c % 2 at both widths (b at 16 rows).
    const int kb = Tr::kStages == 2 ? b : static_cast<int>(c & 1);
    // Checkpoint mode (the chunked backward's recompute): the chunk-start state S0, FP32, at the
    // chunk's slot, so the backward's per-chunk pass needs no chain of its own.
    if (kCheckpoint && chain) {
      write_state(a.checkpoints + slot_head(c) * kDimSq + int64_t{v0} * kDim);
    }
    CpAsyncWait<kWaitTop>();  // group 1 (multicast: Uv) of chunk c
    __syncthreads();
    if constexpr (kMc64) {
      // M (c) into its buffer once rank 1 has read M (c - 1) (its last barrier of chunk c - 1);
      // this CTA's reads of it are done (the barrier above).
      if (lead && c > 0) {
        if (!kCheckpoint && rank == 0) MbarWait(&mb.empty_m, static_cast<uint32_t>(c - 1) & 1);
        mc_m(c);
      }
      if (chain) {
        MbarWait(&mb.full_w[0], static_cast<uint32_t>(c) & 1);
      } else if (!kCheckpoint) {
        MbarWait(&mb.full_q, static_cast<uint32_t>(c) & 1);
      }
    } else if constexpr (kMc32) {  // the chain warps read both
      if (chain) {
        MbarWait(&mb.full_w[0], static_cast<uint32_t>(c) & 1);
        if (!kCheckpoint) MbarWait(&mb.full_q, static_cast<uint32_t>(c) & 1);
      }
    } else if constexpr (kMc) {  // the chain reads -W, the o warps Q Gam
      if (chain) {
        MbarWait(&mb.full_w[b], static_cast<uint32_t>(c >> 1) & 1);
      } else if (!kCheckpoint) {
        MbarWait(&mb.full_q, static_cast<uint32_t>(c) & 1);
      }
    }

    // U = Uv - W S0^T and the inter-chunk part of o, (Q Gam) S0^T: token tile mt, rows vt. With o
    // warps, the chain's warps take U and the o warps (Q Gam) S0^T, each accumulator getting the
    // same mma sequence as in one warp (o is bitwise the same).
    float u0[kVP][2][4], u1[kVP][2][4], u2[kVP][2][4];
    float o0[kVP][2][4], o1[kVP][2][4], o2[kVP][2][4];
#pragma unroll
    for (int j = 0; j < kVP; ++j) {
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) {
        const int row = mt * 16 + g, col = (vt0 + j) * 16 + nt * 8 + 2 * tq;
        if (chain) {
          u0[j][nt][0] = sm.uv[b][row][col];
          u0[j][nt][1] = sm.uv[b][row][col + 1];
          u0[j][nt][2] = sm.uv[b][row + 8][col];
          u0[j][nt][3] = sm.uv[b][row + 8][col + 1];
        }
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          u1[j][nt][i] = u2[j][nt][i] = o0[j][nt][i] = o1[j][nt][i] = o2[j][nt][i] = 0.f;
        }
      }
    }
    if constexpr (Tr::kOWarps) {
      // One operand and accumulator set per warp: called once per role, so that every
      // accumulator index stays static (registers). The A fragments serve the warp's kVP tiles.
      auto product = [&](const uint16_t* a_hi, const uint16_t* a_lo, float(&x0)[kVP][2][4],
                         float(&x1)[kVP][2][4], float(&x2)[kVP][2][4]) {
      // Not unrolled with two tiles (four accumulators a k-step): unrolled by two, the 64-row
      // instance with the reversed o warps spilled 16 bytes (128 registers).
#pragma unroll(kVP == 2 ? 1 : 2)
        for (int ks = 0; ks < kDim / 16; ++ks) {
          uint32_t ah[4], al[4];
          if constexpr (kMc) {  // a_hi: the column halves' tiles, planes hi, lo in their rows
            const uint16_t* t = a_hi + (ks >> 2) * kTile;
            const int r0 = mt * 16, q0 = 2 * (ks & 3);
            LdmAP([&](int r, int q) { return Swz128(t, r0 + r, q0 + q); }, ah);
            LdmAP([&](int r, int q) { return Swz128(t, kChunk + r0 + r, q0 + q); }, al);
          } else {
            LdmA<Tr::kKStride>(a_hi, mt * 16, ks * 16, ah);
            LdmA<Tr::kKStride>(a_lo, mt * 16, ks * 16, al);
          }
#pragma unroll
          for (int j = 0; j < kVP; ++j) {
#pragma unroll
            for (int nt = 0; nt < 2; ++nt) {
              uint32_t sh[2], sl[2];
              LdmB2<Tr::kKStride>(&sm.s[0][0][0], &sm.s[1][0][0], (vt0 + j) * 16 + nt * 8, ks * 16,
                                  sh, sl);
              Mma3(x0[j][nt], Tr::kSplitAcc ? x1[j][nt] : x0[j][nt],
                   Tr::kSplitAcc ? x2[j][nt] : x0[j][nt], ah, al, sh, sl);
            }
          }
        }
      };
      if constexpr (kMc) {
        if (chain) {
          product(w_buf(b), nullptr, u0, u1, u2);
        } else if (!kCheckpoint) {
          product(qg_buf(), nullptr, o0, o1, o2);
        }
      } else if (chain) {
        product(&sm.w[b][0][0][0], &sm.w[b][1][0][0], u0, u1, u2);
      } else if (!kCheckpoint) {
        product(&sm.qg[b][0][0][0], &sm.qg[b][1][0][0], o0, o1, o2);
      }
    } else {
#pragma unroll 2
      for (int ks = 0; ks < kDim / 16; ++ks) {
        uint32_t wh[4], wl[4], qh[4], ql[4];
        if constexpr (kMc) {  // the column halves' tiles, planes hi, lo in their rows
          const uint16_t* tw = w_buf(0) + (ks >> 2) * kTile;
          const uint16_t* tq = qg_buf() + (ks >> 2) * kTile;
          const int r0 = mt * 16, q0 = 2 * (ks & 3);
          LdmAP([&](int r, int q) { return Swz128(tw, r0 + r, q0 + q); }, wh);
          LdmAP([&](int r, int q) { return Swz128(tw, kChunk + r0 + r, q0 + q); }, wl);
          if constexpr (!kCheckpoint) {
            LdmAP([&](int r, int q) { return Swz128(tq, r0 + r, q0 + q); }, qh);
            LdmAP([&](int r, int q) { return Swz128(tq, kChunk + r0 + r, q0 + q); }, ql);
          }
        } else {
          LdmA<Tr::kKStride>(&sm.w[b][0][0][0], mt * 16, ks * 16, wh);
          LdmA<Tr::kKStride>(&sm.w[b][1][0][0], mt * 16, ks * 16, wl);
          if constexpr (!kCheckpoint) {
            LdmA<Tr::kKStride>(&sm.qg[b][0][0][0], mt * 16, ks * 16, qh);
            LdmA<Tr::kKStride>(&sm.qg[b][1][0][0], mt * 16, ks * 16, ql);
          }
        }
#pragma unroll
        for (int j = 0; j < kVP; ++j) {
#pragma unroll
          for (int nt = 0; nt < 2; ++nt) {
            uint32_t sh[2], sl[2];
            LdmB2<Tr::kKStride>(&sm.s[0][0][0], &sm.s[1][0][0], (vt0 + j) * 16 + nt * 8, ks * 16,
                                sh, sl);
            Mma3(u0[j][nt], Tr::kSplitAcc ? u1[j][nt] : u0[j][nt],
                 Tr::kSplitAcc ? u2[j][nt] : u0[j][nt], wh, wl, sh, sl);
            if constexpr (!kCheckpoint) {
              Mma3(o0[j][nt], Tr::kSplitAcc ? o1[j][nt] : o0[j][nt],
                   Tr::kSplitAcc ? o2[j][nt] : o0[j][nt], qh, ql, sh, sl);
            }
          }
        }
      }
    }
    // U^T into shared memory, split (token mt*16 + g (+8), state row vt*16 + nt*8 + 2 tq (+1)):
    // the U tiles transposed by stmatrix, where 2-byte scalar stores took 32 per plane and warp.
    // The checkpoint instance also stores U (FP32, [t][v]) at the chunk's slot: the backward's
    // per-chunk pass takes the U that made S1 instead of computing it again.
    if (chain) {
#pragma unroll
      for (int j = 0; j < kVP; ++j) {
        uint32_t uh[4], ul[4], u3[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int nt = i >> 1, e = 2 * (i & 1);
          const float x0 = u0[j][nt][e] + (u1[j][nt][e] + u2[j][nt][e]);
          const float x1 = u0[j][nt][e + 1] + (u1[j][nt][e + 1] + u2[j][nt][e + 1]);
          if constexpr (kCheckpoint) {  // three parts: U^T Kdec as BF16x6 below
            Split3Pair(x0, x1, &uh[i], &ul[i], &u3[i]);
            const int t = mt * 16 + g + 8 * (i & 1), v = v0 + (vt0 + j) * 16 + nt * 8 + 2 * tq;
            *reinterpret_cast<float2*>(a.chunk_u + slot_head(c) * kChunk * kDim + t * kDim + v) =
                make_float2(x0, x1);
          } else {
            SplitPair(x0, x1, &uh[i], &ul[i]);
          }
        }
        StmT4<Tr::kTStride>(&sm.u[0][0][0], (vt0 + j) * 16, mt * 16, uh);
        StmT4<Tr::kTStride>(&sm.u[1][0][0], (vt0 + j) * 16, mt * 16, ul);
        if constexpr (kCheckpoint) StmT4<Tr::kTStride>(u3_plane(), (vt0 + j) * 16, mt * 16, u3);
      }
    }
    if constexpr (kMc) {
      MbarWait(&mb.full_kd[kb], static_cast<uint32_t>(c >> 1) & 1);
    } else {
      CpAsyncWait<0>();  // group 2 of chunk c
    }
    __syncthreads();
    if constexpr (kMc) {
      if (c + Tr::kStages < chunks) load_uv(record(c + Tr::kStages), b);
      // This CTA is done with -W (c), Q Gam (c) and Kdec^T | M (c - 1): the peer may refill them.
      // Once the peer is too, their successors: in flight during the rest of this chunk (and
      // -W's during the next; at 64 rows -W (c + 1) during the rest of this one).
      if constexpr (kMc32) {  // -W (c + 1) and Q Gam (c + 1) first: the first read
        if (lead && c + 1 < chunks) {
          MbarArrivePeer(&mb.empty, peer);
          MbarWait(&mb.empty, static_cast<uint32_t>(c) & 1);
          mc_wq(0, c + 1, w_buf(0), &mb.full_w[0]);
          mc_wq(1, c + 1, qg_buf(), &mb.full_q);
          mc_kd(c + 1, kb ^ 1);
        }
      } else if (lead && c + 1 < chunks) {
        MbarArrivePeer(&mb.empty, peer);
        MbarWait(&mb.empty, static_cast<uint32_t>(c) & 1);
        mc_wq(1, c + 1, qg_buf(), &mb.full_q);
        mc_kd(c + 1, (kb + 1) & 1);
        if constexpr (kMc64) {
          mc_wq(0, c + 1, w_buf(0), &mb.full_w[0]);
        } else if (c + 2 < chunks) {
          mc_wq(0, c + 2, w_buf(b), &mb.full_w[b]);
        }
      }
      if constexpr (kMc64) {
        if (!kCheckpoint && ow) MbarWait(&mb.full_m, static_cast<uint32_t>(c) & 1);  // for M U
      }
    } else if (c + Tr::kStages < chunks) {
      load_group1(record(c + Tr::kStages), b);
    }
    CpAsyncCommit();

    // o += M U (causal: token tiles ks <= mt), then the output.
#pragma unroll
    for (int ks = 0; ks < 4; ++ks) {
      if (!kCheckpoint && ow && ks <= mt) {
        uint32_t mh[4], ml[4];
        if constexpr (kMc64) {  // M hi | lo: one tile
          const uint16_t* t = m_buf();
          const int r0 = mt * 16;
          LdmAP([&](int r, int q) { return Swz128(t, r0 + r, 2 * ks + q); }, mh);
          LdmAP([&](int r, int q) { return Swz128(t, kChunk + r0 + r, 2 * ks + q); }, ml);
        } else if constexpr (kMc) {  // M's rows follow Kdec^T's 2 kDim in the tiles
          const uint16_t* t = kd_buf(kb);
          const int r0 = 2 * kDim + mt * 16;
          LdmAP([&](int r, int q) { return Swz128(t, r0 + r, 2 * ks + q); }, mh);
          LdmAP([&](int r, int q) { return Swz128(t, kChunk + r0 + r, 2 * ks + q); }, ml);
        } else {
          LdmA<Tr::kTStride>(&sm.m[0][0][0], mt * 16, ks * 16, mh);
          LdmA<Tr::kTStride>(&sm.m[1][0][0], mt * 16, ks * 16, ml);
        }
#pragma unroll
        for (int j = 0; j < kVP; ++j) {
#pragma unroll
          for (int nt = 0; nt < 2; ++nt) {
            uint32_t bh[2], bl[2];
            LdmB2<Tr::kTStride>(&sm.u[0][0][0], &sm.u[1][0][0], (vt0 + j) * 16 + nt * 8, ks * 16,
                                bh, bl);
            Mma3(o0[j][nt], Tr::kSplitAcc ? o1[j][nt] : o0[j][nt],
                 Tr::kSplitAcc ? o2[j][nt] : o0[j][nt], mh, ml, bh, bl);
          }
        }
      }
    }
    {
      const int64_t tok0 = bos + c * kChunk;
      const int64_t valid = min(int64_t{kChunk}, eos - tok0);
#pragma unroll
      for (int j = 0; j < kVP; ++j) {
#pragma unroll
        for (int nt = 0; nt < 2; ++nt) {
          const int col = v0 + (vt0 + j) * 16 + nt * 8 + 2 * tq;
#pragma unroll
          for (int hh = 0; hh < 2; ++hh) {
            const int row = mt * 16 + g + 8 * hh;
            if (!kCheckpoint && ow && row < valid) {
              const float(&x)[4] = o0[j][nt], (&y)[4] = o1[j][nt], (&z)[4] = o2[j][nt];
              const float x0 = a.s.scale * (x[2 * hh] + (y[2 * hh] + z[2 * hh]));
              const float x1 = a.s.scale * (x[2 * hh + 1] + (y[2 * hh + 1] + z[2 * hh + 1]));
              *reinterpret_cast<uint32_t*>(a.o + ((tok0 + row) * H + h) * kDim + col) =
                  uint32_t(ToBf16(x0)) | (uint32_t(ToBf16(x1)) << 16);
            }
          }
        }
      }
    }

    // S1 = S0 Gam_C + U^T Kdec: state tiles vt, K quarter mt; each Kdec fragment serves the
    // warp's kVP tiles.
    if (chain) {
      float p1[kVP][4][4], p2[kVP][4][4];
#pragma unroll
      for (int nt = 0; nt < 4; ++nt) {
        const float2 d = *reinterpret_cast<const float2*>(gc_buf(kb) + 32 * mt + 8 * nt + 2 * tq);
#pragma unroll
        for (int j = 0; j < kVP; ++j) {
          st[j][nt][0] *= d.x;
          st[j][nt][1] *= d.y;
          st[j][nt][2] *= d.x;
          st[j][nt][3] *= d.y;
#pragma unroll
          for (int i = 0; i < 4; ++i) p1[j][nt][i] = p2[j][nt][i] = 0.f;
        }
      }
      // Two state tiles give each k-step eight independent accumulators; unrolled by two, the
      // 64-row instance spilled (128 registers).
#pragma unroll(kVP == 2 ? 1 : 2)
      for (int ks = 0; ks < kChunk / 16; ++ks) {
        uint32_t ah[kVP][4], al[kVP][4], a3[kVP][4];
#pragma unroll
        for (int j = 0; j < kVP; ++j) {
          LdmA<Tr::kTStride>(&sm.u[0][0][0], (vt0 + j) * 16, ks * 16, ah[j]);
          LdmA<Tr::kTStride>(&sm.u[1][0][0], (vt0 + j) * 16, ks * 16, al[j]);
          if constexpr (kCheckpoint) LdmA<Tr::kTStride>(u3_plane(), (vt0 + j) * 16, ks * 16, a3[j]);
        }
#pragma unroll
        for (int nt = 0; nt < 4; ++nt) {
          uint32_t bh[2], bl[2], b3[2];
          if constexpr (kMc) {
            LdmB2P([&](int plane, int r, int q) { return Swz128(kd_buf(kb), kDim * plane + r, q); },
                   32 * mt + 8 * nt, 2 * ks, bh, bl);
          } else {
            LdmB2<Tr::kTStride>(&sm.kd[0][0][0], &sm.kd[1][0][0], 32 * mt + 8 * nt, ks * 16, bh,
                                bl);
          }
          if constexpr (kCheckpoint) {
            LdmBP([&](int r, int q) { return kd3_piece(kb, r, q); }, 32 * mt + 8 * nt, 2 * ks, b3);
          }
#pragma unroll
          for (int j = 0; j < kVP; ++j) {
            float(&acc1)[4] = Tr::kSplitAcc ? p1[j][nt] : st[j][nt];
            float(&acc2)[4] = Tr::kSplitAcc ? p2[j][nt] : st[j][nt];
            if constexpr (kCheckpoint) {  // BF16x6 (Mma6's terms): the small ones first
              Mma(acc2, a3[j], bh);
              Mma(acc1, ah[j], b3);
              Mma(acc2, al[j], bl);
            }
            Mma3(st[j][nt], acc1, acc2, ah[j], al[j], bh, bl);
          }
        }
      }
#pragma unroll
      for (int j = 0; j < kVP; ++j) {
#pragma unroll
        for (int nt = 0; nt < 4; ++nt) {
#pragma unroll
          for (int i = 0; i < 4; ++i) st[j][nt][i] += p1[j][nt][i] + p2[j][nt][i];
        }
      }
    }
    __syncthreads();  // every warp is done with S0, U, Kdec, M and Gam_C of chunk c
    if constexpr (kCheckpoint) {
      // This CTA's rows of S0 and U are written up to chunk c: counted kReadyBatch at a time.
      const int batched = static_cast<int>(c % kReadyBatch) + 1;
      if (tid == 0 && a.ready != nullptr && (batched == kReadyBatch || c + 1 == chunks)) {
        SignalSlotsReady(a.ready + slot_head(c + 1 - batched), H, batched);
      }
    }
    if (chain) store_state();
    if constexpr (kMc64) {  // rank 1 has read M (c): rank 0 may refill it (top of chunk c + 1)
      if (!kCheckpoint && lead && rank == 1 && c + 1 < chunks) MbarArrivePeer(&mb.empty_m, peer);
    }
    if constexpr (!kMc) {
      if (c + 1 < chunks) load_group2(c + 1);
      CpAsyncCommit();
    }
  }

  if (chain && a.final_state != nullptr) {
    write_state(a.final_state + (n * H + h) * kDimSq + int64_t{v0} * kDim);
  }
  // Neither CTA leaves while the other may still reach its shared memory.
  if constexpr (kMc) ClusterSync();
  // Not done before the reverse chain it was launched behind (a no-op when it was not): whatever
  // follows the grad kernel, which waits for this pass the same way, follows all three.
  if constexpr (kCheckpoint) cudaGridDependencySynchronize();
}

template <int kRows, bool kCheckpoint>
Status LaunchStateAs(const FwdArgs& a, const char* ws, cudaStream_t stream, bool dependent) {
  using Tr = StateTraits<kRows, kCheckpoint>;
  static std::atomic<uint64_t> done{0};
  constexpr int kSmem = static_cast<int>(sizeof(StateSmem<kRows>));
  const auto kernel = KdaChunkStateKernel<kRows, kCheckpoint>;
  Status st = AllowSmem(kernel, kSmem, &done, "the chunk state pass");
  if (!st.ok()) return st;
  cudaLaunchAttribute attr;
  cudaLaunchConfig_t cfg = ProgrammaticLaunchConfig(
      dim3(Tr::kSlices, static_cast<unsigned>(a.s.H), static_cast<unsigned>(a.s.N)),
      dim3(Tr::kThreads), kSmem, stream, &attr);
  cfg.numAttrs = dependent ? 1 : 0;
  const cudaError_t err = cudaLaunchKernelEx(&cfg, kernel, a, ws, McNoMaps{});
  if (err != cudaSuccess) {
    return Internal(std::string("kda: launching the chunk state pass: ") + cudaGetErrorString(err));
  }
  return CheckLaunch("the chunk state pass");
}

// The pass (every width, forward or checkpoint) as 2-CTA clusters (kMc); the plain launch where the
// device cannot hold one such cluster or the workspace is not 16-byte aligned (the maps need
// 16-byte aligned rows; every record offset is, as kRecBytes is).
template <int kRows, bool kCheckpoint>
Status LaunchStateMc(const FwdArgs& a, const char* ws, int64_t slots, cudaStream_t stream,
                     bool dependent) {
  using Tr = StateTraits<kRows, kCheckpoint>;
  const auto kernel = KdaChunkStateKernel<kRows, kCheckpoint, true>;
  constexpr int kSmem = kStateSmemBytes<kRows, true>;
  static_assert(kSmem == (kRows == 16 ? 222256 : kRows == 32 ? 201776 : 220224), "layout sizes");
  static_assert(kSmem <= 227 * 1024, "one CTA's shared memory on sm_90");
  static std::atomic<uint64_t> done{0};
  static PerDeviceMemo resident_clusters;
  if (!Aligned(ws, 16)) return LaunchStateAs<kRows, kCheckpoint>(a, ws, stream, dependent);
  const Status attr = AllowSmem(kernel, kSmem, &done, "the chunk state pass (2-CTA clusters)");
  if (!attr.ok()) return attr;
  McMaps maps;
  const Status encoded = EncodeRecordMaps(&maps, ws, slots * a.s.H);
  if (!encoded.ok()) return encoded;
  bool launched = false;
  const Status st = LaunchClusterPair(
      kernel, dim3(Tr::kSlices, static_cast<unsigned>(a.s.H), static_cast<unsigned>(a.s.N)),
      Tr::kThreads, kSmem, stream, dependent, &resident_clusters, "the chunk state pass", &launched,
      a, ws, maps);
  if (!st.ok() || launched) return st;
  return LaunchStateAs<kRows, kCheckpoint>(a, ws, stream, dependent);
}

template <int kRows>
Status LaunchState(const FwdArgs& a, const char* ws, int64_t slots, cudaStream_t stream,
                   bool dependent) {
  if (a.checkpoints != nullptr) return LaunchStateMc<kRows, true>(a, ws, slots, stream, dependent);
  return LaunchStateMc<kRows, false>(a, ws, slots, stream, dependent);
}

template <int kThreads, bool kCheckpoint>
Status LaunchPrep(const FwdArgs& a, char* ws, int64_t slots, cudaStream_t stream) {
  static std::atomic<uint64_t> done{0};
  constexpr int kSmem = static_cast<int>(sizeof(PrepSmem));
  auto* kernel = KdaChunkPrepKernel<kThreads, kCheckpoint>;
  Status st = AllowSmem(kernel, kSmem, &done, "the chunk preparation");
  if (!st.ok()) return st;
  kernel<<<ChunkSlotGrid(slots, a.s.H), kThreads, kSmem, stream>>>(a, ws);
  return CheckLaunch("the chunk preparation");
}

}  // namespace

Status DeviceSmCount(int* sms) {
  int dev = 0;
  cudaError_t err = cudaGetDevice(&dev);
  if (err == cudaSuccess) err = cudaDeviceGetAttribute(sms, cudaDevAttrMultiProcessorCount, dev);
  if (err != cudaSuccess) {
    return Internal(std::string("kda: device attribute: ") + cudaGetErrorString(err));
  }
  return OkStatus();
}

// Every slice reads the whole chunk record, so wider slices cut the operand traffic, which bounds
// this pass: 16-row slices (8 CTAs per (document, head)) while they fit one wave of one CTA per
// SM, 32-row slices up to two waves, 64-row slices beyond (H200, 2026-11-29: 32 rows beat 64 at
// 32 (document, head) pairs, 64 beat 32 at 256 pairs).
int StatePassRows(int64_t chains, int sms) {
  if (chains * StateTraits<16>::kSlices <= sms) return 16;
  if (chains * StateTraits<32>::kSlices <= 2 * sms) return 32;
  return 64;
}

Status LaunchChunkedPrep(const FwdArgs& a, void* workspace, int64_t workspace_bytes,
                         cudaStream_t stream) {
  if (a.s.N == 0) return OkStatus();
  const int64_t slots = kda_layout::ChunkSlots(a.s.total_tokens, a.s.N);
  const int64_t need = slots * a.s.H * kda_layout::kRecBytes;
  if (workspace == nullptr || workspace_bytes < need) {
    return ResourceExhausted("kda: forward workspace needs " + std::to_string(need) +
                             " bytes, got " + std::to_string(workspace_bytes));
  }
  if (slots > 0x7fffffff) return InvalidArgument("kda: too many tokens for one call");
  if (a.s.total_tokens == 0) return OkStatus();
  char* const ws = static_cast<char*>(workspace);
  if (a.checkpoints != nullptr) {
    if (a.chunk_p == nullptr || a.chunk_tinv == nullptr || a.chunk_kdt3 == nullptr) {
      return InvalidArgument(
          "kda: the checkpoint preparation needs chunk_p, chunk_tinv and chunk_kdt3");
    }
    return LaunchPrep<kPrepThreads, true>(a, ws, slots, stream);
  }
  return LaunchPrep<kPrepThreads, false>(a, ws, slots, stream);
}

Status LaunchChunkedStatePass(const FwdArgs& a, const void* workspace, int rows,
                              cudaStream_t stream, bool dependent) {
  if (a.s.N == 0) return OkStatus();
  const int64_t slots = kda_layout::ChunkSlots(a.s.total_tokens, a.s.N);
  const char* ws = static_cast<const char*>(workspace);
  if (a.checkpoints != nullptr && (a.chunk_u == nullptr || a.chunk_kdt3 == nullptr)) {
    return InvalidArgument("kda: the checkpoint state pass needs chunk_u and chunk_kdt3");
  }
  switch (rows) {
    case 16:
      return LaunchState<16>(a, ws, slots, stream, dependent);
    case 32:
      return LaunchState<32>(a, ws, slots, stream, dependent);
    case 64:
      return LaunchState<64>(a, ws, slots, stream, dependent);
    default:
      return InvalidArgument("kda: state pass rows must be 16, 32 or 64, got " +
                             std::to_string(rows));
  }
}

Status LaunchChunkedForward(const FwdArgs& a, void* workspace, int64_t workspace_bytes,
                            cudaStream_t stream) {
  if (a.s.N == 0) return OkStatus();
  Status st = LaunchChunkedPrep(a, workspace, workspace_bytes, stream);
  if (!st.ok()) return st;
  int sms = 0;
  const Status dev = DeviceSmCount(&sms);
  if (!dev.ok()) return dev;
  return LaunchChunkedStatePass(a, workspace, StatePassRows(a.s.N * a.s.H, sms), stream);
}

}  // namespace kda_cuda
}  // namespace cakegrad::kernels
