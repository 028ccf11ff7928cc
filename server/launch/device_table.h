// The GPUs one daemon serves, found by the UUID a client names. A client's CUDA ordinals depend
// on its own CUDA_VISIBLE_DEVICES (and container), so an ordinal means nothing across processes;
// the UUID is the same everywhere.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace cakegrad::server {

class DeviceTable {
 public:
  DeviceTable() = default;
  // uuids[i] is the daemon's CUDA ordinal i, formatted as nvidia-smi -L prints it.
  explicit DeviceTable(std::vector<std::string> uuids) : uuids_(std::move(uuids)) {}

  // The daemon's ordinal of the GPU `uuid` names. Matches "GPU-<hex>" as nvidia-smi prints it,
  // without the "GPU-" prefix, and in either case (what other tools print). NOT_FOUND names
  // every GPU this daemon serves.
  absl::StatusOr<int> Find(absl::string_view uuid) const;

  int size() const { return static_cast<int>(uuids_.size()); }
  const std::string& uuid(int ordinal) const { return uuids_[ordinal]; }

 private:
  std::vector<std::string> uuids_;
};

}  // namespace cakegrad::server
