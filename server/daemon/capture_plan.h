// Start-up capture of the shapes named in the configuration (--capture_at_start=FILE): each
// request of the file is laid out in scratch memory, validated by the same code as a client's
// request (validate/bind.cc), and its CUDA graph captured and instantiated on every GPU before
// health turns SERVING, so the first real request of that shape replays it (a cache hit).
//
// The file is a text-format cakegrad.v1.WarmupPlan:
//
//   request {
//     conv1d_backward {
//       x { dtype: BF16 shape: [40000, 4103] }
//       weight { dtype: FP32 shape: [4103, 4] }
//       ...
//     }
//   }
//
// Every TensorRef gives the dtype and shape (and options) of the shape to capture; region_id,
// offset, session_id and completion are ignored.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cakegrad/v1/service.pb.h"
#include "launch/backend.h"
#include "metrics/metrics.h"
#include "ops/op_spec.h"
#include "regions/region_registry.h"
#include "validate/bind.h"

namespace cakegrad::server {

// One shape to capture.
struct CaptureEntry {
  int index = 0;  // its position in the file: request[index]
  const OpSpec* op = nullptr;
  // As in the file, with each tensor's offset set: 256-byte aligned, one after the other, so the
  // kernels take the route of aligned tensors, the common one. Region ids are set when bound.
  v1::RunRequest request;
  uint64_t scratch_bytes = 0;  // the bytes those offsets span
  std::string summary;         // "conv1d_backward C=4103 N=16 S=40000 (silu_grad_...)", for logs
};

struct CapturePlan {
  std::string source;  // "--capture_at_start=PATH", the prefix of every message
  std::vector<CaptureEntry> entries;
  uint64_t scratch_bytes = 0;   // the largest entry's: one scratch region per GPU holds any
  int64_t workspace_bytes = 0;  // daemon workspace the entries need (those without their own)
};

// Refuses --capture_at_start where there is nothing to capture into: no graph cache
// (--cuda_graphs=0) or the host backend. OK when `path` is empty.
absl::Status CheckCaptureOptions(const std::string& path, uint64_t cuda_graphs,
                                 const std::string& backend);

// Parses `text`, a text-format cakegrad.v1.WarmupPlan, and validates every request as the
// service would (against scratch memory) for a graph cache of `capacity` entries per GPU.
// INVALID_ARGUMENT names `source`, the entry (request[i]) and the field.
absl::StatusOr<CapturePlan> ParseCapturePlan(const std::string& text, const std::string& source,
                                             uint64_t capacity);
// The same for the file at `path`; NOT_FOUND when it cannot be read.
absl::StatusOr<CapturePlan> LoadCapturePlan(const std::string& path, uint64_t capacity);

// An entry bound to the region `region_id` of session `session_id`; `request` holds what
// call.request points into.
struct BoundCapture {
  std::unique_ptr<v1::RunRequest> request;
  BoundCall call;
};
absl::StatusOr<BoundCapture> BindCapture(const CapturePlan& plan, const CaptureEntry& entry,
                                         const RegionRegistry& regions,
                                         const std::string& session_id, uint64_t region_id,
                                         const BindOptions& options);

// Captures every entry into each GPU's graph cache without running it: scratch memory for the
// tensors, bound through validate/bind.cc, PrepareGraph, scratch freed. Logs one line per entry
// and GPU and counts it in the graph metrics (result="prepared"). Call before the executors
// start.
absl::Status CaptureAtStart(const CapturePlan& plan, Backend* backend, Metrics* metrics);

}  // namespace cakegrad::server
