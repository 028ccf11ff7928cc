// mHC backward on sm_90a: backward_prepare (dB, grad_stats) and backward_finish (dX, dfn,
// dscale, dbase).
//
// backward_finish runs as three ordinary launches on the caller's stream:
//   1. MhcBwdTokenKernel: per token, dpre = X dU (a reduction over C), the Sinkhorn backward and
//      the chain down to dz, dsq, in FP64; one 64-float record per token in the workspace (dz
//      already split into BF16 hi + lo, the tensor-core operand of kernel 2).
//   2. MhcBwdColumnsTcKernel: CTAs own (token chunk, 64-channel column block of all streams);
//      the warps keep split fn and the dfn partial of their 16 columns in registers while the
//      chunk's tokens stream through a ring of shared-memory stages filled by tensor-map (TMA)
//      copies, run both 24-wide products on the tensor cores, write dX, and at the end their dfn
//      partial to the workspace.
//   3. MhcBwdReduceKernel: sums the chunk partials of dfn, and the token records of dscale and
//      dbase (those two in FP64), in a fixed order; adds them to the outputs under accumulate.
// Nothing depends on the workspace's prior contents, the grids are functions of (T, C,
// sinkhorn_iters) only, and there are no atomics, so the results are bitwise reproducible.

#include "cakegrad/kernels/mhc.h"
#include "mhc_common.cuh"
#include "mhc_tensor_map.h"
#include "pdl_launch.h"
#include "reference/mhc_layout.h"

namespace cakegrad::kernels {
namespace mhc_cuda {
namespace {

namespace lay = ::cakegrad::kernels::mhc_layout;

// ---------------------------------------------------------------------------------------------
// backward_prepare: one CTA per token; each thread 8 channels at a time.
struct BwdPrepareTraits {
  static constexpr int kMaxThreads = 256;
  static constexpr int kSums = 20;  // dpost[4], dR[16]
  static_assert(kMhcMinC / 8 >= 32, "a CTA is at least one warp");
};

__global__ void __launch_bounds__(BwdPrepareTraits::kMaxThreads)
    MhcBwdPrepareKernel(const uint16_t* __restrict__ X, const uint16_t* __restrict__ dY,
                        const uint16_t* __restrict__ B, const float* __restrict__ stats,
                        uint16_t* __restrict__ dB, float* __restrict__ grad_stats, int64_t C) {
  using Tr = BwdPrepareTraits;
  __shared__ float part[Tr::kMaxThreads / 32][Tr::kSums];
  const int64_t t = blockIdx.x;
  const int tid = threadIdx.x;
  float post[4];
#pragma unroll
  for (int b = 0; b < 4; ++b) post[b] = __ldg(stats + t * kMhcStatsWidth + 29 + b);
  float sums[Tr::kSums] = {};
  for (int64_t c = 8 * tid; c < C; c += 8 * blockDim.x) {
    float xf[4][8], dyf[4][8], bf[8];
#pragma unroll
    for (int a = 0; a < 4; ++a) {
      Unpack8(__ldcs(reinterpret_cast<const uint4*>(X + (t * 4 + a) * C + c)), xf[a]);
      Unpack8(__ldcs(reinterpret_cast<const uint4*>(dY + (t * 4 + a) * C + c)), dyf[a]);
    }
    Unpack8(__ldcs(reinterpret_cast<const uint4*>(B + t * C + c)), bf);
    float db[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      float v = post[0] * dyf[0][e];
#pragma unroll
      for (int b = 1; b < 4; ++b) v = fmaf(post[b], dyf[b][e], v);
      db[e] = v;
#pragma unroll
      for (int b = 0; b < 4; ++b) {
        sums[b] = fmaf(dyf[b][e], bf[e], sums[b]);
#pragma unroll
        for (int a = 0; a < 4; ++a)
          sums[4 + 4 * a + b] = fmaf(dyf[b][e], xf[a][e], sums[4 + 4 * a + b]);
      }
    }
    __stcs(reinterpret_cast<uint4*>(dB + t * C + c), Pack8(db));
  }
  // Fixed-order reduction: butterfly within each warp, then warps in index order.
#pragma unroll
  for (int k = 0; k < Tr::kSums; ++k) {
#pragma unroll
    for (int off = 16; off > 0; off /= 2) sums[k] += __shfl_xor_sync(0xffffffffu, sums[k], off);
  }
  if (tid % 32 == 0) {
#pragma unroll
    for (int k = 0; k < Tr::kSums; ++k) part[tid / 32][k] = sums[k];
  }
  __syncthreads();
  if (tid < kMhcGradStatsWidth) {
    float v = 0.0f;
    if (tid < Tr::kSums) {
      for (int w = 0; w < static_cast<int>(blockDim.x / 32); ++w) v += part[w][tid];
    }
    grad_stats[t * kMhcGradStatsWidth + tid] = v;
  }
}

// ---------------------------------------------------------------------------------------------
// backward_finish, kernel 1: per-token scalars, two tokens a warp, in FP64 from dpre to the
// record: dscale[g] = sum_t sum_{j in g} dl_j m_j cancels (each Sinkhorn row of dl sums to
// zero, token terms have mixed signs), so its error is the per-term error times a condition
// number that training inputs pushed past 1e4; an FP32 chain (2 iters - 1 steps) gave 1.8e-5
// against the 1e-5 contract. The Sinkhorn backward holds one matrix entry a lane, so a
// half-warp runs one token's chain (with one token a warp the other half only mirrored it):
// the chain is a long dependent FP64 sequence (2 (2 iters - 1) steps of shuffles and
// divisions), and two tokens a warp pay it once for twice the bytes. Its steps are spread over the
// warp's loop over channel groups, so that they run while the loads are in flight (below). Per
// token the sums, their order and the chain are those of one token a warp, so the records are the
// same bits.
struct BwdTokenTraits {
  static constexpr int kMaxWarps = 4;
  static constexpr int kTokens = 2;  // tokens a warp, one per half-warp in the Sinkhorn backward
  // The Sinkhorn chain (input of every step, one double per matrix entry and token) lives in
  // dynamic shared memory sized by sinkhorn_iters, kept within the 48 KiB that needs no opt-in.
  static constexpr int kSmemLimit = 48 * 1024;
  // Rows of 16 doubles a token: the 2 iters - 1 steps' inputs, then soft and dR (kept there, out
  // of registers, while the chain is spread over the group loop).
  static constexpr int ChainRows(int iters) { return 2 * iters + 1; }
  static constexpr int ChainBytesPerWarp(int iters) { return kTokens * ChainRows(iters) * 16 * 8; }
  static constexpr int Warps(int iters) {
    const int w = kSmemLimit / ChainBytesPerWarp(iters);
    return w < kMaxWarps ? w : kMaxWarps;
  }
};
static_assert(BwdTokenTraits::Warps(kMhcMaxSinkhornIters) >= 1, "one warp's chains fit");
static_assert(BwdTokenTraits::kTokens == 2, "one token a half-warp");

// The record keeps dz, dsq and dl as floats (what kernels 2 and 3 consume) and the three dscale
// terms as doubles, so kernel 3 sums them over tokens without rounding each to FP32 first.
constexpr int kRecDscaleD = lay::kRecDscale / 2;  // index in the record viewed as doubles
static_assert(lay::kRecDscale % 2 == 0, "dscale doubles must be 8-byte aligned");
static_assert(lay::kRecDscale + 2 * 3 <= lay::kTokenRecordFloats, "3 doubles fit the record");
static_assert(lay::kRecDl + kLogits <= lay::kRecDscale, "dl floats precede the doubles");
static_assert(lay::kTokenRecordFloats % 2 == 0, "records stay 8-byte aligned");
static_assert(lay::kRecDz == 0 && lay::kRecDsq == kLogits,
              "dz as BF16 hi[24] + lo[24] fills floats [0, 24), 16-byte aligned, dsq follows");

// Sum over the 4-lane line of a 4x4 matrix held one entry per lane (lane & 15 = 4a + b): rows
// (over b) combine lanes xor 1, 2; columns (over a) xor 4, 8. Each lane gets the same bits.
__device__ __forceinline__ double LineSum(double v, bool rows) {
  const int o1 = rows ? 1 : 4, o2 = rows ? 2 : 8;
  v += __shfl_xor_sync(0xffffffffu, v, o1);
  v += __shfl_xor_sync(0xffffffffu, v, o2);
  return v;
}

__device__ __forceinline__ uint16_t Bf16Bits(float v) {
  return static_cast<uint16_t>(PackBf16(v, 0.0f) & 0xffffu);
}

__device__ __forceinline__ double SigmoidD(double v) { return 1.0 / (1.0 + exp(-v)); }

__global__ void __launch_bounds__(BwdTokenTraits::kMaxWarps * 32, 4)
    MhcBwdTokenKernel(const uint16_t* __restrict__ X, const uint16_t* __restrict__ dU,
                      const float* __restrict__ scale, const float* __restrict__ base,
                      const float* __restrict__ stats, const float* __restrict__ grad_stats,
                      float* __restrict__ records, int64_t T, int64_t C, float hc_eps_f,
                      int iters) {
  using Tr = BwdTokenTraits;
  extern __shared__ double chain_s[];  // [warps][kTokens][2 iters - 1][16]
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int half = lane / 16;
  const int steps = 2 * iters - 1;
  const int64_t t0 = (static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + warp) * Tr::kTokens;
  if (t0 >= T) return;  // whole warps only: no block-wide barrier follows
  // A last odd token: the second token's work runs on the first's data and is not written.
  const bool second = t0 + 1 < T;
  const int64_t tok[Tr::kTokens] = {t0, second ? t0 + 1 : t0};

  // dpre_a = sum_c dU[t, c] X[t, a, c]. A BF16 x BF16 product is exact in FP32; the sum is FP64.
  // Lane l sums channels 8 l + 256 i (i = 0, 1, ..) in order, then the warp's butterfly. Groups 0
  // and 1 are requested before the Sinkhorn backward below, which does not need them, so the
  // warp's loads stay in flight through its dependent FP64 chain (group 0 alone: backward_finish
  // +0.9%). Two register buffers take turns: a buffer is refilled with the group after next as
  // soon as it has been converted, at the end of its half of the loop body, where ptxas keeps the
  // loads (a load issued at the top, into a third set of registers, was sunk by ptxas below the
  // conversions, where it waited at once).
  // X's stream a of token h lies a C past its row; the offsets within a token pair (< 8 C <=
  // 131072 channels) are 32-bit, so a load's address is one wide add. With a 64-bit row index per
  // load (and a branch per load for the end) the loads took ~15 instructions each, a fifth of the
  // kernel's (ncu, bench/results/mhc_h200.md, thirty-third session).
  constexpr uint32_t kStep = 8 * 32;
  const uint32_t cs = static_cast<uint32_t>(C);
  // Token 1's rows lie x1 and u1 channels past token 0's (32-bit: two row pointers fewer to keep
  // live through the chain now spread over the loop).
  const uint16_t* xrow = X + tok[0] * 4 * C + 8 * lane;
  const uint16_t* urow = dU + tok[0] * C + 8 * lane;
  const uint32_t x1 = second ? 4 * cs : 0u, u1 = second ? cs : 0u;
  auto load = [&](uint32_t c, uint4(&xr)[Tr::kTokens][4], uint4(&ur)[Tr::kTokens]) {
#pragma unroll
    for (int h = 0; h < Tr::kTokens; ++h) {
#pragma unroll
      for (int a = 0; a < 4; ++a) {
        xr[h][a] = __ldg(reinterpret_cast<const uint4*>(xrow + ((h ? x1 : 0u) + a * cs + c)));
      }
      ur[h] = __ldg(reinterpret_cast<const uint4*>(urow + ((h ? u1 : 0u) + c)));
    }
  };
  uint4 xa[Tr::kTokens][4], ua[Tr::kTokens], xb[Tr::kTokens][4], ub[Tr::kTokens];
  load(0, xa, ua);
  // C is a multiple of kStep: C / kStep groups, every lane. With one group (C = 256) buffer b holds
  // group 0 again, unused.
  load(kStep < cs ? kStep : 0, xb, ub);

  const double hc_eps = hc_eps_f;
  // Sinkhorn backward of this half-warp's token, one matrix entry a lane: steps = 2 iters - 1
  // steps forward (each step's input kept in shared memory), then as many back. They are spread
  // over the group loop below, a share before each group's sums, so that its dependent FP64
  // sequence runs while the group's loads are in flight: run first, as one block, it kept each
  // warp at two groups in flight for ~a fifth of the kernel (ncu at the bench's clocks: the chain
  // 21% of the stall samples, the first buffer's sums 46%, long-scoreboard 45%; thirty-fourth
  // session). The steps, their order and so the bits are the same.
  const int idx = lane & 15;
  const int64_t th = half != 0 ? tok[1] : tok[0];
  // 32-bit shared addresses: this lane's entry of step 0, and of the soft and dR rows.
  const uint32_t chain =
      SmemAddr(chain_s) +
      static_cast<uint32_t>(((warp * Tr::kTokens + half) * Tr::ChainRows(iters) * 16 + idx) * 8);
  const uint32_t soft_s = chain + 16 * 8 * steps;  // soft, then dR one row (128 bytes) further
  double v;  // the forward's p, then the backward's y (the output of the current step)
  {
    const double L =
        static_cast<double>(stats[th * kMhcStatsWidth + 8 + idx]) * scale[2] + base[8 + idx];
    const double mx =
        fmax(fmax(L, __shfl_xor_sync(0xffffffffu, L, 1)),
             fmax(__shfl_xor_sync(0xffffffffu, L, 2), __shfl_xor_sync(0xffffffffu, L, 3)));
    const double e = exp(L - mx);
    const double soft = e / LineSum(e, true);
    StsF64(soft_s, soft);
    StsF64(soft_s + 128, grad_stats[th * kMhcGradStatsWidth + 4 + idx]);  // dR
    v = soft + hc_eps;
  }
  double gr = 0.0;  // the backward's gradient
  const int chain_total = 2 * steps;
  int k = 0;  // chain steps done (warp-uniform)
  auto advance = [&](int n) {
    for (int i = 0; i < n && k < chain_total; ++i, ++k) {
      if (k < steps) {
        StsF64(chain + 128 * k, v);  // input of step k
        v = v / (LineSum(v, (k & 1) != 0) + hc_eps);
      } else {
        const int sb = chain_total - 1 - k;  // backward through step sb
        if (sb == steps - 1) gr = LdsF64(soft_s + 128);
        const bool rows = (sb & 1) != 0;
        const double in = LdsF64(chain + 128 * sb);
        const double dot = LineSum(gr * v, rows);
        gr = (gr - dot) / (LineSum(in, rows) + hc_eps);
        v = in;
      }
    }
  };
  // The chain's share before each of the C / kStep groups' sums.
  const int groups = static_cast<int>(cs / kStep);
  const int share = (chain_total + groups - 1) / groups;

  double dpre[Tr::kTokens][4] = {};
  auto accumulate = [&](const uint4(&xr)[Tr::kTokens][4], const uint4(&ur)[Tr::kTokens]) {
#pragma unroll
    for (int h = 0; h < Tr::kTokens; ++h) {
      float uf[8], xf[8];
      Unpack8(ur[h], uf);
#pragma unroll
      for (int a = 0; a < 4; ++a) {
        Unpack8(xr[h][a], xf);
#pragma unroll
        for (int e = 0; e < 8; ++e) dpre[h][a] += static_cast<double>(uf[e] * xf[e]);
      }
    }
  };
  for (uint32_t c = 0;; c += 2 * kStep) {
    advance(share);
    accumulate(xa, ua);
    if (c + kStep >= cs) break;
    if (c + 2 * kStep < cs) load(c + 2 * kStep, xa, ua);
    advance(share);
    accumulate(xb, ub);
    if (c + 2 * kStep >= cs) break;
    if (c + 3 * kStep < cs) load(c + 3 * kStep, xb, ub);
  }
  // No step is left here: the loop above sums each of the C / kStep groups once, each after a
  // share of ceil(chain_total / groups) steps, so the shares cover the chain.
  const double soft = LdsF64(soft_s);
  const double dL = soft * (gr - LineSum(gr * soft, true));
#pragma unroll
  for (int h = 0; h < Tr::kTokens; ++h) {
#pragma unroll
    for (int a = 0; a < 4; ++a) {
#pragma unroll
      for (int off = 16; off > 0; off /= 2) {
        dpre[h][a] += __shfl_xor_sync(0xffffffffu, dpre[h][a], off);
      }
    }
  }

#pragma unroll
  for (int h = 0; h < Tr::kTokens; ++h) {
    if (h > 0 && !second) break;  // warp-uniform
    const int64_t t = tok[h];
    const float* st = stats + t * kMhcStatsWidth;
    const float* gs = grad_stats + t * kMhcGradStatsWidth;
    const double r = st[24];
    // dl for all 24 logits in lanes 0..23; lane 8 + k takes dL of entry k from lane 16 h + k.
    const double dL_k = __shfl_sync(0xffffffffu, dL, 16 * h + ((lane - 8) & 15));
    double dpre_l = dpre[h][0];  // dpre[h][lane] for lanes 0..3, without a local-memory index
#pragma unroll
    for (int a = 1; a < 4; ++a) dpre_l = lane == a ? dpre[h][a] : dpre_l;
    double dl = 0.0, m = 0.0;
    if (lane < kLogits) {
      m = st[lane];
      if (lane < 8) {
        const double l = m * scale[lane / 4] + base[lane];
        const double sg = SigmoidD(l);
        dl = lane < 4 ? dpre_l * sg * (1.0 - sg) : gs[lane - 4] * 2.0 * sg * (1.0 - sg);
      } else {
        dl = dL_k;
      }
    }
    const double sc = lane < kLogits ? scale[Group(lane)] : 0.0;
    const double dm = dl * sc;
    const double dz = dm * r;
    double dr = lane < kLogits ? dm * (m / r) : 0.0;
#pragma unroll
    for (int off = 16; off > 0; off /= 2) dr += __shfl_xor_sync(0xffffffffu, dr, off);
    // dscale terms: groups are lanes [0,4), [4,8), [8,24); butterfly sums within each group.
    const double dsm = dl * m;
    double g0 = dsm + __shfl_xor_sync(0xffffffffu, dsm, 1);
    g0 += __shfl_xor_sync(0xffffffffu, g0, 2);  // lanes 0..3: group 0; 4..7: group 1
    double g2 = (lane >= 8 && lane < kLogits) ? dsm : 0.0;
#pragma unroll
    for (int off = 16; off > 0; off /= 2) g2 += __shfl_xor_sync(0xffffffffu, g2, off);
    const double g0_0 = __shfl_sync(0xffffffffu, g0, 0);  // every lane shuffles
    const double g0_4 = __shfl_sync(0xffffffffu, g0, 4);

    float* rec = records + t * lay::kTokenRecordFloats;
    // Lane k < 24 writes dz_k split into BF16 hi + lo (halves k and 24 + k of floats [0, 24): the
    // operand kernel 2 copies as is) and dl_k (float 32 + k); lanes 24..31 write float k (24:
    // dsq, the rest zero); lanes 24..26 then write the dscale doubles.
    if (lane < kLogits) {
      const float v = static_cast<float>(dz);
      const uint16_t hi = Bf16Bits(v);
      uint16_t* rec_dz = reinterpret_cast<uint16_t*>(rec + lay::kRecDz);
      rec_dz[lane] = hi;
      rec_dz[kLogits + lane] = Bf16Bits(v - __uint_as_float(static_cast<uint32_t>(hi) << 16));
      rec[lay::kRecDl + lane] = static_cast<float>(dl);
    } else {
      rec[lane] = lane == lay::kRecDsq
                      ? static_cast<float>(-0.5 * dr * r * r * r / static_cast<double>(4 * C))
                      : 0.0f;
    }
    double* rec_d = reinterpret_cast<double*>(rec);
    if (lane == kLogits) rec_d[kRecDscaleD] = g0_0;
    if (lane == kLogits + 1) rec_d[kRecDscaleD + 1] = g0_4;
    if (lane == kLogits + 2) rec_d[kRecDscaleD + 2] = g2;
  }
}

// ---------------------------------------------------------------------------------------------
// backward_finish, kernel 2: dX and the dfn partials, with both 24-wide products as BF16 MMAs
// (m16n8k16, FP32 accumulation). Operands are split hi + lo BF16 so the products keep ~16 bits:
//   dxmap [tok x col] = [dz_hi | dz_lo | dz_hi | 0] (k = 80) x [fn_hi; fn_hi; fn_lo; 0]
//   dfn   [32 x col]  = [dz_hi 0..15 | dz_hi 16..23, dz_lo 16..23]^T (k = tokens) x X, plus
//                       dz_lo 0..15^T x X into rows 0..15; rows 16 + j and 24 + j summed last
// X is BF16 already, so it needs no split. The MMA's FP32 accumulation truncates, so dfn takes a
// fresh accumulator per stage (32 tokens) that is added to the running FP32 sum.
// Kernel 1 stores dz already split ([hi | lo], floats [0, 24) of the record), and the stage's
// record tile (floats [0, 28) of 32 records: dz, then dsq) is both A operands: dxmap's through
// ldmatrix (k = 48..71 re-reads the hi columns), dfn's dz^T through ldmatrix.trans.
// A CTA owns kCh channels of all four streams (4 kCh columns of fn) and a token chunk; each warp
// owns 16 columns (two n8 tiles) of one stream, so split fn (20 registers) and the dfn tiles fit
// in 128 registers and 16 warps run per SM. dxmap's n8 tiles interleave channel pairs so that a
// lane's accumulators are four adjacent channels: 8-byte shared reads and dX stores.
// Stages are filled by the tensor-memory-access engine: one thread issues 11 tensor copies a
// stage (X and dY one per stream, dU, records, stats) on a per-slot mbarrier, instead of every
// thread issuing ~5.4 cp.async (about 170 instructions a thread a stage with their addresses).
// X, dY and dU tiles are [stream][token][64 channels] with 128-byte rows in the 128-byte swizzle
// (16-byte chunk c of row r at chunk c ^ (r % 8)), so 8 consecutive tokens of one channel chunk
// fall in distinct banks; the record and stats tiles are 28-float rows, distinct banks for 8
// consecutive tokens too. Tokens past T are zero-filled by the copy engine; tokens past the
// chunk but before T are real records of the next chunk, so dfn masks their dz (kernel 2's only
// cross-token sum).
// At T = 16384, C = 4096 (ncu): FFMA version 1.07 ms; first MMA version (8 warps of 32 columns,
// 254 registers, dz split in shared memory between two barriers a stage, 8-way bank conflicts
// on the coefficient rows) 0.925 ms; cp.async ring 0.607 ms; tensor copies 0.590 ms, now bound
// by shared-memory bandwidth (L1/TEX 82%: each stage is written once by the copies and read by
// the ldmatrix and epilogue loads). Per-row bulk copies (384 of 16..128 bytes a stage, no
// tensor map) took 3.1 ms: the copy engine handles small requests slowly. A 4-stage ring gave
// 0.597 ms. dxmap rows permuted for conflict-free epilogue loads (DxRowToken): 0.545 ms.
// The kernel was partly issue-bound (ncu, thirty-third session: ~60% of issue slots busy), so
// instruction cuts paid: the epilogue's reads as lane offsets plus constants, 32-bit store
// offsets, the stage's bookkeeping carried, predicated stores and one FMA chain a channel took it
// from 677 to 586 us under ncu (backward_finish 0.732 -> 0.664 ms, bench/results/mhc_h200.md).
// Now, at the bench's clocks, L2 throughput bounds it (~89%): X and dU served from L2 instead of
// DRAM gave -1.4%, a fifth of its shared reads removed -2.7% (timing-only diagnostics, thirty-
// fifth session). What can still pay is fewer bytes through L2, not fewer instructions.
template <int kChannels, int kStageCount>
struct BwdColumnsTcTraits {
  static constexpr int kCh = kChannels;  // channels per stream per CTA
  static constexpr int kStages = kStageCount;
  static constexpr int kWarpCols = 16;
  static constexpr int kNTiles = kWarpCols / 8;
  static constexpr int kWarpsPerStream = kCh / kWarpCols;
  static constexpr int kWarps = 4 * kWarpsPerStream;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kMinBlocks = 512 / kThreads;  // 128 registers a thread
  static constexpr int kTok = 32;  // tokens per stage: 2 m16 tiles (dxmap), 2 k16 steps (dfn)
  static constexpr int kRowBytes = kCh * 2;    // one (stream, token) row of X, dY, dU
  static constexpr int kKDx = 80;              // dxmap's k: [hi | lo | hi | pad] logits
  static constexpr int kDzCols = 2 * kLogits;  // record tile rows start with [hi | lo]
  // Record and stats tiles: floats [0, 28) of the record (dz, dsq at 24) and [24, 52) of stats.
  static constexpr int kRecFloats = 28;
  static constexpr int kRecDsq = lay::kRecDsq;  // 24
  static constexpr int kStatsFrom = 24;
  static constexpr int kCoefPre = 25 - kStatsFrom;  // pre_a  = stats[25 + a]
  static constexpr int kCoefR = 33 - kStatsFrom;    // R[a][b] = stats[33 + 4a + b]
  static constexpr int kXTile = 4 * kTok * kRowBytes;
  static constexpr int kOffDy = kXTile;
  static constexpr int kOffU = 2 * kXTile;
  static constexpr int kOffRec = kOffU + kTok * kRowBytes;
  static constexpr int kOffStats = kOffRec + kTok * kRecFloats * 4;
  static constexpr int kStageTx = kOffStats + kTok * kRecFloats * 4;   // bytes a stage
  static constexpr int kStageBytes = (kStageTx + 1023) / 1024 * 1024;  // swizzle atoms: 1 KiB
  static constexpr int kSmemBytes = kStages * kStageBytes + 1024;      // + base alignment
  static_assert(kRowBytes == 128, "rows are one 128-byte swizzle span");
  static_assert(kCh % kWarpCols == 0 && kNTiles == 2, "two n8 tiles: one ldmatrix.x4, 8-byte rows");
  static_assert(kMhcCAlign % kCh == 0, "column blocks tile every valid C");
  static_assert(kXTile % 1024 == 0 && kOffU % 1024 == 0 && kOffRec % 128 == 0 &&
                    kOffStats % 128 == 0,
                "tensor-copy destinations: 1 KiB for the swizzled tiles, 128 B otherwise");
  static_assert(kRecFloats * 4 % 16 == 0 && kRecFloats % 8 == 4,
                "record rows: 16-byte multiple; 8 consecutive rows in distinct banks");
  static_assert(kRecDsq == kLogits && lay::kRecDz == 0 && kRecDsq < kRecFloats,
                "dz as BF16 hi[24] + lo[24] fills floats [0, 24), dsq follows");
  static_assert(kStatsFrom % 4 == 0 && kCoefR + 16 <= kRecFloats, "stats tile covers pre and R");
  static_assert(kStageTx < (1 << 20), "mbarrier transaction count");
  static_assert(kMinBlocks * kSmemBytes <= 227 * 1024, "kMinBlocks CTAs per SM");
};

// The stage token of row i of a dxmap m16 tile. The epilogue's 8-byte loads of X, dY, dU are
// served half a warp at a time; lanes g = 0..3 (and 4..7) of a half hold rows g + 8 h, and with
// rows = tokens in order their four tokens hit only four of the eight swizzle chunks, two
// 16-byte words a bank group: 4 wavefronts a load instead of 2 (ncu, T = 16384: 28.6% of the
// shared-load wavefronts were bank conflicts, ~50 a warp a stage; 24 such loads a warp a stage).
// Rows g = 0..3 take even tokens and g = 4..7 odd ones, so a half's tokens fall in distinct
// chunk pairs. Each MMA row is its token's own dot product: the values do not change. Measured
// (mhc8, ncu, T = 16384): bank conflicts 26.0 M -> 1.2 M of 91.0 M -> 66.2 M wavefronts, the
// kernel 591 -> 545 us (with tests running beside it).
__device__ __forceinline__ int DxRowToken(int i) {
  return 8 * (i >> 3) + 2 * (i & 3) + ((i >> 2) & 1);
}

// Byte offset of channel ch (a multiple of 4) of row r in a 128-byte-swizzled tile.
__device__ __forceinline__ uint32_t Swz128(int r, int ch) {
  return static_cast<uint32_t>(r * 128 + ((((ch >> 3) ^ r) & 7) << 4) + ((ch & 7) << 1));
}

// The five tensor maps of one call (kernel parameters: the copy engine reads them from there).
struct BwdColumnsMaps {
  CUtensorMap x, dy, du, rec, stats;
};

template <class Tr>
__global__ void __launch_bounds__(Tr::kThreads, Tr::kMinBlocks)
    MhcBwdColumnsTcKernel(const __grid_constant__ BwdColumnsMaps maps, const float* __restrict__ fn,
                          uint16_t* __restrict__ dX, float* __restrict__ partials, int64_t T,
                          int64_t C, int64_t chunks) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  __shared__ uint64_t full_bar[Tr::kStages];  // stage landed, per slot
  // The swizzle is a function of shared-memory address bits 7..9: tiles start on 1 KiB. All
  // tile accesses use 32-bit shared addresses.
  const uint32_t smem0 = (SmemAddr(smem_raw) + 1023u) & ~1023u;

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int g = lane / 4, q = lane % 4;
  const int gt = DxRowToken(g);
  const int a = warp / Tr::kWarpsPerStream;                      // stream
  const int wch = Tr::kWarpCols * (warp % Tr::kWarpsPerStream);  // warp's first channel
  const int64_t c0 = static_cast<int64_t>(blockIdx.x) * Tr::kCh;
  const int64_t K = 4 * C;
  const int64_t chunk = blockIdx.y;
  const int64_t t_begin = T * chunk / chunks, t_end = T * (chunk + 1) / chunks;
  const int64_t n_stages = (t_end - t_begin + Tr::kTok - 1) / Tr::kTok;
  // The dX epilogue's shared rows are tt = gt + 16 mt + 8 h: (tt & 7) == gt, so each row's swizzle
  // is row gt's, and every read is a lane offset (below, from the stage's base) plus a constant.
  // Computed per read, the swizzles and row offsets took ~15 instructions of the ~80 an epilogue
  // row (ncu, bench/results/mhc_h200.md, thirty-third session).
  constexpr int kRecRow = 4 * Tr::kRecFloats;  // bytes
  const uint32_t lane_swz = Swz128(gt, wch + 4 * q);
  const uint32_t lane_x = lane_swz + a * Tr::kTok * 128;
  const uint32_t lane_pre = Tr::kOffStats + gt * kRecRow + 4 * (Tr::kCoefPre + a);
  const uint32_t lane_rab = Tr::kOffStats + gt * kRecRow + 4 * (Tr::kCoefR + 4 * a);
  const uint32_t lane_dsq = Tr::kOffRec + gt * kRecRow + 4 * Tr::kRecDsq;

  // Thread 0's producer: the whole stage, one expect-tx arrival (boxes past T count in full).
  auto issue = [&](int64_t st) {
    if (st >= n_stages) return;
    const int slot = static_cast<int>(st % Tr::kStages);
    const uint32_t sb = smem0 + slot * Tr::kStageBytes;
    const uint32_t bar = SmemAddr(&full_bar[slot]);
    const int tb = static_cast<int>(t_begin + st * Tr::kTok);
    const int cx = static_cast<int>(c0);
    MbarArriveExpectTx(&full_bar[slot], Tr::kStageTx);
#pragma unroll
    for (int s = 0; s < 4; ++s) {
      TmaLoad3D(sb + s * Tr::kTok * Tr::kRowBytes, &maps.x, cx, s, tb, bar);
      TmaLoad3D(sb + Tr::kOffDy + s * Tr::kTok * Tr::kRowBytes, &maps.dy, cx, s, tb, bar);
    }
    TmaLoad2D(sb + Tr::kOffU, &maps.du, cx, tb, bar);
    TmaLoad2D(sb + Tr::kOffRec, &maps.rec, 0, tb, bar);
    TmaLoad2D(sb + Tr::kOffStats, &maps.stats, Tr::kStatsFrom, tb, bar);
  };

  // The first stages are requested before fn is loaded and split, so that their latency and
  // fn's overlap (one CTA an SM: each CTA's start is on the critical path). This kernel is
  // launched as kernel 1's programmatic dependent, so it may begin as kernel 1's last CTAs exit:
  // the records (and, to keep this kernel's traffic out of kernel 1's way, the other tiles too)
  // are requested only once kernel 1 has completed and its writes are visible; the tensor copies
  // read them through the async proxy, hence the proxy fence. Every CTA's thread 0 waits, so
  // this grid completes after kernel 1's, and kernel 3 (an ordinary launch) follows both.
  if (tid == 0) {
#pragma unroll
    for (int s = 0; s < Tr::kStages; ++s) MbarInit(&full_bar[s], 1);
    MbarInitFence();
    cudaGridDependencySynchronize();
    asm volatile("fence.proxy.async.global;\n" ::: "memory");
#pragma unroll
    for (int st = 0; st < Tr::kStages - 1; ++st) issue(st);
  }

  // fn as the B operand of dxmap, split, for this warp's n8 tiles: rows k of
  // [fn_hi; fn_hi; fn_lo; 0], column n = lane / 4.
  uint32_t fb[Tr::kKDx / 16][Tr::kNTiles][2];
#pragma unroll
  for (int nt = 0; nt < Tr::kNTiles; ++nt) {
    const int64_t i = a * C + c0 + wch + 4 * (g / 2) + 2 * nt + g % 2;
    // Row k of the split stack (k depends on the lane, so it is computed, not indexed).
    auto bv = [&](int k) {
      if (k >= 3 * kLogits) return 0.0f;
      const float v = __ldg(fn + (k % kLogits) * K + i);
      const float hi = __bfloat162float(__float2bfloat16_rn(v));
      return k < 2 * kLogits ? hi : v - hi;
    };
#pragma unroll
    for (int ks = 0; ks < Tr::kKDx / 16; ++ks) {
      fb[ks][nt][0] = PackBf16(bv(16 * ks + 2 * q), bv(16 * ks + 2 * q + 1));
      fb[ks][nt][1] = PackBf16(bv(16 * ks + 2 * q + 8), bv(16 * ks + 2 * q + 9));
    }
  }

  float acc[2][Tr::kNTiles][4];  // dfn rows, as the stage's fresh accumulators below
#pragma unroll
  for (int mt = 0; mt < 2; ++mt) {
#pragma unroll
    for (int nt = 0; nt < Tr::kNTiles; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[mt][nt][e] = 0.0f;
    }
  }

  // This lane's dX channels of its first token gt of the stage; token gt + r lies r 4 C further.
  // The 64-bit index per store took ~10% of the kernel's instructions, the stage's slot and
  // parity as 64-bit divisions a few more (ncu, bench/results/mhc_h200.md, thirty-third session).
  uint16_t* dx_lane = dX + ((t_begin + gt) * 4 + a) * C + c0 + wch + 4 * q;
  const int64_t dx_stage_step = Tr::kTok * 4 * C;
  const uint32_t dx_row8 = static_cast<uint32_t>(8 * 4 * C * sizeof(uint16_t));  // 8 tokens, bytes
  int slot = 0;                                                                  // st % kStages
  uint32_t phase = 0;  // (st / kStages) & 1
  __syncthreads();     // the barriers are initialized before anyone waits on them
  for (int64_t st = 0; st < n_stages; ++st) {
    MbarWait(&full_bar[slot], phase);
    __syncthreads();  // the previous stage's readers are done with the slot reused below
    if (tid == 0) issue(st + Tr::kStages - 1);
    const uint32_t sb = smem0 + slot * Tr::kStageBytes;
    const uint32_t rec_s = sb + Tr::kOffRec;  // dz [hi | lo] BF16 then dsq, rows of 112 bytes
    const int64_t tb = t_begin + st * Tr::kTok;
    const int nb = static_cast<int>(t_end - tb < Tr::kTok ? t_end - tb : Tr::kTok);

    // dfn: fresh accumulators for this stage's 32 tokens. Tile 0's rows are logits 0..15, hi and
    // lo parts summed by the MMAs (two k16 products a token step); tile 1's rows 0..7 are hi of
    // logits 16..23 and rows 8..15 their lo, added at the end. Three A loads and six MMAs a
    // token step as with three row tiles [hi 0..23; lo 0..23], in 16 fewer registers.
    {
      float fr[2][Tr::kNTiles][4];
#pragma unroll
      for (int mt = 0; mt < 2; ++mt) {
#pragma unroll
        for (int nt = 0; nt < Tr::kNTiles; ++nt) {
#pragma unroll
          for (int e = 0; e < 4; ++e) fr[mt][nt][e] = 0.0f;
        }
      }
#pragma unroll
      for (int ks = 0; ks < Tr::kTok / 16; ++ks) {
        uint32_t xb[2 * Tr::kNTiles];  // B fragments of the n8 tiles
        {
          const int tok = 16 * ks + (lane & 7) + 8 * ((lane >> 3) & 1);
          LdMatrixX4TransAddr(sb + Swz128(a * Tr::kTok + tok, wch + 8 * (lane >> 4)), xb);
          if (nb < Tr::kTok) {  // tokens past the chunk read as zero, as past T
                                // xb[i]: tokens 16 ks + 2q (+1), + 8 for odd i (matrices 1 and 3).
#pragma unroll
            for (int i = 0; i < 2 * Tr::kNTiles; ++i) {
              const int t = 16 * ks + 2 * q + 8 * (i & 1);
              xb[i] = t >= nb ? 0u : (t + 1 >= nb ? xb[i] & 0xffffu : xb[i]);
            }
          }
        }
#pragma unroll
        for (int part = 0; part < 3; ++part) {
          // A = dz^T: matrix i holds 8 rows (logits) of tokens 8 (i >> 1) .. + 8, the rows of this
          // lane's address (second: matrices 1 and 3): part 0 hi 0..7 | 8..15, part 1 lo 0..7 |
          // 8..15, part 2 hi 16..23 | lo 16..23 (record columns [hi 0..23 | lo 0..23]); this
          // lane's halves are tokens 16 ks + 2q (+1) in af[0..1], + 8 in af[2..3].
          const int second = (lane >> 3) & 1;
          const int col = part == 2 ? (second ? kLogits + 16 : 16) : kLogits * part + 8 * second;
          uint32_t af[4];
          LdMatrixX4TransAddr(rec_s + (16 * ks + (lane & 7) + 8 * (lane >> 4)) * kRecRow + 2 * col,
                              af);
          if (nb < Tr::kTok) {  // the chunk's last stage: tokens past it must not count
            const int t0 = 16 * ks + 2 * q;
#pragma unroll
            for (int i = 0; i < 4; ++i) {
              const int t = t0 + 8 * (i >> 1);
              af[i] = t >= nb ? 0u : (t + 1 >= nb ? af[i] & 0xffffu : af[i]);
            }
          }
#pragma unroll
          for (int nt = 0; nt < Tr::kNTiles; ++nt) {
            MmaBf16(fr[part / 2][nt], af[0], af[1], af[2], af[3], xb[2 * nt], xb[2 * nt + 1]);
          }
        }
      }
#pragma unroll
      for (int mt = 0; mt < 2; ++mt) {
#pragma unroll
        for (int nt = 0; nt < Tr::kNTiles; ++nt) {
#pragma unroll
          for (int e = 0; e < 4; ++e) acc[mt][nt][e] += fr[mt][nt][e];
        }
      }
    }

    // dX: dxmap on the tensor cores, then the pre, R and dsq terms per element.
#pragma unroll
    for (int mt = 0; mt < Tr::kTok / 16; ++mt) {
      float d[Tr::kNTiles][4];
#pragma unroll
      for (int nt = 0; nt < Tr::kNTiles; ++nt) {
#pragma unroll
        for (int e = 0; e < 4; ++e) d[nt][e] = 0.0f;
      }
      // k = 16 ks.. of [hi | lo | hi | pad] is column 16 ks mod 48 of [hi | lo]: the three k16
      // steps of [hi | lo] are loaded once and steps 3, 4 reuse steps 0, 1 (the pad, lo 0..7 at
      // k = 72..79, meets fn's zero rows). Five loads a tile were 1/4 of the stage's
      // shared-memory wavefronts.
      constexpr int kDzSteps = Tr::kDzCols / 16;
      uint32_t af[kDzSteps][4];
#pragma unroll
      for (int ks = 0; ks < kDzSteps; ++ks) {
        LdMatrixX4Addr(
            rec_s + (16 * mt + DxRowToken(lane & 15)) * kRecRow + 2 * (16 * ks + 8 * (lane >> 4)),
            af[ks]);
      }
#pragma unroll
      for (int ks = 0; ks < Tr::kKDx / 16; ++ks) {
        const uint32_t* a_ks = af[ks % kDzSteps];
#pragma unroll
        for (int nt = 0; nt < Tr::kNTiles; ++nt) {
          MmaBf16(d[nt], a_ks[0], a_ks[1], a_ks[2], a_ks[3], fb[ks][nt][0], fb[ks][nt][1]);
        }
      }
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r8 = 16 * mt + 8 * h;  // tt - gt: a multiple of 8 rows, the same swizzle
        // Rows past the chunk (its last stage only) are computed from the stage's other bytes
        // and not stored: a predicated store rather than a branch around the row.
        const float pre = LdsF32(sb + lane_pre + r8 * kRecRow);
        const float dsq2 = 2.0f * LdsF32(sb + lane_dsq + r8 * kRecRow);
        float rab[4];
#pragma unroll
        for (int b = 0; b < 4; ++b) rab[b] = LdsF32(sb + lane_rab + r8 * kRecRow + 4 * b);
        // This lane's four channels; tile nt holds ch + 2 nt and ch + 2 nt + 1 (word nt).
        const uint2 xv = LdsU2(sb + lane_x + r8 * 128);
        const uint2 uv = LdsU2(sb + lane_swz + Tr::kOffU + r8 * 128);
        // Per channel one FMA chain: dxmap + 2 dsq x, then pre dU, then the four R dY terms in
        // order (pre dU first and dxmap's sum added last took one instruction more a channel).
        const float x4[4] = {Bf16Lo(xv.x), Bf16Hi(xv.x), Bf16Lo(xv.y), Bf16Hi(xv.y)};
        float v[4];
#pragma unroll
        for (int nt = 0; nt < Tr::kNTiles; ++nt) {
          v[2 * nt] = fmaf(dsq2, x4[2 * nt], d[nt][2 * h]);
          v[2 * nt + 1] = fmaf(dsq2, x4[2 * nt + 1], d[nt][2 * h + 1]);
        }
        v[0] = fmaf(pre, Bf16Lo(uv.x), v[0]);
        v[1] = fmaf(pre, Bf16Hi(uv.x), v[1]);
        v[2] = fmaf(pre, Bf16Lo(uv.y), v[2]);
        v[3] = fmaf(pre, Bf16Hi(uv.y), v[3]);
#pragma unroll
        for (int b = 0; b < 4; ++b) {
          const uint2 yv = LdsU2(sb + lane_swz + Tr::kOffDy + (b * Tr::kTok + r8) * 128);
          v[0] = fmaf(rab[b], Bf16Lo(yv.x), v[0]);
          v[1] = fmaf(rab[b], Bf16Hi(yv.x), v[1]);
          v[2] = fmaf(rab[b], Bf16Lo(yv.y), v[2]);
          v[3] = fmaf(rab[b], Bf16Hi(yv.y), v[3]);
        }
        uint32_t out[Tr::kNTiles];
#pragma unroll
        for (int nt = 0; nt < Tr::kNTiles; ++nt) out[nt] = PackBf16(v[2 * nt], v[2 * nt + 1]);
        if (r8 + gt < nb) {
          __stcs(reinterpret_cast<uint2*>(reinterpret_cast<char*>(dx_lane) +
                                          static_cast<uint32_t>(r8 / 8) * dx_row8),
                 make_uint2(out[0], out[1]));
        }
      }
    }
    dx_lane += dx_stage_step;
    if (++slot == Tr::kStages) {
      slot = 0;
      phase ^= 1u;
    }
  }
  // dfn rows j = g, g + 8 (tile 0) and g + 16 (tile 1: hi in row g, lo in row g + 8).
  float* part = partials + chunk * kLogits * K;
#pragma unroll
  for (int nt = 0; nt < Tr::kNTiles; ++nt) {
    const int64_t i = a * C + c0 + wch + 8 * nt + 2 * q;
    *reinterpret_cast<float2*>(part + g * K + i) = make_float2(acc[0][nt][0], acc[0][nt][1]);
    *reinterpret_cast<float2*>(part + (g + 8) * K + i) = make_float2(acc[0][nt][2], acc[0][nt][3]);
    *reinterpret_cast<float2*>(part + (g + 16) * K + i) =
        make_float2(acc[1][nt][0] + acc[1][nt][2], acc[1][nt][1] + acc[1][nt][3]);
  }
}

// ---------------------------------------------------------------------------------------------
// backward_finish, kernel 3: fixed-order sums. Blocks [0, dfn_blocks) sum the chunk partials of
// dfn (one float4 a thread); the next 27 blocks each reduce one of dbase[24], dscale[3] over
// the token records.
struct BwdReduceTraits {
  static constexpr int kThreads = 256;
  static constexpr int kScalarBlocks = kLogits + 3;
};

__global__ void __launch_bounds__(BwdReduceTraits::kThreads)
    MhcBwdReduceKernel(const float* __restrict__ partials, const float* __restrict__ records,
                       float* __restrict__ dfn, float* __restrict__ dscale,
                       float* __restrict__ dbase, int64_t T, int64_t C, int64_t chunks,
                       int64_t dfn_blocks, bool accumulate) {
  using Tr = BwdReduceTraits;
  const int tid = threadIdx.x;
  if (blockIdx.x < dfn_blocks) {
    const int64_t n4 = kLogits * 4 * C / 4;
    const int64_t k = blockIdx.x * static_cast<int64_t>(Tr::kThreads) + tid;
    if (k >= n4) return;
    const float4* p = reinterpret_cast<const float4*>(partials);
    float4 s = p[k];
#pragma unroll 4
    for (int64_t ch = 1; ch < chunks; ++ch) {
      const float4 v = p[ch * n4 + k];
      s.x += v.x;
      s.y += v.y;
      s.z += v.z;
      s.w += v.w;
    }
    float4* out = reinterpret_cast<float4*>(dfn) + k;
    if (accumulate) {
      const float4 o = *out;
      s.x += o.x;
      s.y += o.y;
      s.z += o.z;
      s.w += o.w;
    }
    *out = s;
    return;
  }
  // dbase and dscale: FP64 over tokens (dscale cancels; see kernel 1), rounded once to FP32.
  __shared__ double red[Tr::kThreads];
  const int which = static_cast<int>(blockIdx.x - dfn_blocks);  // 0..23 dbase, 24..26 dscale
  // 16 tokens a batch (60197be, mhc7) took 48 registers, which the dfn blocks share, and showed no
  // gain on the H200; the plain strided sums keep the kernel at 32.
  double s = 0.0;
  if (which < kLogits) {
    const float* col = records + lay::kRecDl + which;
#pragma unroll 8
    for (int64_t t = tid; t < T; t += Tr::kThreads) s += col[t * lay::kTokenRecordFloats];
  } else {
    const double* col = reinterpret_cast<const double*>(records) + kRecDscaleD + (which - kLogits);
#pragma unroll 8
    for (int64_t t = tid; t < T; t += Tr::kThreads) s += col[t * (lay::kTokenRecordFloats / 2)];
  }
  red[tid] = s;
  __syncthreads();
#pragma unroll
  for (int w = Tr::kThreads / 2; w > 0; w /= 2) {
    if (tid < w) red[tid] += red[tid + w];
    __syncthreads();
  }
  if (tid == 0) {
    float* out = which < kLogits ? dbase + which : dscale + (which - kLogits);
    // Under accumulate the FP32 sum is added in FP32, like dfn's.
    const float v = static_cast<float>(red[0]);
    *out = accumulate ? *out + v : v;
  }
}

}  // namespace
}  // namespace mhc_cuda

Status MhcBackwardPrepareCuda(const MhcBwdPrepareParams& p, cudaStream_t stream) {
  const char* name = "mhc_backward_prepare";
  MHC_RETURN_IF_ERROR(mhc_cuda::CheckShapeAndIters(name, p.T, p.C, 1));
  if (p.T == 0) return OkStatus();
  MHC_RETURN_IF_ERROR(mhc_cuda::CheckVec(name, p.X, "X"));
  MHC_RETURN_IF_ERROR(mhc_cuda::CheckVec(name, p.dY, "dY"));
  MHC_RETURN_IF_ERROR(mhc_cuda::CheckVec(name, p.B, "B"));
  MHC_RETURN_IF_ERROR(mhc_cuda::CheckVec(name, p.stats, "stats"));
  MHC_RETURN_IF_ERROR(mhc_cuda::CheckVec(name, p.dB, "dB"));
  MHC_RETURN_IF_ERROR(mhc_cuda::CheckVec(name, p.grad_stats, "grad_stats"));
  if (p.T > 0x7fffffff) return InvalidArgument(std::string(name) + ": T too large");
  const int threads = static_cast<int>(p.C / 8 < mhc_cuda::BwdPrepareTraits::kMaxThreads
                                           ? p.C / 8
                                           : mhc_cuda::BwdPrepareTraits::kMaxThreads);
  mhc_cuda::MhcBwdPrepareKernel<<<static_cast<unsigned>(p.T), threads, 0, stream>>>(
      p.X, p.dY, p.B, p.stats, p.dB, p.grad_stats, p.C);
  return mhc_cuda::LaunchStatus(name);
}

Status MhcBackwardFinishCuda(const MhcBwdFinishParams& p, cudaStream_t stream) {
  namespace lay = ::cakegrad::kernels::mhc_layout;
  const char* name = "mhc_backward_finish";
  MHC_RETURN_IF_ERROR(mhc_cuda::CheckShapeAndIters(name, p.T, p.C, p.sinkhorn_iters));
  MHC_RETURN_IF_ERROR(mhc_cuda::CheckVec(name, p.dfn, "dfn"));
  if (p.dscale == nullptr || p.dbase == nullptr) {
    return InvalidArgument(std::string(name) + ": dscale and dbase are required");
  }
  const int64_t K = 4 * p.C;
  if (p.T == 0) {
    if (p.accumulate) return OkStatus();
    MHC_RETURN_IF_ERROR(mhc_cuda::CudaStatus(
        cudaMemsetAsync(p.dfn, 0, sizeof(float) * kMhcLogits * K, stream), name));
    MHC_RETURN_IF_ERROR(
        mhc_cuda::CudaStatus(cudaMemsetAsync(p.dscale, 0, sizeof(float) * 3, stream), name));
    return mhc_cuda::CudaStatus(cudaMemsetAsync(p.dbase, 0, sizeof(float) * kMhcLogits, stream),
                                name);
  }
  MHC_RETURN_IF_ERROR(mhc_cuda::CheckVec(name, p.X, "X"));
  MHC_RETURN_IF_ERROR(mhc_cuda::CheckVec(name, p.dY, "dY"));
  MHC_RETURN_IF_ERROR(mhc_cuda::CheckVec(name, p.dU, "dU"));
  MHC_RETURN_IF_ERROR(mhc_cuda::CheckVec(name, p.fn, "fn"));
  MHC_RETURN_IF_ERROR(mhc_cuda::CheckVec(name, p.stats, "stats"));
  MHC_RETURN_IF_ERROR(mhc_cuda::CheckVec(name, p.grad_stats, "grad_stats"));
  MHC_RETURN_IF_ERROR(mhc_cuda::CheckVec(name, p.dX, "dX"));
  MHC_RETURN_IF_ERROR(mhc_cuda::CheckVec(name, p.workspace, "workspace"));
  if (p.scale == nullptr || p.base == nullptr) {
    return InvalidArgument(std::string(name) + ": scale and base are required");
  }
  const int64_t need = MhcBackwardFinishWorkspaceBytes(p.T, p.C);
  if (p.workspace_bytes < need) {
    return InvalidArgument(std::string(name) + ": workspace has " +
                           std::to_string(p.workspace_bytes) + " bytes, needs " +
                           std::to_string(need));
  }
  float* records = static_cast<float*>(p.workspace);
  float* partials =
      reinterpret_cast<float*>(static_cast<char*>(p.workspace) + lay::BwdFinishRecordsBytes(p.T));
  const int64_t chunks = lay::BwdFinishChunks(p.T, p.C);
  // The column kernel's tensor-copy coordinates are 32-bit.
  if (p.T > 0x7fffffff) return InvalidArgument(std::string(name) + ": T too large");

  using TokTr = mhc_cuda::BwdTokenTraits;
  const int tok_warps = TokTr::Warps(p.sinkhorn_iters);  // a function of the options only
  const int64_t tok_per_block = TokTr::kTokens * tok_warps;
  const int64_t tok_blocks = (p.T + tok_per_block - 1) / tok_per_block;
  mhc_cuda::MhcBwdTokenKernel<<<static_cast<unsigned>(tok_blocks), 32 * tok_warps,
                                tok_warps * TokTr::ChainBytesPerWarp(p.sinkhorn_iters), stream>>>(
      p.X, p.dU, p.scale, p.base, p.stats, p.grad_stats, records, p.T, p.C, p.hc_eps,
      p.sinkhorn_iters);
  MHC_RETURN_IF_ERROR(mhc_cuda::LaunchStatus(name));

  using ColTr = mhc_cuda::BwdColumnsTcTraits<64, 3>;
  mhc_cuda::BwdColumnsMaps maps;
  {
    const cuuint64_t T64 = static_cast<cuuint64_t>(p.T), C64 = static_cast<cuuint64_t>(p.C);
    // X and dY as [T][4][C] (channel innermost), boxes of kCh channels x 1 stream x kTok tokens.
    const cuuint64_t x_dims[3] = {C64, 4, T64};
    const cuuint64_t x_strides[2] = {C64 * 2, 4 * C64 * 2};
    const cuuint32_t x_box[3] = {ColTr::kCh, 1, ColTr::kTok};
    const cuuint64_t u_dims[2] = {C64, T64};
    const cuuint64_t u_strides[1] = {C64 * 2};
    const cuuint32_t u_box[2] = {ColTr::kCh, ColTr::kTok};
    // Records and stats as [T][64] floats, boxes of 28 floats x kTok tokens.
    const cuuint64_t r_dims[2] = {kMhcStatsWidth, T64};
    const cuuint64_t r_strides[1] = {kMhcStatsWidth * 4};
    const cuuint32_t r_box[2] = {ColTr::kRecFloats, ColTr::kTok};
    static_assert(lay::kTokenRecordFloats == kMhcStatsWidth, "records and stats rows match");
    const auto bf16 = CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
    const auto f32 = CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
    const auto swz = CU_TENSOR_MAP_SWIZZLE_128B;
    const auto flat = CU_TENSOR_MAP_SWIZZLE_NONE;
    MHC_RETURN_IF_ERROR(EncodeTiledMap(&maps.x, bf16, 3, p.X, x_dims, x_strides, x_box, swz, name));
    MHC_RETURN_IF_ERROR(
        EncodeTiledMap(&maps.dy, bf16, 3, p.dY, x_dims, x_strides, x_box, swz, name));
    MHC_RETURN_IF_ERROR(
        EncodeTiledMap(&maps.du, bf16, 2, p.dU, u_dims, u_strides, u_box, swz, name));
    MHC_RETURN_IF_ERROR(
        EncodeTiledMap(&maps.rec, f32, 2, records, r_dims, r_strides, r_box, flat, name));
    MHC_RETURN_IF_ERROR(
        EncodeTiledMap(&maps.stats, f32, 2, p.stats, r_dims, r_strides, r_box, flat, name));
  }
  auto* col_kernel = mhc_cuda::MhcBwdColumnsTcKernel<ColTr>;
  // Above the 48 KiB default; set on every call since the attribute is per device.
  MHC_RETURN_IF_ERROR(mhc_cuda::CudaStatus(
      cudaFuncSetAttribute(col_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           ColTr::kSmemBytes),
      name));
  const dim3 col_grid(static_cast<unsigned>(p.C / ColTr::kCh), static_cast<unsigned>(chunks));
  // A programmatic dependent of kernel 1, which never triggers early: its CTAs are placed as
  // kernel 1's CTAs exit, which hides the launch gap between the two. H200, thirty-fifth session
  // (bench/results/mhc_h200.md): backward_finish -0.3% / -0.5% / -0.9% at T = 16384 / 8192 /
  // 4096, bitwise the same; a trigger at kernel 1's start (column CTAs placed during its last
  // wave, waiting) was +2.0% at T = 16384.
  cudaLaunchAttribute pdl;
  const cudaLaunchConfig_t cfg =
      ProgrammaticLaunchConfig(col_grid, dim3(ColTr::kThreads), ColTr::kSmemBytes, stream, &pdl);
  MHC_RETURN_IF_ERROR(mhc_cuda::CudaStatus(
      cudaLaunchKernelEx(&cfg, col_kernel, maps, p.fn, p.dX, partials, p.T, p.C, chunks), name));
  MHC_RETURN_IF_ERROR(mhc_cuda::LaunchStatus(name));

  using RedTr = mhc_cuda::BwdReduceTraits;
  const int64_t dfn_blocks = (kMhcLogits * K / 4 + RedTr::kThreads - 1) / RedTr::kThreads;
  mhc_cuda::MhcBwdReduceKernel<<<static_cast<unsigned>(dfn_blocks + RedTr::kScalarBlocks),
                                 RedTr::kThreads, 0, stream>>>(
      partials, records, p.dfn, p.dscale, p.dbase, p.T, p.C, chunks, dfn_blocks, p.accumulate);
  return mhc_cuda::LaunchStatus(name);
}

}  // namespace cakegrad::kernels
