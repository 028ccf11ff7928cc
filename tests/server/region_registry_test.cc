#include "regions/region_registry.h"

#include <gtest/gtest.h>

#include <vector>

namespace cakegrad::server {
namespace {

class FlagMapping : public Mapping {
 public:
  explicit FlagMapping(bool* unmapped) : unmapped_(unmapped) {}
  ~FlagMapping() override { *unmapped_ = true; }

 private:
  bool* unmapped_;
};

MappedRange Range(bool* unmapped, uint64_t size = 64) {
  MappedRange r;
  r.mapping = std::make_shared<FlagMapping>(unmapped);
  r.size = size;
  return r;
}

TEST(RegionRegistry, OwnershipIsPerSession) {
  RegionRegistry registry(16);
  bool unmapped = false;
  auto id = registry.Add("a", "x", RegionKind::kHost, Range(&unmapped));
  ASSERT_TRUE(id.ok());
  EXPECT_TRUE(registry.Pin("a", *id).ok());
  EXPECT_EQ(registry.Pin("b", *id).status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(registry.Remove("b", *id).code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(registry.Pin("a", *id + 1000).status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(registry.Remove("a", *id).ok());
  EXPECT_EQ(registry.Remove("a", *id).code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(unmapped);
}

TEST(RegionRegistry, PinnedRegionStaysMappedAfterRemove) {
  RegionRegistry registry(16);
  bool unmapped = false;
  auto id = registry.Add("a", "x", RegionKind::kHost, Range(&unmapped));
  ASSERT_TRUE(id.ok());
  auto pin = registry.Pin("a", *id);
  ASSERT_TRUE(pin.ok());
  ASSERT_TRUE(registry.Remove("a", *id).ok());
  EXPECT_FALSE(unmapped) << "an in-flight request still holds the region";
  EXPECT_EQ(registry.Pin("a", *id).status().code(), absl::StatusCode::kNotFound);
  pin->reset();
  EXPECT_TRUE(unmapped);
}

TEST(RegionRegistry, SessionLimitAndRelease) {
  RegionRegistry registry(2);
  bool u1 = false, u2 = false, u3 = false;
  ASSERT_TRUE(registry.Add("a", "1", RegionKind::kHost, Range(&u1, 10)).ok());
  ASSERT_TRUE(registry.Add("a", "2", RegionKind::kHost, Range(&u2, 20)).ok());
  auto third = registry.Add("a", "3", RegionKind::kHost, Range(&u3));
  EXPECT_EQ(third.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(u3) << "a refused registration must not leak its mapping";
  EXPECT_TRUE(registry.Add("b", "1", RegionKind::kHost, Range(&u3, 5)).ok());
  EXPECT_EQ(registry.size(), 3u);
  EXPECT_EQ(registry.mapped_bytes(), 35u);
  EXPECT_EQ(registry.List("a").size(), 2u);
  EXPECT_EQ(registry.RemoveSession("a"), 2u);
  EXPECT_TRUE(u1 && u2);
  EXPECT_EQ(registry.size(), 1u);
  EXPECT_TRUE(registry.Add("a", "again", RegionKind::kHost, Range(&u1)).ok());
}

TEST(RegionRegistry, IdsAreNeverReused) {
  RegionRegistry registry(4);
  bool u = false;
  auto a = registry.Add("s", "", RegionKind::kHost, Range(&u));
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(registry.Remove("s", *a).ok());
  auto b = registry.Add("s", "", RegionKind::kHost, Range(&u));
  ASSERT_TRUE(b.ok());
  EXPECT_NE(*a, *b);
}

}  // namespace
}  // namespace cakegrad::server
