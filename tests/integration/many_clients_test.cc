// Many trainer processes at once: 16 client processes, 500 requests each (250 rounds of
// conv1d forward + backward), every result bitwise equal to the reference, no errors, and
// the daemon holds nothing afterwards.
#include <sys/wait.h>

#include <cstdio>
#include <string>
#include <vector>

#include "daemon_process.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace cakegrad::testing {
namespace {

TEST(ManyClients, SixteenProcessesFiveHundredRequestsEach) {
  DaemonProcess daemon;
  ASSERT_TRUE(daemon.Start().ok());
  constexpr int kClients = 16, kRounds = 250;  // two requests a round
  std::vector<FILE*> children;
  for (int i = 0; i < kClients; ++i) {
    const std::string cmd = std::string(CAKEGRAD_CLI_PATH) + " demo --tokens=96 --channels=24 " +
                            "--docs=5 --repeat=" + std::to_string(kRounds) +
                            (i % 2 ? " --policy=fp32" : "") + " --address=" + daemon.address() +
                            " 2>&1";
    children.push_back(popen(cmd.c_str(), "r"));
    ASSERT_NE(children.back(), nullptr);
  }
  for (FILE* child : children) {
    std::string output;
    char buf[512];
    while (fgets(buf, sizeof(buf), child) != nullptr) output += buf;
    const int status = pclose(child);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << output;
    EXPECT_THAT(output, ::testing::HasSubstr("250/250 runs bitwise equal")) << output;
  }
  auto client = Client::Connect(daemon.address(), "observer");
  ASSERT_TRUE(client.ok());
  auto status = (*client)->GetServerStatus();
  ASSERT_TRUE(status.ok());
  EXPECT_EQ(status->requests_served(), uint64_t{kClients} * kRounds * 2);
  EXPECT_EQ(status->requests_failed(), 0u);
  EXPECT_EQ(status->regions(), 0u);
  EXPECT_EQ(status->sessions(), 1u);
}

}  // namespace
}  // namespace cakegrad::testing
