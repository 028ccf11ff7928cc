// The daemon's table of registered regions: id -> shared_ptr<const Region> under one mutex.
// Every lookup checks the calling session owns the region; ids are never reused.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "regions/region.h"

namespace cakegrad::server {

class RegionRegistry {
 public:
  explicit RegionRegistry(uint64_t max_regions_per_session)
      : max_regions_per_session_(max_regions_per_session) {}

  // Adds a mapped range for `session_id`; RESOURCE_EXHAUSTED past the per-session limit.
  absl::StatusOr<uint64_t> Add(const std::string& session_id, std::string label, RegionKind kind,
                               MappedRange range);

  // Removes the region from the table. Requests that already pinned it keep it mapped until
  // they finish. NOT_FOUND for unknown ids, PERMISSION_DENIED for another session's.
  absl::Status Remove(const std::string& session_id, uint64_t region_id);

  // The region, pinned for the caller's lifetime of the returned pointer.
  absl::StatusOr<std::shared_ptr<const Region>> Pin(const std::string& session_id,
                                                    uint64_t region_id) const;

  std::vector<std::shared_ptr<const Region>> List(const std::string& session_id) const;

  // Drops every region of a session (its end); returns how many.
  size_t RemoveSession(const std::string& session_id);

  size_t size() const;
  uint64_t mapped_bytes() const;

 private:
  const uint64_t max_regions_per_session_;
  mutable absl::Mutex mu_;
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  absl::flat_hash_map<uint64_t, std::shared_ptr<const Region>> regions_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, uint64_t> per_session_ ABSL_GUARDED_BY(mu_);
  // Kept as regions come and go: the metrics read it after every request.
  uint64_t mapped_bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace cakegrad::server
