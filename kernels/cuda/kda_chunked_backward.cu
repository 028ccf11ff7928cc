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
//    the FP32 chunk-start states S0 per chunk slot (the state pass in BF16x3 on mma.sync, as the
//    forward; no output written).
// 2. KdaChunkDstateKernel: the reverse chain, one CTA per (16, 32 or 64 state rows, head,
//    document; the forward's wave rule), walking the chunks backwards with its dS slice in shared
//    memory (FP32); writes dS1 per chunk slot and dinitial_state. Separable over state rows, needs
//    no S0, reads the record (split operands summed back to FP32: hi + lo is exact), the next
//    chunk's operands loaded into registers while the current one computes.
// 3. KdaChunkGradKernel: one CTA per (chunk slot, head), all chunks in parallel; every product in
//    FP32 on CUDA cores (the study's "fp32" scheme: FP32 outputs x15 under SPEC's limits), the
//    decayed pair terms with one exp(G_t - G_i) per element (<= 1: no overflow, no sub-chunk
//    references needed). Writes dq dk dv dg dbeta (BF16, rounded once) and FP32 per-chunk
//    partials of ddt_bias and dA_log (per key channel).
// 4. KdaChunkParamReduceKernel: the partials of each head over slots and channels in FP64, in a
//    fixed order. No atomics on outputs anywhere: bitwise reproducible by construction.
// Kernels 2 and 3 are FP32 CUDA-core loops; the study's tensor-core scheme (BF16x3 mma.sync for
// every product but the four decayed ones, 3xTF32 for those) is the next step
// (bench/results/kda_h200.md, "2026-11-29, fourth session").
#include <atomic>
#include <string>

#include "kda_chunked_backward.cuh"
#include "kda_chunked_forward.cuh"
#include "kda_common.cuh"

namespace cakegrad::kernels {
namespace kda_cuda {
namespace {

constexpr int kChunk = static_cast<int>(kda_layout::kChunk);
constexpr int kPartials = static_cast<int>(kda_layout::kBwdPartials);
static_assert(kChunk == 64 && kDim == 128, "index arithmetic below assumes C = 64, K = V = 128");

struct ChunkBwdArgs {
  KdaShape s;
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
  float* partials;            // [slots, H, kBwdPartials] (kernel 3)
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
constexpr int kMLo = kChunk * kChunk;     // offset of the lo block of M

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

// hi + lo of eight split operands (exact in FP32: lo's exponent is >= 8 below hi's) to dst.
__device__ __forceinline__ void StoreJoined8(float* dst, uint4 hi, uint4 lo) {
  auto join = [](uint32_t h, uint32_t l, int half) {
    return half ? Bf16(h >> 16) + Bf16(l >> 16) : Bf16(h & 0xffff) + Bf16(l & 0xffff);
  };
  *reinterpret_cast<float4*>(dst) = make_float4(join(hi.x, lo.x, 0), join(hi.x, lo.x, 1),
                                                join(hi.y, lo.y, 0), join(hi.y, lo.y, 1));
  *reinterpret_cast<float4*>(dst + 4) = make_float4(join(hi.z, lo.z, 0), join(hi.z, lo.z, 1),
                                                    join(hi.w, lo.w, 0), join(hi.w, lo.w, 1));
}

// dst[0 .. 7] = hi + lo of eight consecutive split operands (16-byte aligned source and a
// 16-byte aligned destination): one 16-byte load per part, two 16-byte stores.
__device__ __forceinline__ void StageJoined8(float* dst, const uint16_t* src, int lo_offset) {
  StoreJoined8(dst, *reinterpret_cast<const uint4*>(src),
               *reinterpret_cast<const uint4*>(src + lo_offset));
}

// dst[j * ld] = hi + lo of src[j], j < 8 (src 16-byte aligned): a transposed copy with one 16-byte
// load per part; consecutive threads take consecutive dst columns (no bank conflicts) and read
// rows 128 B apart, where one element per thread and row cost a sector per element.
__device__ __forceinline__ void StageJoinedT8(float* dst, int ld, const uint16_t* src,
                                              int lo_offset) {
  const uint4 hi = *reinterpret_cast<const uint4*>(src);
  const uint4 lo = *reinterpret_cast<const uint4*>(src + lo_offset);
  const uint32_t h[4] = {hi.x, hi.y, hi.z, hi.w}, l[4] = {lo.x, lo.y, lo.z, lo.w};
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    dst[(2 * j) * ld] = Bf16(h[j] & 0xffff) + Bf16(l[j] & 0xffff);
    dst[(2 * j + 1) * ld] = Bf16(h[j] >> 16) + Bf16(l[j] >> 16);
  }
}

// acc + a . b in the order x, y, z, w (one fixed order: bitwise reproducible).
__device__ __forceinline__ float Dot4(float4 a, float4 b, float acc) {
  acc = fmaf(a.x, b.x, acc);
  acc = fmaf(a.y, b.y, acc);
  acc = fmaf(a.z, b.z, acc);
  return fmaf(a.w, b.w, acc);
}

// Four consecutive BF16 values (8-byte aligned) as floats.
__device__ __forceinline__ float4 Bf16x4(const uint16_t* p) {
  const uint2 r = *reinterpret_cast<const uint2*>(p);
  return make_float4(Bf16(r.x & 0xffff), Bf16(r.x >> 16), Bf16(r.y & 0xffff), Bf16(r.y >> 16));
}

// ---- kernel 2: the reverse chain over chunks ---------------------------------------------------

template <int kRowsT>
struct ChainTraits {
  static constexpr int kRows = kRowsT;  // state rows per CTA
  static constexpr int kSlices = kDim / kRows;
  static constexpr int kThreads = 256;
  static constexpr int kDsStride = kDim + 1;    // dS rows read down a column: no bank conflicts
  static constexpr int kColStride = kRows + 4;  // dO, dU rows: 16-byte aligned row blocks
  // dU: item = (slice column j, 4 consecutive tokens); dS: thread = (key k, a block of
  // kRowsPerThread consecutive rows, read as float4 broadcasts).
  static constexpr int kTokBlocks = kChunk / 4;
  static constexpr int kRowsPerThread = kRows * kDim / kThreads;
  // Record operands prefetched into registers one step ahead: 16-byte pieces of Q Gam, -W,
  // Kdec^T (kRowPieces each) and M (kMPieces), hi and lo; dO of the slice (kDoPer per thread).
  static constexpr int kRowPieces = kChunk * kDim / 8 / kThreads;
  static constexpr int kMPieces = kChunk * kChunk / 8 / kThreads;
  static constexpr int kDoPer = kChunk * kRows / kThreads;
  static_assert((kRows * kTokBlocks) % kThreads == 0, "whole dU items per thread");
  static_assert(kThreads % kDim == 0 && kRowsPerThread * (kThreads / kDim) == kRows, "dS items");
  static_assert(kRowsPerThread % 4 == 0, "float4 row blocks");
  static_assert(kRowPieces * kThreads * 8 == kChunk * kDim &&
                    kMPieces * kThreads * 8 == kChunk * kChunk,
                "whole pieces");
};

// The chain's shared memory: the chunk's record operands in FP32 (hi + lo), stored once per
// step from registers and read as float4 runs, plus the dS slice and the slice's dO and dU
// columns.
template <int kRows>
struct ChainSmem {
  using Tr = ChainTraits<kRows>;
  float qg[kChunk][kDim];                         // Q Gam [t][k]
  float nw[kChunk][kDim];                         // -W [t][k]
  float kdt[kDim][kChunk];                        // Kdec^T [k][t]
  float m[kChunk][kChunk];                        // M [s][t]
  float ds[kRows][Tr::kDsStride];                 // dS slice: dS1 of the chunk walked
  alignas(16) float dob[kChunk][Tr::kColStride];  // dO, this slice's columns, unscaled
  alignas(16) float du[kChunk][Tr::kColStride];   // dU, this slice's columns
  float gc[kDim];                                 // Gam_C
};

// One chunk's operands in flight: loaded into registers while the previous chunk computes (the
// L2 latency of ~30 dependent 16-byte loads per thread was paid in every step), then stored.
template <int kRows>
struct ChainPending {
  using Tr = ChainTraits<kRows>;
  uint4 hi[3][Tr::kRowPieces], lo[3][Tr::kRowPieces];
  uint4 mhi[Tr::kMPieces], mlo[Tr::kMPieces];
  uint16_t dob[Tr::kDoPer];
  float gc;
};

template <int kRows>
__device__ __forceinline__ void ChainIssue(const ChunkBwdArgs& a, int64_t slot, int64_t t0, int len,
                                           int64_t h, int v0, int tid, ChainPending<kRows>& p) {
  using Tr = ChainTraits<kRows>;
  const Rec rec = RecordAt(a.records, slot, a.s.H, h);
  const uint16_t* src[3] = {rec.qg, rec.negw, rec.kdt};
#pragma unroll
  for (int m = 0; m < 3; ++m) {
#pragma unroll
    for (int i = 0; i < Tr::kRowPieces; ++i) {
      const int e = 8 * (tid + i * Tr::kThreads);
      p.hi[m][i] = *reinterpret_cast<const uint4*>(src[m] + e);
      p.lo[m][i] = *reinterpret_cast<const uint4*>(src[m] + e + kRowMatLo);
    }
  }
#pragma unroll
  for (int i = 0; i < Tr::kMPieces; ++i) {
    const int e = 8 * (tid + i * Tr::kThreads);
    p.mhi[i] = *reinterpret_cast<const uint4*>(rec.m + e);
    p.mlo[i] = *reinterpret_cast<const uint4*>(rec.m + e + kMLo);
  }
#pragma unroll
  for (int i = 0; i < Tr::kDoPer; ++i) {
    const int e = tid + i * Tr::kThreads, t = e / kRows, j = e % kRows;
    p.dob[i] = t < len ? a.d_o[((t0 + t) * a.s.H + h) * kDim + v0 + j] : uint16_t{0};
  }
  p.gc = tid < kDim ? rec.gamc[tid] : 0.f;
}

template <int kRows>
__device__ __forceinline__ void ChainCommit(const ChainPending<kRows>& p, int tid,
                                            ChainSmem<kRows>& sm) {
  using Tr = ChainTraits<kRows>;
  float* dst[3] = {&sm.qg[0][0], &sm.nw[0][0], &sm.kdt[0][0]};
#pragma unroll
  for (int m = 0; m < 3; ++m) {
#pragma unroll
    for (int i = 0; i < Tr::kRowPieces; ++i) {
      StoreJoined8(dst[m] + 8 * (tid + i * Tr::kThreads), p.hi[m][i], p.lo[m][i]);
    }
  }
#pragma unroll
  for (int i = 0; i < Tr::kMPieces; ++i) {
    StoreJoined8(&sm.m[0][0] + 8 * (tid + i * Tr::kThreads), p.mhi[i], p.mlo[i]);
  }
#pragma unroll
  for (int i = 0; i < Tr::kDoPer; ++i) {
    const int e = tid + i * Tr::kThreads;
    sm.dob[e / kRows][e % kRows] = Bf16(p.dob[i]);
  }
  if (tid < kDim) sm.gc[tid] = p.gc;
}

template <int kRows>
__global__ void __launch_bounds__(ChainTraits<kRows>::kThreads, 1)
    KdaChunkDstateKernel(const __grid_constant__ ChunkBwdArgs a) {
  using Tr = ChainTraits<kRows>;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  ChainSmem<kRows>& sm = *reinterpret_cast<ChainSmem<kRows>*>(smem_raw);
  const int v0 = blockIdx.x * Tr::kRows;
  const int64_t h = blockIdx.y;
  const int64_t n = blockIdx.z;
  const int64_t H = a.s.H;
  const int tid = threadIdx.x;
  int64_t bos, eos;
  DocBounds(a.s, n, &bos, &eos);
  const int64_t chunks = (eos - bos + kChunk - 1) / kChunk;
  const int64_t state_off = (n * H + h) * kDimSq + int64_t{v0} * kDim;
  auto chunk_at = [&](int64_t c, int64_t* slot, int64_t* t0, int* len) {
    *slot = bos / kChunk + n + c;
    *t0 = bos + c * kChunk;
    *len = static_cast<int>(min(int64_t{kChunk}, eos - *t0));
  };

  ChainPending<kRows> pend;
  if (chunks > 0) {
    int64_t slot, t0;
    int len;
    chunk_at(chunks - 1, &slot, &t0, &len);
    ChainIssue<kRows>(a, slot, t0, len, h, v0, tid, pend);
  }
  for (int e = tid; e < Tr::kRows * kDim; e += Tr::kThreads) {
    const int r = e / kDim, k = e % kDim;
    sm.ds[r][k] = a.dfinal_state == nullptr ? 0.f : a.dfinal_state[state_off + r * kDim + k];
  }
  __syncthreads();

  for (int64_t c = chunks - 1; c >= 0; --c) {
    int64_t slot, t0;
    int len;
    chunk_at(c, &slot, &t0, &len);
    float* out = a.ds1 + (slot * H + h) * kDimSq + int64_t{v0} * kDim;
    for (int e = tid; e < Tr::kRows * kDim; e += Tr::kThreads) {
      out[e] = sm.ds[e / kDim][e % kDim];
    }
    ChainCommit<kRows>(pend, tid, sm);
    __syncthreads();
    if (c > 0) {  // the next chunk's loads fly while this one computes
      int64_t nslot, nt0;
      int nlen;
      chunk_at(c - 1, &nslot, &nt0, &nlen);
      ChainIssue<kRows>(a, nslot, nt0, nlen, h, v0, tid, pend);
    }

    // dU[t][j] = scale sum_{s >= t} M[s][t] dO[s][j] + sum_k Kdec[t][k] dS[j][k], tokens
    // t = 4 tb .. 4 tb + 3 (M[s][t] = 0 for s < t, so s starts at the block's first token).
#pragma unroll 1
    for (int item = tid; item < Tr::kRows * Tr::kTokBlocks; item += Tr::kThreads) {
      const int j = item % Tr::kRows, tb = item / Tr::kRows;
      float4 a1 = make_float4(0.f, 0.f, 0.f, 0.f), a2 = a1;
#pragma unroll 4
      for (int s = 4 * tb; s < kChunk; ++s) {
        const float4 mv = *reinterpret_cast<const float4*>(&sm.m[s][4 * tb]);
        const float d = sm.dob[s][j];
        a1 = make_float4(fmaf(mv.x, d, a1.x), fmaf(mv.y, d, a1.y), fmaf(mv.z, d, a1.z),
                         fmaf(mv.w, d, a1.w));
      }
#pragma unroll 4
      for (int k = 0; k < kDim; ++k) {
        const float4 kv = *reinterpret_cast<const float4*>(&sm.kdt[k][4 * tb]);
        const float d = sm.ds[j][k];
        a2 = make_float4(fmaf(kv.x, d, a2.x), fmaf(kv.y, d, a2.y), fmaf(kv.z, d, a2.z),
                         fmaf(kv.w, d, a2.w));
      }
      sm.du[4 * tb][j] = fmaf(a.s.scale, a1.x, a2.x);
      sm.du[4 * tb + 1][j] = fmaf(a.s.scale, a1.y, a2.y);
      sm.du[4 * tb + 2][j] = fmaf(a.s.scale, a1.z, a2.z);
      sm.du[4 * tb + 3][j] = fmaf(a.s.scale, a1.w, a2.w);
    }
    __syncthreads();

    // dS0[j][k] = dS[j][k] Gam_C[k] + scale sum_t dO[t][j] QGam[t][k] + sum_t dU[t][j] (-W)[t][k]
    // for key k and rows j = j0 .. j0 + kPer - 1: the two record values of a token serve all
    // rows, whose dO and dU values come as float4 broadcasts.
    constexpr int kPer = Tr::kRowsPerThread;
    const int k = tid % kDim, j0 = (tid / kDim) * kPer;
    float x[kPer], y[kPer];
#pragma unroll
    for (int i = 0; i < kPer; ++i) x[i] = y[i] = 0.f;
#pragma unroll 2
    for (int t = 0; t < kChunk; ++t) {
      const float q = sm.qg[t][k], w = sm.nw[t][k];
#pragma unroll
      for (int i = 0; i < kPer; i += 4) {
        const float4 d = *reinterpret_cast<const float4*>(&sm.dob[t][j0 + i]);
        const float4 u = *reinterpret_cast<const float4*>(&sm.du[t][j0 + i]);
        x[i] = fmaf(d.x, q, x[i]);
        x[i + 1] = fmaf(d.y, q, x[i + 1]);
        x[i + 2] = fmaf(d.z, q, x[i + 2]);
        x[i + 3] = fmaf(d.w, q, x[i + 3]);
        y[i] = fmaf(u.x, w, y[i]);
        y[i + 1] = fmaf(u.y, w, y[i + 1]);
        y[i + 2] = fmaf(u.z, w, y[i + 2]);
        y[i + 3] = fmaf(u.w, w, y[i + 3]);
      }
    }
    float nv[kPer];
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      nv[i] = sm.ds[j0 + i][k] * sm.gc[k] + fmaf(a.s.scale, x[i], y[i]);
    }
    __syncthreads();  // every thread has read dS, dO, dU and the record of chunk c
#pragma unroll
    for (int i = 0; i < kPer; ++i) sm.ds[j0 + i][k] = nv[i];
    __syncthreads();
  }
  // dS0 of the first chunk (dfinal_state itself for an empty document).
  for (int e = tid; e < Tr::kRows * kDim; e += Tr::kThreads) {
    a.dinitial_state[state_off + e] = sm.ds[e / kDim][e % kDim];
  }
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
  // S0 / dS1 key tiles staged for U and dU; row stride 20 floats: 8 consecutive rows' 16-byte
  // reads fall in distinct banks.
  static constexpr int kTile = 16;
  static constexpr int kStageLd = kTile + 4;
};

struct GradSmem {
  float G[kChunk][kDim];       // cumulative log-gates (bitwise as the forward's preparation)
  uint16_t k[kChunk][kDim];    // raw keys (0 for padding): kh = k rk
  uint16_t q[kChunk][kDim];    // raw queries
  uint16_t d_o[kChunk][kDim];  // raw dO
  union {
    float u[kChunk][kDim];                       // U
    float stage[2][kDim][GradTraits::kStageLd];  // S0, dS1 key tiles (before U)
    struct {
      float p[kChunk][kChunk];   // P = A / beta (strictly lower)
      float da[kChunk][kChunk];  // dA (strictly lower)
    } pa;
  } r1;
  float bufw[kChunk][kDim];  // -W, then dW, then dKb (in place), then X, then dgl
  float bufu[kChunk][kDim];  // Kdec^T [128][64], then dU, then dVb, then Y's exclusive cumsum
  float dm[kChunk][kChunk];  // M, then dM (lower incl. the diagonal)
  float rk[kChunk], rq[kChunk], bt[kChunk];
  float z[kDim];            // Gam_C[k] sum_v dS1[v][k] S0[v][k]
  float red[2][4][kChunk];  // per-warp partial dot products qh . dqh, kh . dkh
  float part[2][GradTraits::kTq][kDim];
};
static_assert(sizeof(GradSmem) + 1024 <= 227 * 1024, "one CTA per SM");

__device__ __forceinline__ float KhAt(const GradSmem& sm, int t, int k) {
  return Bf16(sm.k[t][k]) * sm.rk[t];
}
__device__ __forceinline__ float QhAt(const GradSmem& sm, int t, int k) {
  return Bf16(sm.q[t][k]) * sm.rq[t];
}

__global__ void __launch_bounds__(GradTraits::kThreads, 1)
    KdaChunkGradKernel(const __grid_constant__ ChunkBwdArgs a) {
  using Tr = GradTraits;
  constexpr int kJ = Tr::kPerThread;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  GradSmem& sm = *reinterpret_cast<GradSmem*>(smem_raw);
  const int64_t slot = blockIdx.x;
  const int64_t h = blockIdx.y;
  const int64_t H = a.s.H;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int kc = tid % kDim, tq = tid / kDim;
  float* part_out = a.partials + (slot * H + h) * kPartials;

  int64_t bos, eos, chunk;
  const bool gap = !LocateChunkSlot(a.s, slot, &bos, &eos, &chunk);
  if (gap) {  // the reduce sums every slot: a gap contributes zeros
    for (int e = tid; e < kPartials; e += Tr::kThreads) part_out[e] = 0.f;
    return;
  }
  const int64_t t0 = bos + chunk * kChunk;
  const int len = static_cast<int>(min(int64_t{kChunk}, eos - t0));
  const Rec rec = RecordAt(a.records, slot, H, h);
  const float* s0 = a.s0 + (slot * H + h) * kDimSq;
  const float* ds1 = a.ds1 + (slot * H + h) * kDimSq;
  const float exp_a = expf(a.A_log[h]);
  const float scale = a.s.scale;

  // Per token (warp per token, lane owns k = 4 lane .. 4 lane + 3): exactly the forward
  // preparation's norms, beta and log-gates, so G matches its record bit for bit.
  {
    const float4 dtb = reinterpret_cast<const float4*>(a.dt_bias + h * kDim)[lane];
    const float db[4] = {dtb.x, dtb.y, dtb.z, dtb.w};
#pragma unroll 1
    for (int t = warp; t < kChunk; t += Tr::kWarps) {
      float gl[4] = {0.f, 0.f, 0.f, 0.f};
      uint2 kraw = make_uint2(0u, 0u), qraw = make_uint2(0u, 0u), oraw = make_uint2(0u, 0u);
      if (t < len) {
        const RawToken r = LoadToken(a.q, a.k, a.g, a.beta, t0 + t, H, h);
        kraw = r.k;
        qraw = r.q;
        oraw = *reinterpret_cast<const uint2*>(a.d_o + ((t0 + t) * H + h) * kDim + 4 * lane);
        const float qf[4] = {Bf16(r.q.x & 0xffff), Bf16(r.q.x >> 16), Bf16(r.q.y & 0xffff),
                             Bf16(r.q.y >> 16)};
        const float kf[4] = {Bf16(r.k.x & 0xffff), Bf16(r.k.x >> 16), Bf16(r.k.y & 0xffff),
                             Bf16(r.k.y >> 16)};
        const float gf[4] = {Bf16(r.g.x & 0xffff), Bf16(r.g.x >> 16), Bf16(r.g.y & 0xffff),
                             Bf16(r.g.y >> 16)};
        float sq = 0.f, sk = 0.f;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          sq = fmaf(qf[j], qf[j], sq);
          sk = fmaf(kf[j], kf[j], sk);
          gl[j] = a.s.lower_bound * SigmoidF(exp_a * (gf[j] + db[j]));
        }
        sq = WarpSum(sq);
        sk = WarpSum(sk);
        if (lane == 0) {
          sm.rq[t] = 1.0f / sqrtf(sq + 1e-6f);
          sm.rk[t] = 1.0f / sqrtf(sk + 1e-6f);
          sm.bt[t] = SigmoidF(r.beta);
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
  // Record operands to FP32 shared memory, each with the token of the output row first so the
  // products below read float4 runs along their inner index: -W [t][k], Kdec [t][k] (from
  // Kdec^T), M^T [t][s].
  for (int e = 8 * tid; e < kChunk * kDim; e += 8 * Tr::kThreads) {
    StageJoined8(&sm.bufw[0][0] + e, rec.negw + e, kRowMatLo);
  }
  for (int e = tid; e < kDim * kChunk / 8; e += Tr::kThreads) {
    const int k = e % kDim, tb = e / kDim;
    StageJoinedT8(&sm.bufu[8 * tb][k], kDim, rec.kdt + k * kChunk + 8 * tb, kRowMatLo);
  }
  for (int e = tid; e < kChunk * kChunk / 8; e += Tr::kThreads) {
    const int s = e % kChunk, tb = e / kChunk;
    StageJoinedT8(&sm.dm[8 * tb][s], kChunk, rec.m + s * kChunk + 8 * tb, kMLo);
  }
  __syncthreads();
  if (tid < kDim) {
    float acc = 0.f;
#pragma unroll 8
    for (int t = 0; t < kChunk; ++t) {
      acc += sm.G[t][tid];
      sm.G[t][tid] = acc;
    }
  }

  // U[t][v] = Uv[t][v] + sum_k (-W)[t][k] S0[v][k], and dU[t][v] = scale sum_s M[s][t] dO[s][v] +
  // sum_k Kdec[t][k] dS1[v][k] (column v = kc).
  float du_keep[kJ];
  {
    float acc[kJ], a1[kJ], a2[kJ];
#pragma unroll
    for (int j = 0; j < kJ; ++j) {
      acc[j] = rec.uv[(tq + 4 * j) * kDim + kc];
      a1[j] = 0.f;
      a2[j] = 0.f;
    }
    // S0 and dS1 rows through shared memory in 16-key tiles, loaded coalesced once per CTA (a
    // row per thread straight from L2 re-read each 16-byte piece in four warps, ~1 MB per CTA).
#pragma unroll 1
    for (int k0 = 0; k0 < kDim; k0 += Tr::kTile) {
      constexpr int kPieces = kDim * Tr::kTile / 4;
      for (int e = tid; e < 2 * kPieces; e += Tr::kThreads) {
        const int which = e / kPieces, r = (e % kPieces) / 4, c = 4 * (e % 4);
        const float* src = (which == 0 ? s0 : ds1) + r * kDim + k0 + c;
        *reinterpret_cast<float4*>(&sm.r1.stage[which][r][c]) =
            *reinterpret_cast<const float4*>(src);
      }
      __syncthreads();
#pragma unroll
      for (int k = 0; k < Tr::kTile; k += 4) {
        const float4 sv = *reinterpret_cast<const float4*>(&sm.r1.stage[0][kc][k]);
        const float4 dsv = *reinterpret_cast<const float4*>(&sm.r1.stage[1][kc][k]);
#pragma unroll
        for (int j = 0; j < kJ; ++j) {
          const float4 w = *reinterpret_cast<const float4*>(&sm.bufw[tq + 4 * j][k0 + k]);
          const float4 kd = *reinterpret_cast<const float4*>(&sm.bufu[tq + 4 * j][k0 + k]);
          acc[j] = Dot4(w, sv, acc[j]);
          a2[j] = Dot4(kd, dsv, a2[j]);
        }
      }
      __syncthreads();  // the tile is consumed (the last one before U takes its space)
    }
#pragma unroll 1
    for (int s = 0; s < kChunk; s += 4) {
      const float4 d = make_float4(Bf16(sm.d_o[s][kc]), Bf16(sm.d_o[s + 1][kc]),
                                   Bf16(sm.d_o[s + 2][kc]), Bf16(sm.d_o[s + 3][kc]));
#pragma unroll
      for (int j = 0; j < kJ; ++j) {
        a1[j] = Dot4(*reinterpret_cast<const float4*>(&sm.dm[tq + 4 * j][s]), d, a1[j]);
      }
    }
#pragma unroll
    for (int j = 0; j < kJ; ++j) {
      sm.r1.u[tq + 4 * j][kc] = acc[j];
      du_keep[j] = fmaf(scale, a1[j], a2[j]);
    }
  }
  __syncthreads();  // -W, M and Kdec are consumed; U and the cumulative gates are complete
#pragma unroll
  for (int j = 0; j < kJ; ++j) sm.bufu[tq + 4 * j][kc] = du_keep[j];
  if (tid < kDim) {
    float acc = 0.f;
    for (int v = 0; v < kDim; ++v) acc = fmaf(ds1[v * kDim + tid], s0[v * kDim + tid], acc);
    sm.z[tid] = expf(sm.G[kChunk - 1][tid]) * acc;
  }
  __syncthreads();

  // Per-token accumulators of thread (tq, kc): dqh, dkh, the log-gate terms X (reverse cumsum)
  // and Y = Kdec dKdec (exclusive forward cumsum).
  float dqh[kJ], dkh[kJ], X[kJ], Y[kJ];
  {
    // d(Q Gam) = scale dO S0 and dW = -dU S0 (column k = kc).
    float a1[kJ], a2[kJ];
#pragma unroll
    for (int j = 0; j < kJ; ++j) a1[j] = a2[j] = 0.f;
#pragma unroll 1
    for (int v = 0; v < kDim; v += 4) {
      const float4 sv = make_float4(s0[v * kDim + kc], s0[(v + 1) * kDim + kc],
                                    s0[(v + 2) * kDim + kc], s0[(v + 3) * kDim + kc]);
#pragma unroll
      for (int j = 0; j < kJ; ++j) {
        a1[j] = Dot4(Bf16x4(&sm.d_o[tq + 4 * j][v]), sv, a1[j]);
        a2[j] = Dot4(*reinterpret_cast<const float4*>(&sm.bufu[tq + 4 * j][v]), sv, a2[j]);
      }
    }
#pragma unroll
    for (int j = 0; j < kJ; ++j) {
      const int t = tq + 4 * j;
      const float gam = expf(sm.G[t][kc]);
      const float dqg = scale * a1[j];
      dqh[j] = gam * dqg;
      X[j] = (QhAt(sm, t, kc) * gam) * dqg;  // Q Gam d(Q Gam): a factor exp(G)
      sm.bufw[t][kc] = -a2[j];               // dW (-W is dead)
    }
  }
  {
    // dKdec = U dS1 (column k = kc); Kdec = kh Gam_C / Gam.
    float a1[kJ];
#pragma unroll
    for (int j = 0; j < kJ; ++j) a1[j] = 0.f;
#pragma unroll 2
    for (int v = 0; v < kDim; ++v) {
      const float dsv = ds1[v * kDim + kc];
#pragma unroll
      for (int j = 0; j < kJ; ++j) a1[j] = fmaf(sm.r1.u[tq + 4 * j][v], dsv, a1[j]);
    }
#pragma unroll
    for (int j = 0; j < kJ; ++j) {
      const int t = tq + 4 * j;
      const float dec = expf(sm.G[kChunk - 1][kc] - sm.G[t][kc]);
      dkh[j] = dec * a1[j];
      Y[j] = (KhAt(sm, t, kc) * dec) * a1[j];
    }
  }
  __syncthreads();  // dW complete; M (in dm) is consumed

  // dM[t][s] = scale sum_v dO[t][v] U[s][v] for s <= t. Lanes take consecutive s; the 4-column
  // block index rotates with s so their 16-byte loads hit distinct banks. Fixed order per
  // element: deterministic.
#pragma unroll 1
  for (int e = tid; e < kChunk * kChunk; e += Tr::kThreads) {
    const int t = e / kChunk, s = e % kChunk;
    float acc = 0.f;
    if (s <= t) {
#pragma unroll 1
      for (int vb = 0; vb < kDim / 4; ++vb) {
        const int v = 4 * ((vb + s) % (kDim / 4));
        acc = Dot4(Bf16x4(&sm.d_o[t][v]), *reinterpret_cast<const float4*>(&sm.r1.u[s][v]), acc);
      }
    }
    sm.dm[t][s] = scale * acc;
  }
  __syncthreads();  // U is dead: its space takes P and dA

  // P[t][i] = sum_k kh_t kh_i exp(G_t - G_i), i < t (A = diag(beta) P); exp <= 1 for i < t.
#pragma unroll 1
  for (int e = tid; e < kChunk * kChunk; e += Tr::kThreads) {
    const int t = e / kChunk, i = e % kChunk;
    float acc = 0.f;
    if (i < t) {
#pragma unroll 1
      for (int kb = 0; kb < kDim / 4; ++kb) {
        const int k = 4 * ((kb + i) % (kDim / 4));
        const float4 kt = Bf16x4(&sm.k[t][k]), ki = Bf16x4(&sm.k[i][k]);
        const float4 gt = *reinterpret_cast<const float4*>(&sm.G[t][k]);
        const float4 gi = *reinterpret_cast<const float4*>(&sm.G[i][k]);
        acc = fmaf(kt.x * ki.x, expf(gt.x - gi.x), acc);
        acc = fmaf(kt.y * ki.y, expf(gt.y - gi.y), acc);
        acc = fmaf(kt.z * ki.z, expf(gt.z - gi.z), acc);
        acc = fmaf(kt.w * ki.w, expf(gt.w - gi.w), acc);
      }
      acc *= sm.rk[t] * sm.rk[i];
    }
    sm.r1.pa.p[t][i] = acc;
  }
  __syncthreads();

  // [dKb | dVb] = Tinv^T [dW | dU]: solve (I + A)^T x = y in place, one column per thread,
  // x_t = y_t - sum_{s > t} A[s][t] x_s from the last token up.
  if (tid < 2 * kDim) {
    float* y = tid < kDim ? &sm.bufw[0][tid] : &sm.bufu[0][tid - kDim];
#pragma unroll 1
    for (int t = kChunk - 1; t >= 0; --t) {
      float x = y[t * kDim];
      for (int s = t + 1; s < kChunk; ++s) x = fmaf(-(sm.bt[s] * sm.r1.pa.p[s][t]), y[s * kDim], x);
      y[t * kDim] = x;
    }
  }
  __syncthreads();

  // dA[t][i] = sum_k dKb[t][k] (-W)[i][k] - sum_v dVb[t][v] Uv[i][v], i < t (zero elsewhere: the
  // dbeta sums read whole rows). Warp per row i of the record operands, loaded once and coalesced
  // (lane owns k = 4 lane .. 4 lane + 3), a fixed-order warp sum per element: the record stays in
  // L2, and reading it per element (a row per lane) cost ~6 MB of L2 sectors per CTA.
#pragma unroll 1
  for (int i = warp; i < kChunk; i += Tr::kWarps) {
    const float4 hi = Bf16x4(rec.negw + i * kDim + 4 * lane);
    const float4 lo = Bf16x4(rec.negw + kRowMatLo + i * kDim + 4 * lane);
    const float4 nw = make_float4(hi.x + lo.x, hi.y + lo.y, hi.z + lo.z, hi.w + lo.w);
    const float4 uv = *reinterpret_cast<const float4*>(rec.uv + i * kDim + 4 * lane);
    for (int t = lane; t <= i; t += 32) sm.r1.pa.da[t][i] = 0.f;
#pragma unroll 2
    for (int t = i + 1; t < kChunk; ++t) {
      const float x = Dot4(*reinterpret_cast<const float4*>(&sm.bufw[t][4 * lane]), nw, 0.f);
      const float y = Dot4(*reinterpret_cast<const float4*>(&sm.bufu[t][4 * lane]), uv, 0.f);
      const float d = WarpSum(x - y);
      if (lane == 0) sm.r1.pa.da[t][i] = d;
    }
  }
  __syncthreads();

  // Per token from dKb, dVb: dkh += beta Gam dKb, X += Kb dKb (a factor exp(G)), dv = beta dVb.
#pragma unroll
  for (int j = 0; j < kJ; ++j) {
    const int t = tq + 4 * j;
    const float gam = expf(sm.G[t][kc]);
    const float dkb = sm.bufw[t][kc];
    dkh[j] = fmaf(sm.bt[t] * gam, dkb, dkh[j]);
    X[j] = fmaf(sm.bt[t] * (KhAt(sm, t, kc) * gam), dkb, X[j]);
    if (t < len) a.dv[((t0 + t) * H + h) * kDim + kc] = ToBf16(sm.bt[t] * sm.bufu[t][kc]);
  }
  // dbeta_t = beta (1 - beta) (sum_v dVb V + sum_k dKb kh Gam + sum_i dA P), warp per token.
#pragma unroll 1
  for (int t = warp; t < len; t += Tr::kWarps) {
    const int64_t base = ((t0 + t) * H + h) * kDim;
    float s = 0.f;
    for (int c = lane; c < kDim; c += 32) {
      s = fmaf(sm.bufu[t][c], Bf16(a.v[base + c]), s);
      s = fmaf(sm.bufw[t][c], KhAt(sm, t, c) * expf(sm.G[t][c]), s);
    }
    for (int i = lane; i < kChunk; i += 32) s = fmaf(sm.r1.pa.da[t][i], sm.r1.pa.p[t][i], s);
    s = WarpSum(s);
    if (lane == 0) a.dbeta[(t0 + t) * H + h] = ToBf16(sm.bt[t] * (1.f - sm.bt[t]) * s);
  }

  // The decayed pair terms of A and M (strictly off the diagonal) and M's diagonal elementwise.
  // Row side (i < t): rowA = sum dA[t][i] kh_i e, rowM = sum dM[t][i] kh_i e; column side (i > t):
  // col = sum (beta_i dA[i][t] kh_i + dM[i][t] qh_i) e; e = exp(G_later - G_earlier) <= 1.
  // One walk over i per group of kGroup tokens: kh_i, qh_i, G_i and beta_i are read once for the
  // group (their loads, not the exponentials, dominated a walk per token).
  constexpr int kGroup = 8;
#pragma unroll
  for (int j0 = 0; j0 < kJ; j0 += kGroup) {
    float gt[kGroup], rowA[kGroup], rowM[kGroup], col[kGroup];
#pragma unroll
    for (int jj = 0; jj < kGroup; ++jj) {
      gt[jj] = sm.G[tq + 4 * (j0 + jj)][kc];
      rowA[jj] = rowM[jj] = col[jj] = 0.f;
    }
#pragma unroll 1
    for (int i = 0; i < kChunk; ++i) {
      const float khi = KhAt(sm, i, kc), qhi = QhAt(sm, i, kc), gi = sm.G[i][kc];
      const float bti = sm.bt[i];
#pragma unroll
      for (int jj = 0; jj < kGroup; ++jj) {
        const int t = tq + 4 * (j0 + jj);  // warp-uniform: the branches do not diverge
        if (i < t) {
          const float f = khi * expf(gt[jj] - gi);
          rowA[jj] = fmaf(sm.r1.pa.da[t][i], f, rowA[jj]);
          rowM[jj] = fmaf(sm.dm[t][i], f, rowM[jj]);
        } else if (i > t) {
          const float e = expf(gi - gt[jj]);
          col[jj] = fmaf(bti * sm.r1.pa.da[i][t], khi * e, col[jj]);
          col[jj] = fmaf(sm.dm[i][t], qhi * e, col[jj]);
        }
      }
    }
#pragma unroll
    for (int jj = 0; jj < kGroup; ++jj) {
      const int j = j0 + jj, t = tq + 4 * j;
      const float kht = KhAt(sm, t, kc), qht = QhAt(sm, t, kc), btt = sm.bt[t];
      const float dmd = sm.dm[t][t];
      dkh[j] += btt * rowA[jj] + col[jj] + dmd * qht;
      dqh[j] += rowM[jj] + dmd * kht;
      X[j] += kht * (btt * rowA[jj]) + qht * rowM[jj] - kht * col[jj];
    }
  }
  __syncthreads();  // dKb, dVb are dead: their space takes X and Y

#pragma unroll
  for (int j = 0; j < kJ; ++j) {
    sm.bufw[tq + 4 * j][kc] = X[j];
    sm.bufu[tq + 4 * j][kc] = Y[j];
  }
  __syncthreads();
  // dgl_t = sum_{s >= t} X_s + sum_{s < t} Y_s + z, per column, in a fixed order.
  if (tid < kDim) {
    float ex = 0.f;
    for (int t = 0; t < kChunk; ++t) {
      const float y = sm.bufu[t][tid];
      sm.bufu[t][tid] = ex;
      ex += y;
    }
    float rev = 0.f;
    for (int t = kChunk - 1; t >= 0; --t) {
      rev += sm.bufw[t][tid];
      sm.bufw[t][tid] = (rev + sm.bufu[t][tid]) + sm.z[tid];
    }
  }
  // qh . dqh and kh . dkh per token: warp sums over its 32 columns, 4 warps per token group.
#pragma unroll
  for (int j = 0; j < kJ; ++j) {
    const int t = tq + 4 * j;
    const float pq = WarpSum(QhAt(sm, t, kc) * dqh[j]);
    const float pk = WarpSum(KhAt(sm, t, kc) * dkh[j]);
    if (lane == 0) {
      sm.red[0][warp & 3][t] = pq;
      sm.red[1][warp & 3][t] = pk;
    }
  }
  __syncthreads();

  float pdt = 0.f, pal = 0.f;
  const float dtb = a.dt_bias[h * kDim + kc];
#pragma unroll
  for (int j = 0; j < kJ; ++j) {
    const int t = tq + 4 * j;
    if (t < len) {
      const int64_t base = ((t0 + t) * H + h) * kDim + kc;
      const float sq = ((sm.red[0][0][t] + sm.red[0][1][t]) + sm.red[0][2][t]) + sm.red[0][3][t];
      const float sk = ((sm.red[1][0][t] + sm.red[1][1][t]) + sm.red[1][2][t]) + sm.red[1][3][t];
      a.dq[base] = ToBf16(sm.rq[t] * (dqh[j] - QhAt(sm, t, kc) * sq));
      a.dk[base] = ToBf16(sm.rk[t] * (dkh[j] - KhAt(sm, t, kc) * sk));
      const float x = exp_a * (Bf16(a.g[base]) + dtb);
      const float sg = SigmoidF(x);
      const float dx = sm.bufw[t][kc] * a.s.lower_bound * sg * (1.f - sg);
      a.dg[base] = ToBf16(exp_a * dx);
      pdt = fmaf(exp_a, dx, pdt);
      pal = fmaf(x, dx, pal);
    }
  }
  sm.part[0][tq][kc] = pdt;
  sm.part[1][tq][kc] = pal;
  __syncthreads();
  if (tid < kPartials) {
    const int w = tid / kDim, k = tid % kDim;
    part_out[tid] = ((sm.part[w][0][k] + sm.part[w][1][k]) + sm.part[w][2][k]) + sm.part[w][3][k];
  }
}

// ---- kernel 4: the parameter reduce ------------------------------------------------------------

// ddt_bias[h][k] = sum over slots of the ddt_bias partials; dA_log[h] = sum over channels of the
// per-channel sums: FP64, fixed order, one CTA per head.
__global__ void __launch_bounds__(kDim)
    KdaChunkParamReduceKernel(const float* __restrict__ partials, int64_t slots, int64_t H,
                              float* __restrict__ dA_log, float* __restrict__ ddt_bias) {
  __shared__ double al[kDim];
  const int64_t h = blockIdx.x;
  const int k = threadIdx.x;
  double sdt = 0.0, sal = 0.0;
  for (int64_t s = 0; s < slots; ++s) {
    const float* p = partials + (s * H + h) * kPartials;
    sdt += static_cast<double>(p[k]);
    sal += static_cast<double>(p[kDim + k]);
  }
  ddt_bias[h * kDim + k] = static_cast<float>(sdt);
  al[k] = sal;
  __syncthreads();
  if (k == 0) {
    double total = 0.0;
    for (int i = 0; i < kDim; ++i) total += al[i];
    dA_log[h] = static_cast<float>(total);
  }
}

template <int kRows>
Status LaunchChainAs(const ChunkBwdArgs& b, cudaStream_t stream) {
  using Tr = ChainTraits<kRows>;
  static std::atomic<uint64_t> done{0};
  constexpr int kSmem = static_cast<int>(sizeof(ChainSmem<kRows>));
  Status attr = AllowSmem(KdaChunkDstateKernel<kRows>, kSmem, &done, "the reverse chain");
  if (!attr.ok()) return attr;
  const dim3 grid(Tr::kSlices, static_cast<unsigned>(b.s.H), static_cast<unsigned>(b.s.N));
  KdaChunkDstateKernel<kRows><<<grid, Tr::kThreads, kSmem, stream>>>(b);
  return CheckLaunch("the chunked backward's reverse chain");
}

// Every slice stages the whole record per step, so wider slices cut that traffic but serialise
// more work per CTA: 16-row slices while they fit one wave of one CTA per SM, 32-row slices up to
// two, 64-row slices beyond (the forward's state-pass rule; first device run: 16-row slices in
// two waves at H = 32 cost 24 us per step against 12 in one).
Status LaunchChain(const ChunkBwdArgs& b, cudaStream_t stream) {
  int dev = 0, sms = 0;
  cudaError_t err = cudaGetDevice(&dev);
  if (err == cudaSuccess) err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  if (err != cudaSuccess) {
    return Internal(std::string("kda: device attribute: ") + cudaGetErrorString(err));
  }
  const int64_t chains = b.s.N * b.s.H;
  if (chains * ChainTraits<16>::kSlices <= sms) return LaunchChainAs<16>(b, stream);
  if (chains * ChainTraits<32>::kSlices <= 2 * sms) return LaunchChainAs<32>(b, stream);
  return LaunchChainAs<64>(b, stream);
}

}  // namespace

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
  b.partials = reinterpret_cast<float*>(ws + layout.partials);
  b.dq = p.dq;
  b.dk = p.dk;
  b.dv = p.dv;
  b.dg = p.dg;
  b.dbeta = p.dbeta;
  b.dinitial_state = p.dinitial_state;

  if (f.s.N > 0) {
    // 1. Records and chunk-start states: the chunked forward in checkpoint mode (no o).
    f.q = p.q;
    f.k = p.k;
    f.v = p.v;
    f.g = p.g;
    f.beta = p.beta;
    f.A_log = p.A_log;
    f.dt_bias = p.dt_bias;
    f.initial_state = p.initial_state;
    f.o = nullptr;
    f.final_state = nullptr;
    f.checkpoints = reinterpret_cast<float*>(ws + layout.s0);
    f.residual = nullptr;
    Status fwd = LaunchChunkedForward(f, ws + layout.records, layout.s0 - layout.records, stream);
    if (!fwd.ok()) return fwd;
    // 2. The reverse chain.
    Status chain = LaunchChain(b, stream);
    if (!chain.ok()) return chain;
    // 3. Every chunk's gradients and partials (gap slots write zero partials).
    constexpr int kSmem = static_cast<int>(sizeof(GradSmem));
    static std::atomic<uint64_t> done{0};
    Status attr = AllowSmem(KdaChunkGradKernel, kSmem, &done, "the chunked backward");
    if (!attr.ok()) return attr;
    const dim3 grad_grid(static_cast<unsigned>(slots), static_cast<unsigned>(f.s.H));
    KdaChunkGradKernel<<<grad_grid, GradTraits::kThreads, kSmem, stream>>>(b);
    Status grad = CheckLaunch("the chunked backward's per-chunk pass");
    if (!grad.ok()) return grad;
  }
  // 4. dA_log and ddt_bias (zeros without documents).
  KdaChunkParamReduceKernel<<<static_cast<unsigned>(f.s.H), kDim, 0, stream>>>(
      b.partials, f.s.N > 0 ? slots : 0, f.s.H, p.dA_log, p.ddt_bias);
  return CheckLaunch("the chunked backward's parameter reduce");
}

}  // namespace kda_cuda
}  // namespace cakegrad::kernels
