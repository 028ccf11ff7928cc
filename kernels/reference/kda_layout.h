// Workspace layout of the KDA CUDA kernels, shared by the shape-only size queries
// (kda_workspace.cc, no CUDA) and the kernels (cuda/kda_*.cu), so the two cannot disagree.
#pragma once

#include <cstdint>

namespace cakegrad::kernels::kda_layout {

constexpr int64_t kDim = 128;
// Tokens between the state checkpoints the backward's recompute pass saves; the backward
// rebuilds every state inside such a chunk from its checkpoint (kernels/cuda/kda_backward.cu).
constexpr int64_t kCheckpointInterval = 32;
// CTAs (one cluster) that split the 128 state rows of one (document, head) in the backward;
// each leaves one row of parameter-gradient partials.
constexpr int64_t kRowSplit = 8;
constexpr int64_t kAlign = 256;

constexpr int64_t AlignUp(int64_t x) { return (x + kAlign - 1) / kAlign * kAlign; }

// N for the params' num_docs convention (0 means B).
constexpr int64_t Docs(int64_t B, int64_t num_docs) { return num_docs > 0 ? num_docs : B; }

// Checkpoint slots: document n's chunk c lives at slot floor(bos_n / interval) + n + c, which
// never collides with document n+1's slots and stays below this bound for any clamped offsets.
constexpr int64_t CheckpointSlots(int64_t total_tokens, int64_t docs) {
  return total_tokens / kCheckpointInterval + docs + 1;
}

// The sequential backward cuts documents into segments that run in parallel: each one's
// transition (the state map M over its tokens, the state B it builds from zero, the state
// gradient E it sends back from zero) is computed on its own, and two FP64 scans over the segments
// link them (kernels/cuda/kda_segment.cu). A segment is a multiple of kCheckpointInterval tokens
// (every segment starts at a checkpoint) and at least kSegmentMin; the workspace is sized for
// that shortest length.
constexpr int64_t kSegmentMin = 256;
constexpr int64_t kSegmentMax = 512;
static_assert(kSegmentMin % kCheckpointInterval == 0, "segments start at checkpoints");

// The segment length of a call, from its shape and the backward kernel's resident clusters on the
// device (its one-wave capacity). Whole documents when the (document, head) chains alone give
// every cluster two; otherwise the fewest waves of clusters whose segments stay within
// kSegmentMax tokens, so that the last wave is as full as the others (for one document, or B of
// equal length; packed documents only approximately). Longer segments mean fewer sequential scan
// steps; more waves mean more parallel work for the passes before the backward.
constexpr int64_t SegmentLength(int64_t total_tokens, int64_t docs, int64_t H, int64_t clusters) {
  const int64_t c = clusters > 0 ? clusters : 1;
  if (docs * H >= 2 * c) {
    return total_tokens > kSegmentMin ? (total_tokens + kSegmentMin - 1) / kSegmentMin * kSegmentMin
                                      : kSegmentMin;
  }
  const int64_t work = total_tokens * H;
  for (int64_t waves = 1;; ++waves) {
    const int64_t per = (work + waves * c - 1) / (waves * c);
    const int64_t len = (per + kCheckpointInterval - 1) / kCheckpointInterval * kCheckpointInterval;
    if (len <= kSegmentMax) return len < kSegmentMin ? kSegmentMin : len;
  }
}

// Segment slots, by the checkpoints' rule: document n's segment c lives at slot
// floor(bos_n / len) + n + c; below this bound for any len >= kSegmentMin.
constexpr int64_t SegmentSlots(int64_t total_tokens, int64_t docs, int64_t len = kSegmentMin) {
  return total_tokens / len + docs + 1;
}

// Per-token FP64 scalars the sequential backward's token pass keeps, at these indices, and a pad
// to 32 bytes (two double2).
constexpr int64_t kTokRq = 0, kTokRk = 1, kTokBt = 2;
constexpr int64_t kTokenScalars = 4;
static_assert(kTokRq == 0 && kTokRk == 1 && kTokBt == 2 && kTokenScalars == 4,
              "written and read as two double2: (rq, rk), (bt, pad)");

struct BwdLayout {
  int64_t checkpoints = 0;     // FP64 [slots, H, 128, 128]
  int64_t residual = 0;        // FP64 [total_tokens, H, 128]: w = v - S_decayed kh, per token
  int64_t tok_d = 0;           // FP64 [total_tokens, H, 128]: the token pass's decays
  int64_t tok_s = 0;           // FP64 [total_tokens, H, kTokenScalars]: its rq, rk, bt
  int64_t seg_map = 0;         // FP64 [segment slots, H, 128, 128]: M, the segment's state map
  int64_t seg_grad = 0;        // FP64 [segment slots, H, 128, 128]: E, then the state gradient
                               // at the segment's end
  int64_t param_partials = 0;  // FP64 [segment slots, H, kRowSplit, 2, 128]: ddt_bias and
                               // dA_log terms
  int64_t total = 0;
};

constexpr BwdLayout MakeBwdLayout(int64_t B, int64_t T, int64_t H, int64_t num_docs) {
  BwdLayout l;
  const int64_t tokens = B * T;
  const int64_t docs = Docs(B, num_docs);
  const int64_t segs = SegmentSlots(tokens, docs);
  int64_t off = 0;
  l.checkpoints = off;
  off += AlignUp(CheckpointSlots(tokens, docs) * H * kDim * kDim * 8);
  l.residual = off;
  off += AlignUp(tokens * H * kDim * 8);
  l.tok_d = off;
  off += AlignUp(tokens * H * kDim * 8);
  l.tok_s = off;
  off += AlignUp(tokens * H * kTokenScalars * 8);
  l.seg_map = off;
  off += AlignUp(segs * H * kDim * kDim * 8);
  l.seg_grad = off;
  off += AlignUp(segs * H * kDim * kDim * 8);
  l.param_partials = off;
  off += AlignUp(segs * H * kRowSplit * 2 * kDim * 8);
  l.total = off;
  return l;
}

// Chunked forward (kernels/cuda/kda_chunked_forward.cu): tokens per chunk, and one record of
// chunk operands per (chunk slot, head). Document n's chunk c lives at slot
// floor(bos_n / kChunk) + n + c: unique per chunk, and below ChunkSlots for any clamped offsets.
constexpr int64_t kChunk = 64;
constexpr int64_t ChunkSlots(int64_t total_tokens, int64_t docs) {
  return total_tokens / kChunk + docs + 1;
}

// One chunk record (bytes). Split operands are BF16 pairs (hi = bf16(x), lo = bf16(x - hi)),
// hi block then lo block, row-major: -W [64][128], Q Gam [64][128], (K Gam_C / Gam)^T
// [128][64], M [64][64]; then Uv FP32 [64][128] and Gam_C FP32 [128].
constexpr int64_t kRecNegW = 0;
constexpr int64_t kRecQg = kRecNegW + 2 * kChunk * kDim * 2;
constexpr int64_t kRecKdecT = kRecQg + 2 * kChunk * kDim * 2;
constexpr int64_t kRecM = kRecKdecT + 2 * kDim * kChunk * 2;
constexpr int64_t kRecUv = kRecM + 2 * kChunk * kChunk * 2;
constexpr int64_t kRecGamC = kRecUv + kChunk * kDim * 4;
constexpr int64_t kRecBytes = AlignUp(kRecGamC + kDim * 4);

// Chunked backward (kernels/cuda/kda_chunked_backward.cu), per (chunk slot, head): the forward's
// chunk record, the FP32 chunk-start state S0 and chunk-end state gradient dS1 (value-first
// [128][128]), and FP32 parameter-gradient partials: ddt_bias terms [128], then dA_log terms
// per key channel [128] (reduced over slots and channels in FP64, in a fixed order).
constexpr int64_t kBwdPartials = 2 * kDim;
// The checkpoint preparation's P = A / beta (the strictly lower products of normalised keys with
// the decays), FP32, packed by 16-token sub-chunk: row t of sub-chunk J keeps its columns
// 0 .. 16 J + 15 (zeros from t on), block J at 256 J (J + 1) / 2 floats.
constexpr int64_t kChunkPFloats = 16 * 16 * 10;
// The first float of sub-chunk J's block in that packing, and the sub-chunk of float e.
constexpr int PackedBlockStart(int J) { return 16 * 16 * (J * (J + 1) / 2); }
constexpr int PackedBlockOf(int e) {
  return e < PackedBlockStart(1)   ? 0
         : e < PackedBlockStart(2) ? 1
         : e < PackedBlockStart(3) ? 2
                                   : 3;
}

struct ChunkBwdLayout {
  int64_t records = 0;   // kRecBytes per (slot, head)
  int64_t s0 = 0;        // FP32 [slots, H, 128, 128]
  int64_t ds1 = 0;       // FP32 [slots, H, 128, 128]
  int64_t partials = 0;  // FP32 [slots, H, kBwdPartials]
  int64_t p = 0;         // FP32 [slots, H, kChunkPFloats]
  int64_t tinv = 0;      // FP32 [slots, H, kChunkPFloats]: Tinv = (I + A)^-1, packed as P
  int64_t du = 0;        // FP32 [slots, H, 64, 128]: dU, the reverse chain's
  int64_t u = 0;         // FP32 [slots, H, 64, 128]: U, the checkpoint state pass's
  int64_t kdt3 = 0;      // BF16 [slots, H, 128, 64]: Kdec^T's third part (the record's 2 + this)
  int64_t ready = 0;     // uint32 [slots, H]: the state pass's and reverse chain's CTAs done with
                         // the slot (S0, U; dS1, dU)
  int64_t total = 0;
};

constexpr ChunkBwdLayout MakeChunkBwdLayout(int64_t B, int64_t T, int64_t H, int64_t num_docs) {
  ChunkBwdLayout l;
  const int64_t slots_h = ChunkSlots(B * T, Docs(B, num_docs)) * H;
  int64_t off = 0;
  l.records = off;
  off += AlignUp(slots_h * kRecBytes);
  l.s0 = off;
  off += AlignUp(slots_h * kDim * kDim * 4);
  l.ds1 = off;
  off += AlignUp(slots_h * kDim * kDim * 4);
  l.partials = off;
  off += AlignUp(slots_h * kBwdPartials * 4);
  l.p = off;
  off += AlignUp(slots_h * kChunkPFloats * 4);
  l.tinv = off;
  off += AlignUp(slots_h * kChunkPFloats * 4);
  l.du = off;
  off += AlignUp(slots_h * kChunk * kDim * 4);
  l.u = off;
  off += AlignUp(slots_h * kChunk * kDim * 4);
  l.kdt3 = off;
  off += AlignUp(slots_h * kDim * kChunk * 2);
  l.ready = off;
  off += AlignUp(slots_h * 4);
  l.total = off;
  return l;
}

constexpr int64_t FwdWorkspaceBytes(int64_t B, int64_t T, int64_t H, int64_t num_docs) {
  return ChunkSlots(B * T, Docs(B, num_docs)) * H * kRecBytes;
}

}  // namespace cakegrad::kernels::kda_layout
