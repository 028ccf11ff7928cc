// Where operators run: the host backend (FP64 references on POSIX shared memory) or the cuda
// backend (the CUDA kernels on memory shared through CUDA IPC). The service, sessions and
// validation are the same code for both.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
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
  // Runs a validated call: to completion, or for EVENT calls (call.event_slot >= 0) until it
  // is enqueued behind the slot's ready event. Called only from the launcher thread of
  // call.device (or of device 0 on the host backend). A backend that can keep several calls in
  // flight may instead launch the call, set *finish and return OK: the executor then calls
  // (*finish) exactly once, from its completion thread, in launch order, and that outcome is
  // the call's. The launcher meanwhile launches the next call, so the GPU does not idle while
  // a reply is sent.
  virtual absl::Status Execute(const BoundCall& call, ExecuteInfo* info, FinishFn* finish) = 0;
  // How many calls may be in flight on one device (launched, finish not yet called).
  virtual int max_in_flight() const { return 1; }

  // Start-up capture (--capture_at_start). Device memory for the tensors of calls to capture,
  // freed when the last copy of the range's mapping goes.
  virtual absl::StatusOr<MappedRange> AllocateScratch(int device, uint64_t bytes) {
    (void)device;
    (void)bytes;
    return absl::FailedPreconditionError(
        absl::StrCat("the ", name(), " backend captures no CUDA graphs"));
  }
  // Captures and instantiates the graph `call` would launch, exactly as Execute would for a SYNC
  // call, in call.device's graph cache, without running it. Called before the executors start.
  virtual absl::Status PrepareGraph(const BoundCall& call) {
    (void)call;
    return absl::FailedPreconditionError(
        absl::StrCat("the ", name(), " backend captures no CUDA graphs"));
  }
  // Graphs one device's cache keeps (--cuda_graphs); 0 when every call launches eagerly.
  virtual size_t graph_cache_capacity() const { return 0; }

  // EVENT completion. Opens the client's ready events on the GPU named by `gpu_uuid` and
  // returns the handles of the daemon's done events, one per slot.
  virtual absl::StatusOr<std::vector<std::string>> RegisterEvents(
      const std::string& session_id, const std::string& gpu_uuid,
      const std::vector<std::string>& ready_events) = 0;
  // OK when `slot` of the session's ring exists on `device`.
  virtual absl::Status CheckEventSlot(const std::string& session_id, int slot, int device) = 0;
  // The session ended: drop its events once no queued work uses them.
  virtual void ReleaseSession(const std::string& session_id) = 0;
};

std::unique_ptr<Backend> MakeHostBackend();

struct CudaBackendOptions {
  size_t max_event_slots = 64;            // per session
  int64_t workspace_bytes = 256ll << 20;  // preallocated per device
  size_t graph_cache_size = 0;            // captured graphs kept per device; 0: launch eagerly
  KernelChoices kernels;                  // the same for every device and call
};

// Creates contexts, streams and workspaces on every visible GPU. UNAVAILABLE without a GPU or
// in a build without CUDA.
absl::StatusOr<std::unique_ptr<Backend>> MakeCudaBackend(const CudaBackendOptions& options);

// Whether a CUDA device is visible (false in builds without CUDA).
bool CudaDevicePresent();

}  // namespace cakegrad::server
