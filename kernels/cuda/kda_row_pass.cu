// The FP64 row passes of the sequential KDA backward (kda_backward.cu): token walks over one
// segment (KdaShape::segment tokens) of a document, split over state rows, and the token pass
// before them. FP64 for the reason in kda_common.cuh (TokenScalars64).
//
// Each row of the state evolves on its own given the token's kh, decay and beta (RowForwardStep),
// and so does each row of the state gradient (RowAdjointStep), so a CTA owns kRowsPerCta rows of
// one (segment, head) in registers and a token costs one row reduction, no barrier. A CTA plays
// one role:
//  - kRecompute (the recompute pass): the state from the segment's start state (the forward
//    scan's, at its first checkpoint), saving it every kda_layout::kCheckpointInterval tokens and
//    every token's residual w = v - S_decayed kh, from which the backward rebuilds its states;
//  - the segment transitions (what the scans of kda_segment.cu combine): kB, the state the
//    segment builds from zero; kM, the rows of its state map (identity rows with v = 0); kE, the
//    state gradient its own outputs send back from zero (walking the segment backwards). Only
//    what the scans read is computed: no B of a document's last segment, no E of its first,
//    nothing for a one-segment document.
//
// The token pass (KdaTokenPassKernel, first on the stream) computes each token's FP64 decays and
// scalars once per (token, head) into the workspace. Every CTA of the row passes and of the
// backward kernel (40 per segment and head) used to compute them itself, on prep warps beside the
// walk whose exponentials were ~half of the row passes' issue slots (ncu, twenty-sixth session).
// Now a CTA is its walking warps alone: they copy batch b+1's decays, raw keys (and queries) and
// scalars (cp.async) while they walk batch b, and turn the raw keys into kh (k rk) before walking
// a batch; two barriers per batch. Without prep warps four CTAs fit an SM instead of two, twice
// the warps to hide the walk's latency chain (shared loads, then a shuffle reduction, per token).
// (Storing kh and qh from the token pass as well was ~4% faster still at one head and 9% at two,
// but grew the workspace by 3 KB a token and head, 1.5x, for every caller: the shape-only size
// query covers both algorithms.)
#include <atomic>

#include "cp_async.cuh"
#include "kda_common.cuh"

namespace cakegrad::kernels {
namespace kda_cuda {
namespace {

struct RowTraits {
  static constexpr int kWarps = 4;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kMinBlocks = 4;  // 128 registers a thread
  static constexpr int kRowsPerWarp = 32 / kRowLanes;
  static constexpr int kRowsPerCta = kWarps * kRowsPerWarp;
  static constexpr int kCtasPerMatrix = kDim / kRowsPerCta;
  static constexpr int kTokenBatch = 8;
  static_assert(kDim % kRowsPerCta == 0, "rows must split evenly over CTAs");
  static_assert(kda_layout::kCheckpointInterval % kTokenBatch == 0,
                "checkpoints are taken at token-batch starts");
  static_assert(kRowsPerCta * 2 % 16 == 0, "a token's v or do rows are whole 16-byte copies");
};

enum class RowRole { kRecompute, kB, kM, kE };

// The launches of the row passes: the forward walks (kRecompute; kB and kM side by side) and the
// backward walk (kE) are separate kernels, so that each keeps its registers to itself (one kernel
// with both spilled at 2 CTAs an SM).
enum class RowLaunch { kRecompute, kBM, kE };

__host__ __device__ constexpr int CtasPerSlot(RowLaunch l) {
  return (l == RowLaunch::kBM ? 2 : 1) * RowTraits::kCtasPerMatrix;
}

__device__ __forceinline__ RowRole RoleOf(RowLaunch l, int cta) {
  switch (l) {
    case RowLaunch::kRecompute:
      return RowRole::kRecompute;
    case RowLaunch::kE:
      return RowRole::kE;
    default:
      return cta < RowTraits::kCtasPerMatrix ? RowRole::kB : RowRole::kM;
  }
}

// One batch of tokens in shared memory: the token pass's decays, the raw BF16 keys (and queries,
// for the backward walk) and scalars (rq, rk, bt, 0), and this CTA's rows of v (kRecompute, kB)
// or do (kE), BF16. Double-buffered: the copies of batch b+1 land in the other one.
template <RowLaunch kLaunch>
struct RowBatch {
  static constexpr bool kQ = kLaunch == RowLaunch::kE;
  static constexpr int kRaw = kQ ? 2 : 1;  // k, then q
  double d[RowTraits::kTokenBatch][kDim];
  double sc[RowTraits::kTokenBatch][kda_layout::kTokenScalars];
  uint16_t raw[kRaw][RowTraits::kTokenBatch][kDim];
  uint16_t x[RowTraits::kTokenBatch][RowTraits::kRowsPerCta];
};

// kh and qh of the batch being walked (StoreScaled4's products), single-buffered: made from the
// batch's raw keys after its copies land, read by the walk.
template <RowLaunch kLaunch>
struct RowVecs {
  double kh[RowTraits::kTokenBatch][kDim];
  double qh[RowBatch<kLaunch>::kQ ? RowTraits::kTokenBatch : 1][kDim];
};

template <RowLaunch kLaunch>
struct RowSmem {
  RowBatch<kLaunch> batch[2];
  RowVecs<kLaunch> vecs;
};

// Issues (and commits) the copies of batch [t0, t0 + nb) into b.
template <RowLaunch kLaunch>
__device__ __forceinline__ void CopyBatch(const SeqBwdArgs& a, RowRole role, int64_t t0, int nb,
                                          int row0, int64_t h, RowBatch<kLaunch>& b) {
  using Tr = RowTraits;
  constexpr int kRaw = RowBatch<kLaunch>::kRaw;
  constexpr int kDChunks = kDim * 8 / 16, kRawChunks = kDim * 2 / 16, kScChunks = 2;
  constexpr int kPerToken = kDChunks + kRaw * kRawChunks + kScChunks;
  const int64_t H = a.s.H;
  const int tid = threadIdx.x;
  for (int i = tid; i < nb * kPerToken; i += Tr::kThreads) {
    const int tb = i / kPerToken;
    int e = i % kPerToken;
    const int64_t th = (t0 + tb) * H + h;
    if (e < kDChunks) {
      CpAsync<16>(&b.d[tb][2 * e], a.tok_d + th * kDim + 2 * e);
    } else if ((e -= kDChunks) < kRaw * kRawChunks) {
      const uint16_t* src = e < kRawChunks ? a.k : a.q;
      const int r = e / kRawChunks, c = e % kRawChunks;
      CpAsync<16>(&b.raw[r][tb][8 * c], src + th * kDim + 8 * c);
    } else {
      e -= kRaw * kRawChunks;
      CpAsync<16>(&b.sc[tb][2 * e], a.tok_s + th * kda_layout::kTokenScalars + 2 * e);
    }
  }
  constexpr int kRowCopies = Tr::kRowsPerCta * 2 / 16;
  if (role != RowRole::kM && tid < nb * kRowCopies) {
    const int tb = tid / kRowCopies, part = tid % kRowCopies;
    const uint16_t* x = role == RowRole::kE ? a.d_o : a.v;
    CpAsync<16>(&b.x[tb][8 * part], x + ((t0 + tb) * H + h) * kDim + row0 + 8 * part);
  }
  CpAsyncCommit();
}

// kh = k rk (and qh = q rq) of the batch in b, into v, four channels a thread at a time.
template <RowLaunch kLaunch>
__device__ __forceinline__ void MakeVecs(const RowBatch<kLaunch>& b, int nb, RowVecs<kLaunch>& v) {
  constexpr int kRaw = RowBatch<kLaunch>::kRaw;
  for (int i = threadIdx.x; i < kRaw * nb * (kDim / 4); i += RowTraits::kThreads) {
    const int r = i / (nb * (kDim / 4)), rem = i % (nb * (kDim / 4));
    const int tb = rem / (kDim / 4), c = 4 * (rem % (kDim / 4));
    double f[4];
    UnpackBf16x4(*reinterpret_cast<const uint2*>(&b.raw[r][tb][c]), f);
    StoreScaled4(f, b.sc[tb][r == 0 ? kda_layout::kTokRk : kda_layout::kTokRq],
                 reinterpret_cast<double2*>(r == 0 ? &v.kh[tb][c] : &v.qh[tb][c]));
  }
}

// One token of the gradient's recurrence on one row, in the backward's operations: G += sdo qh,
// du = G kh, G <- (G - bt du kh) d. kh is read again after the reduction rather than kept: with
// the state's 64 registers, keeping kh and d spilled at 128 registers a thread.
__device__ __forceinline__ void RowAdjointStep(double (&G)[kRowPairs][2], const double* d,
                                               const double* kh, const double* qh, int col,
                                               double sdo, double bt) {
  const double2* d2 = reinterpret_cast<const double2*>(d) + col;
  const double2* k2 = reinterpret_cast<const double2*>(kh) + col;
  const double2* q2 = reinterpret_cast<const double2*>(qh) + col;
  double p[4] = {0.0, 0.0, 0.0, 0.0};
#pragma unroll
  for (int i = 0; i < kRowPairs; ++i) {
    const double2 kv = k2[kRowLanes * i];
    const double2 qv = q2[kRowLanes * i];
    G[i][0] = fma(sdo, qv.x, G[i][0]);
    G[i][1] = fma(sdo, qv.y, G[i][1]);
    p[2 * (i & 1)] = fma(G[i][0], kv.x, p[2 * (i & 1)]);
    p[2 * (i & 1) + 1] = fma(G[i][1], kv.y, p[2 * (i & 1) + 1]);
  }
  const double dpred = -bt * RowSum((p[0] + p[1]) + (p[2] + p[3]));
#pragma unroll
  for (int i = 0; i < kRowPairs; ++i) {
    const double2 kv = k2[kRowLanes * i];
    const double2 dv = d2[kRowLanes * i];
    G[i][0] = fma(dpred, kv.x, G[i][0]) * dv.x;
    G[i][1] = fma(dpred, kv.y, G[i][1]) * dv.y;
  }
}

template <RowLaunch kLaunch>
__global__ void __launch_bounds__(RowTraits::kThreads, RowTraits::kMinBlocks)
    KdaRowPassKernel(const __grid_constant__ SeqBwdArgs a) {
  using Tr = RowTraits;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  RowSmem<kLaunch>& sm = *reinterpret_cast<RowSmem<kLaunch>*>(smem_raw);
  constexpr int ctas = CtasPerSlot(kLaunch);
  const int cta = blockIdx.x % ctas;
  const int64_t slot = blockIdx.x / ctas;
  const RowRole role = RoleOf(kLaunch, cta);
  const int64_t h = blockIdx.y;
  const int64_t H = a.s.H;
  const int warp = threadIdx.x >> 5;
  const int lane = threadIdx.x & 31;

  int64_t n, bos, eos, seg;
  if (!LocateSlot(a.s, slot, a.s.segment, &n, &bos, &eos, &seg)) return;  // a gap
  const int64_t sbeg = bos + seg * a.s.segment;
  const int64_t send = min(eos, sbeg + a.s.segment);
  const bool last = send == eos;
  if ((role == RowRole::kB && last) || (role == RowRole::kE && seg == 0) ||
      (role == RowRole::kM && seg == 0 && last)) {
    return;
  }
  constexpr bool reverse = kLaunch == RowLaunch::kE;
  const int64_t batches = (send - sbeg + Tr::kTokenBatch - 1) / Tr::kTokenBatch;
  // The i-th batch walked (E walks the segment backwards) and its first token and length.
  auto batch_t0 = [&](int64_t i) {
    return sbeg + (reverse ? batches - 1 - i : i) * Tr::kTokenBatch;
  };
  auto batch_len = [&](int64_t i) {
    return static_cast<int>(min(int64_t{Tr::kTokenBatch}, send - batch_t0(i)));
  };
  auto checkpoint = [&](int64_t t0) { return CheckpointAt(a.checkpoints, bos, n, t0, H, h); };

  // Rows and state: lane col owns the double2 columns col + kRowLanes * i of row `row`.
  const int row0 = (cta % Tr::kCtasPerMatrix) * Tr::kRowsPerCta;
  const int rloc = warp * Tr::kRowsPerWarp + lane / kRowLanes;
  const int row = row0 + rloc;
  const int col = lane % kRowLanes;
  if (batches > 0) CopyBatch(a, role, batch_t0(0), batch_len(0), row0, h, sm.batch[0]);
  double S[kRowPairs][2];
  {
    // The recompute pass starts from the forward scan's state at the segment's first checkpoint;
    // the transitions from zero (B, E) or the identity (M).
    const double2* src = reinterpret_cast<const double2*>(checkpoint(sbeg) + int64_t(row) * kDim);
#pragma unroll
    for (int i = 0; i < kRowPairs; ++i) {
      const int c0 = 2 * (col + kRowLanes * i);
      if (role == RowRole::kRecompute) {
        const double2 x = src[col + kRowLanes * i];
        S[i][0] = x.x;
        S[i][1] = x.y;
      } else {
        S[i][0] = role == RowRole::kM && c0 == row ? 1.0 : 0.0;
        S[i][1] = role == RowRole::kM && c0 + 1 == row ? 1.0 : 0.0;
      }
    }
  }
  CpAsyncWait<0>();
  __syncthreads();

  const double scale = a.s.scale;
  for (int64_t b = 0; b < batches; ++b) {
    const int64_t t0 = batch_t0(b);
    const RowBatch<kLaunch>& cur = sm.batch[b & 1];
    const int nb = batch_len(b);
    MakeVecs(cur, nb, sm.vecs);
    __syncthreads();  // kh (qh) complete
    // The other buffer was last read in batch b - 1, before the barrier that ended it.
    if (b + 1 < batches) {
      CopyBatch(a, role, batch_t0(b + 1), batch_len(b + 1), row0, h, sm.batch[(b + 1) & 1]);
    }
    if constexpr (reverse) {
      for (int tb = nb - 1; tb >= 0; --tb) {
        RowAdjointStep(S, cur.d[tb], sm.vecs.kh[tb], sm.vecs.qh[tb], col,
                       scale * Bf16(cur.x[tb][rloc]), cur.sc[tb][kda_layout::kTokBt]);
      }
    } else {
      const bool recompute = role == RowRole::kRecompute;
      if (recompute && t0 != sbeg && (t0 - bos) % kda_layout::kCheckpointInterval == 0) {
        double2* dst = reinterpret_cast<double2*>(checkpoint(t0) + int64_t(row) * kDim);
#pragma unroll
        for (int i = 0; i < kRowPairs; ++i) {
          dst[col + kRowLanes * i] = make_double2(S[i][0], S[i][1]);
        }
      }
      for (int tb = 0; tb < nb; ++tb) {
        const float v = role == RowRole::kM ? 0.f : Bf16(cur.x[tb][rloc]);
        const double w = RowForwardStep(S, cur.d[tb], sm.vecs.kh[tb], col, static_cast<double>(v),
                                        cur.sc[tb][kda_layout::kTokBt]);
        if (recompute && col == 0) a.residual[((t0 + tb) * H + h) * kDim + row] = w;
      }
    }
    CpAsyncWait<0>();
    __syncthreads();  // batch b + 1 landed; kh (qh) and this buffer no longer read
  }

  if (role == RowRole::kRecompute) return;
  // B goes where the next segment's start state will be (the forward scan turns it into that
  // state in place); M and E to the segment's own slot.
  double* dst = role == RowRole::kB   ? checkpoint(send)
                : role == RowRole::kM ? a.seg_map + (slot * H + h) * kDimSq
                                      : a.seg_grad + (slot * H + h) * kDimSq;
  double2* out = reinterpret_cast<double2*>(dst + int64_t(row) * kDim);
#pragma unroll
  for (int i = 0; i < kRowPairs; ++i) out[col + kRowLanes * i] = make_double2(S[i][0], S[i][1]);
}

// The token pass: warp per (token, head), every token of the call (tokens outside any document
// too: they are inputs all the same, and no pass reads them).
constexpr int kTokenPassWarps = 8;

__global__ void __launch_bounds__(kTokenPassWarps * 32)
    KdaTokenPassKernel(const __grid_constant__ SeqBwdArgs a) {
  const int lane = threadIdx.x & 31;
  const int64_t t = static_cast<int64_t>(blockIdx.x) * kTokenPassWarps + (threadIdx.x >> 5);
  const int64_t h = blockIdx.y;
  const int64_t H = a.s.H;
  if (t >= a.s.total_tokens) return;
  const double exp_a = exp(static_cast<double>(a.A_log[h]));
  const float4 dtb = reinterpret_cast<const float4*>(a.dt_bias + h * kDim)[lane];
  const TokenCost64 c =
      ComputeTokenCost64(LoadToken(a.q, a.k, a.g, a.beta, t, H, h), dtb, exp_a, a.s.lower_bound);
  const int64_t th = t * H + h;
  double2* dp = reinterpret_cast<double2*>(a.tok_d + th * kDim) + 2 * lane;
  dp[0] = make_double2(c.d[0], c.d[1]);
  dp[1] = make_double2(c.d[2], c.d[3]);
  if (lane == 0) {
    double2* sp = reinterpret_cast<double2*>(a.tok_s + th * kda_layout::kTokenScalars);
    sp[0] = make_double2(c.s.rq, c.s.rk);
    sp[1] = make_double2(c.s.bt, 0.0);  // the pad too: the row passes copy all four
  }
}

}  // namespace

template <RowLaunch kLaunch>
Status LaunchRowKernel(const SeqBwdArgs& a, int64_t slots, const char* what, cudaStream_t stream) {
  constexpr int kSmem = static_cast<int>(sizeof(RowSmem<kLaunch>));
  static std::atomic<uint64_t> done{0};
  const Status attr = AllowSmem(KdaRowPassKernel<kLaunch>, kSmem, &done, what);
  if (!attr.ok()) return attr;
  const int64_t ctas = CtasPerSlot(kLaunch) * slots;
  if (ctas > 0x7fffffff) return InvalidArgument("kda: too many tokens for one call");
  const dim3 grid(static_cast<unsigned>(ctas), static_cast<unsigned>(a.s.H));
  KdaRowPassKernel<kLaunch><<<grid, RowTraits::kThreads, kSmem, stream>>>(a);
  return CheckLaunch(what);
}

Status LaunchTokenPass(const SeqBwdArgs& a, cudaStream_t stream) {
  const int64_t blocks = (a.s.total_tokens + kTokenPassWarps - 1) / kTokenPassWarps;
  if (blocks == 0) return OkStatus();
  if (blocks > 0x7fffffff) return InvalidArgument("kda: too many tokens for one call");
  const dim3 grid(static_cast<unsigned>(blocks), static_cast<unsigned>(a.s.H));
  KdaTokenPassKernel<<<grid, kTokenPassWarps * 32, 0, stream>>>(a);
  return CheckLaunch("the token pass");
}

Status LaunchRowPass(const SeqBwdArgs& a, RowPass pass, cudaStream_t stream) {
  if (a.s.N == 0) return OkStatus();
  const int64_t slots = kda_layout::SegmentSlots(a.s.total_tokens, a.s.N, a.s.segment);
  if (pass == RowPass::kRecompute) {
    return LaunchRowKernel<RowLaunch::kRecompute>(a, slots, "the recompute pass", stream);
  }
  const Status bm = LaunchRowKernel<RowLaunch::kBM>(a, slots, "the segment transitions", stream);
  if (!bm.ok()) return bm;
  return LaunchRowKernel<RowLaunch::kE>(a, slots, "the segment gradients", stream);
}

}  // namespace kda_cuda
}  // namespace cakegrad::kernels
