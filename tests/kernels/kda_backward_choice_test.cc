// Which backward kernels a KDA call runs: kAuto takes the chunked ones only where dA_log, an [H]
// vector, has enough heads that its rel-L2 does not hinge on one cancelling sum (kda.h says why);
// an explicit choice is kept at every H.
#include <gtest/gtest.h>

#include <cstdint>

#include "cakegrad/kernels/kda.h"

namespace cakegrad::kernels {
namespace {

using A = KdaBackwardAlgorithm;

TEST(KdaBackwardChoice, AutoIsTheDefaultAndPicksChunkedFromFourHeads) {
  EXPECT_EQ(KdaBwdParams{}.algorithm, A::kAuto);
  for (int64_t H : {1, 2, 3}) {
    EXPECT_EQ(ResolveKdaBackwardAlgorithm(A::kAuto, H), A::kSequential) << "H = " << H;
  }
  for (int64_t H : {4, 8, 16, 32, 64}) {
    EXPECT_EQ(ResolveKdaBackwardAlgorithm(A::kAuto, H), A::kChunked) << "H = " << H;
  }
}

TEST(KdaBackwardChoice, AnExplicitChoiceIsKeptAtEveryHeadCount) {
  for (int64_t H : {1, 4, 8, 32}) {
    EXPECT_EQ(ResolveKdaBackwardAlgorithm(A::kSequential, H), A::kSequential) << "H = " << H;
    EXPECT_EQ(ResolveKdaBackwardAlgorithm(A::kChunked, H), A::kChunked) << "H = " << H;
  }
}

}  // namespace
}  // namespace cakegrad::kernels
