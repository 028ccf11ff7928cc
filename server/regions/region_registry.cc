#include "regions/region_registry.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace cakegrad::server {

const char* RegionKindName(RegionKind kind) { return kind == RegionKind::kCuda ? "cuda" : "host"; }

absl::StatusOr<uint64_t> RegionRegistry::Add(const std::string& session_id, std::string label,
                                             RegionKind kind, MappedRange range) {
  absl::MutexLock lock(&mu_);
  uint64_t& count = per_session_[session_id];
  if (count >= max_regions_per_session_) {
    return absl::ResourceExhaustedError(
        absl::StrCat("session already holds ", count, " regions, the limit (--max_regions_per_",
                     "session); unregister some or raise the limit"));
  }
  auto region = std::make_shared<Region>();
  region->id = next_id_++;
  region->session_id = session_id;
  region->label = std::move(label);
  region->kind = kind;
  region->range = std::move(range);
  regions_[region->id] = region;
  mapped_bytes_ += region->range.size;
  ++count;
  return region->id;
}

absl::Status RegionRegistry::Remove(const std::string& session_id, uint64_t region_id) {
  std::shared_ptr<const Region> doomed;  // released outside the lock: unmapping can be slow
  {
    absl::MutexLock lock(&mu_);
    auto it = regions_.find(region_id);
    if (it == regions_.end()) {
      return absl::NotFoundError(absl::StrCat("region ", region_id, " is not registered"));
    }
    if (it->second->session_id != session_id) {
      return absl::PermissionDeniedError(
          absl::StrCat("region ", region_id, " belongs to another session"));
    }
    doomed = std::move(it->second);
    mapped_bytes_ -= doomed->range.size;
    regions_.erase(it);
    if (--per_session_[session_id] == 0) per_session_.erase(session_id);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<const Region>> RegionRegistry::Pin(const std::string& session_id,
                                                                  uint64_t region_id) const {
  absl::MutexLock lock(&mu_);
  auto it = regions_.find(region_id);
  if (it == regions_.end()) {
    return absl::NotFoundError(absl::StrCat("region ", region_id, " is not registered"));
  }
  if (it->second->session_id != session_id) {
    return absl::PermissionDeniedError(
        absl::StrCat("region ", region_id, " belongs to another session"));
  }
  return it->second;
}

std::vector<std::shared_ptr<const Region>> RegionRegistry::List(
    const std::string& session_id) const {
  std::vector<std::shared_ptr<const Region>> out;
  absl::MutexLock lock(&mu_);
  for (const auto& [id, region] : regions_) {
    if (region->session_id == session_id) out.push_back(region);
  }
  return out;
}

size_t RegionRegistry::RemoveSession(const std::string& session_id) {
  std::vector<std::shared_ptr<const Region>> doomed;
  {
    absl::MutexLock lock(&mu_);
    for (auto it = regions_.begin(); it != regions_.end();) {
      if (it->second->session_id == session_id) {
        mapped_bytes_ -= it->second->range.size;
        doomed.push_back(std::move(it->second));
        regions_.erase(it++);
      } else {
        ++it;
      }
    }
    per_session_.erase(session_id);
  }
  return doomed.size();
}

size_t RegionRegistry::size() const {
  absl::MutexLock lock(&mu_);
  return regions_.size();
}

uint64_t RegionRegistry::mapped_bytes() const {
  absl::MutexLock lock(&mu_);
  return mapped_bytes_;
}

}  // namespace cakegrad::server
