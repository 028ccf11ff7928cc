// Workspace layout of the mHC CUDA kernels, shared by the shape-only size queries (host code,
// no CUDA) and the kernels that carve the workspace. Every number here depends on (T, C) only,
// so a workspace sized for a shape serves every call of that shape and the reduction order
// (hence the bits of dfn/dscale/dbase) never depends on the device or the workspace contents.
#pragma once

#include <cstdint>

#include "cakegrad/kernels/mhc.h"

namespace cakegrad::kernels::mhc_layout {

constexpr int64_t kAlign = 256;
constexpr int64_t AlignUp(int64_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

constexpr bool ValidShape(int64_t T, int64_t C) {
  return T >= 0 && C >= kMhcMinC && C <= kMhcMaxC && C % kMhcCAlign == 0;
}

// backward_finish, kernel 1 writes one record of per-token scalars (dz, dsq, dl, dl*m per
// group); kernel 2 reads them.
constexpr int64_t kTokenRecordFloats = 64;
// [0, 24) as 48 BF16: dz_j = dl_j * scale[g(j)] * r split for the tensor cores, hi[24] then
// lo[24] (hi = bf16(dz), lo = bf16(dz - hi)); kernel 2 copies the pair as it is.
constexpr int kRecDz = 0;
constexpr int kRecDsq = 24;     // dsq = -0.5 * dr * r^3 / (4C)
constexpr int kRecDl = 32;      // [32, 56): dl_j (dbase terms)
constexpr int kRecDscale = 56;  // [56, 62): the 3 dscale terms sum_{j in g} dl_j m_j as doubles

// Kernel 2 tiles tokens by chunks and channels by blocks of all four streams; each (chunk,
// column block) CTA writes its dfn partial, and kernel 3 sums chunks in order. The chunk count
// aims at kTargetBwdCtas CTAs of kColsPerBlock channels (kernel 2's first tiling; its tensor-core
// version tiles 64 channels, so it runs twice as many CTAs). Kept as is: the chunk count fixes
// the summation order, hence dfn's bits, and the workspace size.
constexpr int64_t kColsPerBlock = 128;
constexpr int64_t kTargetBwdCtas = 256;
constexpr int64_t kMaxChunks = 64;

constexpr int64_t BwdFinishChunks(int64_t T, int64_t C) {
  const int64_t col_blocks = C / kColsPerBlock;
  int64_t chunks = (kTargetBwdCtas + col_blocks - 1) / col_blocks;
  if (chunks > kMaxChunks) chunks = kMaxChunks;
  if (chunks > T) chunks = T;
  return chunks < 1 ? 1 : chunks;
}

constexpr int64_t BwdFinishRecordsBytes(int64_t T) { return AlignUp(T * kTokenRecordFloats * 4); }
constexpr int64_t BwdFinishPartialsBytes(int64_t T, int64_t C) {
  return AlignUp(BwdFinishChunks(T, C) * kMhcLogits * 4 * C * 4);
}

// Forward: room for a split (hi, lo) BF16 copy of fn, [48, 4C], for tensor-core paths.
constexpr int64_t ForwardFnSplitBytes(int64_t C) { return AlignUp(2 * kMhcLogits * 4 * C * 2); }

// forward_stats at C = kFwdSliceC: the cluster kernel's per-rank CTA sums (z_0..23, sq of each
// token, one per k-slice rank), written by independent CTAs and summed in rank order by a second
// kernel; floats [kFwdRanks][T rounded up to kFwdStageTok][kFwdRow] (a token's values, padded to
// 16 bytes). Sized for that C whatever the device, so the size query stays a function of (T, C).
constexpr int64_t kFwdSliceC = 4096;
constexpr int64_t kFwdRanks = 16;
constexpr int64_t kFwdVals = kMhcLogits + 1;
constexpr int64_t kFwdRow = 28;
constexpr int64_t kFwdStageTok = 32;
constexpr int64_t FwdPartialsTokens(int64_t T) {
  return (T + kFwdStageTok - 1) / kFwdStageTok * kFwdStageTok;
}
constexpr int64_t ForwardPartialsBytes(int64_t T, int64_t C) {
  return C == kFwdSliceC ? AlignUp(kFwdRanks * FwdPartialsTokens(T) * kFwdRow * 4) : 0;
}

}  // namespace cakegrad::kernels::mhc_layout
