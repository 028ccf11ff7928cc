// The sequential KDA backward's segment scans (kda_backward.cu): what lets the segments of one
// (document, head) run their recompute and backward in parallel instead of one after another.
//
// Over a segment of tokens the state recurrence is affine in the state, S_end = S_start M + B
// (M = prod_t diag(d_t) (I - bt_t kh_t kh_t^T), B = the state built from zero), and the state
// gradient's recurrence is linear, G_start = G_end M^T + E (E = the gradient sent back from zero
// by the segment's own outputs). The row passes (kda_row_pass.cu) compute B, M and E of every
// segment at once; KdaSegmentScanKernel then walks each (document, head)'s segments in order, in
// FP64: the start state of each segment (into its first checkpoint, where the recompute pass
// starts), and in reverse the gradient at each segment's end (over E, where the backward starts).
// A scan step is a 128 x 128 x 128 product split over kCtas CTAs by rows, one step per segment of
// at least kda_layout::kSegmentMin tokens.
#include <atomic>

#include "cp_async.cuh"
#include "kda_common.cuh"

namespace cakegrad::kernels {
namespace kda_cuda {
namespace {

struct ScanTraits {
  static constexpr int kCtas = 16;  // per scan and (document, head)
  static constexpr int kRows = kDim / kCtas;
  // Thread (group, j) carries column j of kRowsPerGroup of the CTA's rows: two groups, so that
  // each scheduler has two warps to issue from (one left each FP64 product waiting on its own
  // loads: ~13 K cycles a step against its ~2 K of FP64 issue, ncu kda80).
  static constexpr int kGroups = 2;
  static constexpr int kRowsPerGroup = kRows / kGroups;
  static constexpr int kThreads = kGroups * kDim;
  // A step's map M streams through shared memory in tiles of kKTile of the product's k, kStages
  // buffers with cp.async (kStages - 1 tiles in flight), across tiles and steps: the forward
  // scan's tile is rows k of M ([kKTile][128], thread j reads column j), the reverse scan's
  // columns k of every row ([128][kRevStride], thread j reads row j; the odd number of 16-byte
  // pieces a row keeps a half-warp's reads 2-way conflicted at most).
  static constexpr int kKTile = 32;
  static constexpr int kStages = 4;
  static constexpr int kTilesPerStep = kDim / kKTile;
  static constexpr int kRevStride = kKTile + 2;
  static constexpr int kTileDoubles = kDim * kRevStride;
  static constexpr int kPiecesPerThread = kKTile * kDim / 2 / kThreads;  // 16-byte copies
  static_assert(kDim % kKTile == 0 && kKTile % 2 == 0, "whole tiles of 16-byte pieces");
  static_assert(kKTile * kDim / 2 % kThreads == 0, "whole pieces per thread");
  static_assert(kRowsPerGroup % 2 == 0, "rows read as double2");
};

struct ScanSmem {
  double X[kDim][ScanTraits::kRows];  // the carried rows, transposed: X[column][row]
  double tile[ScanTraits::kStages][ScanTraits::kTileDoubles];
};

// Issues the copies of tile t of map M into buf (one commit group).
__device__ __forceinline__ void IssueMapTile(const double* M, int t, bool reverse, double* buf) {
  using Tr = ScanTraits;
#pragma unroll
  for (int i = 0; i < Tr::kPiecesPerThread; ++i) {
    const int piece = i * Tr::kThreads + static_cast<int>(threadIdx.x);
    if (!reverse) {  // rows k0 .. k0 + kKTile - 1, 64 pieces a row
      const int kk = piece / (kDim / 2), c2 = piece % (kDim / 2);
      CpAsync<16>(buf + kk * kDim + 2 * c2, M + (t * Tr::kKTile + kk) * kDim + 2 * c2);
    } else {  // columns k0 .. k0 + kKTile - 1 of every row, kKTile / 2 pieces a row
      const int row = piece / (Tr::kKTile / 2), c2 = piece % (Tr::kKTile / 2);
      CpAsync<16>(buf + row * Tr::kRevStride + 2 * c2, M + row * kDim + t * Tr::kKTile + 2 * c2);
    }
  }
  CpAsyncCommit();
}

// One scan over a (document, head)'s segments, kRows rows a CTA:
//   forward: X = initial state; for c = 0 .. segs - 2: X <- X M(c) + B(c), written over B(c) at
//            segment c + 1's first checkpoint (segment 0's gets the initial state);
//   reverse: X = dfinal_state; for c = segs - 1 .. 1: written over E(c), then X <- X M(c)^T +
//            E(c); segment 0's seg_grad gets the last X.
__global__ void __launch_bounds__(ScanTraits::kThreads)
    KdaSegmentScanKernel(const __grid_constant__ SeqBwdArgs a) {
  using Tr = ScanTraits;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  ScanSmem& sm = *reinterpret_cast<ScanSmem*>(smem_raw);
  const bool reverse = blockIdx.x >= Tr::kCtas;
  const int r0 = (blockIdx.x % Tr::kCtas) * Tr::kRows;
  const int64_t h = blockIdx.y;
  const int64_t n = blockIdx.z;
  const int64_t H = a.s.H;
  const int j = threadIdx.x % kDim;
  const int g0 = (threadIdx.x / kDim) * Tr::kRowsPerGroup;  // this thread's first CTA row

  int64_t bos, eos;
  DocBounds(a.s, n, &bos, &eos);
  const int64_t len = a.s.segment;
  const int64_t segs = (eos - bos + len - 1) / len;
  const int64_t state_off = (n * H + h) * kDimSq;
  // The loop below indexes with multiplications only (no 64-bit division a tile): CheckpointAt's
  // rule with segment c's first token, bos + c len, folded into a slot and a stride.
  const int64_t seg_slot0 = bos / len + n;
  const int64_t ck_slot0 = bos / kda_layout::kCheckpointInterval + n;
  const int64_t ck_per_seg = len / kda_layout::kCheckpointInterval;
  auto start_checkpoint = [&](int64_t c) {
    return a.checkpoints + ((ck_slot0 + c * ck_per_seg) * H + h) * kDimSq;
  };
  auto segment = [&](auto* base, int64_t c) { return base + ((seg_slot0 + c) * H + h) * kDimSq; };
  auto elem = [&](int r) { return int64_t(r0 + g0 + r) * kDim + j; };

  const float* x0 = reverse ? a.dfinal_state : a.initial_state;
#pragma unroll
  for (int r = 0; r < Tr::kRowsPerGroup; ++r) {
    sm.X[j][g0 + r] = x0 != nullptr ? x0[state_off + elem(r)] : 0.0;
  }
  if (segs == 0) {
    // An empty document: dinitial_state is dfinal_state (no segment's backward will write it).
    if (reverse && a.dinitial_state != nullptr) {
#pragma unroll
      for (int r = 0; r < Tr::kRowsPerGroup; ++r) {
        a.dinitial_state[state_off + elem(r)] = static_cast<float>(sm.X[j][g0 + r]);
      }
    }
    return;
  }
  if (!reverse) {
#pragma unroll
    for (int r = 0; r < Tr::kRowsPerGroup; ++r) start_checkpoint(0)[elem(r)] = sm.X[j][g0 + r];
  }

  // Step s maps segment c = s (forward) or segs - 1 - s (reverse); segs - 1 steps in all. Tiles
  // are issued kStages - 1 ahead of use (empty commit groups past the end, so that one wait
  // count serves every tile), each into the buffer the tile before its use freed.
  const int64_t steps = segs - 1;
  auto map_of = [&](int64_t step) { return segment(a.seg_map, reverse ? segs - 1 - step : step); };
  int64_t next_step = 0;
  int next_t = 0, next_buf = 0;
  auto issue_next = [&]() {
    if (next_step < steps) {
      IssueMapTile(map_of(next_step), next_t, reverse, sm.tile[next_buf]);
    } else {
      CpAsyncCommit();
    }
    next_buf = next_buf + 1 == Tr::kStages ? 0 : next_buf + 1;
    if (++next_t == Tr::kTilesPerStep) {
      next_t = 0;
      ++next_step;
    }
  };
  for (int i = 0; i < Tr::kStages - 1; ++i) issue_next();
  int buf = 0;
  for (int64_t step = 0; step < steps; ++step) {
    const int64_t c = reverse ? segs - 1 - step : step;
    double* add = reverse ? segment(a.seg_grad, c) : start_checkpoint(c + 1);
    double acc[Tr::kRowsPerGroup];
#pragma unroll
    for (int r = 0; r < Tr::kRowsPerGroup; ++r) {
      acc[r] = add[elem(r)];
      if (reverse) add[elem(r)] = sm.X[j][g0 + r];  // segment c's backward starts from it
    }
    for (int t = 0; t < Tr::kTilesPerStep; ++t) {
      issue_next();
      CpAsyncWait<Tr::kStages - 1>();
      __syncthreads();  // this tile (and X) visible to all
      const double* tile = sm.tile[buf];
#pragma unroll 8
      for (int kk = 0; kk < Tr::kKTile; ++kk) {
        const double m = reverse ? tile[j * Tr::kRevStride + kk] : tile[kk * kDim + j];
        const double2* x = reinterpret_cast<const double2*>(&sm.X[t * Tr::kKTile + kk][g0]);
#pragma unroll
        for (int r = 0; r < Tr::kRowsPerGroup / 2; ++r) {
          const double2 xv = x[r];
          acc[2 * r] = fma(xv.x, m, acc[2 * r]);
          acc[2 * r + 1] = fma(xv.y, m, acc[2 * r + 1]);
        }
      }
      __syncthreads();  // every thread is done with this tile's buffer and with X
      buf = buf + 1 == Tr::kStages ? 0 : buf + 1;
    }
#pragma unroll
    for (int r = 0; r < Tr::kRowsPerGroup; ++r) {
      sm.X[j][g0 + r] = acc[r];
      if (!reverse) add[elem(r)] = acc[r];
    }
    // The next tile's barrier orders these writes before X is read again.
  }
  if (reverse) {
    double* first = segment(a.seg_grad, 0);
#pragma unroll
    for (int r = 0; r < Tr::kRowsPerGroup; ++r) first[elem(r)] = sm.X[j][g0 + r];
  }
}

}  // namespace

Status LaunchSegmentScans(const SeqBwdArgs& a, cudaStream_t stream) {
  if (a.s.N == 0) return OkStatus();
  constexpr int kSmem = static_cast<int>(sizeof(ScanSmem));
  static std::atomic<uint64_t> done{0};
  const Status attr = AllowSmem(KdaSegmentScanKernel, kSmem, &done, "the segment scans");
  if (!attr.ok()) return attr;
  const dim3 grid(2 * ScanTraits::kCtas, static_cast<unsigned>(a.s.H),
                  static_cast<unsigned>(a.s.N));
  KdaSegmentScanKernel<<<grid, ScanTraits::kThreads, kSmem, stream>>>(a);
  return CheckLaunch("the segment scans");
}

}  // namespace kda_cuda
}  // namespace cakegrad::kernels
