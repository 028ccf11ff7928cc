#include "launch/workspace_plan.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "cakegrad/kernels/conv1d.h"
#include "cakegrad/kernels/kda.h"
#include "cakegrad/kernels/mhc.h"

namespace cakegrad::server {
namespace {

TEST(WorkspacePlan, LargestOfTheListedShapes) {
  auto bytes = WorkspaceBytesForPlan(
      "conv1d_backward:S=1048576,C=12288; mhc_backward_finish:T=65536,C=4096;"
      "kda_backward:B=1,T=65536,H=32,N=64");
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_EQ(*bytes, std::max({kernels::Conv1dBackwardWorkspaceBytes(1048576, 12288),
                              kernels::MhcBackwardFinishWorkspaceBytes(65536, 4096),
                              kernels::MhcForwardWorkspaceBytes(65536, 4096),
                              kernels::MhcBackwardPrepareWorkspaceBytes(65536, 4096),
                              kernels::KdaBackwardWorkspaceBytes(1, 65536, 32, 64),
                              kernels::KdaForwardWorkspaceBytes(1, 65536, 32, 64)}));
  EXPECT_GT(*bytes, 0);
  EXPECT_EQ(*WorkspaceBytesForPlan(""), 0);
}

// Naming one operator sizes its family's forward and backward at those shapes (whichever needs
// more: for KDA it depends on the shape and on which backward layouts exist).
TEST(WorkspacePlan, AnEntrySizesEveryOperatorOfItsFamily) {
  const int64_t fwd = kernels::KdaForwardWorkspaceBytes(1, 32768, 16, 1);
  const int64_t bwd = kernels::KdaBackwardWorkspaceBytes(1, 32768, 16, 1);
  EXPECT_EQ(*WorkspaceBytesForPlan("kda_backward:B=1,T=32768,H=16,N=1"), std::max(fwd, bwd));
  EXPECT_EQ(*WorkspaceBytesForPlan("kda_forward:B=1,T=32768,H=16,N=1"), std::max(fwd, bwd));
  EXPECT_EQ(*WorkspaceBytesForPlan("conv1d_forward:S=4096,C=512"),
            kernels::Conv1dBackwardWorkspaceBytes(4096, 512));
  EXPECT_EQ(*WorkspaceBytesForPlan("mhc_forward_finish:T=64,C=256"),
            std::max({kernels::MhcForwardWorkspaceBytes(64, 256),
                      kernels::MhcBackwardPrepareWorkspaceBytes(64, 256),
                      kernels::MhcBackwardFinishWorkspaceBytes(64, 256)}));
}

TEST(WorkspacePlan, BadEntriesNameThemselves) {
  for (const char* bad : {"conv1d_backward", "nope:S=1", "conv1d_backward:X=3",
                          "conv1d_backward:S=-1", "conv1d_backward:S=abc", "a:b:c"}) {
    auto bytes = WorkspaceBytesForPlan(bad);
    EXPECT_EQ(bytes.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(bytes.status().message().find("--workspace_for"), std::string::npos) << bad;
  }
}

}  // namespace
}  // namespace cakegrad::server
