// A client names its GPU by UUID; the daemon's ordinal for it may differ from the client's.
#include "launch/device_table.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace cakegrad::server {
namespace {

using ::testing::HasSubstr;

const char kA[] = "GPU-2f9a01c4-5e6d-0718-9abc-0011223344ff";
const char kB[] = "GPU-77e0b6d1-0c3a-4e5f-8a9b-cdef01234567";

TEST(DeviceTable, FindsTheDaemonsOrdinalWhateverTheClientsOrdinalIs) {
  // The daemon sees B first (say CUDA_VISIBLE_DEVICES=1,0 in its container); a client that sees
  // A as its device 0 still reaches the daemon's ordinal 1.
  const DeviceTable table({kB, kA});
  EXPECT_EQ(*table.Find(kA), 1);
  EXPECT_EQ(*table.Find(kB), 0);
  EXPECT_EQ(table.size(), 2);
  EXPECT_EQ(table.uuid(1), kA);
}

TEST(DeviceTable, AcceptsTheUuidWithoutPrefixAndInUpperCase) {
  const DeviceTable table({kA, kB});
  EXPECT_EQ(*table.Find("77E0B6D1-0C3A-4E5F-8A9B-CDEF01234567"), 1);
  EXPECT_EQ(*table.Find("gpu-2f9a01c4-5e6d-0718-9abc-0011223344ff"), 0);
  EXPECT_EQ(*table.Find(std::string(" ") + kB + "\n"), 1);
}

TEST(DeviceTable, UnknownOrEmptyUuidNamesEveryServedGpu) {
  const DeviceTable table({kA, kB});
  const auto unknown = table.Find("GPU-00000000-0000-0000-0000-000000000000");
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(unknown.status().message()), HasSubstr(kA));
  EXPECT_THAT(std::string(unknown.status().message()), HasSubstr(kB));
  // A prefix of a served UUID is not that GPU.
  EXPECT_FALSE(table.Find("GPU-2f9a01c4").ok());
  const auto empty = table.Find("");
  EXPECT_EQ(empty.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(empty.status().message()), HasSubstr("gpu_uuid is empty"));
  EXPECT_EQ(DeviceTable().Find(kA).status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace cakegrad::server
