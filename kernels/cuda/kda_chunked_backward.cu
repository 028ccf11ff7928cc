// KDA backward, chunked (issue #5): the WY / UT form of kda_chunked_forward.cu differentiated per
// chunk of 64 tokens, so that only T / 64 steps per (document, head) are sequential.
//
// Per chunk (notation of kda_chunked_forward.cu; dO unscaled, dS1 = gradient of the chunk-end
// state, V x K; bench/kda_chunked_backward_study.py checks these equations against autograd of
// the FP64 sequential forward to 3e-14):
//   dU   = scale M^T dO + Kdec dS1^T                 dS0 = dS1 Gam_C + scale dO^T (Q Gam) - dU^T W
//   d(Q Gam) = scale dO S0    dM = scale tril(dO U^T)    dW = -dU S0    dKdec = U dS1
//   dKb  = Tinv^T dW          dVb = Tinv^T dU            dA = -strict_tril(dKb W^T + dVb Uv^T)
// then dK, dQ, dbeta, dv and the log-gate gradient from A = diag(beta) P, M, Kb = beta K Gam,
// Q Gam, Kdec, Vb = beta V and Gam_C, assembled in the study's "stable" form (M's diagonal applied
// elementwise; Kdec's term as an exclusive forward cumsum; Gam_C's state term on every token).
//
// Four launches (plus the forward's two):
// 1. The chunked forward's preparation and state pass in checkpoint mode: the chunk records and
//    the FP32 chunk-start states S0 per chunk slot (no output written). Unlike the forward's, its
//    gate sums run in FP64 (Kdec^T's decays from those sums, not from two rounded ones)
//    and U^T Kdec in BF16x6 (Kdec^T with a third BF16 part, kdt3): S0 about FP32-exact, which
//    dA_log's cancellation on short documents needs (host emulator and H200,
//    bench/results/kda_h200.md, twentieth and twenty-first sessions); -W S0^T stays BF16x3.
// 2. KdaChunkDstateKernel: the reverse chain, one CTA per (16, 32 or 64 state rows, head,
//    document; the forward's wave rule), walking the chunks backwards with its dS slice in
//    registers (FP32); writes dS1 and its dU (FP32) per chunk slot, and dinitial_state.
//    Separable over state rows, needs no S0; both products on mma.sync in BF16x3 (the state pass's
//    precision), the record's operands as they are stored (split), shared by the two slices of a
//    2-CTA cluster by TMA multicast as in the forward's pass.
// 3. KdaChunkGradKernel: one CTA per (chunk slot, head), all chunks in parallel; every product on
//    mma.sync m16n8k16 with split BF16 operands (kda_mma.cuh): BF16x3 where the study allows it
//    (U, dW), about FP32-exact where the result reaches the gate gradient directly (dO's products
//    with the other operand in three parts; dKdec, dA, [dKb | dVb] = Tinv^T [dW | dU] and the
//    four decayed pair products with both operands in three parts, six MMAs); the decays
//    factored at the forward's 16-token sub-chunk references, which its log-gates are stored
//    as (GRef: references plus offsets). Writes dq dk dv dg dbeta (BF16,
//    rounded once) and FP32 per-chunk partials of ddt_bias and dA_log (per key channel). What
//    launches 1 and 2 already computed it takes from the workspace instead of computing it again
//    (bench/results/kda_h200.md, 2026-11-30, eighteenth session: together ~13% of the backward):
//    P = A / beta, Tinv and Uv from the checkpoint preparation, Uv with Tinv' in three parts
//    (about FP32-exact; a two-part product, ~2^-17 operand rounding, drove the dA_log tail on
//    short documents, and this pass used to solve Uv again in FP32), and dU from the reverse
//    chain. All of that lies in DRAM (the workspace is gigabytes), so the kernel asks L2 for it
//    (bulk prefetch) at its start and before dA, and one CTA an SM waits on L2, not DRAM.
// 4. KdaChunkParamReduceKernel: the partials of each head over slots and channels in FP64, in a
//    fixed order. No atomics on outputs anywhere: bitwise reproducible by construction.
// On the caller's stream they run as: launch 1's preparation, launch 2, launch 1's state pass and
// launch 3, the last two as programmatic dependents of the one before, with per-slot counters in
// the workspace (KdaBackwardChunkedCuda says why), then launch 4.
#include <atomic>
#include <cstddef>
#include <string>

#include "kda_chunked_backward.cuh"
#include "kda_chunked_forward.cuh"
#include "kda_cluster_launch.cuh"
#include "kda_common.cuh"
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
constexpr int kPartials = static_cast<int>(kda_layout::kBwdPartials);
constexpr int kChunkPFloats = static_cast<int>(kda_layout::kChunkPFloats);
static_assert(kChunk == 64 && kDim == 128, "index arithmetic below assumes C = 64, K = V = 128");

struct ChunkBwdArgs {
  KdaShape s;
  int64_t slots;  // chunk slots (the grad kernel's grid may hold a few more CTAs)
  const uint16_t* q;
  const uint16_t* k;
  const uint16_t* v;
  const uint16_t* g;
  const uint16_t* beta;
  const uint16_t* d_o;
  const float* A_log;
  const float* dt_bias;
  const float* dfinal_state;  // nullable: zeros
  const char* records;        // the forward's chunk records, kda_layout::kRecBytes each
  const float* s0;            // [slots, H, 128, 128] chunk-start states (kernel 1)
  float* ds1;                 // [slots, H, 128, 128] chunk-end state gradients (kernel 2)
  float* du;                  // [slots, H, 64, 128] dU = scale M^T dO + Kdec dS1^T (kernel 2)
  float* partials;            // [slots, H, kBwdPartials] (kernel 3)
  const float* chunk_p;       // [slots, H, kChunkPFloats] P of each chunk (kernel 1)
  const float* chunk_tinv;    // [slots, H, kChunkPFloats] Tinv = (I + A)^-1 (kernel 1)
  const float* chunk_u;       // [slots, H, 64, 128] U = Uv - W S0^T (kernel 1's state pass)
  unsigned* ready;            // nullable: [slots, H] the CTAs of kernel 1's state pass and of
                              // kernel 2 done with the slot (SignalSlotsReady)
  unsigned ready_target;      // ... of ready_target (their slices of state rows)
  uint16_t* dq;
  uint16_t* dk;
  uint16_t* dv;
  uint16_t* dg;
  uint16_t* dbeta;
  float* dinitial_state;
};

// One chunk record's operands (kda_layout.h); split ones are hi blocks followed by lo blocks.
struct Rec {
  const uint16_t* negw;  // -W [64][128]
  const uint16_t* qg;    // Q Gam [64][128]
  const uint16_t* kdt;   // Kdec^T [128][64]
  const uint16_t* m;     // M [64][64] (zero above the diagonal)
  const float* uv;       // Uv [64][128]
  const float* gamc;     // Gam_C [128]
};
constexpr int kRowMatLo = kChunk * kDim;  // offset of the lo block of -W, Q Gam, Kdec^T

__device__ __forceinline__ Rec RecordAt(const char* records, int64_t slot, int64_t H, int64_t h) {
  const char* r = records + (slot * H + h) * kda_layout::kRecBytes;
  Rec x;
  x.negw = reinterpret_cast<const uint16_t*>(r + kda_layout::kRecNegW);
  x.qg = reinterpret_cast<const uint16_t*>(r + kda_layout::kRecQg);
  x.kdt = reinterpret_cast<const uint16_t*>(r + kda_layout::kRecKdecT);
  x.m = reinterpret_cast<const uint16_t*>(r + kda_layout::kRecM);
  x.uv = reinterpret_cast<const float*>(r + kda_layout::kRecUv);
  x.gamc = reinterpret_cast<const float*>(r + kda_layout::kRecGamC);
  return x;
}

// ---- kernel 2: the reverse chain over chunks ---------------------------------------------------

// Per chunk, for the CTA's state rows j (dS slice, FP32 in registers; everything separable over j):
//   dU^T = scale dO^T M + dS Kdec^T            dS0 = dS Gam_C + scale dO^T (Q Gam) + dU^T (-W)
// on mma.sync, as the forward's state pass (U = Uv - W S0^T, S1 = S0 Gam_C + U^T Kdec) with the
// roles of -W and Kdec^T swapped. The FP32 operands (dS, dU) are split in BF16 hi + lo (BF16x3,
// the forward's state precision); the record's operands are stored split and dO is BF16, so the
// dO products take two MMAs and are exact. The first version (an FP32 CUDA-core loop) took 3.7x
// the forward's pass at (1, 32768, 16): per step 0.43 M FMAs per 16-row CTA at 128 a cycle, plus
// the record staged as FP32 (bench/results/kda_h200.md, 2026-11-30).
// kMc: clusters of two slices of a (document, head), each CTA copying half of the record's
// operands into both by TMA multicast, as the forward's pass: on tensor cores the chain is bound
// by L2 (ncu at (1, 32768, 16), 16 rows: L2 74.7% busy, SM 13%), and every slice reads the same
// -W, Q Gam, Kdec^T, M and Gam_C. The plain instance (no cluster fits) copies the same tiles by
// cp.async.
template <int kRowsT>
struct ChainTraits {
  static constexpr int kRows = kRowsT;             // state rows per CTA
  static constexpr int kSlices = kDim / kRows;     // CTAs per (document, head)
  static constexpr int kTiles = kRows / 16;        // 16-row state tiles
  static constexpr int kThreads = 128 * kTiles;    // warp = (state tile, token tile | K quarter)
  static constexpr int kKStride = kDim + 8;        // BF16 rows over K: ldmatrix conflict-free
  static constexpr int kTStride = kChunk + 8;      // BF16 rows over tokens: likewise
  static constexpr int kOStride = kRows + 8;       // dO rows (the slice's columns): likewise
  static constexpr int kOPieces = kRows * 2 / 16;  // 16-byte pieces of a dO row
  // Group A (Kdec^T, M: the dU product's) is double-buffered where shared memory allows, so that
  // chunk c - 2's copies fly during all of chunk c - 1; group B (-W, Q Gam, Gam_C: dS0's) is
  // issued at the top of its own chunk, to land during the dU product. dO, read by both products,
  // has two buffers of its own (chunk parity), filled one chunk ahead.
  static constexpr int kStagesA = kRows == 64 ? 1 : 2;
  static constexpr int kTile = 128 * 64;  // BF16 elements of a record tile (128 rows of 128 B)
  static_assert(kRows % 16 == 0 && kDim % kRows == 0, "16-row tiles, whole slices");
  static_assert(kChunk == 4 * 16 && kDim == 4 * 32, "4 token tiles of 16, 4 K quarters of 32");
  static_assert(kChunk * kOPieces == kThreads, "one dO piece per thread");
};

// The record's operands as TMA tiles (128 rows of 64 BF16, the 128-byte swizzle: piece q of row r
// at r * 64 + 8 (q ^ (r % 8))), 1024-byte aligned; the plain instance stores them the same way.
template <int kRows>
struct ChainSmem {
  using Tr = ChainTraits<kRows>;
  static constexpr int kTile = Tr::kTile;
  uint16_t kd[Tr::kStagesA][3 * kTile];  // Kdec^T hi, Kdec^T lo ([k][t]), M hi | lo ([s][t])
  uint16_t wq[4 * kTile];  // -W key halves 0 .. 63, 64 .. 127 (rows [t]: hi, then lo), Q Gam's
  // Gam_C, buffer c % 2: written one chunk after its last read, as the forward's (single, the
  // peer's multicast landed a barrier after the reads, which racecheck reports as a hazard).
  float gc[2][kDim];
  uint16_t dob[2][kChunk][Tr::kOStride];  // dO [t][slice column], unscaled; buffer c % 2
  uint16_t s[2][kRows][Tr::kKStride];     // dS slice [j][k], hi and lo
  uint16_t u[2][kRows][Tr::kTStride];     // dU^T slice [j][t], hi and lo
};
struct ChainBarriers {
  uint64_t full_a[2];  // Kdec^T | M of buffer b landed (both halves)
  uint64_t full_b;     // -W | Q Gam and Gam_C landed
  uint64_t empty_a;    // the peer is done with its buffer of group A (its middle barrier)
  uint64_t empty_b;    // the peer is done with group B (its top barrier)
};
template <int kRows>
constexpr int kChainSmemBytes = static_cast<int>(sizeof(ChainSmem<kRows>) + sizeof(ChainBarriers) +
                                                 1024);

template <int kRows, bool kMc>
__global__ void __launch_bounds__(ChainTraits<kRows>::kThreads, 1)
    KdaChunkDstateKernel(const __grid_constant__ ChunkBwdArgs a,
                         const __grid_constant__ McParam<kMc> maps = {}) {
  using Tr = ChainTraits<kRows>;
  constexpr int kTile = Tr::kTile;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  unsigned char* const smem = AlignSmem1024(smem_raw);
  ChainSmem<kRows>& sm = *reinterpret_cast<ChainSmem<kRows>*>(smem);
  ChainBarriers& mb = *reinterpret_cast<ChainBarriers*>(smem + sizeof(ChainSmem<kRows>));
  static_assert(sizeof(ChainSmem<kRows>::kd) % 1024 == 0, "tiles 1024-byte aligned");
  // The state pass is launched behind this kernel as a programmatic dependent (KdaBackward-
  // ChunkedCuda): it may begin once every CTA here has.
  cudaTriggerProgrammaticLaunchCompletion();
  const int v0 = blockIdx.x * kRows;
  const int64_t h = blockIdx.y;
  const int64_t n = blockIdx.z;
  const int64_t H = a.s.H;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int tq = lane & 3;
  // State tile vt (rows 16 vt ..), and the warp's token tile (dU) and K quarter (dS0): mt.
  const int vt = warp >> 2, mt = warp & 3;
  int64_t bos, eos;
  DocBounds(a.s, n, &bos, &eos);
  const int64_t chunks = (eos - bos + kChunk - 1) / kChunk;
  auto slot_of = [&](int64_t c) { return bos / kChunk + n + c; };
  auto record = [&](int64_t c) { return a.records + (slot_of(c) * H + h) * kda_layout::kRecBytes; };
  static_assert(kda_layout::kRecQg == kda_layout::kRecNegW + 2 * kChunk * kDim * 2 &&
                    kda_layout::kRecM == kda_layout::kRecKdecT + 2 * kDim * kChunk * 2,
                "-W | Q Gam and Kdec^T | M adjacent in the record");

  // Multicast mode: one thread (warp 3: token tile 3, the least dO^T M work) issues this CTA's
  // tiles, rank 0 Kdec^T hi, M, -W; rank 1 Kdec^T lo, Q Gam, Gam_C; and handles the barriers.
  const uint32_t rank = kMc ? ClusterCtaRank() : 0, peer = rank ^ 1;
  const bool lead = kMc && tid == 96;
  constexpr uint16_t kMcMask = 0x3;
  auto mc_tile = [&](uint16_t* dst, int map, int x, int y, int64_t c, uint64_t* bar,
                     const char* emu_src, int emu_row_bytes) {
    TmaTileMulticast(dst, MapOf(maps, map), x, y, static_cast<int>(slot_of(c) * H + h), bar,
                     kMcMask, emu_src, emu_row_bytes);
  };
  auto mc_a = [&](int64_t c, int b) {  // Kdec^T | M: three tiles of the kdm map
    MbarArriveExpectTx(&mb.full_a[b], 3 * kTile * 2);
    const char* rec = record(c) + kda_layout::kRecKdecT;
#pragma unroll
    for (int t = 0; t < 3; ++t) {
      if (!kMcBothRanks && static_cast<int>(rank) != (t == 1 ? 1 : 0)) continue;
      mc_tile(sm.kd[b] + t * kTile, 1, 0, 128 * t, c, &mb.full_a[b], rec + 128 * t * kChunk * 2,
              kChunk * 2);
    }
  };
  auto mc_b = [&](int64_t c) {  // -W | Q Gam: four tiles of the wq map, and Gam_C
    MbarArriveExpectTx(&mb.full_b, 4 * kTile * 2 + kDim * 4);
    const char* rec = record(c);
#pragma unroll
    for (int m = 0; m < 2; ++m) {
      if (!kMcBothRanks && static_cast<int>(rank) != m) continue;
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        mc_tile(sm.wq + (2 * m + half) * kTile, 0, 64 * half, 128 * m, c, &mb.full_b,
                rec + kda_layout::kRecNegW + 128 * m * kDim * 2 + 128 * half, kDim * 2);
      }
    }
    if (kMcBothRanks || rank == 1) {
      BulkMulticast(sm.gc[c & 1], rec + kda_layout::kRecGamC, kDim * 4, &mb.full_b, kMcMask);
    }
  };
  // Plain mode: the same tiles by cp.async, compile-time trip counts and one piece index per
  // thread (the forward's rule); plus dO (both modes).
  constexpr int kT = Tr::kThreads;
  const int r8 = tid / 8, p8 = tid % 8, r16 = tid / 16, p16 = tid % 16;
  const int ro = tid / Tr::kOPieces, po = tid % Tr::kOPieces;
  auto load_a = [&](int64_t c, int b) {  // rows R of Kdec^T | M: tile R / 128, row R % 128
    const char* src = record(c) + kda_layout::kRecKdecT + r8 * kChunk * 2 + 16 * p8;
#pragma unroll
    for (int i = 0; i < 3 * 128 * 8 / kT; ++i) {
      constexpr int kStep = kT / 8;
      CpAsync<16>(Swz128(sm.kd[b], r8 + i * kStep, p8), src + i * kStep * kChunk * 2);
    }
  };
  auto load_b = [&](int64_t c) {  // rows R of -W | Q Gam, pieces p: tile 2 (R / 128) + p / 8
    const char* rec = record(c);
    const char* src = rec + kda_layout::kRecNegW + r16 * kDim * 2 + 16 * p16;
#pragma unroll
    for (int i = 0; i < 4 * kChunk * 16 / kT; ++i) {
      constexpr int kStep = kT / 16;
      const int row = r16 + i * kStep;
      CpAsync<16>(Swz128(sm.wq + (2 * (row / 128) + p16 / 8) * kTile, row % 128, p16 % 8),
                  src + i * kStep * kDim * 2);
    }
    if (tid < kDim / 4) CpAsync<16>(&sm.gc[c & 1][4 * tid], rec + kda_layout::kRecGamC + 16 * tid);
  };
  auto load_do = [&](int64_t c) {
    const int64_t t0 = bos + c * kChunk;
    const bool valid = t0 + ro < eos;  // dO of padding tokens: zeros
    CpAsyncZfill<16>(&sm.dob[c & 1][ro][8 * po],
                     a.d_o + ((valid ? t0 + ro : t0) * H + h) * kDim + v0 + 8 * po, valid);
  };
  if constexpr (kMc) {
    if (tid == 0) {
      MbarInit(&mb.full_a[0], 1);  // the local expect_tx
      MbarInit(&mb.full_a[1], 1);
      MbarInit(&mb.full_b, 1);
      MbarInit(&mb.empty_a, 1);  // the peer's arrival
      MbarInit(&mb.empty_b, 1);
      MbarInitFence();
    }
    ClusterSync();  // both CTAs' barriers initialised before any copy or arrival reaches them
  }

  // The warp's dS: rows 16 vt + g (+ 8), columns 32 mt + 8 nt + 2 tq (+ 1).
  const int64_t state_off = (n * H + h) * kDimSq + int64_t{v0} * kDim;
  const int64_t tile_off = 16 * vt * kDim + 32 * mt;
  float st[4][4];
  LoadStateTile(a.dfinal_state == nullptr ? nullptr : a.dfinal_state + state_off + tile_off, st);
  auto store_state = [&]() {
    StoreStateTileSplit<Tr::kKStride>(&sm.s[0][0][0], &sm.s[1][0][0], 16 * vt, 32 * mt, st);
  };
  auto write_state = [&](float* dst) { WriteStateTile(dst + tile_off, st); };  // dst at row v0
  store_state();
  // dO^T tiles (A operands) from dO [t][j] by ldmatrix.trans: rows 16 vt .., tokens 16 ks ...
  auto dot_frag = [&](int db, int ks, uint32_t(&x)[4]) {
    LdmATP([&](int t, int q) { return &sm.dob[db][t][8 * q]; }, 16 * ks, 16 * vt, x);
  };

  // Chunk index i = C - 1 - c; group A's buffer b = i % kStagesA.
  // Plain commits: A(C - 1) with dO(C - 1), [A(C - 2),] B(C - 1) with dO(C - 2); then per chunk c:
  // B(c) with dO(c - 1) (c < C - 1) after the top barrier, A(c - kStagesA) after the middle one.
  // The middle wait (all groups) also completes A(c - 1), issued a whole chunk earlier; the top
  // wait covers the first chunk. Multicast commits dO alone: dO(C - 1), dO(C - 2), then dO(c - 1)
  // at the top of chunk c; the tiles go out at the same points, each once the peer is done with
  // the buffer (empty_a, empty_b).
  if (chunks > 0) {
    if constexpr (kMc) {
      if (lead) {
        mc_a(chunks - 1, 0);
        if (Tr::kStagesA == 2 && chunks > 1) mc_a(chunks - 2, 1);
        mc_b(chunks - 1);
      }
      load_do(chunks - 1);
      CpAsyncCommit();
      if (chunks > 1) load_do(chunks - 2);
      CpAsyncCommit();
    } else {
      load_a(chunks - 1, 0);
      load_do(chunks - 1);
      CpAsyncCommit();
      if constexpr (Tr::kStagesA == 2) {
        if (chunks > 1) load_a(chunks - 2, 1);
        CpAsyncCommit();
      }
      load_b(chunks - 1);
      if (chunks > 1) load_do(chunks - 2);
      CpAsyncCommit();
    }
  }
  for (int64_t c = chunks - 1; c >= 0; --c) {
    const uint32_t i = static_cast<uint32_t>(chunks - 1 - c);
    const int b = static_cast<int>(i % Tr::kStagesA);
    const int db = static_cast<int>(c & 1);
    write_state(a.ds1 + (slot_of(c) * H + h) * kDimSq + int64_t{v0} * kDim);
    CpAsyncWait<kMc ? 1 : Tr::kStagesA == 2 ? 2 : 0>();  // A(c) (plain), dO(c)
    __syncthreads();  // A(c), dO(c) and the split dS visible; every warp is done with B(c + 1), U
    if constexpr (kMc) {
      if (lead && c < chunks - 1) {
        MbarArrivePeer(&mb.empty_b, peer);
        MbarWait(&mb.empty_b, (i - 1) & 1);
        mc_b(c);
      }
      MbarWait(&mb.full_a[b], (i / Tr::kStagesA) & 1);
    } else if (c < chunks - 1) {
      load_b(c);
    }
    if (c < chunks - 1 && c > 0) load_do(c - 1);
    CpAsyncCommit();

    // dU^T, token tile mt: dS Kdec^T (hi hi in x0, the cross terms in x1), then dO^T M over the
    // token tiles ks >= mt (M[s][t] = 0 for s < t).
    {
      uint16_t* const kd = sm.kd[b];
      float x0[2][4], x1[2][4], y[2][4];
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) {
#pragma unroll
        for (int e = 0; e < 4; ++e) x0[nt][e] = x1[nt][e] = y[nt][e] = 0.f;
      }
#pragma unroll 2
      for (int ks = 0; ks < kDim / 16; ++ks) {
        uint32_t ah[4], al[4], bh[2][2], bl[2][2];
        LdmA<Tr::kKStride>(&sm.s[0][0][0], 16 * vt, 16 * ks, ah);
        LdmA<Tr::kKStride>(&sm.s[1][0][0], 16 * vt, 16 * ks, al);
        LdmBT4([&](int k, int q) { return Swz128(kd, k, q); }, 16 * ks, 16 * mt, bh[0], bh[1]);
        LdmBT4([&](int k, int q) { return Swz128(kd + kTile, k, q); }, 16 * ks, 16 * mt, bl[0],
               bl[1]);
#pragma unroll
        for (int nt = 0; nt < 2; ++nt) Mma3(x0[nt], x1[nt], x1[nt], ah, al, bh[nt], bl[nt]);
      }
#pragma unroll
      for (int ks = 0; ks < 4; ++ks) {
        if (ks < mt) continue;
        uint32_t d[4], bh[2][2], bl[2][2];
        dot_frag(db, ks, d);
        LdmBT4([&](int s, int q) { return Swz128(kd + 2 * kTile, s, q); }, 16 * ks, 16 * mt, bh[0],
               bh[1]);
        LdmBT4([&](int s, int q) { return Swz128(kd + 2 * kTile, kChunk + s, q); }, 16 * ks,
               16 * mt, bl[0], bl[1]);
#pragma unroll
        for (int nt = 0; nt < 2; ++nt) {
          Mma(y[nt], d, bh[nt]);
          Mma(y[nt], d, bl[nt]);
        }
      }
      // FP32 dU[t][v] also to the chunk's slot: the per-chunk pass takes it as it is (it
      // computed the same products again, from its own staging of Kdec and M).
      uint32_t uh[4], ul[4];  // tile e: rows + 8 (e & 1), token columns + 8 (e >> 1)
      float* const du = a.du + (slot_of(c) * H + h) * kChunk * kDim;
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int nt = e >> 1, f = 2 * (e & 1);
        const float u0 = fmaf(a.s.scale, y[nt][f], x0[nt][f] + x1[nt][f]);
        const float u1 = fmaf(a.s.scale, y[nt][f + 1], x0[nt][f + 1] + x1[nt][f + 1]);
        SplitPair(u0, u1, &uh[e], &ul[e]);
        const int v = v0 + 16 * vt + (lane >> 2) + 8 * (e & 1), t = 16 * mt + 8 * nt + 2 * tq;
        du[t * kDim + v] = u0;
        du[(t + 1) * kDim + v] = u1;
      }
      Stm4<Tr::kTStride>(&sm.u[0][0][0], 16 * vt, 16 * mt, uh);
      Stm4<Tr::kTStride>(&sm.u[1][0][0], 16 * vt, 16 * mt, ul);
    }
    CpAsyncWait<0>();  // B(c) (plain), dO(c - 1)
    __syncthreads();   // dU^T complete; every warp is done with A(c) and the split dS
    {  // this CTA's rows of dS1 and dU are written down to chunk c (kReadyBatch a count)
      const int batched = static_cast<int>(i % kReadyBatch) + 1;
      if (tid == 0 && a.ready != nullptr && (batched == kReadyBatch || c == 0)) {
        SignalSlotsReady(a.ready + slot_of(c) * H + h, H, batched);
      }
    }
    if constexpr (kMc) {
      if (lead && c >= Tr::kStagesA) {
        MbarArrivePeer(&mb.empty_a, peer);
        MbarWait(&mb.empty_a, i & 1);
        mc_a(c - Tr::kStagesA, b);
      }
      MbarWait(&mb.full_b, i & 1);
    } else {
      if (c >= Tr::kStagesA) load_a(c - Tr::kStagesA, b);
      CpAsyncCommit();
    }

    // dS0, K quarter mt: dU^T (-W) (x0, x1) and dO^T (Q Gam) (y) over the 4 token tiles; -W and
    // Q Gam in key halves (tiles), hi rows then lo rows.
    {
      float x0[4][4], x1[4][4], y[4][4];
#pragma unroll
      for (int nt = 0; nt < 4; ++nt) {
#pragma unroll
        for (int e = 0; e < 4; ++e) x0[nt][e] = x1[nt][e] = y[nt][e] = 0.f;
      }
      uint16_t* const wt = sm.wq + (mt >> 1) * kTile;  // -W's tile of this K quarter
      uint16_t* const qt = wt + 2 * kTile;             // Q Gam's
      const int q0 = 4 * (mt & 1);                     // the quarter's first piece in the tile
#pragma unroll
      for (int ks = 0; ks < 4; ++ks) {
        uint32_t ah[4], al[4], d[4];
        LdmA<Tr::kTStride>(&sm.u[0][0][0], 16 * vt, 16 * ks, ah);
        LdmA<Tr::kTStride>(&sm.u[1][0][0], 16 * vt, 16 * ks, al);
        dot_frag(db, ks, d);
#pragma unroll
        for (int np = 0; np < 2; ++np) {
          uint32_t wh[2][2], wl[2][2], qh[2][2], ql[2][2];
          const int k0 = 16 * ks, n0 = 8 * (q0 + 2 * np);
          LdmBT4([&](int t, int q) { return Swz128(wt, t, q); }, k0, n0, wh[0], wh[1]);
          LdmBT4([&](int t, int q) { return Swz128(wt, kChunk + t, q); }, k0, n0, wl[0], wl[1]);
          LdmBT4([&](int t, int q) { return Swz128(qt, t, q); }, k0, n0, qh[0], qh[1]);
          LdmBT4([&](int t, int q) { return Swz128(qt, kChunk + t, q); }, k0, n0, ql[0], ql[1]);
#pragma unroll
          for (int j = 0; j < 2; ++j) {
            const int nt = 2 * np + j;
            Mma3(x0[nt], x1[nt], x1[nt], ah, al, wh[j], wl[j]);
            Mma(y[nt], d, qh[j]);
            Mma(y[nt], d, ql[j]);
          }
        }
      }
#pragma unroll
      for (int nt = 0; nt < 4; ++nt) {
        const float2 gk = *reinterpret_cast<const float2*>(&sm.gc[db][32 * mt + 8 * nt + 2 * tq]);
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          st[nt][e] = fmaf(st[nt][e], (e & 1) ? gk.y : gk.x,
                           fmaf(a.s.scale, y[nt][e], x0[nt][e] + x1[nt][e]));
        }
      }
    }
    store_state();  // every warp passed the middle barrier: no one still reads the old split
  }
  // dS0 of the first chunk (dfinal_state itself for an empty document).
  write_state(a.dinitial_state + state_off);
  // Neither CTA leaves while the other may still reach its shared memory.
  if constexpr (kMc) ClusterSync();
}

// ---- kernel 3: the per-chunk gradients ---------------------------------------------------------

struct GradTraits {
  static constexpr int kThreads = 512;
  static constexpr int kWarps = kThreads / 32;
  // Thread (tq, kc) owns column kc of tokens tq + 4 j, j < kPerThread: a warp shares its tokens
  // (broadcast reads of the row operand) and reads 32 consecutive columns.
  static constexpr int kTq = kThreads / kDim;
  static constexpr int kPerThread = kChunk / kTq;
  static_assert(kThreads % kDim == 0 && kChunk % kTq == 0 && kChunk % kWarps == 0, "mapping");
  static_assert(kTq == 4 && kDim / 32 == 4, "4 warps per token group: 4 partial dot products");
};

// Padded row strides of the shared arrays. With the unpadded strides (128 floats = 512 B, 128
// BF16 = 256 B, 64 floats = 256 B) every mma fragment access (lane (g, q) at row g, column 2 q)
// put the 8 rows g on the same banks: 4- to 8-way conflicts; ncu counted 59% of the kernel's
// shared wavefronts as excess (bench/results/kda_h200.md, 2026-11-29 fifth session). With 8 more
// elements per row the rows g of a half-warp (float2) or warp (32-bit) land 8 (or 4) banks apart.
// G pads by 4: the pair terms read G[i0 + 2 q][n0 + g], rows 2 q apart, which then fall 8 banks
// apart (a pad of 8 would leave 2-way conflicts there).
constexpr int kLdF = kDim + 8;    // FP32 [64][128] arrays (floats)
constexpr int kLdH = kDim + 8;    // BF16 [64][128] arrays (uint16)
constexpr int kLdG = kDim + 4;    // the cumulative gates (floats)
constexpr int kLdC = kChunk + 8;  // FP32 [64][64] arrays (floats; rows stay 16-byte aligned)

struct GradSmem {
  float G[kChunk][kLdG];       // cumulative log-gates: sub-chunk references and offsets (GRef)
  uint16_t k[kChunk][kLdH];    // raw keys (0 for padding): kh = k rk
  uint16_t q[kChunk][kLdH];    // raw queries
  uint16_t d_o[kChunk][kLdH];  // raw dO, then Tinv^T's BF16 parts (TinvTPart), then dA's handover
  union {
    float u[kChunk][kLdF];     // U's hi and mid BF16 parts ([kChunk][kLdH] each)
    struct {                   // after dM (U is dead)
      float da[kChunk][kLdC];  // dA (strictly lower)
    } pa;
  } r1;
  float p[kChunk][kLdC];  // P = A / beta (strictly lower), from the start
  // d(Q Gam), then dW, then dKb (in place), then kh Gam dKb (dbeta's), then X, then dgl.
  float bufw[kChunk][kLdF];
  // dU (the reverse chain's), then dVb, then Y's exclusive cumsum, then the epilogue's partials
  // (part, below: the padding left no room for them beside it).
  float bufu[kChunk][kLdF];
  float dm[kChunk][kLdC];  // U's lo BF16 part, then dM (lower incl. the diagonal)
  float rk[kChunk], rq[kChunk], bt[kChunk];
  float dmd[kChunk];        // dM's diagonal (zeroed in dm: the pair terms run without branches)
  float z[kDim];            // Gam_C[k] sum_v dS1[v][k] S0[v][k]
  float red[2][4][kChunk];  // per-warp partials of qh . dqh, kh . dkh; then slot 0 the sums
};
static_assert(sizeof(GradSmem) + 1024 <= 227 * 1024, "one CTA per SM");
// The pair terms' split dA and dM: six BF16 planes [kChunk][kLdPair] (rows 144 B apart: the eight
// rows of an ldmatrix matrix fall in distinct 16-byte bank groups) over d_o, r1 and p.
constexpr int kLdPair = kChunk + 8;
constexpr int kPairPlane = kChunk * kLdPair;
static_assert(offsetof(GradSmem, r1) == offsetof(GradSmem, d_o) + sizeof(GradSmem::d_o) &&
                  offsetof(GradSmem, p) == offsetof(GradSmem, r1) + sizeof(GradSmem::r1) &&
                  6 * kPairPlane * sizeof(uint16_t) <=
                      sizeof(GradSmem::d_o) + sizeof(GradSmem::r1) + sizeof(GradSmem::p),
              "the six planes fit in d_o .. p");
// The epilogue's per-token-group partials [2][kTq][kDim] live in G (dead by then).
static_assert(2 * GradTraits::kTq * kDim <= kChunk * kLdG, "partials fit in G");

// Tile n < 32 of the 16 x 8 tiles of a [64][64] matrix at (m0, c0): the 20 that reach the lower
// triangle (c0 < m0 + 16) first, sub-chunk by sub-chunk, then the 12 wholly above it. With tiles
// n = w and w + 16 for warp w, warps 0-3 take two of the 20 and the others one, so each of the
// four schedulers (warps w, w + 4, w + 8, w + 12) has five, where tiles 2 w and 2 w + 1 put eight
// on warps 0, 4, 8, 12 and two or none on the others.
__device__ __forceinline__ void TriTile(int n, int* m0, int* c0) {
  int J, c;
  if (n < 20) {
    J = n < 2 ? 0 : n < 6 ? 1 : n < 12 ? 2 : 3;
    c = n - J * (J + 1);
  } else {
    n -= 20;
    J = n < 6 ? 0 : n < 10 ? 1 : 2;
    c = 2 * J + 2 + n - (J == 0 ? 0 : J == 1 ? 6 : 10);
  }
  *m0 = 16 * J;
  *c0 = 8 * c;
}

__device__ __forceinline__ float KhAt(const GradSmem& sm, int t, int k) {
  return Bf16(sm.k[t][k]) * sm.rk[t];
}
__device__ __forceinline__ float QhAt(const GradSmem& sm, int t, int k) {
  return Bf16(sm.q[t][k]) * sm.rq[t];
}

// The cumulative log-gates G_t (nats) as references at the 16-token sub-chunk starts plus FP32
// offsets: row 16 J of sm.G holds r_J = G_{16 J}, the other rows t of sub-chunk J hold G_t - r_J.
// A decay exp(G_a - G_b) then has an argument as accurate as its own size: G_t reaches ~-300 over
// a chunk, and in one FP32 array each G_t carried ~2e-5 of rounding into every difference, even
// between neighbouring tokens; dA_log's cancellation amplified it (host emulator, single-chunk
// documents: dA_log 3.2e-5 -> 2.9e-6, bench/results/kda_h200.md, twenty-first session).
__device__ __forceinline__ float GRef(const GradSmem& sm, int t, int k) { return sm.G[t & ~15][k]; }
__device__ __forceinline__ float GOff(const GradSmem& sm, int t, int k) {
  return (t & 15) != 0 ? sm.G[t][k] : 0.f;
}
// G_t itself, for the decays from the chunk start (as accurate as an FP32 G_t: enough there).
__device__ __forceinline__ float GAt(const GradSmem& sm, int t, int k) {
  return GRef(sm, t, k) + GOff(sm, t, k);
}
// G_t for token t = tq + 4 j of a thread's column (tq < kTq = 4, j unrolled): its sub-chunk
// is j / 4, a start only where j % 4 == 0 and tq == 0. Spelled out so that the four references'
// loads are shared by the unrolled j (with t & ~15 the compiler loaded one per j, and the
// per-token phases spilled).
__device__ __forceinline__ float GOffTok(const GradSmem& sm, int tq, int j, int k) {
  return (j & 3) != 0 || tq != 0 ? sm.G[tq + 4 * j][k] : 0.f;
}
__device__ __forceinline__ float GAtTok(const GradSmem& sm, int tq, int j, int k) {
  return sm.G[16 * (j >> 2)][k] + GOffTok(sm, tq, j, k);
}
// G_63 - G_t for the same t (the decay to the chunk end).
__device__ __forceinline__ float GToEndTok(const GradSmem& sm, int tq, int j, int k) {
  return (sm.G[kChunk - 16][k] - sm.G[16 * (j >> 2)][k]) +
         (sm.G[kChunk - 1][k] - GOffTok(sm, tq, j, k));
}

// U is staged in three BF16 parts (Split3Pair, as LoadASplit3 would split it for dKdec and dM):
// hi and mid in r1 ([kChunk][kLdH] each, mid after hi), lo in dm.
constexpr int kSplitLo = kChunk * kLdH;
static_assert(2 * kSplitLo * sizeof(uint16_t) <= sizeof(float) * kChunk * kLdF, "parts fit");
static_assert(kSplitLo * sizeof(uint16_t) <= sizeof(float) * kChunk * kLdC, "U's lo part fits");
static_assert(2 * kSplitLo * sizeof(uint16_t) <= sizeof(GradSmem::bufw), "dU's parts fit");

// Tinv^T's three BF16 parts for [dKb | dVb] = Tinv^T [dW | dU]: only its 10 16 x 16 tiles (row
// block mt, column block ks >= mt) are read, each stored as 16 rows of two 16-byte pieces, the
// pieces of rows 4..7 and 12..15 swapped, so that an ldmatrix phase's 8 rows fill the 8 bank
// groups. Element (s, t) of part p, or with q the piece (columns 8 q ..) of row s.
constexpr int kTinvTiles = 10;
constexpr int kTinvPlane = kTinvTiles * 16 * 16;
__device__ __forceinline__ int TinvTPart(int p, int s, int t0, int q) {
  const int mt = s >> 4, ks = t0 >> 4, r = s & 15;
  const int tile = 4 * mt - mt * (mt - 1) / 2 + (ks - mt);
  return p * kTinvPlane + tile * 256 + 16 * r + 8 * (q ^ ((r >> 2) & 1));
}
__device__ __forceinline__ int TinvTPart(int p, int s, int t) {
  return TinvTPart(p, s, t, (t & 15) >> 3) + (t & 7);
}
static_assert(3 * kTinvPlane * sizeof(uint16_t) <= sizeof(GradSmem::d_o), "Tinv^T's parts fit");

// sigmoid'(x) for the gate's and beta's chain rules, as e / (1 + e)^2 with e = exp(-|x|):
// sg (1 - sg) with sg = sigmoid(x) cancels once sg rounds near 1 (gates near lower_bound: at
// x = 10, 1 - sg keeps about 3 significant digits in FP32; at x = 16, none), and with the SFU's
// approximate sigmoid (GateSigmoid) it carried that rounding into dg, ddt_bias and dA_log. That
// was the chunked backward's fast-decay dA_log tail (host emulator, B2_T1000_H4_fastdecay seed
// 4192886706: unchanged with the records, S0 and dS1 all exact, so the per-chunk pass alone).
// The SFU's ex2 and rcp, as GateSigmoid: expf and an IEEE division here made the grad kernel 8%
// slower (spills; twenty-seventh session), and their precision is not what was missing.
__device__ __forceinline__ float GateSigmoidDerivative(float x) {
  const float e = Ex2Ftz(fabsf(x) * -kLog2e);
  const float r = RcpFtz(1.0f + e);
  return e * r * r;
}
__global__ void __launch_bounds__(GradTraits::kThreads, 1)
    KdaChunkGradKernel(const __grid_constant__ ChunkBwdArgs a) {
  using Tr = GradTraits;
  constexpr int kJ = Tr::kPerThread;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  GradSmem& sm = *reinterpret_cast<GradSmem*>(smem_raw);
  const int64_t slot = ChunkSlotOfBlock();  // ChunkSlotGrid
  const int64_t h = blockIdx.x;
  // Every exit waits for the state pass to complete first (cudaGridDependencySynchronize; the
  // launch says why), the early ones too. Every CTA, not only one: a CTA that ends while the state
  // pass still runs then keeps its SM, and fewer of this kernel's CTAs compete with that
  // latency-bound pass for memory (with one waiting CTA the backward was 1-2% slower on the H200;
  // kda_h200.md, thirty-second session).
  if (slot >= a.slots) {  // past the last slot (a gap slot would write partials)
    cudaGridDependencySynchronize();
    return;
  }
  const int64_t H = a.s.H;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int kc = tid % kDim, tq = tid / kDim;
  float* part_out = a.partials + (slot * H + h) * kPartials;

  int64_t bos, eos, chunk;
  const bool gap = !LocateChunkSlot(a.s, slot, &bos, &eos, &chunk);
  if (gap) {  // the reduce sums every slot: a gap contributes zeros
    for (int e = tid; e < kPartials; e += Tr::kThreads) part_out[e] = 0.f;
    cudaGridDependencySynchronize();
    return;
  }
  const int64_t t0 = bos + chunk * kChunk;
  const int len = static_cast<int>(min(int64_t{kChunk}, eos - t0));
  const Rec rec = RecordAt(a.records, slot, H, h);
  const float* s0 = a.s0 + (slot * H + h) * kDimSq;
  const float* ds1 = a.ds1 + (slot * H + h) * kDimSq;
  const float exp_a = expf(a.A_log[h]);
  const float scale = a.s.scale;

  // The reverse chain and the checkpoint state pass may still be running beside this kernel
  // (KdaBackwardChunkedCuda): this slot's S0, U, dS1 and dU are there once its ready_target CTAs
  // of both have counted in. Asked here for the prefetch below; thread 0 waits for it, if need
  // be, before the barrier ahead of U's and dU's staging, the first read of any of them.
  bool slot_ready = true;  // thread 0's answer is the one the wait below goes by
  // What launches 1 and 2 wrote for this CTA lies in DRAM (the workspace is gigabytes), and one
  // CTA an SM cannot hide a phase's wait for it. The copy engine brings it into L2 from the start,
  // in two rounds so that the resident CTAs' share of L2 stays ~25 MB: S0, dS1, U, dU, P and Tinv
  // here (210 KB, read from the z sums on), -W, Uv, V and g after dKdec (96 KB, read from dA on).
  if (warp == 0) {
    slot_ready = a.ready == nullptr || SlotReady(a.ready + slot * H + h, a.ready_target);
    const int64_t sq = (slot * H + h) * kDimSq, cd = (slot * H + h) * kChunk * kDim;
    const int64_t cp = (slot * H + h) * kChunkPFloats;
    const float* const src = lane == 0   ? a.s0 + sq
                             : lane == 1 ? a.ds1 + sq
                             : lane == 2 ? a.chunk_u + cd
                             : lane == 3 ? a.du + cd
                             : lane == 4 ? a.chunk_p + cp
                                         : a.chunk_tinv + cp;
    if (lane < 6 && (slot_ready || lane >= 4)) {
      PrefetchL2(src, lane < 2 ? 4 * kDimSq : lane < 4 ? 4 * kChunk * kDim : 4 * kChunkPFloats);
    }
  }

  // Per token (warp per token, lane owns k = 4 lane .. 4 lane + 3): exactly the forward
  // preparation's norms and beta (UnpackToken, GateSigmoid), bit for bit; its log-gates in
  // nats, where the preparation keeps them in log2 units (equal up to rounding).
  {
    const float4 dtb = reinterpret_cast<const float4*>(a.dt_bias + h * kDim)[lane];
    const float db[4] = {dtb.x, dtb.y, dtb.z, dtb.w};
    // Unrolled: the four tokens' loads from L2 are in flight together, not one wait per token.
#pragma unroll
    for (int t = warp; t < kChunk; t += Tr::kWarps) {
      float gl[4] = {0.f, 0.f, 0.f, 0.f};
      uint2 kraw = make_uint2(0u, 0u), qraw = make_uint2(0u, 0u), oraw = make_uint2(0u, 0u);
      if (t < len) {
        const RawToken r = LoadToken(a.q, a.k, a.g, a.beta, t0 + t, H, h);
        kraw = r.k;
        qraw = r.q;
        oraw = *reinterpret_cast<const uint2*>(a.d_o + ((t0 + t) * H + h) * kDim + 4 * lane);
        const TokenLane tl = UnpackToken(r, db, exp_a, a.s.lower_bound);
#pragma unroll
        for (int j = 0; j < 4; ++j) gl[j] = tl.gl[j];
        if (lane == 0) {
          sm.rq[t] = tl.rq;
          sm.rk[t] = tl.rk;
          sm.bt[t] = GateSigmoid(r.beta);
        }
      } else if (lane == 0) {
        sm.rq[t] = 0.f;
        sm.rk[t] = 0.f;
        sm.bt[t] = 0.f;
      }
#pragma unroll
      for (int j = 0; j < 4; ++j) sm.G[t][4 * lane + j] = gl[j];
      *reinterpret_cast<uint2*>(&sm.k[t][4 * lane]) = kraw;
      *reinterpret_cast<uint2*>(&sm.q[t][4 * lane]) = qraw;
      *reinterpret_cast<uint2*>(&sm.d_o[t][4 * lane]) = oraw;
    }
  }
  __syncthreads();
  if (tid < kDim) {
    // Summed in FP64 (an FP32 running sum drifts by ~1e-5 over the chunk, and every decay inherits
    // it as relative error), stored as GRef describes: each reference rounded to FP32 and the sum
    // continued from it, so that the offsets are exact differences from the stored reference.
    double acc = 0.0;
    float ref = 0.f;
#pragma unroll 16
    for (int t = 0; t < kChunk; ++t) {
      acc += sm.G[t][tid];
      if ((t & 15) == 0) {
        ref = static_cast<float>(acc);
        acc = ref;
        sm.G[t][tid] = ref;
      } else {
        sm.G[t][tid] = static_cast<float>(acc - ref);
      }
    }
  }
  __syncthreads();  // cumulative gates complete

  // P[t][i] = sum_k kh_t kh_i exp(G_t - G_i), i < t (A = diag(beta) P), as the checkpoint
  // preparation made it for A (packed by sub-chunk: row t of sub-chunk J has columns < 16 J + 16;
  // the rest is zeroed below before dbeta reads it). Tinv, W and Uv come from that A too, so
  // [dKb | dVb], dbeta and Uv agree with each other; this pass used to compute its own P on the
  // tensor cores (20 tiles on 10 warps). It lives until dbeta, beside U.
  {
    const float4* pp = reinterpret_cast<const float4*>(a.chunk_p + (slot * H + h) * kChunkPFloats);
#pragma unroll 1
    for (int e4 = tid; e4 < kChunkPFloats / 4; e4 += Tr::kThreads) {
      const int e = 4 * e4;
      const int J = kda_layout::PackedBlockOf(e);
      const int rem = e - kda_layout::PackedBlockStart(J), width = 16 * (J + 1);
      *reinterpret_cast<float4*>(&sm.p[16 * J + rem / width][rem % width]) = pp[e4];
    }
  }
  if (tid == 0 && !slot_ready) {
    const int64_t sh = slot * H + h;
    WaitSlotReady(a.ready + sh, a.ready_target);
    // The states only (read from the z sums on): U's and dU's prefetch too spilled 68 B.
    PrefetchL2(a.s0 + sh * kDimSq, 4 * kDimSq);
    PrefetchL2(a.ds1 + sh * kDimSq, 4 * kDimSq);
  }
  __syncthreads();  // P staged; this slot's S0, U, dS1 and dU written (thread 0's acquire above)
  // U = Uv - W S0^T and dU = scale M^T dO + Kdec dS1^T come from the workspace: U as the checkpoint
  // state pass made it for S1, dU as the reverse chain made it for dS0 (FP32, per chunk slot; the
  // same products at the same precision, BF16x3, which this pass used to redo from its own
  // staging of -W, Kdec and M^T). Warp w owns columns v = 8 w .. 8 w + 7 in fragment layout:
  // U split in three BF16 parts (Split3Pair, as dKdec's and dM's loads read it), hi and mid to r1,
  // lo to dm; dU to bufu.
  constexpr int kMt = kChunk / 16;  // 16-token tiles
  static_assert(Tr::kWarps * 8 == kDim, "one 8-column tile per warp");
  const int n0 = 8 * warp, fr = lane >> 2, fc = n0 + 2 * (lane & 3);  // fragment coordinates
  uint16_t* const u_parts = reinterpret_cast<uint16_t*>(&sm.r1.u[0][0]);
  // dU's BF16 hi and lo parts for dW = -dU S0 (the A operand every warp reads whole), split once
  // here into bufw (free until d(Q Gam)) instead of by each of the 16 warps in the S0 walk: that
  // was ~900 of a warp's ~14k instructions, and this kernel's time follows its instruction count.
  uint16_t* const du_parts = reinterpret_cast<uint16_t*>(&sm.bufw[0][0]);
  uint16_t* const u_lo = reinterpret_cast<uint16_t*>(&sm.dm[0][0]);
  {
    const float* const u_g = a.chunk_u + (slot * H + h) * kChunk * kDim;
    const float* const du_g = a.du + (slot * H + h) * kChunk * kDim;
    float2 u[kMt][2], du[kMt][2];  // all loads in flight before the first use
#pragma unroll
    for (int m = 0; m < kMt; ++m) {
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
        const int t = 16 * m + fr + 8 * hh;
        u[m][hh] = *reinterpret_cast<const float2*>(u_g + t * kDim + fc);
        du[m][hh] = *reinterpret_cast<const float2*>(du_g + t * kDim + fc);
      }
    }
#pragma unroll
    for (int m = 0; m < kMt; ++m) {
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
        const int t = 16 * m + fr + 8 * hh;
        uint32_t uh, um, ul;
        Split3Pair(u[m][hh].x, u[m][hh].y, &uh, &um, &ul);
        *reinterpret_cast<uint32_t*>(u_parts + t * kLdH + fc) = uh;
        *reinterpret_cast<uint32_t*>(u_parts + kSplitLo + t * kLdH + fc) = um;
        *reinterpret_cast<uint32_t*>(u_lo + t * kLdH + fc) = ul;
        *reinterpret_cast<float2*>(&sm.bufu[t][fc]) = du[m][hh];
        uint32_t dh, dl;
        SplitPair(du[m][hh].x, du[m][hh].y, &dh, &dl);
        *reinterpret_cast<uint32_t*>(du_parts + t * kLdH + fc) = dh;
        *reinterpret_cast<uint32_t*>(du_parts + kSplitLo + t * kLdH + fc) = dl;
      }
    }
  }
  __syncthreads();  // U's parts and dU are complete; the cumulative gates are too

  // Per-token accumulators of thread (tq, kc): dqh, dkh, the log-gate terms X (reverse cumsum)
  // and Y = Kdec dKdec (exclusive forward cumsum).
  float dqh[kJ], dkh[kJ], X[kJ], Y[kJ];
  {
    // d(Q Gam) = scale dO S0 and dW = -dU S0 on the tensor cores (mma.sync m16n8k16, FP32
    // accumulation): warp w owns columns k = 8 w .. 8 w + 7 for all 64 tokens, so each S0 element
    // is read from L2 by one warp and split once, in three parts: dO is exactly BF16, so
    // d(Q Gam) takes three passes and is ~exact (it reaches dg directly, through X); dW uses the
    // first two parts with dU split in two (BF16x3, the study's dwu class). The CUDA-core loop
    // took ~8k instructions per thread (11%); this one ~1.9k. Both products come out in fragment
    // layout: d(Q Gam) goes through bufw (-W is dead) to the per-token thread layout, then dW
    // replaces it there.
    float cq[kMt][4], cw[kMt][4];
#pragma unroll
    for (int m = 0; m < kMt; ++m) {
#pragma unroll
      for (int i = 0; i < 4; ++i) cq[m][i] = cw[m][i] = 0.f;
    }
    // z = Gam_C sum_v dS1[v][k] S0[v][k] rides along: each lane sums its S0 fragment's four rows
    // of column n0 + lane / 4 against dS1's, then the column's four lanes are summed. A pass of
    // its own walked S0 and dS1 before the products, waiting on memory.
    float xs[4], xd[4];  // the next step's S0 and dS1 fragments, loaded from L2 ahead
    float zs = 0.f;
    LoadBRaw(s0, kDim, 0, n0, xs);
    LoadBRaw(ds1, kDim, 0, n0, xd);
#pragma unroll 1
    for (int v0 = 0; v0 < kDim; v0 += 16) {
      uint32_t bh[2], bm[2], bl[2];  // S0 in three parts; hi + mid is the two-part split
      SplitB3(xs, bh, bm, bl);
#pragma unroll
      for (int i = 0; i < 4; ++i) zs = fmaf(xd[i], xs[i], zs);
      if (v0 + 16 < kDim) {
        LoadBRaw(s0, kDim, v0 + 16, n0, xs);
        LoadBRaw(ds1, kDim, v0 + 16, n0, xd);
      }
#pragma unroll
      for (int m = 0; m < kMt; ++m) {
        uint32_t ao[4], uh[4], ul[4];
        LdmA<kLdH>(&sm.d_o[0][0], 16 * m, v0, ao);
        Mma(cq[m], ao, bl);
        Mma(cq[m], ao, bm);
        Mma(cq[m], ao, bh);
        LdmA<kLdH>(du_parts, 16 * m, v0, uh);
        LdmA<kLdH>(du_parts + kSplitLo, 16 * m, v0, ul);
        Mma(cw[m], uh, bh);
        Mma(cw[m], uh, bm);
        Mma(cw[m], ul, bh);
      }
    }
    zs += __shfl_xor_sync(0xffffffffu, zs, 1);
    zs += __shfl_xor_sync(0xffffffffu, zs, 2);
    if ((lane & 3) == 0) sm.z[n0 + fr] = expf(GAt(sm, kChunk - 1, n0 + fr)) * zs;
    __syncthreads();  // every warp has read dU's parts: d(Q Gam) takes bufw
#pragma unroll
    for (int m = 0; m < kMt; ++m) {
      *reinterpret_cast<float2*>(&sm.bufw[16 * m + fr][fc]) = make_float2(cq[m][0], cq[m][1]);
      *reinterpret_cast<float2*>(&sm.bufw[16 * m + fr + 8][fc]) = make_float2(cq[m][2], cq[m][3]);
    }
    __syncthreads();
#pragma unroll
    for (int j = 0; j < kJ; ++j) {
      const int t = tq + 4 * j;
      const float gam = expf(GAtTok(sm, tq, j, kc));
      const float dqg = scale * sm.bufw[t][kc];
      dqh[j] = gam * dqg;
      X[j] = (QhAt(sm, t, kc) * gam) * dqg;  // Q Gam d(Q Gam): a factor exp(G)
    }
    __syncthreads();  // d(Q Gam) is read: dKdec takes its place
    // dKdec = U dS1 (Kdec = kh Gam_C / Gam), the same way: B fragments of dS1 from L2, U's
    // parts from shared memory, both in three parts (Mma6, ~exact: dKdec reaches dg directly,
    // through Y); ~4k instructions per thread on the CUDA cores, ~2.7k here.
    float ck[kMt][4];
#pragma unroll
    for (int m = 0; m < kMt; ++m) {
#pragma unroll
      for (int i = 0; i < 4; ++i) ck[m][i] = 0.f;
    }
    // the next step's dS1 fragment, loaded from L2 ahead (xd is free after the loop above)
    LoadBRaw(ds1, kDim, 0, n0, xd);
#pragma unroll 1
    for (int v0 = 0; v0 < kDim; v0 += 16) {
      uint32_t bh[2], bm[2], bl[2];
      SplitB3(xd, bh, bm, bl);
      if (v0 + 16 < kDim) LoadBRaw(ds1, kDim, v0 + 16, n0, xd);
#pragma unroll
      for (int m = 0; m < kMt; ++m) {
        uint32_t ah[4], am[4], al[4];
        LdmA<kLdH>(u_parts, 16 * m, v0, ah);
        LdmA<kLdH>(u_parts + kSplitLo, 16 * m, v0, am);
        LdmA<kLdH>(u_lo, 16 * m, v0, al);
        Mma6(ck[m], ah, am, al, bh, bm, bl);
      }
    }
#pragma unroll
    for (int m = 0; m < kMt; ++m) {
      *reinterpret_cast<float2*>(&sm.bufw[16 * m + fr][fc]) = make_float2(ck[m][0], ck[m][1]);
      *reinterpret_cast<float2*>(&sm.bufw[16 * m + fr + 8][fc]) = make_float2(ck[m][2], ck[m][3]);
    }
    __syncthreads();
#pragma unroll
    for (int j = 0; j < kJ; ++j) {
      const int t = tq + 4 * j;
      const float dec = expf(GToEndTok(sm, tq, j, kc));
      const float dkd = sm.bufw[t][kc];
      dkh[j] = dec * dkd;
      Y[j] = (KhAt(sm, t, kc) * dec) * dkd;
    }
    __syncthreads();  // dKdec is read: dW takes its place
    if (tid < 2) {    // dA's B operands (the record's -W hi | lo and Uv)
      PrefetchL2(tid == 0 ? static_cast<const void*>(rec.negw) : static_cast<const void*>(rec.uv),
                 2 * kChunk * kDim * 2);
    } else if (tid >= 64 && tid < 64 + 2 * kChunk) {  // dbeta's V rows, the epilogue's g rows
      const int t = (tid - 64) % kChunk;
      if (t < len) {
        PrefetchL2((tid < 64 + kChunk ? a.v : a.g) + ((t0 + t) * H + h) * kDim, kDim * 2);
      }
    }
#pragma unroll
    for (int m = 0; m < kMt; ++m) {
      *reinterpret_cast<float2*>(&sm.bufw[16 * m + fr][fc]) = make_float2(-cw[m][0], -cw[m][1]);
      *reinterpret_cast<float2*>(&sm.bufw[16 * m + fr + 8][fc]) = make_float2(-cw[m][2], -cw[m][3]);
    }
  }
  __syncthreads();  // dW complete; M (in dm) is consumed

  // dM[t][s] = scale sum_v dO[t][v] U[s][v] for s <= t on the tensor cores: 32 tiles of 16 x 8,
  // two per warp, those wholly above the diagonal written as zeros without products. dO is exactly
  // BF16 and U in its three parts (three passes, ~exact). dM's diagonal goes to dmd and is zeroed
  // in dm (the pair terms below rely on it). The CUDA-core loop took ~3k instructions per thread.
  // U's lo part lives in dm: every warp's products are done before dM is written.
  static_assert(32 == 2 * Tr::kWarps, "two tiles per warp");
  {
    float acc[2][4];
#pragma unroll
    for (int n = 0; n < 2; ++n) {
      int m0, c0;
      TriTile(warp + Tr::kWarps * n, &m0, &c0);
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[n][e] = 0.f;
      if (c0 <= m0 + 15) {  // warp-uniform
#pragma unroll 2
        for (int v0 = 0; v0 < kDim; v0 += 16) {
          uint32_t ao[4], bh[2], bm[2], bl[2];
          LdmA<kLdH>(&sm.d_o[0][0], m0, v0, ao);
          LdmB2<kLdH>(u_parts, u_parts + kSplitLo, c0, v0, bh, bm);
          LoadB<kLdH>(u_lo, c0, v0, bl);
          Mma(acc[n], ao, bl);
          Mma(acc[n], ao, bm);
          Mma(acc[n], ao, bh);
        }
      }
    }
    __syncthreads();  // U's parts are read
#pragma unroll
    for (int n = 0; n < 2; ++n) {
      int m0, c0;
      TriTile(warp + Tr::kWarps * n, &m0, &c0);
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int t = m0 + (lane >> 2) + 8 * (e >> 1), c = c0 + 2 * (lane & 3) + (e & 1);
        const float x = c <= t ? scale * acc[n][e] : 0.f;
        if (c == t) sm.dmd[t] = x;
        sm.dm[t][c] = c == t ? 0.f : x;
      }
    }
  }
  __syncthreads();  // U is dead: its space takes dA

  // P right of a row's sub-chunk is zeroed (the dbeta sums read whole rows).
#pragma unroll 1
  for (int e = tid; e < kChunk * kChunk; e += Tr::kThreads) {
    const int t = e / kChunk, i = e % kChunk;
    if (i >= 16 * (t / 16 + 1)) sm.p[t][i] = 0.f;
  }
  // The checkpoint preparation's Tinv = (I + A)^-1 (FP32, from the A of P, W and Uv), transposed:
  // Tinv^T is upper triangular by 16-token blocks, and the product below reads rows s of block J_s
  // at columns t >= 16 J_s. It goes straight into its three BF16 parts (TinvTPart), split once
  // here instead of by each of the 16 warps (10 LoadASplit3 a warp). A thread holds rows s0 .. s0 +
  // 3 of column t; with its neighbour's column t ^ 1 (a shuffle) it splits two rows' (t, t + 1)
  // pairs: even t rows s0, s0 + 1, odd t rows s0 + 2, s0 + 3. Split3Pair of the same pairs as
  // LoadASplit3 took: the same parts, the same bits.
  uint16_t* const tinv_parts = reinterpret_cast<uint16_t*>(&sm.d_o[0][0]);  // dO is dead
  {
    const float4* tp =
        reinterpret_cast<const float4*>(a.chunk_tinv + (slot * H + h) * kChunkPFloats);
    static_assert(kChunkPFloats / 4 % 32 == 0 && Tr::kThreads % 32 == 0, "whole warps shuffle");
#pragma unroll 1
    for (int e4 = tid; e4 < kChunkPFloats / 4; e4 += Tr::kThreads) {
      const int J = kda_layout::PackedBlockOf(4 * e4), base4 = kda_layout::PackedBlockStart(J) / 4;
      const int rem = e4 - base4, r = rem % 16, c4 = rem / 16;
      const float4 v = tp[base4 + r * 4 * (J + 1) + c4];
      float4 w;
      w.x = __shfl_xor_sync(0xffffffffu, v.x, 1);
      w.y = __shfl_xor_sync(0xffffffffu, v.y, 1);
      w.z = __shfl_xor_sync(0xffffffffu, v.z, 1);
      w.w = __shfl_xor_sync(0xffffffffu, v.w, 1);
      const bool odd = (r & 1) != 0;
      const int te = 16 * J + (r & ~1), sa = 4 * c4 + (odd ? 2 : 0);
      uint32_t x3[2][3];
      Split3Pair(odd ? w.z : v.x, odd ? v.z : w.x, &x3[0][0], &x3[0][1], &x3[0][2]);
      Split3Pair(odd ? w.w : v.y, odd ? v.w : w.y, &x3[1][0], &x3[1][1], &x3[1][2]);
#pragma unroll
      for (int i = 0; i < 2; ++i) {
#pragma unroll
        for (int part = 0; part < 3; ++part) {
          *reinterpret_cast<uint32_t*>(tinv_parts + TinvTPart(part, sa + i, te)) = x3[i][part];
        }
      }
    }
  }
  __syncthreads();

  // [dKb | dVb] = Tinv^T [dW | dU] on the tensor cores, BF16x6 (~FP32-exact: dKb reaches dg
  // through X and dA). Warp w owns columns 16 (w % 8) .. + 15 of dW (w < 8) or dU: output tiles
  // (mt, n) over k-steps ks >= mt, in place by ascending mt (block mt's result needs the input's
  // blocks ks >= mt only, and no other warp touches the columns). It replaces a back
  // substitution, (I + A)^T x = y by 16-token blocks on the CUDA cores, ~1600 latency-bound
  // instructions a warp (bench/results/kda_h200.md, kda43 and the eighteenth session).
  {
    float* const y = (warp < Tr::kWarps / 2 ? &sm.bufw[0][0] : &sm.bufu[0][0]) + 16 * (warp & 7);
    static_assert(Tr::kWarps * 16 == 2 * kDim, "16 columns per warp");
#pragma unroll 1
    for (int mt = 0; mt < kMt; ++mt) {
      float acc[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
#pragma unroll 1
      for (int ks = mt; ks < kMt; ++ks) {
        uint32_t ah[4], am[4], al[4];
        auto part = [&](int pt) {
          return
              [&, pt](int r, int q) { return tinv_parts + TinvTPart(pt, 16 * mt + r, 16 * ks, q); };
        };
        LdmAP(part(0), ah);
        LdmAP(part(1), am);
        LdmAP(part(2), al);
#pragma unroll
        for (int n = 0; n < 2; ++n) {
          float xb[4];
          uint32_t bh[2], bm[2], bl[2];
          LoadBRaw(y, kLdF, 16 * ks, 8 * n, xb);
          SplitB3(xb, bh, bm, bl);
          Mma6(acc[n], ah, am, al, bh, bm, bl);
        }
      }
      __syncwarp();  // every lane has read block mt
#pragma unroll
      for (int n = 0; n < 2; ++n) {
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
          *reinterpret_cast<float2*>(y + (16 * mt + fr + 8 * hh) * kLdF + 8 * n + 2 * (lane & 3)) =
              make_float2(acc[n][2 * hh], acc[n][2 * hh + 1]);
        }
      }
      __syncwarp();
    }
  }
  __syncthreads();

  // dA[t][i] = sum_k dKb[t][k] (-W)[i][k] - sum_v dVb[t][v] Uv[i][v], i < t (zero elsewhere: the
  // dbeta sums read whole rows), on the tensor cores: the 20 tiles of 16 x 8 that reach below the
  // diagonal (TriTile order), the 12 above it written as zeros. -W's B fragments come straight
  // from the record's hi / lo blocks (L2), Uv's are split from the FP32 record, dKb and dVb from
  // shared memory, in three parts (BF16x6; -W is exactly hi + lo, so five MMAs there: dA reaches
  // dg through the pair terms). The warp-per-row loop with a warp sum per element took ~3.5k
  // instructions per thread.
  // Balance: 20 tiles of 8 k-steps are 160 steps, 10 a warp. Warp w takes steps [10 w, 10 w + 10)
  // of the tiles in order: the tail of one tile and the head of the next (or a whole one). A tile
  // split between warps w and w + 1 is (w's partial, its first steps) + (w + 1's, its last steps),
  // in that order: w stores its part in dA, w + 1 leaves its own in dO's space (dead since dM) and
  // the block adds it after the barrier, before dbeta reads dA. With whole tiles, warps 0-3 took
  // two and the rest one: ncu saw the rest wait ~4% of the kernel at the barrier below. (A
  // hand-over on named barriers, bar.arrive / bar.sync, gave the same bits without the block
  // pass, but racecheck then reported hazards across later block barriers.)
  float* const handover = reinterpret_cast<float*>(&sm.d_o[0][0]);  // [warp - 1][lane][4]
  constexpr int kKs = kDim / 16;                                    // k-steps a tile
  constexpr int kPer = 20 * kKs / Tr::kWarps;                       // steps a warp
  {
    constexpr int kWorkTiles = 20;
    static_assert(kWorkTiles * kKs == kPer * Tr::kWarps && kPer > kKs && kPer <= 2 * kKs,
                  "each warp's steps span exactly two tiles");
    static_assert(Tr::kWarps * 128 * sizeof(float) <= sizeof(GradSmem::d_o), "handover fits");
    // Steps [ks0, ks1) of tile n: ax - ay over them.
    auto segment = [&](int n, int ks0, int ks1, float(&v)[4]) {
      int m0, c0;
      TriTile(n, &m0, &c0);
      float ax[4] = {0.f, 0.f, 0.f, 0.f}, ay[4] = {0.f, 0.f, 0.f, 0.f};
      // -W's and Uv's fragments come from L2, two steps ahead (one step's products are shorter
      // than an L2 round trip): buffer b holds the steps of parity b. Segments have an even
      // number of steps (kPer and kKs are even), so the loop takes them in pairs.
      static_assert(kPer % 2 == 0 && kKs % 2 == 0, "even segments");
      uint32_t wh[2][2], wl[2][2];
      float xu[2][4];
      auto load = [&](int k0, uint32_t(&h)[2], uint32_t(&l)[2], float(&u)[4]) {
        LoadB<kDim>(rec.negw, c0, k0, h);
        LoadB<kDim>(rec.negw + kRowMatLo, c0, k0, l);
        LoadBRawT(rec.uv, kDim, c0, k0, u);
      };
      load(16 * ks0, wh[0], wl[0], xu[0]);
      load(16 * ks0 + 16, wh[1], wl[1], xu[1]);
      auto step = [&](int k0, uint32_t(&h)[2], uint32_t(&l)[2], float(&u)[4]) {
        uint32_t ah[4], am[4], al[4], bh[2], bm[2], bl[2];
        LoadASplit3(&sm.bufw[0][0], kLdF, m0, k0, ah, am, al);
        bh[0] = h[0];  // -W = hi + lo exactly: five partial products
        bh[1] = h[1];
        bl[0] = l[0];
        bl[1] = l[1];
        float xc[4] = {u[0], u[1], u[2], u[3]};
        if (k0 + 32 < 16 * ks1) load(k0 + 32, h, l, u);
        Mma(ax, al, bh);
        Mma(ax, am, bl);
        Mma(ax, ah, bl);
        Mma(ax, am, bh);
        Mma(ax, ah, bh);
        LoadASplit3(&sm.bufu[0][0], kLdF, m0, k0, ah, am, al);
        SplitB3(xc, bh, bm, bl);
        Mma6(ay, ah, am, al, bh, bm, bl);
      };
#pragma unroll 1
      for (int k0 = 16 * ks0; k0 < 16 * ks1; k0 += 32) {
        step(k0, wh[0], wl[0], xu[0]);
        step(k0 + 16, wh[1], wl[1], xu[1]);
      }
#pragma unroll
      for (int e = 0; e < 4; ++e) v[e] = ax[e] - ay[e];
    };
    auto store = [&](int n, const float(&v)[4]) {
      int m0, c0;
      TriTile(n, &m0, &c0);
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int t = m0 + (lane >> 2) + 8 * (e >> 1), i = c0 + 2 * (lane & 3) + (e & 1);
        sm.r1.pa.da[t][i] = i < t ? v[e] : 0.f;
      }
    };
    const int s0w = kPer * warp, s1w = s0w + kPer;
    const int n0w = s0w / kKs;  // the warp's tiles: n0w (from step s0w % kKs on) and n0w + 1
#pragma unroll 1
    for (int part = 0; part < 2; ++part) {  // a loop, not two copies: registers are short here
      const int n = n0w + part;
      float v[4];
      segment(n, part == 0 ? s0w - kKs * n : 0, part == 0 ? kKs : s1w - kKs * n, v);
      if (part == 0 && s0w % kKs != 0) {  // the tail of warp - 1's tile: hand it over
        *reinterpret_cast<float4*>(handover + (warp - 1) * 128 + 4 * lane) =
            make_float4(v[0], v[1], v[2], v[3]);
      } else {
        store(n, v);
      }
    }
    if (kWorkTiles + warp < 32) store(kWorkTiles + warp, {0.f, 0.f, 0.f, 0.f});
  }
  __syncthreads();

  // The split tiles' second parts (pair w: warps w and w + 1, tile 10 (w + 1) / 8), where i < t.
  for (int e = tid; e < (Tr::kWarps - 1) * 128; e += Tr::kThreads) {
    const int w = e / 128, l = (e / 4) % 32, x = e % 4;
    if (kPer * (w + 1) % kKs == 0) continue;  // the pair meets at a tile boundary
    int m0, c0;
    TriTile(kPer * (w + 1) / kKs, &m0, &c0);
    const int t = m0 + (l >> 2) + 8 * (x >> 1), i = c0 + 2 * (l & 3) + (x & 1);
    if (i < t) sm.r1.pa.da[t][i] += handover[e];
  }
  // Per token from dKb, dVb: dkh += beta Gam dKb, X += Kb dKb (a factor exp(G)), dv = beta dVb.
#pragma unroll
  for (int j = 0; j < kJ; ++j) {
    const int t = tq + 4 * j;
    const float gam = expf(GAtTok(sm, tq, j, kc));
    const float dkb = sm.bufw[t][kc];
    const float khg = KhAt(sm, t, kc) * gam;
    dkh[j] = fmaf(sm.bt[t] * gam, dkb, dkh[j]);
    X[j] = fmaf(sm.bt[t] * khg, dkb, X[j]);
    sm.bufw[t][kc] = khg * dkb;  // dbeta's kh Gam dKb term (dKb is dead after dbeta)
    if (t < len) a.dv[((t0 + t) * H + h) * kDim + kc] = ToBf16(sm.bt[t] * sm.bufu[t][kc]);
  }
  // dbeta_t = beta (1 - beta) (sum_v dVb V + sum_k dKb kh Gam + sum_i dA P), warp per token. The
  // warp's four tokens' V are loaded first, so the loads from L2 are in flight together. beta
  // (1 - beta) is taken from the raw beta as GateSigmoidDerivative, not from sm.bt: 1 - bt
  // cancels once |beta| is large (at |beta| = 15, bt rounds to within an ulp or two of 1).
  constexpr int kTokPerWarp = kChunk / Tr::kWarps;
  float vv[kTokPerWarp][kDim / 32];
  float dbt[kTokPerWarp];
#pragma unroll
  for (int j = 0; j < kTokPerWarp; ++j) {
    const int t = warp + Tr::kWarps * j;
#pragma unroll
    for (int c = 0; c < kDim / 32; ++c) {
      vv[j][c] = t < len ? Bf16(a.v[((t0 + t) * H + h) * kDim + lane + 32 * c]) : 0.f;
    }
    dbt[j] = t < len ? Bf16(a.beta[(t0 + t) * H + h]) : 0.f;
  }
  __syncthreads();  // dA's split tiles are complete
#pragma unroll
  for (int j = 0; j < kTokPerWarp; ++j) {
    const int t = warp + Tr::kWarps * j;
    if (t < len) {  // warp-uniform
      float s = 0.f;
#pragma unroll
      for (int c = 0; c < kDim / 32; ++c) {
        const int col = lane + 32 * c;
        s = fmaf(sm.bufu[t][col], vv[j][c], s);
        s += sm.bufw[t][col];
      }
      for (int i = lane; i < kChunk; i += 32) s = fmaf(sm.r1.pa.da[t][i], sm.p[t][i], s);
      s = WarpSum(s);
      if (lane == 0) a.dbeta[(t0 + t) * H + h] = ToBf16(GateSigmoidDerivative(dbt[j]) * s);
    }
  }

  // The decayed pair terms of A and M (strictly off the diagonal) and M's diagonal elementwise:
  //   row side (i < t):    rowA = sum_i dA[t][i] kh_i e,  rowM = sum_i dM[t][i] kh_i e,
  //   column side (i > t): col = sum_i (beta_i dA[i][t] kh_i + dM[i][t] qh_i) e,
  // e = exp(G_later - G_earlier) <= 1, per channel k. The exponential is factored at the
  // forward's sub-chunk references r_J = G[16 J] (J = 16-token sub-chunk): row side
  // e = exp(G_t - r_J(t)) exp(r_J(t) - G_i), column side e = exp(G_i - r_J(i)) exp(r_J(i) - G_t),
  // each factor in [e^-75, e^75] (at most 15 gates of >= -5 between a token and its own
  // sub-chunk's reference; where one underflows the other is <= 1). That makes both sides
  // products over i, per row tile J (row side: i < 16 J + 16) or per (row tile, column sub-chunk
  // J' >= J) (column side, each partial scaled by exp(r_J' - G_t) before it is summed), which run
  // on the tensor cores with both operands split in three BF16 parts (Mma6, ~FP32-exact: the
  // study found BF16x3 short by x1.7 / x8.2 on these four products and 3xTF32 or FP32
  // sufficient). dA is zero on and above its diagonal and dM above it (its diagonal is in dmd),
  // so the pairs of the wrong side inside a diagonal block add exact zeros. Warp w owns channels
  // k = 8 w .. 8 w + 7; the B operands (the factored k_i, q_i) are built in registers from k, q,
  // G (one DecayExp per element). The results reach the per-token layout through bufw and bufu
  // (dKb and dVb are dead after dbeta). The CUDA-core walk with one accurate expf per pair and
  // channel was 32% of the kernel's instructions.
  __syncthreads();  // dbeta has read dKb, dVb and P
  // dA and dM in their three BF16 parts (Split3Pair is elementwise), split once for all warps:
  // the pair terms below load their A operands by ldmatrix (.trans on the column side), where
  // each warp split the same tiles again in every step (eight Split3Pair a step and matrix). Same
  // parts, same MMAs: the same bits. The six planes take d_o .. P (dO, U and P are dead); dA's
  // FP32 copy lies in that span (r1), so every thread reads its pairs before the barrier.
  uint16_t* const planes = reinterpret_cast<uint16_t*>(&sm.d_o[0][0]);  // dA hi mid lo, dM ...
  {
    constexpr int kPairs = kChunk * kChunk / 2 / Tr::kThreads;
    float2 xa[kPairs], xm[kPairs];
#pragma unroll
    for (int j = 0; j < kPairs; ++j) {
      const int e = tid + Tr::kThreads * j, t = e / (kChunk / 2), c = 2 * (e % (kChunk / 2));
      xa[j] = *reinterpret_cast<const float2*>(&sm.r1.pa.da[t][c]);
      xm[j] = *reinterpret_cast<const float2*>(&sm.dm[t][c]);
    }
    __syncthreads();
#pragma unroll
    for (int j = 0; j < kPairs; ++j) {
      const int e = tid + Tr::kThreads * j, t = e / (kChunk / 2), c = 2 * (e % (kChunk / 2));
      uint32_t x3[2][3];
      Split3Pair(xa[j].x, xa[j].y, &x3[0][0], &x3[0][1], &x3[0][2]);
      Split3Pair(xm[j].x, xm[j].y, &x3[1][0], &x3[1][1], &x3[1][2]);
#pragma unroll
      for (int m = 0; m < 2; ++m) {
#pragma unroll
        for (int part = 0; part < 3; ++part) {
          *reinterpret_cast<uint32_t*>(planes + (3 * m + part) * kPairPlane + t * kLdPair + c) =
              x3[m][part];
        }
      }
    }
  }
  __syncthreads();  // the planes are complete
  {
    const int g = lane >> 2, q2 = 2 * (lane & 3), kch = n0 + g;  // B's channel
    // The A tile (rows m0 .., columns i0 ..) of plane pl in its three parts; .trans: of its
    // transpose (rows i0 .., columns m0 .. of the plane).
    auto plane_a = [&](int pl, int m0, int i0, uint32_t(&ah)[4], uint32_t(&am)[4],
                       uint32_t(&al)[4]) {
      const uint16_t* const b = planes + 3 * pl * kPairPlane;
      LdmA<kLdPair>(b, m0, i0, ah);
      LdmA<kLdPair>(b + kPairPlane, m0, i0, am);
      LdmA<kLdPair>(b + 2 * kPairPlane, m0, i0, al);
    };
    auto plane_at = [&](int pl, int m0, int i0, uint32_t(&ah)[4], uint32_t(&am)[4],
                        uint32_t(&al)[4]) {
      const uint16_t* const b = planes + 3 * pl * kPairPlane;
      auto piece = [&](const uint16_t* x) {
        return [x](int k, int q) { return x + k * kLdPair + 8 * q; };
      };
      LdmATP(piece(b), i0, m0, ah);
      LdmATP(piece(b + kPairPlane), i0, m0, am);
      LdmATP(piece(b + 2 * kPairPlane), i0, m0, al);
    };
    // Row side, row tile J: RA = dA[J rows][i] Kc_J[i], RM = dM[J rows][i] Kc_J[i], with
    // Kc_J[i][k] = kh_i exp(r_J - G_i); times exp(G_t - r_J) at the end.
#pragma unroll 1
    for (int J = 0; J < kChunk / 16; ++J) {
      const int m0 = 16 * J;
      float ra[4] = {0.f, 0.f, 0.f, 0.f}, rm[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll 1
      for (int i0 = 0; i0 < m0 + 16; i0 += 16) {
        const float rdiff = sm.G[m0][kch] - sm.G[i0][kch];  // r_J - r_J'
        uint32_t bh[2], bm[2], bl[2];
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          const int i = i0 + q2 + 8 * r;
          const float x0 = KhAt(sm, i, kch) * DecayExp(rdiff - GOff(sm, i, kch));
          // (i + 1 is odd: never a sub-chunk start, so its row is an offset)
          const float x1 = KhAt(sm, i + 1, kch) * DecayExp(rdiff - sm.G[i + 1][kch]);
          Split3Pair(x0, x1, &bh[r], &bm[r], &bl[r]);
        }
        uint32_t ah[4], am[4], al[4];
        plane_a(0, m0, i0, ah, am, al);  // dA
        Mma6(ra, ah, am, al, bh, bm, bl);
        plane_a(1, m0, i0, ah, am, al);  // dM
        Mma6(rm, ah, am, al, bh, bm, bl);
      }
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int t = m0 + g + 8 * (e >> 1), k = n0 + q2 + (e & 1);
        const float f = DecayExp(GOff(sm, t, k));  // exp(G_t - r_J)
        sm.bufw[t][k] = f * ra[e];
        sm.bufu[t][k] = f * rm[e];
      }
    }
    __syncthreads();
#pragma unroll
    for (int j = 0; j < kJ; ++j) {
      const int t = tq + 4 * j;
      const float ra_t = sm.bufw[t][kc], rm_t = sm.bufu[t][kc];
      const float kht = KhAt(sm, t, kc), qht = QhAt(sm, t, kc), btt = sm.bt[t];
      const float dmd = sm.dmd[t];
      dkh[j] += btt * ra_t + dmd * qht;
      dqh[j] += rm_t + dmd * kht;
      X[j] += kht * (btt * ra_t) + qht * rm_t;
    }
    __syncthreads();  // the row side is read: the column side takes bufw
    // Column side, row tile J, column sub-chunks J' >= J: S = dA[i][t]^T (beta_i Kf_i) +
    // dM[i][t]^T Qf_i over i in J', Kf_i = kh_i exp(G_i - r_J'), Qf_i likewise; col += exp(r_J' -
    // G_t) S. The column sub-chunk is the outer loop, so that Kf and Qf are built once for all
    // J <= J'. Each lane sums its own col elements in bufw (no other lane touches them), for each
    // J over J' = J, J + 1, .. in that order, as a register sum per J would.
#pragma unroll 1
    for (int Jc = 0; Jc < kChunk / 16; ++Jc) {
      const int i0 = 16 * Jc;
      uint32_t kh3[3][2], qh3[3][2];
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int i = i0 + q2 + 8 * r;
        const float f0 = DecayExp(GOff(sm, i, kch)), f1 = DecayExp(sm.G[i + 1][kch]);  // i + 1 odd
        Split3Pair(sm.bt[i] * (KhAt(sm, i, kch) * f0), sm.bt[i + 1] * (KhAt(sm, i + 1, kch) * f1),
                   &kh3[0][r], &kh3[1][r], &kh3[2][r]);
        Split3Pair(QhAt(sm, i, kch) * f0, QhAt(sm, i + 1, kch) * f1, &qh3[0][r], &qh3[1][r],
                   &qh3[2][r]);
      }
#pragma unroll 1
      for (int J = 0; J <= Jc; ++J) {
        const int m0 = 16 * J;
        float sp[4] = {0.f, 0.f, 0.f, 0.f};
        uint32_t ah[4], am[4], al[4];
        plane_at(0, m0, i0, ah, am, al);  // A[t][i] = dA[i][t]
        Mma6(sp, ah, am, al, kh3[0], kh3[1], kh3[2]);
        plane_at(1, m0, i0, ah, am, al);  // dM[i][t]
        Mma6(sp, ah, am, al, qh3[0], qh3[1], qh3[2]);
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int t = m0 + g + 8 * (e >> 1), k = n0 + q2 + (e & 1);
          const float prev = J == Jc ? 0.f : sm.bufw[t][k];
          // exp(r_J' - G_t) = exp((r_J' - r_J) - (G_t - r_J))
          const float dec = DecayExp((sm.G[i0][k] - sm.G[m0][k]) - GOff(sm, t, k));
          sm.bufw[t][k] = fmaf(dec, sp[e], prev);
        }
      }
    }
    __syncthreads();
#pragma unroll
    for (int j = 0; j < kJ; ++j) {
      const int t = tq + 4 * j;
      const float c = sm.bufw[t][kc];
      dkh[j] += c;
      X[j] -= KhAt(sm, t, kc) * c;
    }
  }
  __syncthreads();  // dKb, dVb are dead: their space takes X and Y

#pragma unroll
  for (int j = 0; j < kJ; ++j) {
    sm.bufw[tq + 4 * j][kc] = X[j];
    sm.bufu[tq + 4 * j][kc] = Y[j];
  }
  __syncthreads();
  // dgl_t = sum_{s >= t} X_s + sum_{s < t} Y_s + z, per column, in a fixed order: warps 0-3 the
  // exclusive sums of Y (in bufu), warps 4-7 the reverse sums of X (in bufw), side by side; the
  // epilogue adds them. Both on warps 0-3 put 128 dependent steps on the block's critical path.
  if (tid < kDim) {
    float ex = 0.f;
    for (int t = 0; t < kChunk; ++t) {
      const float y = sm.bufu[t][tid];
      sm.bufu[t][tid] = ex;
      ex += y;
    }
  } else if (tid < 2 * kDim) {
    const int c = tid - kDim;
    float rev = 0.f;
    for (int t = kChunk - 1; t >= 0; --t) {
      rev += sm.bufw[t][c];
      sm.bufw[t][c] = rev;
    }
  }
  // The epilogue's g, loaded here so that their L2 latency hides behind the sums below: in the
  // epilogue's loop each load waited behind the dq / dk stores before it, which may alias it (16
  // round trips in a row; ncu, H200, 2026-11-30: ~5% of the kernel). Kept as BF16 pairs: as floats
  // they cost 8 bytes of spill.
  uint32_t graw[kJ / 2];
#pragma unroll
  for (int j = 0; j < kJ; j += 2) {
    const int t = tq + 4 * j;
    const uint32_t g0 = t < len ? a.g[((t0 + t) * H + h) * kDim + kc] : 0u;
    const uint32_t g1 = t + 4 < len ? a.g[((t0 + t + 4) * H + h) * kDim + kc] : 0u;
    graw[j / 2] = g0 | (g1 << 16);
  }
  // qh . dqh and kh . dkh per token: warp sums over its 32 columns, 4 warps per token group. The
  // 32 sums of a warp (16 tokens, two products) as one reduce-scatter: at the butterfly's steps
  // (lane offsets 16, 8, 4, 2, 1) each lane keeps half of its values, adding its partner's, so
  // that lane l ends with value l; 31 shuffles where 32 butterflies took 160. Every sum is the
  // butterfly's tree (the same pairs at every level; a + b == b + a): the same bits as WarpSum.
  {
    float v[2 * kJ];
#pragma unroll
    for (int j = 0; j < kJ; ++j) {
      const int t = tq + 4 * j;
      v[j] = QhAt(sm, t, kc) * dqh[j];
      v[kJ + j] = KhAt(sm, t, kc) * dkh[j];
    }
    static_assert(2 * kJ == 32, "one value a lane at the end");
    ReduceScatterStep<16, 32>(v, lane);
    ReduceScatterStep<8, 16>(v, lane);
    ReduceScatterStep<4, 8>(v, lane);
    ReduceScatterStep<2, 4>(v, lane);
    ReduceScatterStep<1, 2>(v, lane);
    // The four warps' partials of a sum are added once, by the lane of the group's first warp that
    // holds the first: each reading thread adding them took 8 shared loads and 6 adds a token.
    const int w = lane / kJ, t = tq + 4 * (lane % kJ);
    if (warp & 3) sm.red[w][warp & 3][t] = v[0];
    __syncthreads();
    if ((warp & 3) == 0) {
      sm.red[w][0][t] = ((v[0] + sm.red[w][1][t]) + sm.red[w][2][t]) + sm.red[w][3][t];
    }
    // Only the token group's kDim threads read its sums.
    NamedBarrierSync(1 + tq, kDim);
  }

  float pdt = 0.f, pal = 0.f;
  const float dtb = a.dt_bias[h * kDim + kc];
#pragma unroll
  for (int j = 0; j < kJ; ++j) {
    const int t = tq + 4 * j;
    if (t < len) {
      const int64_t base = ((t0 + t) * H + h) * kDim + kc;
      const float sq = sm.red[0][0][t], sk = sm.red[1][0][t];
      a.dq[base] = ToBf16(sm.rq[t] * (dqh[j] - QhAt(sm, t, kc) * sq));
      a.dk[base] = ToBf16(sm.rk[t] * (dkh[j] - KhAt(sm, t, kc) * sk));
      const float x =
          exp_a * (Bf16(static_cast<uint16_t>(j % 2 ? graw[j / 2] >> 16 : graw[j / 2])) + dtb);
      const float dgl = (sm.bufw[t][kc] + sm.bufu[t][kc]) + sm.z[kc];
      const float dx = dgl * a.s.lower_bound * GateSigmoidDerivative(x);
      a.dg[base] = ToBf16(exp_a * dx);
      pdt = fmaf(exp_a, dx, pdt);
      pal = fmaf(x, dx, pal);
    }
  }
  // G is dead since the pair terms (the epilogue reads bufw and bufu).
  auto& part = *reinterpret_cast<float(*)[2][Tr::kTq][kDim]>(&sm.G[0][0]);
  part[0][tq][kc] = pdt;
  part[1][tq][kc] = pal;
  __syncthreads();
  if (tid < kPartials) {
    const int w = tid / kDim, k = tid % kDim;
    part_out[tid] = ((part[w][0][k] + part[w][1][k]) + part[w][2][k]) + part[w][3][k];
  }
  cudaGridDependencySynchronize();  // the grid completes after the state pass: see the launch
}

// ---- kernel 4: the parameter reduce ------------------------------------------------------------

// ddt_bias[h][k] = sum over slots of the ddt_bias partials; dA_log[h] = sum over channels of the
// per-channel sums: FP64, fixed order, one CTA per head. kReduceGroups threads per channel each
// sum every kReduceGroups-th slot (independent loads in flight: one thread per channel walking
// all slots took 0.1 ms at 514 slots, a dependent L2 round trip per slot), then the groups' sums
// in group order.
constexpr int kReduceGroups = 8;
constexpr int kReduceThreads = kReduceGroups * kDim;
__global__ void __launch_bounds__(kReduceThreads)
    KdaChunkParamReduceKernel(const float* __restrict__ partials, int64_t slots, int64_t H,
                              float* __restrict__ dA_log, float* __restrict__ ddt_bias) {
  __shared__ double part[2][kReduceGroups][kDim];
  const int64_t h = blockIdx.x;
  const int k = threadIdx.x % kDim, grp = threadIdx.x / kDim;
  double sdt = 0.0, sal = 0.0;
#pragma unroll 4
  for (int64_t s = grp; s < slots; s += kReduceGroups) {
    const float* p = partials + (s * H + h) * kPartials;
    sdt += static_cast<double>(p[k]);
    sal += static_cast<double>(p[kDim + k]);
  }
  part[0][grp][k] = sdt;
  part[1][grp][k] = sal;
  __syncthreads();
  if (grp == 0) {
    double dt = 0.0, al = 0.0;
    for (int i = 0; i < kReduceGroups; ++i) {
      dt += part[0][i][k];
      al += part[1][i][k];
    }
    ddt_bias[h * kDim + k] = static_cast<float>(dt);
    part[1][0][k] = al;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    double total = 0.0;
    for (int i = 0; i < kDim; ++i) total += part[1][0][i];
    dA_log[h] = static_cast<float>(total);
  }
}

// The chain as 2-CTA clusters; its plain instance where the device cannot hold one such cluster.
// (The workspace is 16-byte aligned: CheckBackwardParams.)
template <int kRows>
Status LaunchChainAs(const ChunkBwdArgs& b, int64_t slots, cudaStream_t stream) {
  using Tr = ChainTraits<kRows>;
  constexpr int kSmem = kChainSmemBytes<kRows>;
  static_assert(kSmem <= 227 * 1024, "one CTA's shared memory on sm_90");
  static std::atomic<uint64_t> done_mc{0}, done_plain{0};
  static PerDeviceMemo resident_clusters;
  const dim3 grid(Tr::kSlices, static_cast<unsigned>(b.s.H), static_cast<unsigned>(b.s.N));
  const auto mc = KdaChunkDstateKernel<kRows, true>;
  const Status attr = AllowSmem(mc, kSmem, &done_mc, "the reverse chain (2-CTA clusters)");
  if (!attr.ok()) return attr;
  McMaps maps;
  const Status encoded = EncodeRecordMaps(&maps, b.records, slots * b.s.H);
  if (!encoded.ok()) return encoded;
  bool launched = false;
  const Status st =
      LaunchClusterPair(mc, grid, Tr::kThreads, kSmem, stream, false, &resident_clusters,
                        "the chunked backward's reverse chain", &launched, b, maps);
  if (!st.ok() || launched) return st;
  const auto plain = KdaChunkDstateKernel<kRows, false>;
  const Status attr_plain = AllowSmem(plain, kSmem, &done_plain, "the reverse chain");
  if (!attr_plain.ok()) return attr_plain;
  plain<<<grid, Tr::kThreads, kSmem, stream>>>(b, McNoMaps{});
  return CheckLaunch("the chunked backward's reverse chain");
}

Status LaunchChain(const ChunkBwdArgs& b, int64_t slots, int rows, cudaStream_t stream) {
  switch (rows) {
    case 16:
      return LaunchChainAs<16>(b, slots, stream);
    case 32:
      return LaunchChainAs<32>(b, slots, stream);
    case 64:
      return LaunchChainAs<64>(b, slots, stream);
    default:
      return InvalidArgument("kda: reverse chain rows must be 16, 32 or 64, got " +
                             std::to_string(rows));
  }
}

}  // namespace

// The reverse chain does not read the chunk-start states, so it and the checkpoint state pass
// both follow the preparation and may run side by side, each a chain of T / 64 dependent steps per
// (document, head) slice, latency-bound. Side by side each gets half the SMs, in the narrowest
// slices that fit one wave there; where even 64-row slices do not (more than ~33 chains on the
// H200), one after the other (the state pass begins as the chain's last wave does), each in the
// forward's slices (16 rows while they fit one wave of one CTA per SM, 32 rows up to two, 64
// beyond: the state pass's rule; 16-row slices in two waves at H = 32 cost the chain 24 us per
// step against 12 in one). Returns 0 for one after the other.
// H200 (bench/results/kda_h200.md, kda48): the backward 9.29 -> 8.86 ms at (1, 32768, 16) (32-row
// slices side by side), 4.45 -> 4.42 at (1, 8192, 32) (64 rows). The slice width changes the
// checkpoint states' bits (not their accuracy), so the width is a function of the shape alone.
int ChunkedBackwardSideBySideRows(int64_t chains, int sms) {
  for (int rows = 16; rows <= 64; rows *= 2) {
    if (chains * (kDim / rows) <= sms / 2) return rows;
  }
  return 0;
}

Status KdaBackwardChunkedCuda(const KdaBwdParams& p, cudaStream_t stream) {
  FwdArgs f{};
  Status st = CheckBackwardParams(p, &f.s);
  if (!st.ok()) return st;
  const int64_t tokens = f.s.total_tokens;
  const kda_layout::ChunkBwdLayout layout =
      kda_layout::MakeChunkBwdLayout(p.B, p.T, p.H, p.num_docs);
  const int64_t slots = kda_layout::ChunkSlots(tokens, f.s.N);
  if (slots > 0x7fffffff) return InvalidArgument("kda: too many tokens for one call");
  char* ws = static_cast<char*>(p.workspace);
  ChunkBwdArgs b{};
  b.s = f.s;
  b.slots = slots;
  b.q = p.q;
  b.k = p.k;
  b.v = p.v;
  b.g = p.g;
  b.beta = p.beta;
  b.d_o = p.d_o;
  b.A_log = p.A_log;
  b.dt_bias = p.dt_bias;
  b.dfinal_state = p.dfinal_state;
  b.records = ws + layout.records;
  b.s0 = reinterpret_cast<const float*>(ws + layout.s0);
  b.ds1 = reinterpret_cast<float*>(ws + layout.ds1);
  b.du = reinterpret_cast<float*>(ws + layout.du);
  b.partials = reinterpret_cast<float*>(ws + layout.partials);
  b.chunk_p = reinterpret_cast<const float*>(ws + layout.p);
  b.chunk_tinv = reinterpret_cast<const float*>(ws + layout.tinv);
  b.chunk_u = reinterpret_cast<const float*>(ws + layout.u);
  b.dq = p.dq;
  b.dk = p.dk;
  b.dv = p.dv;
  b.dg = p.dg;
  b.dbeta = p.dbeta;
  b.dinitial_state = p.dinitial_state;

  if (f.s.N > 0) {
    // 1. Records and chunk-start states: the chunked forward in checkpoint mode (no o).
    SetFwdInputs(p, &f);
    f.o = nullptr;
    f.final_state = nullptr;
    f.checkpoints = reinterpret_cast<float*>(ws + layout.s0);
    f.chunk_p = reinterpret_cast<float*>(ws + layout.p);
    f.chunk_tinv = reinterpret_cast<float*>(ws + layout.tinv);
    f.chunk_u = reinterpret_cast<float*>(ws + layout.u);
    f.chunk_kdt3 = reinterpret_cast<uint16_t*>(ws + layout.kdt3);
    void* const rec_ws = ws + layout.records;
    unsigned* const ready = reinterpret_cast<unsigned*>(ws + layout.ready);
    f.ready = ready;
    b.ready = ready;
    const cudaError_t zeroed =
        cudaMemsetAsync(ready, 0, sizeof(unsigned) * static_cast<size_t>(slots * f.s.H), stream);
    if (zeroed != cudaSuccess) {
      return Internal(std::string("kda: clearing the slot counters: ") +
                      cudaGetErrorString(zeroed));
    }
    const Status prep = LaunchChunkedPrep(f, rec_ws, layout.s0 - layout.records, stream);
    if (!prep.ok()) return prep;
    int sms = 0;
    const Status dev = DeviceSmCount(&sms);
    if (!dev.ok()) return dev;
    // 2. The reverse chain and the checkpoint state pass; 3. every chunk's gradients and partials
    // (gap slots write zero partials). The state pass is launched behind the chain and the grad
    // kernel behind the state pass, each as a programmatic dependent (pdl_launch.h): the chain
    // and the state pass run side by side where both fit (ChunkedBackwardSideBySideRows), and the
    // grad kernel's CTAs take the SMs either leaves, each waiting for its slot's S0, U, dS1 and dU
    // (b.ready: one count per slice of rows of each pass). Its CTAs may wait because every CTA of
    // both passes has begun before any of them does, whatever else runs on the device; each pass
    // completes only after the kernel it was launched behind (cudaGridDependencySynchronize), so
    // that what follows the grad kernel follows all three. H200 (bench/results/kda_h200.md,
    // thirty-second session): the chain ends ~0.06 ms before the state pass at (1, 8192, 32).
    const int rows = ChunkedBackwardSideBySideRows(f.s.N * f.s.H, sms);
    const int pass_rows = rows != 0 ? rows : StatePassRows(f.s.N * f.s.H, sms);
    b.ready_target = static_cast<unsigned>(2 * (kDim / pass_rows));
    const Status chain = LaunchChain(b, slots, pass_rows, stream);
    if (!chain.ok()) return chain;
    const Status state = LaunchChunkedStatePass(f, rec_ws, pass_rows, stream, /*dependent=*/true);
    if (!state.ok()) return state;
    constexpr int kSmem = static_cast<int>(sizeof(GradSmem));
    static std::atomic<uint64_t> done{0};
    const Status attr = AllowSmem(KdaChunkGradKernel, kSmem, &done, "the chunked backward");
    if (!attr.ok()) return attr;
    cudaLaunchAttribute pdl;
    const cudaLaunchConfig_t cfg = ProgrammaticLaunchConfig(
        ChunkSlotGrid(slots, f.s.H), dim3(GradTraits::kThreads), kSmem, stream, &pdl);
    const cudaError_t launched = cudaLaunchKernelEx(&cfg, KdaChunkGradKernel, b);
    if (launched != cudaSuccess) {
      return Internal(std::string("kda: launching the chunked backward's per-chunk pass: ") +
                      cudaGetErrorString(launched));
    }
    const Status grad = CheckLaunch("the chunked backward's per-chunk pass");
    if (!grad.ok()) return grad;
  }
  // 4. dA_log and ddt_bias (zeros without documents).
  KdaChunkParamReduceKernel<<<static_cast<unsigned>(f.s.H), kReduceThreads, 0, stream>>>(
      b.partials, f.s.N > 0 ? slots : 0, f.s.H, p.dA_log, p.ddt_bias);
  return CheckLaunch("the chunked backward's parameter reduce");
}

}  // namespace kda_cuda
}  // namespace cakegrad::kernels
