// Device pieces shared by the KDA forward and backward kernels: document bounds with clamping,
// the per-token preprocessing (L2 norms, gate, beta), and the exact FP32 state step both kernels
// must repeat bit for bit.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "aligned.h"
#include "cakegrad/kernels/kda.h"
#include "reference/kda_layout.h"
#ifndef CAKEGRAD_KDA_HOST_EMU
#include "sfu_math.cuh"
#endif

namespace cakegrad::kernels::kda_cuda {

constexpr int kDim = kKdaHeadDim;
constexpr int kDimSq = kDim * kDim;

// Shapes and scalars common to every KDA kernel, passed by value.
struct KdaShape {
  const void* cu_seqlens;  // nullptr: document n is tokens [n*T, n*T + T)
  int is_int64;            // cu_seqlens dtype
  int64_t T;               // tokens per batch row (without cu_seqlens)
  int64_t total_tokens;    // B * T
  int64_t H;
  int64_t N;        // documents
  int64_t segment;  // the sequential backward's segment length (kda_layout::SegmentLength)
  float scale;
  float lower_bound;
  uint32_t* device_status;
};

__device__ __forceinline__ float Bf16(uint16_t x) { return __uint_as_float(uint32_t(x) << 16); }

__device__ __forceinline__ uint16_t ToBf16(float x) {
  return __bfloat16_as_ushort(__float2bfloat16_rn(x));
}

// Document n's tokens [*bos, *eos), clamped into [0, total_tokens] and non-decreasing, so no
// access can leave the tensors; malformed offsets raise kDeviceStatusBadCuSeqlens.
__device__ __forceinline__ void DocBounds(const KdaShape& s, int64_t n, int64_t* bos,
                                          int64_t* eos) {
  if (s.cu_seqlens == nullptr) {
    *bos = n * s.T;
    *eos = *bos + s.T;
    return;
  }
  int64_t a, b;
  if (s.is_int64) {
    a = static_cast<const int64_t*>(s.cu_seqlens)[n];
    b = static_cast<const int64_t*>(s.cu_seqlens)[n + 1];
  } else {
    a = static_cast<const int32_t*>(s.cu_seqlens)[n];
    b = static_cast<const int32_t*>(s.cu_seqlens)[n + 1];
  }
  const bool bad = (n == 0 && a != 0) || (n == s.N - 1 && b != s.total_tokens) || b < a || a < 0 ||
                   b > s.total_tokens;
  if (bad && s.device_status != nullptr && threadIdx.x == 0) {
    atomicOr(s.device_status, kDeviceStatusBadCuSeqlens);
  }
  *bos = min(max(a, int64_t{0}), s.total_tokens);
  *eos = min(max(b, *bos), s.total_tokens);
}

// Document n's first token, clamped as DocBounds clamps it (without its status check).
__device__ __forceinline__ int64_t DocStart(const KdaShape& s, int64_t n) {
  if (s.cu_seqlens == nullptr) return n * s.T;
  const int64_t a = s.is_int64 ? static_cast<const int64_t*>(s.cu_seqlens)[n]
                               : static_cast<const int32_t*>(s.cu_seqlens)[n];
  return min(max(a, int64_t{0}), s.total_tokens);
}

// The slot rule of per-document units of len tokens (kda_layout::ChunkSlots, SegmentSlots):
// document n's unit c lives at slot floor(bos_n / len) + n + c. Finds the unit living at `slot`
// (its document is the last one whose first slot is <= slot), that document's index and bounds;
// false for a gap slot.
__device__ __forceinline__ bool LocateSlot(const KdaShape& s, int64_t slot, int64_t len,
                                           int64_t* doc, int64_t* bos, int64_t* eos,
                                           int64_t* unit) {
  if (s.N == 0) return false;
  int64_t lo = 0, hi = s.N - 1;
  while (lo < hi) {
    const int64_t mid = (lo + hi + 1) / 2;
    if (DocStart(s, mid) / len + mid <= slot) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  DocBounds(s, lo, bos, eos);
  *doc = lo;
  *unit = slot - (*bos / len + lo);
  return *unit >= 0 && *unit * len < *eos - *bos;
}

// Document n's checkpoint at token t (a multiple of kda_layout::kCheckpointInterval past its
// first token bos) of head h: a 128 x 128 state at the slot kda_layout::CheckpointSlots counts,
// floor(bos / interval) + n + (t - bos) / interval.
template <typename T>
__device__ __forceinline__ T* CheckpointAt(T* checkpoints, int64_t bos, int64_t n, int64_t t,
                                           int64_t H, int64_t h) {
  constexpr int64_t kInterval = kda_layout::kCheckpointInterval;
  return checkpoints + ((bos / kInterval + n + (t - bos) / kInterval) * H + h) * kDimSq;
}

// The grid of the per-chunk kernels (preparation, gradients): heads along x, so that the CTAs
// resident together read and write neighbouring head rows of the same tokens ([tokens, H, kDim])
// rather than one head's rows H * kDim apart (H200, kda96: the chunked backward -0.3..-1.0% with
// the gradients' kernel so); the chunk slots along y, and on along z past y's 65535. The last z
// row's CTAs past the last slot have no chunk. max_y below 65535 folds earlier (the host emulator's
// test of the z rows).
inline dim3 ChunkSlotGrid(int64_t slots, int64_t H, int64_t max_y = 65535) {
  const int64_t y = slots < 1 ? 1 : slots < max_y ? slots : max_y;
  return dim3(static_cast<unsigned>(H), static_cast<unsigned>(y),
              static_cast<unsigned>((slots + y - 1) / y));
}
__device__ __forceinline__ int64_t ChunkSlotOfBlock() {
  return blockIdx.y + static_cast<int64_t>(blockIdx.z) * gridDim.y;
}

// The chunked kernels' 64-token chunks.
__device__ __forceinline__ bool LocateChunkSlot(const KdaShape& s, int64_t slot, int64_t* bos,
                                                int64_t* eos, int64_t* chunk) {
  int64_t doc;
  return LocateSlot(s, slot, kda_layout::kChunk, &doc, bos, eos, chunk);
}

// A chunk slot's readiness across kernels running at once (the chunked backward's reverse chain,
// checkpoint state pass and grad kernel, chained by programmatic dependent launch): each producer
// CTA adds one to the slot's counter once its writes for the slot are done, the consumer waits
// for all of them. The producer's other threads reach their writes before the caller through a
// block barrier, so the fence orders the whole CTA's writes before the count (the grid-barrier
// pattern). Only CTAs that are already resident may be waited for: the launch order guarantees
// it (kda_chunked_backward.cu).
// The producers count in batches of kReadyBatch chunks (a document's last batch may be
// shorter): the fence stalls the counting thread, and with it the next block barrier, on a pass
// whose every step is latency-bound. A first form counting every chunk was ~1.8% slower at
// (1, 32768, 16), 512 steps; batches of 8 took most of that away (bench/results/kda_h200.md,
// thirty-second session). The consumers want early slots only.
constexpr int kReadyBatch = 8;
// Adds one to the n counters first, first + stride, ...
__device__ __forceinline__ void SignalSlotsReady(unsigned* first, int64_t stride, int n) {
#ifdef CAKEGRAD_KDA_HOST_EMU
  for (int i = 0; i < n; ++i) std::atomic_ref<unsigned>(first[i * stride]).fetch_add(1u);
#else
  __threadfence();
  for (int i = 0; i < n; ++i) atomicAdd(first + i * stride, 1u);
#endif
}
__device__ __forceinline__ bool SlotReady(const unsigned* count, unsigned target) {
#ifdef CAKEGRAD_KDA_HOST_EMU
  return std::atomic_ref<unsigned>(*const_cast<unsigned*>(count)).load() >= target;
#else
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\n" : "=r"(v) : "l"(count) : "memory");
  return v >= target;
#endif
}
__device__ __forceinline__ void WaitSlotReady(const unsigned* count, unsigned target) {
  while (!SlotReady(count, target)) {
#ifndef CAKEGRAD_KDA_HOST_EMU
    __nanosleep(200);
#endif
  }
}

template <typename T>
__device__ __forceinline__ T WarpSum(T x) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

// One halving step of a warp's reduce-scatter over the first kM values of v, in place: lanes with
// bit kOffset set keep the upper half, the others the lower, each adding its partner's (lane ^
// kOffset) copy of the half it keeps into v[0 .. kM / 2). Steps at offsets 16, 8, .. leave lane l
// with (a partial of) one value, summed by the butterfly's own tree: WarpSum's bits (the same
// pairs at every level, a + b == b + a) for a fraction of its shuffles.
template <int kOffset, int kM, typename T, int kN>
__device__ __forceinline__ void ReduceScatterStep(T (&v)[kN], int lane) {
  static_assert(kM <= kN && kM >= 2 && kM % 2 == 0 && kOffset >= 1 && kOffset <= 16, "a step");
  const bool upper = (lane & kOffset) != 0;
#pragma unroll
  for (int i = 0; i < kM / 2; ++i) {
    const T send = upper ? v[i] : v[i + kM / 2];
    const T keep = upper ? v[i + kM / 2] : v[i];
    v[i] = keep + __shfl_xor_sync(0xffffffffu, send, kOffset);
  }
}

// log2(e): e^x as the SFU's 2^(x log2 e).
constexpr float kLog2e = 1.44269504088896340736f;

// The SFU's exp2, reciprocal and reciprocal square root (sfu_math.cuh) on the host emulator
// (tools/emu, CAKEGRAD_KDA_HOST_EMU): each carries a deterministic error of up to its PTX bound
// (ex2 2 ulp, rcp 1 ulp, rsqrt 2 ulp), so the emulation is no more accurate than the device.
// The error is drawn from the argument's bits by a hash: EMU_SFU_SALT=n changes the draw (another
// realization of the same error sizes), EMU_SFU_ULPS=n makes every result n ulps off instead (a
// one-sided SFU). The thirty-ninth session used both to tell a tail draw's luck from a device bias
// (bench/results/kda_h200.md).
#ifdef CAKEGRAD_KDA_HOST_EMU
inline float EmuUlps(float y, float x, int max_ulps) {
  if (std::fpclassify(y) == FP_SUBNORMAL) return 0.f;
  if (!std::isfinite(y) || y == 0.f) return y;
  static const char* const salt = std::getenv("EMU_SFU_SALT");
  static const char* const fixed = std::getenv("EMU_SFU_ULPS");
  uint32_t b;
  std::memcpy(&b, &x, 4);
  if (salt != nullptr) b ^= static_cast<uint32_t>(std::atol(salt));
  const int ulps =
      fixed != nullptr
          ? std::atoi(fixed)
          : static_cast<int>(((b * 2654435761u) >> 24) % (2 * max_ulps + 1)) - max_ulps;
  for (int i = 0; i < (ulps < 0 ? -ulps : ulps); ++i) y = std::nextafter(y, ulps < 0 ? 0.f : 1e38f);
  return y;
}
inline float Ex2Ftz(float x) { return EmuUlps(std::exp2(x), x, 2); }
inline float RcpFtz(float x) {
  if (std::fpclassify(x) == FP_SUBNORMAL) x = std::copysign(0.f, x);
  return EmuUlps(1.0f / x, x, 1);
}
inline float RsqrtFtz(float x) {
  return EmuUlps(static_cast<float>(1.0 / std::sqrt(static_cast<double>(x))), x, 2);
}
#endif

// sigmoid(x) on the SFU: 4 instructions where expf's accurate path and the IEEE division take
// ~25 (the chunked preparation is issue-bound; its token prologue was a fifth of its
// instructions). Error: the exponent's rounding (|x| 2^-24 relative) plus ~3 ulp. For very
// negative x the exponential overflows to inf and the reciprocal gives 0.
__device__ __forceinline__ float GateSigmoid(float x) { return RcpFtz(1.0f + Ex2Ftz(x * -kLog2e)); }

// One token of one head is prepared by one full warp: lane l owns k = 4l .. 4l+3. The raw
// loads are split from the arithmetic so a warp can have several tokens' loads in flight.
struct RawToken {
  uint2 q, k, g;  // 4 BF16 each
  float beta;
};

__device__ __forceinline__ RawToken LoadToken(const uint16_t* q, const uint16_t* k,
                                              const uint16_t* g, const uint16_t* beta, int64_t t,
                                              int64_t H, int64_t h) {
  const int lane = threadIdx.x & 31;
  const int64_t base = (t * H + h) * kDim + 4 * lane;
  RawToken r;
  r.q = *reinterpret_cast<const uint2*>(q + base);
  r.k = *reinterpret_cast<const uint2*>(k + base);
  r.g = *reinterpret_cast<const uint2*>(g + base);
  r.beta = Bf16(beta[t * H + h]);
  return r;
}

// A token's lane values as every KDA kernel derives them: q and k unpacked, the reciprocal
// norms rq, rk (warp sums) and the log-decays gl = lower_bound * sigmoid(A (g + dt_bias)). db is
// this lane's dt_bias[h, 4l .. 4l+3]. One definition, so that the chunked kernels (the
// preparation and the chunked backward's per-chunk pass) agree bit for bit. It uses the SFU's
// sigmoid and reciprocal square root; the sequential kernels use ComputeTokenCost64 instead.
struct TokenLane {
  float qf[4], kf[4], gl[4];
  float rq, rk;
};

// The 4 BF16 values of a lane's uint2 load, widened exactly (to float or double).
template <typename T>
__device__ __forceinline__ void UnpackBf16x4(uint2 v, T (&out)[4]) {
  out[0] = Bf16(v.x & 0xffff);
  out[1] = Bf16(v.x >> 16);
  out[2] = Bf16(v.y & 0xffff);
  out[3] = Bf16(v.y >> 16);
}

__device__ __forceinline__ TokenLane UnpackToken(const RawToken& r, const float db[4], float exp_a,
                                                 float lower_bound) {
  TokenLane t;
  float gf[4];
  UnpackBf16x4(r.g, gf);
  UnpackBf16x4(r.q, t.qf);
  UnpackBf16x4(r.k, t.kf);
  float sq = 0.f, sk = 0.f;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    sq = fmaf(t.qf[i], t.qf[i], sq);
    sk = fmaf(t.kf[i], t.kf[i], sk);
    const float z = exp_a * (gf[i] + db[i]);
    t.gl[i] = lower_bound * GateSigmoid(z);
  }
  t.rq = RsqrtFtz(WarpSum(sq) + 1e-6f);
  t.rk = RsqrtFtz(WarpSum(sk) + 1e-6f);
  return t;
}

// The sequential backward and its recompute pass run in FP64 (kda_row_pass.cu, kda_backward.cu).
// At one head dA_log is a single sum whose terms cancel to a part in ~10^4 on some draws (the
// twenty-fourth session measured a condition number of 7097), so SPEC's 1e-4 needs each term
// beyond FP32's reach (bench/kda_dalog_seq_study.py: every FP32 stage contributes about equally).
struct TokenScalars64 {
  double rq, rk, bt;
};

// The FP64 values of one token that cost: lane l's four decays d = exp(gl) (k = 4l .. 4l+3) and
// the token's scalars, from its raw BF16 / FP32 inputs; db is this lane's dt_bias[h, 4l .. 4l+3].
// Only the token pass (kda_row_pass.cu, KdaTokenPassKernel) computes them, once per (token, head),
// into the workspace; the row passes (cp.async) and the backward kernel (LoadToken64) read them,
// so they agree bit for bit.
struct TokenCost64 {
  double d[4];
  TokenScalars64 s;
};
__device__ __forceinline__ TokenCost64 ComputeTokenCost64(const RawToken& r, float4 db,
                                                          double exp_a, double lower_bound) {
  const double dtb[4] = {db.x, db.y, db.z, db.w};
  double gf[4], qf[4], kf[4];
  UnpackBf16x4(r.g, gf);
  UnpackBf16x4(r.q, qf);
  UnpackBf16x4(r.k, kf);
  double sq = 0.0, sk = 0.0;
  TokenCost64 c;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    sq = fma(qf[i], qf[i], sq);
    sk = fma(kf[i], kf[i], sk);
    const double z = exp_a * (gf[i] + dtb[i]);
    c.d[i] = exp(lower_bound / (1.0 + exp(-z)));
  }
  c.s.rq = 1.0 / sqrt(WarpSum(sq) + 1e-6);
  c.s.rk = 1.0 / sqrt(WarpSum(sk) + 1e-6);
  c.s.bt = 1.0 / (1.0 + exp(-static_cast<double>(r.beta)));
  return c;
}

// What a sequential kernel reads of one token, lane l holding k = 4l .. 4l+3: raw q and k, and
// the token pass's decays and scalars (every lane the scalars: kh and qh need them).
struct RawToken64 {
  uint2 q, k;
  double2 d01, d23;
  TokenScalars64 s;
};
__device__ __forceinline__ RawToken64 LoadToken64(const uint16_t* q, const uint16_t* k,
                                                  const double* tok_d, const double* tok_s,
                                                  int64_t t, int64_t H, int64_t h) {
  const int lane = threadIdx.x & 31;
  const int64_t th = t * H + h;
  RawToken64 r;
  r.q = *reinterpret_cast<const uint2*>(q + th * kDim + 4 * lane);
  r.k = *reinterpret_cast<const uint2*>(k + th * kDim + 4 * lane);
  const double2* dp = reinterpret_cast<const double2*>(tok_d + th * kDim) + 2 * lane;
  r.d01 = dp[0];
  r.d23 = dp[1];
  const double2 s01 = *reinterpret_cast<const double2*>(tok_s + th * kda_layout::kTokenScalars);
  r.s.rq = s01.x;
  r.s.rk = s01.y;
  r.s.bt = tok_s[th * kda_layout::kTokenScalars + kda_layout::kTokBt];
  return r;
}

// dst[0..3] = f[0..3] times s: kh = k rk and qh = q rq from the unpacked BF16 values, as the
// backward kernel (StoreToken64) and the row passes (kda_row_pass.cu, MakeVecs) both form them.
__device__ __forceinline__ void StoreScaled4(const double (&f)[4], double s, double2* dst) {
  dst[0] = make_double2(f[0] * s, f[1] * s);
  dst[1] = make_double2(f[2] * s, f[3] * s);
}

// Writes kh = k rk, qh = q rq (qh may be null) and d, 128 doubles each, of one token into shared
// memory.
__device__ __forceinline__ void StoreToken64(const RawToken64& r, double* kh, double* qh,
                                             double* d) {
  const int lane = threadIdx.x & 31;
  double qf[4], kf[4];
  UnpackBf16x4(r.q, qf);
  UnpackBf16x4(r.k, kf);
  StoreScaled4(kf, r.s.rk, reinterpret_cast<double2*>(kh) + 2 * lane);
  if (qh != nullptr) StoreScaled4(qf, r.s.rq, reinterpret_cast<double2*>(qh) + 2 * lane);
  double2* dp = reinterpret_cast<double2*>(d) + 2 * lane;
  dp[0] = r.d01;
  dp[1] = r.d23;
}

// The state step S <- S * d + u * kh, spelled out so that no compiler contraction choice can
// make the recompute and the backward's rebuild disagree.
__device__ __forceinline__ double StateStep(double s, double d, double u, double kh) {
  return __fma_rn(u, kh, __dmul_rn(s, d));
}

// The row layout of the FP64 row recurrences (the recompute pass, the segment transitions):
// kRowLanes lanes of a warp share a state row, lane `col` (lane % kRowLanes) owning the double2
// columns col + kRowLanes i, i < kRowPairs. Rows evolve on their own given the token's vectors, so
// a token costs one kRowLanes-lane shuffle reduction and no barrier.
constexpr int kRowLanes = 8;
constexpr int kRowPairs = kDim / 2 / kRowLanes;

// Sum over the kRowLanes lanes of a row; every lane of the row gets it.
__device__ __forceinline__ double RowSum(double x) {
#pragma unroll
  for (int m = kRowLanes / 2; m > 0; m >>= 1) x += __shfl_xor_sync(0xffffffffu, x, m);
  return x;
}

// One token of the forward recurrence on one row: S <- S d, w = v - S kh, S <- S + (bt w) kh,
// with StateStep's operations. d and kh are the token's 128-vectors; returns w.
__device__ __forceinline__ double RowForwardStep(double (&S)[kRowPairs][2], const double* d,
                                                 const double* kh, int col, double v, double bt) {
  double2 dv[kRowPairs], kv[kRowPairs];
#pragma unroll
  for (int i = 0; i < kRowPairs; ++i) {
    dv[i] = reinterpret_cast<const double2*>(d)[col + kRowLanes * i];
    kv[i] = reinterpret_cast<const double2*>(kh)[col + kRowLanes * i];
  }
  // Four partial sums: the token's dependent chain is this row sum, then the shuffles.
  double p[4] = {0.0, 0.0, 0.0, 0.0};
#pragma unroll
  for (int i = 0; i < kRowPairs; ++i) {
    S[i][0] = __dmul_rn(S[i][0], dv[i].x);
    S[i][1] = __dmul_rn(S[i][1], dv[i].y);
    p[2 * (i & 1)] = fma(S[i][0], kv[i].x, p[2 * (i & 1)]);
    p[2 * (i & 1) + 1] = fma(S[i][1], kv[i].y, p[2 * (i & 1) + 1]);
  }
  const double w = v - RowSum((p[0] + p[1]) + (p[2] + p[3]));
  const double u = __dmul_rn(bt, w);
#pragma unroll
  for (int i = 0; i < kRowPairs; ++i) {
    S[i][0] = __fma_rn(u, kv[i].x, S[i][0]);
    S[i][1] = __fma_rn(u, kv[i].y, S[i][1]);
  }
  return w;
}

}  // namespace cakegrad::kernels::kda_cuda

namespace cakegrad::kernels::kda_cuda {

// Host-side checks shared by both entry points (everything the host can check without reading
// device memory); fills *s. Grid y/z carry H and N, hence their 65535 limit.
inline Status MakeShape(int64_t B, int64_t T, int64_t H, int64_t num_docs, const void* cu_seqlens,
                        DType seqlens_dtype, float scale, float lower_bound,
                        uint32_t* device_status, KdaShape* s) {
  if (B < 0 || T < 0) return InvalidArgument("kda: B and T must be >= 0");
  if (H < 1 || H > 65535) return InvalidArgument("kda: H must be in [1, 65535]");
  if (!(scale > 0.0f) || scale > 3.0e38f) return InvalidArgument("kda: scale must be finite, > 0");
  if (!(lower_bound >= -5.0f && lower_bound < 0.0f)) {
    return InvalidArgument("kda: lower_bound must be in [-5, 0)");
  }
  if (cu_seqlens != nullptr) {
    if (B != 1) return InvalidArgument("kda: cu_seqlens needs B == 1");
    if (num_docs < 1) return InvalidArgument("kda: cu_seqlens needs num_docs >= 1");
    if (seqlens_dtype != DType::kINT32 && seqlens_dtype != DType::kINT64) {
      return InvalidArgument("kda: cu_seqlens must be int32 or int64");
    }
  } else if (num_docs != 0 && num_docs != B) {
    return InvalidArgument("kda: without cu_seqlens num_docs must be B (or 0)");
  }
  s->cu_seqlens = cu_seqlens;
  s->is_int64 = seqlens_dtype == DType::kINT64 ? 1 : 0;
  s->T = T;
  s->total_tokens = B * T;
  s->H = H;
  s->N = kda_layout::Docs(B, num_docs);
  if (s->N > 65535) return InvalidArgument("kda: at most 65535 documents per call");
  s->scale = scale;
  s->lower_bound = lower_bound;
  s->device_status = device_status;
  return OkStatus();
}

// Raises a kernel's dynamic shared-memory limit once per device (`done` holds one bit per
// device), so that calls captured into a CUDA graph after an eager warm-up issue no attribute
// calls.
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

// The kernels read and write the 128-wide rows (q, k, v, g, o, dO and their gradients), the
// states, dt_bias / ddt_bias and the workspace in 8- and 16-byte pieces: a misaligned pointer
// would fault on the device, which poisons the context for every later call (the daemon's too).
// Legitimate views of those tensors are 256-byte aligned at least; beta, A_log and their
// gradients are read element by element and need only their dtype's alignment.
struct NamedPointer {
  const char* name;
  const void* p;
};
inline Status CheckAligned16(std::initializer_list<NamedPointer> pointers) {
  for (const NamedPointer& x : pointers) {
    if (x.p != nullptr && !Aligned(x.p, 16)) {
      return InvalidArgument(std::string("kda: ") + x.name +
                             " must be 16-byte aligned (the kernels access it in 16-byte pieces)");
    }
  }
  return OkStatus();
}

// The backward's host checks shared by the sequential and the chunked backward: shape and
// scalars (MakeShape), required pointers, their alignment, and the workspace against
// KdaBackwardWorkspaceBytes (the larger of the two layouts, so one buffer serves either
// backward).
inline Status CheckBackwardParams(const KdaBwdParams& p, KdaShape* s) {
  Status st = MakeShape(p.B, p.T, p.H, p.num_docs, p.cu_seqlens, p.seqlens_dtype, p.scale,
                        p.lower_bound, p.device_status, s);
  if (!st.ok()) return st;
  if (s->total_tokens > 0 &&
      (p.q == nullptr || p.k == nullptr || p.v == nullptr || p.g == nullptr || p.beta == nullptr ||
       p.d_o == nullptr || p.dq == nullptr || p.dk == nullptr || p.dv == nullptr ||
       p.dg == nullptr || p.dbeta == nullptr)) {
    return InvalidArgument("kda: q, k, v, g, beta, d_o and dq, dk, dv, dg, dbeta are required");
  }
  if (p.A_log == nullptr || p.dt_bias == nullptr || p.dA_log == nullptr || p.ddt_bias == nullptr ||
      p.dinitial_state == nullptr) {
    return InvalidArgument("kda: A_log, dt_bias, dA_log, ddt_bias, dinitial_state are required");
  }
  const Status aligned = CheckAligned16({{"q", p.q},
                                         {"k", p.k},
                                         {"v", p.v},
                                         {"g", p.g},
                                         {"d_o", p.d_o},
                                         {"dq", p.dq},
                                         {"dk", p.dk},
                                         {"dv", p.dv},
                                         {"dg", p.dg},
                                         {"dt_bias", p.dt_bias},
                                         {"ddt_bias", p.ddt_bias},
                                         {"initial_state", p.initial_state},
                                         {"dfinal_state", p.dfinal_state},
                                         {"dinitial_state", p.dinitial_state},
                                         {"workspace", p.workspace}});
  if (!aligned.ok()) return aligned;
  const int64_t need = KdaBackwardWorkspaceBytes(p.B, p.T, p.H, p.num_docs);
  if (p.workspace == nullptr || p.workspace_bytes < need) {
    return ResourceExhausted("kda: backward workspace needs " + std::to_string(need) +
                             " bytes, got " + std::to_string(p.workspace_bytes));
  }
  return OkStatus();
}

inline Status CheckLaunch(const char* what) {
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) {
    return Internal(std::string("kda: launching ") + what + ": " + cudaGetErrorString(err));
  }
  return OkStatus();
}

}  // namespace cakegrad::kernels::kda_cuda

namespace cakegrad::kernels::kda_cuda {

// The forward recurrence's inputs, as the kernels that run it read them: the chunked forward
// (also the chunked backward's checkpoint pass) and the sequential backward's recompute pass.
struct FwdInputs {
  KdaShape s;
  const uint16_t* q;
  const uint16_t* k;
  const uint16_t* v;
  const uint16_t* g;
  const uint16_t* beta;
  const float* A_log;
  const float* dt_bias;
  const float* initial_state;  // nullable: zeros
};

// Copies the input pointers of a forward or backward call (KdaFwdParams or KdaBwdParams); the
// shape is filled by the call's checks.
template <typename Params>
void SetFwdInputs(const Params& p, FwdInputs* in) {
  in->q = p.q;
  in->k = p.k;
  in->v = p.v;
  in->g = p.g;
  in->beta = p.beta;
  in->A_log = p.A_log;
  in->dt_bias = p.dt_bias;
  in->initial_state = p.initial_state;
}

// The chunked forward's arguments. The chunked backward reruns it in checkpoint mode, where it
// writes chunk-start states and per-chunk operands instead of o and final_state.
struct FwdArgs : FwdInputs {
  uint16_t* o;           // nullable in the chunked backward's checkpoint mode
  float* final_state;    // nullable
  float* checkpoints;    // non-null: the chunked backward's checkpoint mode, chunk-start
                         // states at chunk slots
  float* chunk_p;        // checkpoint mode: P per chunk slot,
                         // [slots, H, kda_layout::kChunkPFloats]
  float* chunk_tinv;     // likewise: Tinv = (I + A)^-1 per chunk slot, packed as P
  float* chunk_u;        // likewise: U = Uv - W S0^T per chunk slot, [slots, H, 64, 128]
  uint16_t* chunk_kdt3;  // likewise: Kdec^T's third BF16 part, [slots, H, 128, 64]
  unsigned* ready;       // likewise, nullable: per (slot, head), +1 from each CTA (slice of state
                         // rows) once its S0 and U of the slot are written (SignalSlotsReady)
};

// The sequential backward's passes before its backward kernel (kda_backward.cu): the row passes
// (kda_row_pass.cu: the segment transitions, the recompute pass) and the segment scans
// (kda_segment.cu). Workspace regions as kda_layout::BwdLayout names them.
struct SeqBwdArgs : FwdInputs {
  const uint16_t* d_o;
  double* tok_d;              // [total_tokens, H, 128]: the token pass's decays
  double* tok_s;              // [total_tokens, H, kda_layout::kTokenScalars]: its rq, rk, bt
  const float* dfinal_state;  // nullable: zeros
  double* checkpoints;        // [slots, H, 128, 128]
  double* residual;           // [total_tokens, H, 128]
  double* seg_map;            // [segment slots, H, 128, 128]
  double* seg_grad;           // [segment slots, H, 128, 128]
  float* dinitial_state;      // nullable (written here only for empty documents)
};

enum class RowPass {
  kTransitions,  // each segment's B, M and E, as the scans read them
  kRecompute,    // each segment's checkpoints and residuals, from its start state
};

Status LaunchRowPass(const SeqBwdArgs& a, RowPass pass, cudaStream_t stream);

// The token pass: every token's decays and scalars (ComputeTokenCost64) into tok_d and tok_s.
Status LaunchTokenPass(const SeqBwdArgs& a, cudaStream_t stream);

// The forward and reverse scans over each (document, head)'s segments: every segment's start
// state at its first checkpoint, the state gradient at every segment's end in seg_grad.
Status LaunchSegmentScans(const SeqBwdArgs& a, cudaStream_t stream);

}  // namespace cakegrad::kernels::kda_cuda
