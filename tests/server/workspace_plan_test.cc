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
                              kernels::KdaBackwardWorkspaceBytes(1, 65536, 32, 64)}));
  EXPECT_GT(*bytes, 0);
  EXPECT_EQ(*WorkspaceBytesForPlan(""), 0);
  EXPECT_EQ(*WorkspaceBytesForPlan("mhc_forward_finish:T=10,C=256"), 0) << "needs none";
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
