// The KDA workspaces' layouts (reference/kda_layout.h) and the size queries built on them: every
// region aligned, large enough for what the kernels write there, and clear of its neighbours, for
// shapes from empty to the benchmark's. A region added to a layout without room (the chunked
// backward gained kdt3 in the twentieth session) fails here rather than on a device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "cakegrad/kernels/kda.h"
#include "reference/kda_layout.h"

namespace cakegrad::kernels {
namespace {

namespace L = kda_layout;

struct LayoutShape {
  int64_t B, T, H, num_docs;
};

std::vector<LayoutShape> Shapes() {
  return {{1, 0, 1, 0},      {1, 1, 4, 0},       {2, 65, 1, 0},   {1, 8192, 32, 0},
          {1, 32768, 16, 0}, {1, 32768, 16, 16}, {1, 300, 3, 16}, {3, 1000, 2, 0}};
}

std::string Name(const LayoutShape& s) {
  return "B" + std::to_string(s.B) + " T" + std::to_string(s.T) + " H" + std::to_string(s.H) +
         " N" + std::to_string(s.num_docs);
}

// Regions as (offset, bytes the kernels use), in layout order: each must start aligned and end
// before the next one starts; the last before the total.
void ExpectRegions(const std::vector<std::pair<int64_t, int64_t>>& regions, int64_t total,
                   const std::string& what) {
  int64_t end = 0;
  for (size_t i = 0; i < regions.size(); ++i) {
    const auto [offset, bytes] = regions[i];
    EXPECT_EQ(offset % L::kAlign, 0) << what << ": region " << i << " unaligned";
    EXPECT_GE(offset, end) << what << ": region " << i << " overlaps the one before";
    end = offset + bytes;
  }
  EXPECT_GE(total, end) << what << ": the total misses the last region";
  EXPECT_EQ(total % L::kAlign, 0) << what;
}

TEST(KdaWorkspaceLayout, ChunkedBackwardRegionsFitAndDoNotOverlap) {
  for (const LayoutShape& s : Shapes()) {
    const L::ChunkBwdLayout l = L::MakeChunkBwdLayout(s.B, s.T, s.H, s.num_docs);
    const int64_t sh = L::ChunkSlots(s.B * s.T, L::Docs(s.B, s.num_docs)) * s.H;
    ExpectRegions({{l.records, sh * L::kRecBytes},
                   {l.s0, sh * L::kDim * L::kDim * 4},
                   {l.ds1, sh * L::kDim * L::kDim * 4},
                   {l.partials, sh * L::kBwdPartials * 4},
                   {l.p, sh * L::kChunkPFloats * 4},
                   {l.tinv, sh * L::kChunkPFloats * 4},
                   {l.du, sh * L::kChunk * L::kDim * 4},
                   {l.u, sh * L::kChunk * L::kDim * 4},
                   {l.kdt3, sh * L::kDim * L::kChunk * 2},
                   {l.ready, sh * 4}},
                  l.total, "chunked backward " + Name(s));
  }
}

TEST(KdaWorkspaceLayout, SequentialBackwardRegionsFitAndDoNotOverlap) {
  for (const LayoutShape& s : Shapes()) {
    const L::BwdLayout l = L::MakeBwdLayout(s.B, s.T, s.H, s.num_docs);
    const int64_t docs = L::Docs(s.B, s.num_docs);
    const int64_t segs = L::SegmentSlots(s.B * s.T, docs);
    ExpectRegions(
        {{l.checkpoints, L::CheckpointSlots(s.B * s.T, docs) * s.H * L::kDim * L::kDim * 8},
         {l.residual, s.B * s.T * s.H * L::kDim * 8},
         {l.tok_d, s.B * s.T * s.H * L::kDim * 8},
         {l.tok_s, s.B * s.T * s.H * L::kTokenScalars * 8},
         {l.seg_map, segs * s.H * L::kDim * L::kDim * 8},
         {l.seg_grad, segs * s.H * L::kDim * L::kDim * 8},
         {l.param_partials, segs * s.H * L::kRowSplit * 2 * L::kDim * 8}},
        l.total, "sequential backward " + Name(s));
  }
}

// The sequential backward's segment length: a multiple of the checkpoint interval within
// [kSegmentMin, kSegmentMax] (so the layout's slot count bounds every call's), whole documents
// once the chains give every cluster two, and otherwise whole waves of clusters.
TEST(KdaWorkspaceLayout, SegmentLengthKeepsTheLayoutsBound) {
  for (const LayoutShape& s : Shapes()) {
    for (int64_t clusters : {1, 15, 16}) {
      const int64_t docs = L::Docs(s.B, s.num_docs);
      const int64_t tokens = s.B * s.T;
      const int64_t len = L::SegmentLength(tokens, docs, s.H, clusters);
      const std::string what = Name(s) + " clusters " + std::to_string(clusters);
      EXPECT_EQ(len % L::kCheckpointInterval, 0) << what;
      EXPECT_GE(len, L::kSegmentMin) << what;
      EXPECT_LE(L::SegmentSlots(tokens, docs, len), L::SegmentSlots(tokens, docs)) << what;
      if (docs * s.H >= 2 * clusters) {
        EXPECT_GE(len, tokens) << what << ": one segment per document";
      } else {
        EXPECT_LE(len, L::kSegmentMax) << what;
      }
    }
  }
  // One document: whole waves of 15 clusters.
  EXPECT_EQ(L::SegmentLength(4096, 1, 1, 15), 288);      // 15 segments, one wave
  EXPECT_EQ(L::SegmentLength(8192, 1, 1, 15), 288);      // 29 segments, two waves
  EXPECT_EQ(L::SegmentLength(32768, 1, 2, 15), 512);     // 64 a head, 128 in nine waves
  EXPECT_EQ(L::SegmentLength(32768, 16, 2, 15), 32768);  // whole documents
  EXPECT_EQ(L::SegmentLength(1000, 2, 1, 15), 256);
}

// The chunk record: its operands in order, each 16-byte aligned (the state pass's tensor maps and
// bulk copies need it), inside kRecBytes.
TEST(KdaWorkspaceLayout, ChunkRecordOperandsInOrderAndAligned) {
  const std::vector<std::pair<int64_t, int64_t>> ops = {
      {L::kRecNegW, 2 * L::kChunk * L::kDim * 2},  {L::kRecQg, 2 * L::kChunk * L::kDim * 2},
      {L::kRecKdecT, 2 * L::kDim * L::kChunk * 2}, {L::kRecM, 2 * L::kChunk * L::kChunk * 2},
      {L::kRecUv, L::kChunk * L::kDim * 4},        {L::kRecGamC, L::kDim * 4}};
  int64_t end = 0;
  for (const auto& [offset, bytes] : ops) {
    EXPECT_EQ(offset % 16, 0);
    EXPECT_EQ(offset, end) << "record operands are packed back to back";
    end = offset + bytes;
  }
  EXPECT_GE(L::kRecBytes, end);
  EXPECT_EQ(L::kRecBytes % L::kAlign, 0);
}

// The public queries: the forward's is its records; the backward's covers whichever backward
// serves the call; invalid shapes give 0.
TEST(KdaWorkspaceLayout, SizeQueriesCoverTheLayouts) {
  for (const LayoutShape& s : Shapes()) {
    const int64_t bwd = KdaBackwardWorkspaceBytes(s.B, s.T, s.H, s.num_docs);
    EXPECT_EQ(bwd, std::max(L::MakeBwdLayout(s.B, s.T, s.H, s.num_docs).total,
                            L::MakeChunkBwdLayout(s.B, s.T, s.H, s.num_docs).total))
        << Name(s);
    EXPECT_EQ(KdaForwardWorkspaceBytes(s.B, s.T, s.H, s.num_docs),
              L::ChunkSlots(s.B * s.T, L::Docs(s.B, s.num_docs)) * s.H * L::kRecBytes)
        << Name(s);
  }
  EXPECT_EQ(KdaBackwardWorkspaceBytes(1, 16, 0, 0), 0);
  EXPECT_EQ(KdaForwardWorkspaceBytes(-1, 16, 1, 0), 0);
}

}  // namespace
}  // namespace cakegrad::kernels
