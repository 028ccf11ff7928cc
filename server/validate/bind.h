// Turns an operator request into a BoundCall, or says precisely what is wrong with it:
// presence, dtype, shape (symbols bound across arguments), contiguity, region ownership,
// alignment, bounds (overflow-safe), memory kind, device, overlap of outputs with anything else,
// workspace size and the operator's own rules. Nothing is launched for a call that fails here.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "google/protobuf/message.h"
#include "ops/op_spec.h"
#include "regions/region_registry.h"

namespace cakegrad::server {

struct BindOptions {
  RegionKind memory = RegionKind::kHost;  // the kind of memory this backend computes on
  bool needs_workspace = false;           // check a caller workspace against workspace_bytes
};

absl::StatusOr<BoundCall> Bind(const OpSpec& op, const google::protobuf::Message& request,
                               const std::string& session_id, const RegionRegistry& regions,
                               const BindOptions& options);

// Byte range [offset, offset + bytes) inside a region of `size` bytes, without overflow.
bool RangeInside(uint64_t offset, uint64_t bytes, uint64_t size);

}  // namespace cakegrad::server
