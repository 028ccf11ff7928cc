// KDA forward, chunked: the WY / UT form of the delta rule over chunks of 64 tokens, so that only
// T / 64 state steps per (document, head) are sequential, and those are tensor-core products.
//
// Per chunk (start state S0, V x K; G_t = cumulative log-gates from the chunk start, per k;
// Gam_t = exp(G_t); K, Q the L2-normalised keys and queries; beta the sigmoid betas):
//   A    = strict_tril( beta_t (k_t Gam_t).(k_i / Gam_i) )          M = tril( (q_t Gam_t).(k_i / Gam_i) )
//   W    = (I + A)^-1 (beta K Gam)                                  Uv = (I + A)^-1 (beta V)
//   U    = Uv - W S0^T                                              S1 = S0 Gam_C + U^T (K Gam_C / Gam)
//   o    = bf16( scale ((Q Gam) S0^T + M U) )
// (bench/kda_chunked_study.py checks this form against the sequential recurrence to 1e-15.)
//
// Two launches:
// 1. KdaChunkPrepKernel, one CTA per (chunk, head), all chunks in parallel, FP32 on CUDA cores:
//    gates and their cumulative sums, A and M (the decay factors taken per 16-token row sub-chunk J
//    relative to G at J's first token, so every factor lies in [e^-75, e^75] for lower_bound >= -5),
//    W and Uv by forward substitution (one thread per column of [K | V]), K Gam_C / Gam and Q Gam.
//    It writes one record per chunk into the workspace, the tensor-core operands already split
//    into BF16 pairs (x = hi + lo).
// 2. KdaChunkStateKernel, one CTA per (kRows state rows, head, document), walking the document's
//    chunks in order with its state slice in registers (FP32). U, S1 and o are separable over state
//    rows, so 4 or 8 CTAs share a (document, head). Every product is BF16x3 on mma.sync
//    (hi*hi + hi*lo + lo*hi, FP32 accumulation): SPEC's final_state limit (1e-4) rules out
//    single-pass TF32 or BF16 on the state path (bench/results/kda_h200.md, CPU study).
// Chunks never straddle a document; a document's last chunk is padded with zero tokens (beta 0,
// gate 0), which leave the state unchanged. No atomics on outputs: bitwise reproducible.
#include <atomic>
#include <cuda_bf16.h>

#include "kda_chunked_forward.cuh"

namespace cakegrad::kernels {
namespace kda_cuda {
namespace {

constexpr int kChunk = static_cast<int>(kda_layout::kChunk);

struct PrepTraits {
  static constexpr int kSub = 16;  // decay sub-chunk: factors stay in [e^-75, e^75]
  static constexpr int kSubs = kChunk / kSub;
  static constexpr int kThreads = 256;
  static constexpr int kWarps = kThreads / 32;
  static constexpr int kGStride = kDim + 1;    // scalar columns walked by rows: no conflicts
  static constexpr int kVecStride = kDim + 4;  // float4 rows: 8 rows hit distinct bank groups
  static constexpr int kAStride = kChunk + 4;
  static constexpr int kKdTStride = kChunk + 2;  // Kdec^T staged in the kc buffer
  static_assert(kThreads == 2 * kDim, "the solve: one thread per column of [K | V]");
  static_assert(kThreads == kSub * kSub, "the products: thread = (row, column group)");
  static_assert(kChunk % kWarps == 0, "whole tokens per warp in the preparation");
  static_assert(kDim * kKdTStride <= kChunk * kVecStride, "Kdec^T staging fits the kc buffer");
};

struct PrepSmem {
  float G[kChunk][PrepTraits::kGStride];      // log-gates, then their cumulative sums
  float kc[kChunk][PrepTraits::kVecStride];   // k_i exp(r_J - G_i); later Kdec^T staging
  float kr[PrepTraits::kSub][PrepTraits::kVecStride];  // k_t exp(G_t - r_J), t in J
  float qr[PrepTraits::kSub][PrepTraits::kVecStride];  // q_t exp(G_t - r_J), t in J
  float A[kChunk][PrepTraits::kAStride];      // strictly lower; zero on and right of the diagonal
  float rk[kChunk], rq[kChunk], bt[kChunk];   // 1 / |k|, 1 / |q|, sigmoid(beta); 0 for padding
};

template <int kRows>
struct StateTraits {
  static constexpr int kVTiles = kRows / 16;    // 16-row tiles of the CTA's state slice
  static constexpr int kWarps = 4 * kVTiles;    // warp = (token tile | K quarter, state tile)
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kSlices = kDim / kRows;  // CTAs per (document, head)
  static constexpr int kKStride = kDim + 8;     // BF16 rows over K: fragment loads conflict-free
  static constexpr int kTStride = kChunk + 8;   // BF16 rows over tokens: likewise
  static constexpr int kUvStride = kRows + 4;
  static_assert(kRows % 16 == 0 && kDim % kRows == 0, "16-row tiles, whole slices");
  static_assert(kChunk == 4 * 16 && kDim == 4 * 32, "4 token tiles of 16, 4 K quarters of 32");
};

template <int kRows>
struct StateSmem {
  using Tr = StateTraits<kRows>;
  uint16_t w[2][kChunk][Tr::kKStride];   // -W, hi and lo
  uint16_t qg[2][kChunk][Tr::kKStride];  // Q Gam
  uint16_t kd[2][kDim][Tr::kTStride];    // (K Gam_C / Gam)^T
  uint16_t m[2][kChunk][Tr::kTStride];   // M
  float uv[kChunk][Tr::kUvStride];       // Uv, this CTA's columns
  float gc[kDim];                        // Gam_C
  uint16_t s[2][kRows][Tr::kKStride];    // S0 slice, hi and lo
  uint16_t u[2][kRows][Tr::kTStride];    // U^T slice, hi and lo
};

// ---- small helpers -----------------------------------------------------------------------------

__device__ __forceinline__ float Dot4(float4 x, float4 y, float acc) {
  acc = fmaf(x.x, y.x, acc);
  acc = fmaf(x.y, y.y, acc);
  acc = fmaf(x.z, y.z, acc);
  return fmaf(x.w, y.w, acc);
}

// x = hi + lo with hi = bf16(x), lo = bf16(x - hi), for one value.
__device__ __forceinline__ void Split(float x, uint16_t* hi, uint16_t* lo) {
  const __nv_bfloat16 h = __float2bfloat16_rn(x);
  *hi = __bfloat16_as_ushort(h);
  *lo = ToBf16(x - __bfloat162float(h));
}

// The same for a pair, packed as an mma operand register (x0 in the low half).
__device__ __forceinline__ void SplitPair(float x0, float x1, uint32_t* hi, uint32_t* lo) {
  uint16_t h0, l0, h1, l1;
  Split(x0, &h0, &l0);
  Split(x1, &h1, &l1);
  *hi = uint32_t(h0) | (uint32_t(h1) << 16);
  *lo = uint32_t(l0) | (uint32_t(l1) << 16);
}

__device__ __forceinline__ void CpAsync16(void* smem, const void* gmem) {
  const uint32_t s = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem));
}
__device__ __forceinline__ void CpAsyncCommit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int kPending>
__device__ __forceinline__ void CpAsyncWait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
}

// D += A B, m16n8k16, BF16 operands, FP32 accumulators.
__device__ __forceinline__ void Mma(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// A fragment (16 x 16) of a row-major BF16 matrix with row stride kStride, at (row0, col0).
template <int kStride>
__device__ __forceinline__ void LoadA(const uint16_t* base, int row0, int col0, uint32_t (&a)[4]) {
  const int lane = threadIdx.x & 31;
  const uint16_t* p = base + (row0 + (lane >> 2)) * kStride + col0 + 2 * (lane & 3);
  a[0] = *reinterpret_cast<const uint32_t*>(p);
  a[1] = *reinterpret_cast<const uint32_t*>(p + 8 * kStride);
  a[2] = *reinterpret_cast<const uint32_t*>(p + 8);
  a[3] = *reinterpret_cast<const uint32_t*>(p + 8 * kStride + 8);
}

// B fragment (16 x 8) of B = X^T, X row-major [n][k] BF16 with row stride kStride, at (n0, k0).
template <int kStride>
__device__ __forceinline__ void LoadB(const uint16_t* base, int n0, int k0, uint32_t (&b)[2]) {
  const int lane = threadIdx.x & 31;
  const uint16_t* p = base + (n0 + (lane >> 2)) * kStride + k0 + 2 * (lane & 3);
  b[0] = *reinterpret_cast<const uint32_t*>(p);
  b[1] = *reinterpret_cast<const uint32_t*>(p + 8);
}

// BF16x3 product: (acc, acc1, acc2) += (a_hi b_hi, a_hi b_lo, a_lo b_hi).
__device__ __forceinline__ void Mma3(float (&acc)[4], float (&acc1)[4], float (&acc2)[4],
                                     const uint32_t (&ahi)[4], const uint32_t (&alo)[4],
                                     const uint32_t (&bhi)[2], const uint32_t (&blo)[2]) {
  Mma(acc, ahi, bhi);
  Mma(acc1, ahi, blo);
  Mma(acc2, alo, bhi);
}

// Document n's first token, clamped as DocBounds clamps it.
__device__ __forceinline__ int64_t DocStart(const KdaShape& s, int64_t n) {
  if (s.cu_seqlens == nullptr) return n * s.T;
  const int64_t a = s.is_int64 ? static_cast<const int64_t*>(s.cu_seqlens)[n]
                               : static_cast<const int32_t*>(s.cu_seqlens)[n];
  return min(max(a, int64_t{0}), s.total_tokens);
}

// ---- kernel 1: chunk preparation ---------------------------------------------------------------

struct ChunkCtx {
  const FwdArgs* a;
  int64_t t0;  // first token of the chunk
  int64_t h;
  int len;  // valid tokens in the chunk
};

__device__ __forceinline__ int64_t TokenBase(const ChunkCtx& c, int t) {
  return ((c.t0 + t) * c.a->s.H + c.h) * kDim;
}

// A and M for the rows of sub-chunk J (columns 0 .. 16 J + 15), reference r_J = G[16 J].
template <int J>
__device__ __forceinline__ void SubChunkProducts(const ChunkCtx& c, PrepSmem& sm, uint16_t* m_hi,
                                                 uint16_t* m_lo) {
  using Tr = PrepTraits;
  constexpr int r0 = J * Tr::kSub;
  constexpr int cols = r0 + Tr::kSub;
  const int tid = threadIdx.x;
  for (int e = tid; e < cols * kDim; e += Tr::kThreads) {
    const int i = e / kDim, k = e % kDim;
    float x = 0.f;
    if (i < c.len) {
      x = Bf16(c.a->k[TokenBase(c, i) + k]) * sm.rk[i] * expf(sm.G[r0][k] - sm.G[i][k]);
    }
    sm.kc[i][k] = x;
  }
  for (int e = tid; e < Tr::kSub * kDim; e += Tr::kThreads) {
    const int r = e / kDim, k = e % kDim, t = r0 + r;
    float x = 0.f, y = 0.f;
    if (t < c.len) {
      const float f = expf(sm.G[t][k] - sm.G[r0][k]);
      x = Bf16(c.a->k[TokenBase(c, t) + k]) * sm.rk[t] * f;
      y = Bf16(c.a->q[TokenBase(c, t) + k]) * sm.rq[t] * f;
    }
    sm.kr[r][k] = x;
    sm.qr[r][k] = y;
  }
  __syncthreads();
  const int r = tid / Tr::kSub, cg = tid % Tr::kSub, t = r0 + r;
  float ak[J + 1], aq[J + 1];
#pragma unroll
  for (int m = 0; m <= J; ++m) ak[m] = aq[m] = 0.f;
#pragma unroll 4
  for (int k4 = 0; k4 < kDim / 4; ++k4) {
    const float4 x = *reinterpret_cast<const float4*>(&sm.kr[r][4 * k4]);
    const float4 y = *reinterpret_cast<const float4*>(&sm.qr[r][4 * k4]);
#pragma unroll
    for (int m = 0; m <= J; ++m) {
      const float4 z = *reinterpret_cast<const float4*>(&sm.kc[cg + Tr::kSub * m][4 * k4]);
      ak[m] = Dot4(x, z, ak[m]);
      aq[m] = Dot4(y, z, aq[m]);
    }
  }
#pragma unroll
  for (int m = 0; m < Tr::kSubs; ++m) {
    const int i = cg + Tr::kSub * m;
    float mv = 0.f;
    if (m <= J) {
      // Right of the diagonal the factors may overflow: those products are discarded, not scaled.
      sm.A[t][i] = i < t ? sm.bt[t] * ak[m <= J ? m : 0] : 0.f;
      mv = i <= t ? aq[m <= J ? m : 0] : 0.f;
    }
    Split(mv, &m_hi[t * kChunk + i], &m_lo[t * kChunk + i]);
  }
  __syncthreads();
}

__global__ void __launch_bounds__(PrepTraits::kThreads, 2)
    KdaChunkPrepKernel(const __grid_constant__ FwdArgs a, char* __restrict__ ws) {
  using Tr = PrepTraits;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  PrepSmem& sm = *reinterpret_cast<PrepSmem*>(smem_raw);
  const int64_t slot = blockIdx.x;
  const int64_t h = blockIdx.y;
  const int64_t H = a.s.H;

  // The slot's document: the last one whose first slot is <= slot (slots grow with documents).
  int64_t lo = 0, hi = a.s.N - 1;
  while (lo < hi) {
    const int64_t mid = (lo + hi + 1) / 2;
    if (DocStart(a.s, mid) / kChunk + mid <= slot) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  int64_t bos, eos;
  DocBounds(a.s, lo, &bos, &eos);
  const int64_t chunk = slot - (bos / kChunk + lo);
  if (chunk < 0 || chunk * kChunk >= eos - bos) return;  // a gap slot
  ChunkCtx c;
  c.a = &a;
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
  // Per token: norms, beta, log-gates (lane owns k = 4 lane .. 4 lane + 3).
  {
    const float exp_a = expf(a.A_log[h]);
    const float4 dtb = reinterpret_cast<const float4*>(a.dt_bias + h * kDim)[lane];
    const float db[4] = {dtb.x, dtb.y, dtb.z, dtb.w};
    for (int i = 0; i < kChunk / Tr::kWarps; ++i) {
      const int t = warp + Tr::kWarps * i;
      float gl[4] = {0.f, 0.f, 0.f, 0.f};
      if (t < c.len) {
        const RawToken r = LoadToken(a.q, a.k, a.g, a.beta, c.t0 + t, H, h);
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
    }
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
  __syncthreads();

  uint16_t* m_hi = mm;
  uint16_t* m_lo = mm + kChunk * kChunk;
  SubChunkProducts<0>(c, sm, m_hi, m_lo);
  SubChunkProducts<1>(c, sm, m_hi, m_lo);
  SubChunkProducts<2>(c, sm, m_hi, m_lo);
  SubChunkProducts<3>(c, sm, m_hi, m_lo);
  static_assert(Tr::kSubs == 4, "one call per sub-chunk above");

  // Q Gam (pairs along k), Gam_C, and Kdec = K Gam_C / Gam staged transposed in the kc buffer.
  {
    uint32_t* q_hi = reinterpret_cast<uint32_t*>(qg);
    uint32_t* q_lo = q_hi + kChunk * kDim / 2;
    for (int e = tid; e < kChunk * kDim / 2; e += Tr::kThreads) {
      const int t = e / (kDim / 2), k = 2 * (e % (kDim / 2));
      float x0 = 0.f, x1 = 0.f;
      if (t < c.len) {
        const int64_t base = TokenBase(c, t) + k;
        x0 = Bf16(a.q[base]) * sm.rq[t] * expf(sm.G[t][k]);
        x1 = Bf16(a.q[base + 1]) * sm.rq[t] * expf(sm.G[t][k + 1]);
      }
      SplitPair(x0, x1, &q_hi[e], &q_lo[e]);
    }
    float(*kd)[Tr::kKdTStride] = reinterpret_cast<float(*)[Tr::kKdTStride]>(&sm.kc[0][0]);
    for (int e = tid; e < kChunk * kDim; e += Tr::kThreads) {
      const int t = e / kDim, k = e % kDim;
      float x = 0.f;
      if (t < c.len) {
        x = Bf16(a.k[TokenBase(c, t) + k]) * sm.rk[t] * expf(sm.G[kChunk - 1][k] - sm.G[t][k]);
      }
      kd[k][t] = x;
    }
    if (tid < kDim) gamc[tid] = expf(sm.G[kChunk - 1][tid]);
    __syncthreads();
    uint32_t* kd_lo = kdt + kDim * kChunk / 2;
    for (int e = tid; e < kDim * kChunk / 2; e += Tr::kThreads) {
      const int k = e / (kChunk / 2), t = 2 * (e % (kChunk / 2));
      const float2 x = *reinterpret_cast<const float2*>(&kd[k][t]);
      SplitPair(x.x, x.y, &kdt[e], &kd_lo[e]);
    }
  }

  // W and Uv: forward substitution X_t = rhs_t - sum_{j<t} A[t][j] X_j, one column per thread.
  {
    const int col = tid;
    float x[kChunk];
#pragma unroll
    for (int t = 0; t < kChunk; ++t) x[t] = 0.f;
#pragma unroll
    for (int t = 0; t < kChunk; ++t) {
      float rhs = 0.f;
      if (t < c.len) {
        const int64_t base = TokenBase(c, t);
        rhs = col < kDim ? sm.bt[t] * (Bf16(a.k[base + col]) * sm.rk[t] * expf(sm.G[t][col]))
                         : sm.bt[t] * Bf16(a.v[base + col - kDim]);
      }
      float acc = 0.f;
#pragma unroll
      for (int j4 = 0; j4 < (t + 3) / 4; ++j4) {
        const float4 av = *reinterpret_cast<const float4*>(&sm.A[t][4 * j4]);
        acc = fmaf(av.x, x[4 * j4], acc);
        acc = fmaf(av.y, x[4 * j4 + 1], acc);
        acc = fmaf(av.z, x[4 * j4 + 2], acc);
        acc = fmaf(av.w, x[4 * j4 + 3], acc);
      }
      x[t] = rhs - acc;
    }
    if (col < kDim) {
#pragma unroll
      for (int t = 0; t < kChunk; ++t) {
        Split(-x[t], &negw[t * kDim + col], &negw[kChunk * kDim + t * kDim + col]);
      }
    } else {
#pragma unroll
      for (int t = 0; t < kChunk; ++t) uv[t * kDim + col - kDim] = x[t];
    }
  }
}

// ---- kernel 2: the state pass over chunks ------------------------------------------------------

template <int kRows>
__global__ void __launch_bounds__(StateTraits<kRows>::kThreads, 1)
    KdaChunkStateKernel(const __grid_constant__ FwdArgs a, const char* __restrict__ ws) {
  using Tr = StateTraits<kRows>;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  StateSmem<kRows>& sm = *reinterpret_cast<StateSmem<kRows>*>(smem_raw);
  const int slice = blockIdx.x;
  const int64_t h = blockIdx.y;
  const int64_t n = blockIdx.z;
  const int64_t H = a.s.H;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int g = lane >> 2, tq = lane & 3;
  // Token tile of U and o, and K quarter of the state step; 16-row state tile of both.
  const int mt = warp & 3, vt = warp >> 2;
  const int v0 = slice * kRows;

  int64_t bos, eos;
  DocBounds(a.s, n, &bos, &eos);
  const int64_t chunks = (eos - bos + kChunk - 1) / kChunk;
  const char* rec0 = ws + ((bos / kChunk + n) * H + h) * kda_layout::kRecBytes;
  auto record = [&](int64_t c) { return rec0 + c * H * kda_layout::kRecBytes; };

  // Group 1 (-W, Q Gam, Uv): read by the U / o products. Group 2 (Kdec^T, M, Gam_C): read after.
  auto load_group1 = [&](const char* rec) {
    constexpr int kRowPieces = kDim * 2 / 16;
    for (int e = tid; e < 2 * kChunk * kRowPieces; e += Tr::kThreads) {
      const int row = e / kRowPieces, p = e % kRowPieces;
      CpAsync16(&sm.w[0][0][0] + row * Tr::kKStride + 8 * p,
                rec + kda_layout::kRecNegW + row * kDim * 2 + 16 * p);
      CpAsync16(&sm.qg[0][0][0] + row * Tr::kKStride + 8 * p,
                rec + kda_layout::kRecQg + row * kDim * 2 + 16 * p);
    }
    constexpr int kUvPieces = kRows * 4 / 16;
    for (int e = tid; e < kChunk * kUvPieces; e += Tr::kThreads) {
      const int row = e / kUvPieces, p = e % kUvPieces;
      CpAsync16(&sm.uv[row][4 * p], rec + kda_layout::kRecUv + (row * kDim + v0) * 4 + 16 * p);
    }
  };
  auto load_group2 = [&](const char* rec) {
    constexpr int kRowPieces = kChunk * 2 / 16;
    for (int e = tid; e < 2 * kDim * kRowPieces; e += Tr::kThreads) {
      const int row = e / kRowPieces, p = e % kRowPieces;
      CpAsync16(&sm.kd[0][0][0] + row * Tr::kTStride + 8 * p,
                rec + kda_layout::kRecKdecT + row * kChunk * 2 + 16 * p);
    }
    for (int e = tid; e < 2 * kChunk * kRowPieces; e += Tr::kThreads) {
      const int row = e / kRowPieces, p = e % kRowPieces;
      CpAsync16(&sm.m[0][0][0] + row * Tr::kTStride + 8 * p,
                rec + kda_layout::kRecM + row * kChunk * 2 + 16 * p);
    }
    for (int e = tid; e < kDim * 4 / 16; e += Tr::kThreads) {
      CpAsync16(&sm.gc[4 * e], rec + kda_layout::kRecGamC + 16 * e);
    }
  };

  // The warp's state: rows vt*16 + g (+8) of the slice, columns 32 mt + 8 nt + 2 tq (+1).
  const int srow = vt * 16 + g;
  float st[4][4];
  {
    const float* init = a.initial_state == nullptr
                            ? nullptr
                            : a.initial_state + (n * H + h) * kDimSq + int64_t{v0} * kDim;
#pragma unroll
    for (int nt = 0; nt < 4; ++nt) {
      const int col = 32 * mt + 8 * nt + 2 * tq;
      float2 x = make_float2(0.f, 0.f), y = make_float2(0.f, 0.f);
      if (init != nullptr) {
        x = *reinterpret_cast<const float2*>(init + srow * kDim + col);
        y = *reinterpret_cast<const float2*>(init + (srow + 8) * kDim + col);
      }
      st[nt][0] = x.x;
      st[nt][1] = x.y;
      st[nt][2] = y.x;
      st[nt][3] = y.y;
    }
  }
  auto store_state = [&]() {
#pragma unroll
    for (int nt = 0; nt < 4; ++nt) {
      const int col = 32 * mt + 8 * nt + 2 * tq;
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
        uint32_t hi, lo;
        SplitPair(st[nt][2 * hh], st[nt][2 * hh + 1], &hi, &lo);
        *reinterpret_cast<uint32_t*>(&sm.s[0][srow + 8 * hh][col]) = hi;
        *reinterpret_cast<uint32_t*>(&sm.s[1][srow + 8 * hh][col]) = lo;
      }
    }
  };
  store_state();
  if (chunks > 0) {
    load_group1(record(0));
    CpAsyncCommit();
    load_group2(record(0));
    CpAsyncCommit();
  }

  for (int64_t c = 0; c < chunks; ++c) {
    CpAsyncWait<1>();  // group 1 of chunk c
    __syncthreads();

    // U = Uv - W S0^T and the inter-chunk part of o, (Q Gam) S0^T: token tile mt, rows vt.
    float u0[2][4], u1[2][4], u2[2][4], o0[2][4], o1[2][4], o2[2][4];
#pragma unroll
    for (int nt = 0; nt < 2; ++nt) {
      const int row = mt * 16 + g, col = vt * 16 + nt * 8 + 2 * tq;
      u0[nt][0] = sm.uv[row][col];
      u0[nt][1] = sm.uv[row][col + 1];
      u0[nt][2] = sm.uv[row + 8][col];
      u0[nt][3] = sm.uv[row + 8][col + 1];
#pragma unroll
      for (int i = 0; i < 4; ++i) u1[nt][i] = u2[nt][i] = o0[nt][i] = o1[nt][i] = o2[nt][i] = 0.f;
    }
#pragma unroll
    for (int ks = 0; ks < kDim / 16; ++ks) {
      uint32_t wh[4], wl[4], qh[4], ql[4];
      LoadA<Tr::kKStride>(&sm.w[0][0][0], mt * 16, ks * 16, wh);
      LoadA<Tr::kKStride>(&sm.w[1][0][0], mt * 16, ks * 16, wl);
      LoadA<Tr::kKStride>(&sm.qg[0][0][0], mt * 16, ks * 16, qh);
      LoadA<Tr::kKStride>(&sm.qg[1][0][0], mt * 16, ks * 16, ql);
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) {
        uint32_t sh[2], sl[2];
        LoadB<Tr::kKStride>(&sm.s[0][0][0], vt * 16 + nt * 8, ks * 16, sh);
        LoadB<Tr::kKStride>(&sm.s[1][0][0], vt * 16 + nt * 8, ks * 16, sl);
        Mma3(u0[nt], u1[nt], u2[nt], wh, wl, sh, sl);
        Mma3(o0[nt], o1[nt], o2[nt], qh, ql, sh, sl);
      }
    }
    // U^T into shared memory, split (token mt*16 + g (+8), state row vt*16 + nt*8 + 2 tq (+1)).
#pragma unroll
    for (int nt = 0; nt < 2; ++nt) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const float uval = u0[nt][i] + (u1[nt][i] + u2[nt][i]);
        const int tok = mt * 16 + g + 8 * (i >> 1);
        const int row = vt * 16 + nt * 8 + 2 * tq + (i & 1);
        Split(uval, &sm.u[0][row][tok], &sm.u[1][row][tok]);
      }
    }
    CpAsyncWait<0>();  // group 2 of chunk c
    __syncthreads();
    if (c + 1 < chunks) load_group1(record(c + 1));
    CpAsyncCommit();

    // o += M U (causal: token tiles ks <= mt), then the output.
#pragma unroll
    for (int ks = 0; ks < 4; ++ks) {
      if (ks <= mt) {
        uint32_t mh[4], ml[4];
        LoadA<Tr::kTStride>(&sm.m[0][0][0], mt * 16, ks * 16, mh);
        LoadA<Tr::kTStride>(&sm.m[1][0][0], mt * 16, ks * 16, ml);
#pragma unroll
        for (int nt = 0; nt < 2; ++nt) {
          uint32_t bh[2], bl[2];
          LoadB<Tr::kTStride>(&sm.u[0][0][0], vt * 16 + nt * 8, ks * 16, bh);
          LoadB<Tr::kTStride>(&sm.u[1][0][0], vt * 16 + nt * 8, ks * 16, bl);
          Mma3(o0[nt], o1[nt], o2[nt], mh, ml, bh, bl);
        }
      }
    }
    {
      const int64_t tok0 = bos + c * kChunk;
      const int64_t valid = min(int64_t{kChunk}, eos - tok0);
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) {
        const int col = v0 + vt * 16 + nt * 8 + 2 * tq;
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
          const int row = mt * 16 + g + 8 * hh;
          if (row < valid) {
            const float x0 = a.s.scale * (o0[nt][2 * hh] + (o1[nt][2 * hh] + o2[nt][2 * hh]));
            const float x1 =
                a.s.scale * (o0[nt][2 * hh + 1] + (o1[nt][2 * hh + 1] + o2[nt][2 * hh + 1]));
            *reinterpret_cast<uint32_t*>(a.o + ((tok0 + row) * H + h) * kDim + col) =
                uint32_t(ToBf16(x0)) | (uint32_t(ToBf16(x1)) << 16);
          }
        }
      }
    }

    // S1 = S0 Gam_C + U^T Kdec: state tile vt, K quarter mt.
    {
      float p1[4][4], p2[4][4];
#pragma unroll
      for (int nt = 0; nt < 4; ++nt) {
        const float2 d = *reinterpret_cast<const float2*>(&sm.gc[32 * mt + 8 * nt + 2 * tq]);
        st[nt][0] *= d.x;
        st[nt][1] *= d.y;
        st[nt][2] *= d.x;
        st[nt][3] *= d.y;
#pragma unroll
        for (int i = 0; i < 4; ++i) p1[nt][i] = p2[nt][i] = 0.f;
      }
#pragma unroll
      for (int ks = 0; ks < kChunk / 16; ++ks) {
        uint32_t ah[4], al[4];
        LoadA<Tr::kTStride>(&sm.u[0][0][0], vt * 16, ks * 16, ah);
        LoadA<Tr::kTStride>(&sm.u[1][0][0], vt * 16, ks * 16, al);
#pragma unroll
        for (int nt = 0; nt < 4; ++nt) {
          uint32_t bh[2], bl[2];
          LoadB<Tr::kTStride>(&sm.kd[0][0][0], 32 * mt + 8 * nt, ks * 16, bh);
          LoadB<Tr::kTStride>(&sm.kd[1][0][0], 32 * mt + 8 * nt, ks * 16, bl);
          Mma3(st[nt], p1[nt], p2[nt], ah, al, bh, bl);
        }
      }
#pragma unroll
      for (int nt = 0; nt < 4; ++nt) {
#pragma unroll
        for (int i = 0; i < 4; ++i) st[nt][i] += p1[nt][i] + p2[nt][i];
      }
    }
    __syncthreads();  // every warp is done with S0, U, Kdec, M and Gam_C of chunk c
    store_state();
    if (c + 1 < chunks) load_group2(record(c + 1));
    CpAsyncCommit();
  }

  if (a.final_state != nullptr) {
    float* fs = a.final_state + (n * H + h) * kDimSq + int64_t{v0} * kDim;
#pragma unroll
    for (int nt = 0; nt < 4; ++nt) {
      const int col = 32 * mt + 8 * nt + 2 * tq;
      *reinterpret_cast<float2*>(fs + srow * kDim + col) = make_float2(st[nt][0], st[nt][1]);
      *reinterpret_cast<float2*>(fs + (srow + 8) * kDim + col) = make_float2(st[nt][2], st[nt][3]);
    }
  }
}

// Raises a kernel's dynamic shared-memory limit once per device (so that calls captured into a
// CUDA graph after an eager warm-up issue no attribute calls).
template <typename Kernel>
Status AllowSmem(Kernel kernel, int bytes, std::atomic<uint64_t>* done, const char* what) {
  int dev = 0;
  cudaError_t err = cudaGetDevice(&dev);
  if (err != cudaSuccess) {
    return Internal(std::string("kda: cudaGetDevice: ") + cudaGetErrorString(err));
  }
  const uint64_t bit = dev < 64 ? (uint64_t{1} << dev) : 0;
  if (bit != 0 && (done->load(std::memory_order_acquire) & bit) != 0) return OkStatus();
  err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  if (err != cudaSuccess) {
    return Internal(std::string("kda: cudaFuncSetAttribute (") + what +
                    "): " + cudaGetErrorString(err));
  }
  done->fetch_or(bit, std::memory_order_acq_rel);
  return OkStatus();
}

template <int kRows>
Status LaunchState(const FwdArgs& a, const char* ws, cudaStream_t stream) {
  using Tr = StateTraits<kRows>;
  static std::atomic<uint64_t> done{0};
  constexpr int kSmem = static_cast<int>(sizeof(StateSmem<kRows>));
  Status st = AllowSmem(KdaChunkStateKernel<kRows>, kSmem, &done, "the chunk state pass");
  if (!st.ok()) return st;
  const dim3 grid(Tr::kSlices, static_cast<unsigned>(a.s.H), static_cast<unsigned>(a.s.N));
  KdaChunkStateKernel<kRows><<<grid, Tr::kThreads, kSmem, stream>>>(a, ws);
  return CheckLaunch("the chunk state pass");
}

}  // namespace

Status LaunchChunkedForward(const FwdArgs& a, void* workspace, int64_t workspace_bytes,
                            cudaStream_t stream) {
  if (a.s.N == 0) return OkStatus();
  const int64_t slots = kda_layout::ChunkSlots(a.s.total_tokens, a.s.N);
  const int64_t need = slots * a.s.H * kda_layout::kRecBytes;
  if (workspace == nullptr || workspace_bytes < need) {
    return ResourceExhausted("kda: forward workspace needs " + std::to_string(need) +
                             " bytes, got " + std::to_string(workspace_bytes));
  }
  if (slots > 0x7fffffff) return InvalidArgument("kda: too many tokens for one call");
  char* ws = static_cast<char*>(workspace);
  if (a.s.total_tokens > 0) {
    static std::atomic<uint64_t> done{0};
    constexpr int kSmem = static_cast<int>(sizeof(PrepSmem));
    Status st = AllowSmem(KdaChunkPrepKernel, kSmem, &done, "the chunk preparation");
    if (!st.ok()) return st;
    const dim3 grid(static_cast<unsigned>(slots), static_cast<unsigned>(a.s.H));
    KdaChunkPrepKernel<<<grid, PrepTraits::kThreads, kSmem, stream>>>(a, ws);
    Status launched = CheckLaunch("the chunk preparation");
    if (!launched.ok()) return launched;
  }
  // 16-row slices (8 CTAs per (document, head)) while they fit one wave of one CTA per SM,
  // 32-row slices (half the operand traffic per state row) beyond.
  int dev = 0, sms = 0;
  cudaError_t err = cudaGetDevice(&dev);
  if (err == cudaSuccess) err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  if (err != cudaSuccess) {
    return Internal(std::string("kda: device attribute: ") + cudaGetErrorString(err));
  }
  if (a.s.N * a.s.H * StateTraits<16>::kSlices <= sms) return LaunchState<16>(a, ws, stream);
  return LaunchState<32>(a, ws, stream);
}

}  // namespace kda_cuda
}  // namespace cakegrad::kernels
