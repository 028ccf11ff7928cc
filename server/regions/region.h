// A registered memory region: a range of the daemon's address space (host or device) that one
// session may use. Regions are immutable once registered and shared by pointer: a request pins
// the regions it uses, so unregistering never unmaps memory under in-flight work.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"

namespace cakegrad::server {

enum class RegionKind { kHost, kCuda };

// Owns one mapping (an mmap of a shm object, an opened CUDA IPC handle) and undoes it when
// destroyed. Implementations live with the backend that creates them.
class Mapping {
 public:
  virtual ~Mapping() = default;
  // Whether the memory is still fully backed; checked before each request that uses it.
  virtual absl::Status Check() const { return absl::OkStatus(); }
};

// Where a mapped region lies, as a backend's mapper returns it.
struct MappedRange {
  std::shared_ptr<const Mapping> mapping;  // keeps `base` valid
  std::byte* base = nullptr;               // start of the region
  uint64_t size = 0;                       // bytes usable from base
  int device = -1;                         // CUDA ordinal in the daemon, -1 for host memory
  std::string gpu_uuid;                    // for CUDA regions
};

struct Region {
  uint64_t id = 0;
  std::string session_id;
  std::string label;
  RegionKind kind = RegionKind::kHost;
  MappedRange range;
};

const char* RegionKindName(RegionKind kind);

}  // namespace cakegrad::server
