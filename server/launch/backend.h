// Where operators run: the host backend (FP64 references on POSIX shared memory) or the cuda
// backend (the CUDA kernels on memory shared through CUDA IPC). The service, sessions and
// validation are the same code for both.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "cakegrad/v1/regions.pb.h"
#include "cakegrad/v1/service.pb.h"
#include "launch/execute_info.h"
#include "ops/op_spec.h"
#include "regions/region.h"

namespace cakegrad::server {

class Backend {
 public:
  virtual ~Backend() = default;

  virtual const char* name() const = 0;
  // The memory its operators read and write; regions of the other kind are refused.
  virtual RegionKind memory() const = 0;
  virtual absl::StatusOr<MappedRange> MapHost(const v1::HostRegion& region) = 0;
  virtual absl::StatusOr<MappedRange> MapCuda(const v1::CudaRegion& region) = 0;
  virtual void Describe(v1::Capabilities* caps) const = 0;
  // One executor (launcher thread) per device; the host backend has one.
  virtual int num_devices() const = 0;
  // Runs a validated call to completion. Called only from the launcher thread of
  // call.device (or of device 0 on the host backend).
  virtual absl::Status Execute(const BoundCall& call, ExecuteInfo* info) = 0;
};

std::unique_ptr<Backend> MakeHostBackend();

struct CudaBackendOptions {
  int64_t workspace_bytes = 256ll << 20;  // preallocated per device
  size_t graph_cache_size = 0;            // captured graphs kept per device; 0: launch eagerly
};

// Creates contexts, streams and workspaces on every visible GPU. UNAVAILABLE without a GPU or
// in a build without CUDA.
absl::StatusOr<std::unique_ptr<Backend>> MakeCudaBackend(const CudaBackendOptions& options);

// Whether a CUDA device is visible (false in builds without CUDA).
bool CudaDevicePresent();

}  // namespace cakegrad::server
