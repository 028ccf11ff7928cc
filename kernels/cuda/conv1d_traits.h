// Tiling of the conv1d kernels, shared by the launchers, the device code and the workspace query
// (which host-only builds compile too, so this header needs no CUDA).
//
// A CTA owns a tile of `tile_tokens` consecutive tokens and `vx * V` consecutive channels. Each
// thread walks one segment of kSegLen tokens of V channels (one 16-byte BF16 vector when V = 8),
// keeping a 4-token window in registers; the segments of a tile are stacked `segs` deep. The tile
// shape depends on C only (never on the vector width a call's alignment allows), so the order in
// which dweight/dbias are summed, and hence their bits, depend on (S, C) alone.
#pragma once

#include <cstdint>

namespace cakegrad::kernels::conv1d {

// Number of partial rows per token tile in the backward workspace: dweight[:, 0..3], dbias.
constexpr int kPartialRows = 5;
// Tokens a segment needs beyond its own: 3 before (x history) and 3 after (dx looks ahead).
constexpr int kHalo = 3;

// Words of doc-start bits for a tile of `tile_tokens` tokens plus the halo on both sides.
constexpr int MarkWords(int64_t tile_tokens) {
  return static_cast<int>((tile_tokens + 2 * kHalo + 31) / 32);
}

template <int kThreads_, int kSegLen_, int kMaxVx_>
struct TileTraits {
  static constexpr int kThreads = kThreads_;                 // threads per CTA
  static constexpr int kSegLen = kSegLen_;                   // tokens per thread
  static constexpr int kMaxVx = kMaxVx_;                     // channel vectors per CTA row, at most
  static constexpr int kMaxTileTokens = kThreads * kSegLen;  // when vx == 1
  static constexpr int kMarkWords = MarkWords(kMaxTileTokens);  // the largest tile's
  static_assert((kThreads & (kThreads - 1)) == 0, "kThreads must be a power of two");
  static_assert((kMaxVx & (kMaxVx - 1)) == 0 && kMaxVx <= kThreads, "bad kMaxVx");
  static_assert(kMaxVx >= 32, "a warp must cover one row of a segment when C is large");
  static_assert(kSegLen % 4 == 0 && kSegLen >= 2 * kHalo, "the walk is unrolled by 4");
};

// Forward: 128-thread CTAs, six per SM at 80 registers (V = 4). Against 256-thread CTAs (three
// per SM) each CTA's work is halved, so the SMs finish more evenly (32768 x 4096 was 15.5 CTAs
// of 256 threads per SM): 1% faster there on the H200, 0.7% at 65536 x 12288.
using FwdTraits = TileTraits<128, 64, 32>;
// Backward: 256-thread CTAs, two per SM at 128 registers (V = 4; 16 warps per SM, as four
// 128-thread CTAs gave before). Under "bf16" each CTA holds SiLU''s table in shared memory
// (below), and a CTA twice as large copies it half as often: 48 KB of rings + 31.5 KB of table +
// the tile's marks (140 bytes when C >= 256) + 1 KB reserved per CTA, ~161 KB per SM, so a 164 KB
// carveout with 92 KB of L1 (conv1d_backward.cu).
// Segments of 136 tokens: a walk of L tokens takes L + 6 steps (the halo) rounded up to the
// ring's 12-step body, so 136 (144 steps) wastes less than 64 did (72 steps for 64 tokens), and a
// CTA's start-up (ring prefill, document search, table copy, under block barriers) is paid for
// 1088 tokens instead of 512. On the H200 (sixth session, same call, two runs each) that took
// "bf16" from 259-264 to 243-245 us at 32768 x 4096 (1.28-1.29x the floor) and from 1452-1669
// to 1319-1390 us at 65536 x 12288 (1.16-1.22x); "fp32" 274-280 -> 279-282 us (small shape) and
// 1617-1880 -> 1555-1763 us (large, power-capped); L = 100 was in between; L = 126 (exactly 4
// waves of CTAs at 32768 x 4096) and persistent CTAs walking several tiles each were slower
// (seventh session, conv1d_h200.md). The partial rows are 20 bytes per channel per 1088-token
// tile (0.3% of the main traffic).
using BwdTraits = TileTraits<256, 136, 32>;

// SiLU' of every BF16 preactivation p the "bf16" policy can see, correctly rounded to FP32 from
// FP64, indexed by p's 16 bits with the magnitude clamped to [kSiluTabLo, kSiluTabHi] =
// [2^-24, 127.5]: below, SiLU'(p) = 0.5 + p/2 - p^3/12... is within an FP32 ulp of the clamped
// entry; above, SiLU'(p) is 1 (p > 0) or rounds to zero (p < 0) in FP32, as is the entry at
// 127.5 (NaN lands there too: it yields 1 or 0, never an index outside the table). The library
// holds it (conv1d_backward.cu); each CTA copies it into shared memory with the
// negative half kSiluTabSignBytes after the positive one, so that p's sign bit as it is (bit 15)
// is the byte offset's: one instruction a pair less than at bit 14. The 16.5 KB between the
// halves hold ring slots (with the gap left empty, 16 KB less L1 cost 5-10 us on the H200).
constexpr uint32_t kSiluTabLo = 0x3380u;                                     // BF16 2^-24
constexpr uint32_t kSiluTabHi = 0x42FFu;                                     // BF16 127.5
constexpr int kSiluTabHalf = static_cast<int>(kSiluTabHi - kSiluTabLo + 1);  // entries per sign
constexpr int kSiluTabEntries = 2 * kSiluTabHalf;
constexpr int kSiluTabSignBytes = 0x8000;
constexpr int kSiluTabSmemBytes = kSiluTabSignBytes + kSiluTabHalf * 4;
// The bytes between the halves, which the backward fills with ring slots.
constexpr int kSiluTabGapBegin = kSiluTabHalf * 4;
constexpr int kSiluTabGapBytes = kSiluTabSignBytes - kSiluTabGapBegin;
static_assert(kSiluTabHalf * 4 <= kSiluTabSignBytes, "the halves must not overlap");
static_assert(kSiluTabGapBegin % 16 == 0, "ring slots in the gap are 16-byte aligned");

struct Tiling {
  int32_t vx = 1;           // channel vectors per CTA row (power of two)
  int32_t vx_log2 = 0;      // log2(vx)
  int32_t segs = 1;         // segments per CTA (kThreads / vx)
  int64_t tile_tokens = 0;  // segs * kSegLen
  int64_t num_ctiles = 0;   // CTAs across channels: ceil(C / (vx * V))
  int64_t num_ttiles = 0;   // CTAs across tokens: ceil(S / tile_tokens)
};

template <class Traits>
constexpr Tiling MakeTiling(int64_t S, int64_t C, int vec) {
  Tiling t;
  const int64_t nv8 = (C + 7) / 8;
  while (t.vx < Traits::kMaxVx && t.vx < nv8) {
    t.vx *= 2;
    ++t.vx_log2;
  }
  t.segs = Traits::kThreads / t.vx;
  t.tile_tokens = static_cast<int64_t>(t.segs) * Traits::kSegLen;
  const int64_t cta_channels = static_cast<int64_t>(t.vx) * vec;
  t.num_ctiles = (C + cta_channels - 1) / cta_channels;
  t.num_ttiles = S > 0 ? (S + t.tile_tokens - 1) / t.tile_tokens : 0;
  return t;
}

// FP32 partial rows [num_ttiles][kPartialRows][C]; the tile count does not depend on the vector
// width, so this is the maximum over every route.
constexpr int64_t BackwardWorkspaceBytes(int64_t S, int64_t C) {
  if (S <= 0 || C <= 0) return 0;
  return MakeTiling<BwdTraits>(S, C, 1).num_ttiles * kPartialRows * C *
         static_cast<int64_t>(sizeof(float));
}

}  // namespace cakegrad::kernels::conv1d
