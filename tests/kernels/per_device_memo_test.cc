// PerDeviceMemo (kernels/cuda/per_device_memo.h), the once-per-device cache of the cluster
// occupancy queries of the mHC and KDA launches.
#include "cuda/per_device_memo.h"

#include <gtest/gtest.h>

namespace cakegrad::kernels {
namespace {

TEST(PerDeviceMemo, QueriesEachDeviceOnceAndRemembersItsAnswer) {
  PerDeviceMemo memo;
  int calls = 0, v = -1;
  auto answer = [&](int a) {
    return [&calls, a](int* out) {
      ++calls;
      *out = a;
      return OkStatus();
    };
  };
  ASSERT_TRUE(memo.Get(0, answer(7), &v).ok());
  EXPECT_EQ(v, 7);
  ASSERT_TRUE(memo.Get(0, answer(9), &v).ok());
  EXPECT_EQ(v, 7) << "device 0's first answer";
  ASSERT_TRUE(memo.Get(3, answer(0), &v).ok());
  EXPECT_EQ(v, 0) << "a zero answer is remembered too";
  ASSERT_TRUE(memo.Get(3, answer(5), &v).ok());
  EXPECT_EQ(v, 0);
  EXPECT_EQ(calls, 2);
}

TEST(PerDeviceMemo, DoesNotRememberAFailedQuery) {
  PerDeviceMemo memo;
  int v = -1;
  const Status failed = memo.Get(
      1, [](int*) { return Internal("occupancy query failed"); }, &v);
  EXPECT_FALSE(failed.ok());
  EXPECT_EQ(failed.message(), "occupancy query failed");
  ASSERT_TRUE(memo.Get(
                      1,
                      [](int* out) {
                        *out = 4;
                        return OkStatus();
                      },
                      &v)
                  .ok());
  EXPECT_EQ(v, 4);
}

TEST(PerDeviceMemo, AsksEveryTimeForDevicesItCannotHold) {
  PerDeviceMemo memo;
  int calls = 0, v = -1;
  for (int device : {-1, 64, 64}) {
    ASSERT_TRUE(memo.Get(
                        device,
                        [&](int* out) {
                          *out = ++calls;
                          return OkStatus();
                        },
                        &v)
                    .ok());
    EXPECT_EQ(v, calls);
  }
  EXPECT_EQ(calls, 3);
}

}  // namespace
}  // namespace cakegrad::kernels
