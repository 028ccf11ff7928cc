// The cuda backend: CUDA kernels on GPU memory shared by clients through CUDA IPC. One context,
// stream, workspace and status word per visible GPU, created at start.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "cakegrad/kernels/cuda_memory.h"
#include "common/kernel_status.h"
#include "common/status_macros.h"
#include "launch/backend.h"
#include "launch/device_table.h"
#include "launch/graph_cache.h"
#include "launch/graph_key.h"
#include "spdlog/spdlog.h"
#include "validate/bind.h"

namespace cakegrad::server {
namespace {

// Logs the full CUDA error on the server and returns what the client can act on.
absl::Status CudaError(cudaError_t err, const std::string& what) {
  spdlog::error("{}: {} ({})", what, cudaGetErrorString(err), static_cast<int>(err));
  return absl::InternalError(absl::StrCat(what, ": ", cudaGetErrorString(err)));
}

#define CUDA_RETURN_IF_ERROR(expr, what)                                     \
  do {                                                                       \
    cudaError_t cakegrad_err_ = (expr);                                      \
    if (cakegrad_err_ != cudaSuccess) return CudaError(cakegrad_err_, what); \
  } while (0)

class IpcMapping : public Mapping {
 public:
  IpcMapping(int device, void* ptr) : device_(device), ptr_(ptr) {}
  ~IpcMapping() override {
    cudaSetDevice(device_);
    const cudaError_t err = cudaIpcCloseMemHandle(ptr_);
    if (err != cudaSuccess) spdlog::error("cudaIpcCloseMemHandle: {}", cudaGetErrorString(err));
  }
  void* ptr() const { return ptr_; }

 private:
  int device_;
  void* ptr_;
};

// Device memory the daemon allocated itself for start-up capture (AllocateScratch).
class ScratchMapping : public Mapping {
 public:
  ScratchMapping(int device, void* ptr) : device_(device), ptr_(ptr) {}
  ~ScratchMapping() override {
    cudaSetDevice(device_);
    const cudaError_t err = cudaFree(ptr_);
    if (err != cudaSuccess) {
      spdlog::error("cudaFree of capture scratch: {}", cudaGetErrorString(err));
    }
  }

 private:
  int device_;
  void* ptr_;
};

// What a call enqueues, eagerly or under capture. Execute and PrepareGraph both go through it,
// so a graph captured at start has the nodes a request's capture has, and updates in place.
absl::Status EnqueueCall(const BoundCall& call, const LaunchContext& ctx) {
  CUDA_RETURN_IF_ERROR(cudaMemsetAsync(ctx.device_status, 0, sizeof(uint32_t), ctx.stream),
                       "clearing the status word");
  return FromKernelStatus(call.op->launch(call, ctx));
}

// A session's EVENT completion slots on one GPU: the client's ready events (opened here), the
// daemon's done events (exported), and a status word per slot in mapped pinned memory, which
// kernels write on the GPU and a host callback reads after them.
class EventRing {
 public:
  ~EventRing() {
    cudaSetDevice(device);
    for (cudaEvent_t e : done) {
      if (e != nullptr) {
        cudaEventSynchronize(e);
        cudaEventDestroy(e);
      }
    }
    for (cudaEvent_t e : ready) {
      if (e != nullptr) cudaEventDestroy(e);
    }
    if (status_host != nullptr) cudaFreeHost(status_host);
  }

  // Sizes the per-slot bookkeeping (after `ready` and `done`).
  void InitSlots() {
    absl::MutexLock lock(&mu);
    enqueued.assign(done.size(), 0);
    checked.assign(done.size(), 0);
    ops.assign(done.size(), "");
  }

  // The first device error seen since the last call, for the session's next EVENT request. Calls
  // that finished on the GPU are checked here if their host callback has not run yet: `done` is
  // recorded before the callback, so the client can see a call finish and send its next request
  // first (a race that made the error arrive one request late, twenty-sixth session).
  // Launcher thread only, before the next call is enqueued (so no slot is being refilled).
  absl::Status TakeError() {
    for (size_t slot = 0; slot < done.size(); ++slot) {
      uint64_t call = 0;
      std::string op;
      {
        absl::MutexLock lock(&mu);
        if (enqueued[slot] <= checked[slot]) continue;
        call = enqueued[slot];
        op = ops[slot];
      }
      const cudaError_t q = cudaEventQuery(done[slot]);
      if (q == cudaSuccess) {
        Check(static_cast<int>(slot), call, op);
      } else if (q == cudaErrorNotReady) {
        (void)cudaGetLastError();  // not an error: keep it from the next launch's check
      }
    }
    absl::MutexLock lock(&mu);
    absl::Status s = std::move(error);
    error = absl::OkStatus();
    return s;
  }

  // Numbers the slot's next call (launcher thread, as it is enqueued).
  uint64_t Enqueue(int slot, const std::string& op) {
    absl::MutexLock lock(&mu);
    ops[slot] = op;
    return ++enqueued[slot];
  }

  // Reads the slot's status word for call number `call` once, by whichever of the host callback
  // and TakeError comes first; no CUDA calls (the callback runs it).
  void Check(int slot, uint64_t call, const std::string& op) {
    absl::MutexLock lock(&mu);
    if (call <= checked[slot]) return;
    checked[slot] = call;
    const uint32_t bits = reinterpret_cast<volatile uint32_t*>(status_host)[slot];
    if ((bits & kernels::kDeviceStatusBadCuSeqlens) != 0 && error.ok()) {
      error = absl::FailedPreconditionError(
          absl::StrCat("an earlier EVENT request (", op, ", slot ", slot,
                       ") had malformed cu_seqlens; its outputs are invalid"));
    }
  }

  int device = 0;
  std::vector<cudaEvent_t> ready, done;
  uint32_t* status_host = nullptr;  // mapped pinned memory, one word per slot
  uint32_t* status_dev = nullptr;   // its device alias
  absl::Mutex mu;
  absl::Status error ABSL_GUARDED_BY(mu);
  std::vector<uint64_t> enqueued ABSL_GUARDED_BY(mu);  // per slot: its last call's number
  std::vector<uint64_t> checked ABSL_GUARDED_BY(mu);   // per slot: the last number checked
  std::vector<std::string> ops ABSL_GUARDED_BY(mu);    // per slot: its last call's operator
};

// Regions whose last in-flight EVENT call finished on the GPU. A host callback may not make
// CUDA calls, and dropping the last reference to a region closes its IPC mapping, so the
// callback parks the references here and a launcher or gRPC thread drops them.
class Graveyard {
 public:
  void Add(std::vector<std::shared_ptr<const Region>> pins) {
    absl::MutexLock lock(&mu_);
    for (auto& p : pins) pins_.push_back(std::move(p));
  }
  std::vector<std::shared_ptr<const Region>> Take() {
    absl::MutexLock lock(&mu_);
    return std::move(pins_);
  }

 private:
  absl::Mutex mu_;
  std::vector<std::shared_ptr<const Region>> pins_ ABSL_GUARDED_BY(mu_);
};

// What the host callback after an EVENT call needs: the ring (one reference) and the call's
// regions, which must stay mapped until its kernels are done, not only until it is enqueued.
struct SlotCheck {
  std::shared_ptr<EventRing> ring;
  int slot;
  uint64_t call;  // EventRing::Enqueue's number
  std::string op;
  std::vector<std::shared_ptr<const Region>> pins;
  Graveyard* graveyard;
};

// Runs on a CUDA callback thread once the call's kernels finished: no CUDA calls here.
void CheckSlot(void* arg) {
  std::unique_ptr<SlotCheck> check(static_cast<SlotCheck*>(arg));
  check->graveyard->Add(std::move(check->pins));
  check->ring->Check(check->slot, check->call, check->op);
}

// A SYNC call in flight on a device: its own status word, the pinned copy the stream writes
// back after the kernels, and timed events around them. kSyncSlots of them let the launcher
// start the next call while the completion thread waits on this one.
constexpr int kSyncSlots = 4;
struct SyncSlot {
  uint32_t* status_dev = nullptr;   // one word of DeviceState::status_words
  uint32_t* status_host = nullptr;  // one word of DeviceState::status_host (pinned)
  cudaEvent_t start = nullptr, done = nullptr;
};

struct DeviceState {
  int ordinal = 0;
  std::string uuid;
  std::string name;
  int cc_major = 0, cc_minor = 0;
  uint64_t memory = 0;
  cudaStream_t stream = nullptr;
  void* workspace = nullptr;
  int64_t workspace_bytes = 0;
  uint32_t* status_words = nullptr;  // device memory, kSyncSlots kernels::DeviceStatusBits
  uint32_t* status_host = nullptr;   // pinned host memory, kSyncSlots words
  std::vector<SyncSlot> sync;        // kSyncSlots, used round robin by the launcher thread
  size_t next_sync = 0;
  std::unique_ptr<GraphCache> graphs;  // null: every call launches eagerly
};

class CudaBackend : public Backend {
 public:
  ~CudaBackend() override {
    // Finish every stream (their host callbacks included) before events and memory go.
    for (DeviceState& d : devices_) {
      cudaSetDevice(d.ordinal);
      if (d.stream != nullptr) cudaStreamSynchronize(d.stream);
    }
    {
      absl::MutexLock lock(&rings_mu_);
      rings_.clear();
      retired_.clear();
    }
    graveyard_.Take();
    for (DeviceState& d : devices_) {
      cudaSetDevice(d.ordinal);
      d.graphs.reset();
      if (d.workspace != nullptr) cudaFree(d.workspace);
      for (SyncSlot& slot : d.sync) {
        if (slot.start != nullptr) cudaEventDestroy(slot.start);
        if (slot.done != nullptr) cudaEventDestroy(slot.done);
      }
      if (d.status_words != nullptr) cudaFree(d.status_words);
      if (d.status_host != nullptr) cudaFreeHost(d.status_host);
      if (d.stream != nullptr) cudaStreamDestroy(d.stream);
    }
  }

  absl::Status Init(const CudaBackendOptions& options) {
    max_event_slots_ = options.max_event_slots;
    kernels_ = options.kernels;
    int count = 0;
    const cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess || count == 0) {
      return absl::UnavailableError(absl::StrCat(
          "no CUDA device is visible (", err == cudaSuccess ? "0 devices" : cudaGetErrorString(err),
          "): use --backend=host"));
    }
    for (int i = 0; i < count; ++i) {
      DeviceState d;
      d.ordinal = i;
      cudaDeviceProp prop;
      CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&prop, i), "cudaGetDeviceProperties");
      d.uuid = kernels::FormatGpuUuid(reinterpret_cast<const unsigned char*>(prop.uuid.bytes));
      d.name = prop.name;
      d.cc_major = prop.major;
      d.cc_minor = prop.minor;
      d.memory = prop.totalGlobalMem;
      CUDA_RETURN_IF_ERROR(cudaSetDevice(i), "cudaSetDevice");
      CUDA_RETURN_IF_ERROR(cudaFree(nullptr), "creating the CUDA context");
      CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&d.stream, cudaStreamNonBlocking),
                           "cudaStreamCreate");
      d.workspace_bytes = options.workspace_bytes;
      if (d.workspace_bytes > 0) {
        CUDA_RETURN_IF_ERROR(cudaMalloc(&d.workspace, d.workspace_bytes), "allocating workspace");
      }
      CUDA_RETURN_IF_ERROR(cudaMalloc(&d.status_words, kSyncSlots * sizeof(uint32_t)),
                           "allocating status words");
      CUDA_RETURN_IF_ERROR(
          cudaHostAlloc(&d.status_host, kSyncSlots * sizeof(uint32_t), cudaHostAllocDefault),
          "allocating pinned status words");
      d.sync.resize(kSyncSlots);
      for (int k = 0; k < kSyncSlots; ++k) {
        SyncSlot& slot = d.sync[k];
        slot.status_dev = d.status_words + k;
        slot.status_host = d.status_host + k;
        CUDA_RETURN_IF_ERROR(cudaEventCreate(&slot.start), "cudaEventCreate");
        CUDA_RETURN_IF_ERROR(cudaEventCreate(&slot.done), "cudaEventCreate");
      }
      if (options.graph_cache_size > 0) {
        d.graphs = std::make_unique<GraphCache>(options.graph_cache_size);
      }
      spdlog::info("GPU {}: {} {} (sm_{}{}), {} GiB, workspace {} MiB", i, d.uuid, d.name,
                   d.cc_major, d.cc_minor, d.memory >> 30, d.workspace_bytes >> 20);
      devices_.push_back(std::move(d));
    }
    std::vector<std::string> uuids;
    for (const DeviceState& d : devices_) uuids.push_back(d.uuid);
    table_ = DeviceTable(std::move(uuids));
    return absl::OkStatus();
  }

  const char* name() const override { return "cuda"; }
  RegionKind memory() const override { return RegionKind::kCuda; }
  int num_devices() const override { return static_cast<int>(devices_.size()); }
  int max_in_flight() const override { return kSyncSlots; }

  absl::StatusOr<MappedRange> MapHost(const v1::HostRegion&) override {
    return absl::FailedPreconditionError(
        "this daemon runs the cuda backend: register CUDA (IPC) regions");
  }

  absl::StatusOr<MappedRange> MapCuda(const v1::CudaRegion& region) override {
    if (region.ipc_handle().size() != sizeof(cudaIpcMemHandle_t)) {
      return absl::InvalidArgumentError(absl::StrCat("cuda.ipc_handle must be ",
                                                     sizeof(cudaIpcMemHandle_t), " bytes, got ",
                                                     region.ipc_handle().size()));
    }
    if (region.byte_size() == 0) return absl::InvalidArgumentError("cuda.byte_size must be > 0");
    ASSIGN_OR_RETURN(const DeviceState* dev, FindDevice(region.gpu_uuid()));
    // gRPC handler threads have no current context until one is set, and the driver call
    // below needs one even when the handle's mapping comes from the cache.
    CUDA_RETURN_IF_ERROR(cudaSetDevice(dev->ordinal), "cudaSetDevice");
    ASSIGN_OR_RETURN(std::shared_ptr<IpcMapping> mapping, OpenHandle(*dev, region.ipc_handle()));
    // The handle's size is not trusted: the driver says how large the allocation really is.
    uintptr_t alloc_base = 0;
    size_t alloc_size = 0;
    if (kernels::Status s = kernels::CudaAllocationRange(mapping->ptr(), &alloc_base, &alloc_size);
        !s.ok()) {
      spdlog::error("size of an opened IPC allocation: {}", s.message());
      return absl::InternalError("cannot read the size of the shared allocation");
    }
    const uint64_t usable = alloc_size - (reinterpret_cast<uintptr_t>(mapping->ptr()) - alloc_base);
    if (!RangeInside(region.offset_in_allocation(), region.byte_size(), usable)) {
      return absl::InvalidArgumentError(
          absl::StrCat("cuda region [", region.offset_in_allocation(), ", +", region.byte_size(),
                       ") exceeds the shared allocation (", usable, " bytes)"));
    }
    MappedRange range;
    range.base = static_cast<std::byte*>(mapping->ptr()) + region.offset_in_allocation();
    range.size = region.byte_size();
    range.device = dev->ordinal;
    range.gpu_uuid = dev->uuid;
    range.mapping = std::move(mapping);
    return range;
  }

  void Describe(v1::Capabilities* caps) const override {
    caps->set_backend("cuda");
    for (const DeviceState& d : devices_) {
      v1::Device* out = caps->add_devices();
      out->set_uuid(d.uuid);
      out->set_name(d.name);
      out->set_compute_capability_major(d.cc_major);
      out->set_compute_capability_minor(d.cc_minor);
      out->set_total_memory_bytes(d.memory);
    }
  }

  absl::Status Execute(const BoundCall& call, ExecuteInfo* info, FinishFn* finish) override {
    if (call.device < 0 || call.device >= num_devices()) {
      return absl::InternalError("call bound to no device");
    }
    DeviceState& d = devices_[call.device];
    CUDA_RETURN_IF_ERROR(cudaSetDevice(d.ordinal), "cudaSetDevice");
    graveyard_.Take();  // regions of finished EVENT calls: unmapped here, if these were the last
    std::shared_ptr<EventRing> ring;
    if (call.event_slot >= 0) {
      ring = FindRing(call.session_id);
      if (ring == nullptr || ring->device != d.ordinal ||
          call.event_slot >= static_cast<int>(ring->ready.size())) {
        return absl::FailedPreconditionError("the session's event ring changed under the request");
      }
      RETURN_IF_ERROR(ring->TakeError());
    }
    // The executor keeps at most kSyncSlots calls in flight, so this slot's last call is done.
    SyncSlot* slot = ring == nullptr ? &d.sync[d.next_sync++ % d.sync.size()] : nullptr;
    LaunchContext ctx;
    ctx.cuda = true;
    ctx.choices = kernels_;
    ctx.stream = d.stream;
    ctx.device_status = ring != nullptr ? ring->status_dev + call.event_slot : slot->status_dev;
    RETURN_IF_ERROR(SetWorkspace(call, d, &ctx));
    auto enqueue = [&]() -> absl::Status { return EnqueueCall(call, ctx); };
    if (ring != nullptr) {
      // EVENT: behind the client's producer, ahead of its consumer; no host wait.
      CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(d.stream, ring->ready[call.event_slot], 0),
                           "waiting on the client's ready event");
      absl::Status launched = d.graphs != nullptr
                                  ? d.graphs->Run(GraphKey(call), d.stream, enqueue, &info->graph)
                                  : enqueue();
      CUDA_RETURN_IF_ERROR(cudaEventRecord(ring->done[call.event_slot], d.stream),
                           "recording the done event");
      RETURN_IF_ERROR(launched);
      const uint64_t number = ring->Enqueue(call.event_slot, call.op->name);
      auto* check =
          new SlotCheck{ring, call.event_slot, number, call.op->name, call.pins, &graveyard_};
      if (cudaError_t err = cudaLaunchHostFunc(d.stream, CheckSlot, check); err != cudaSuccess) {
        delete check;
        return CudaError(err, "cudaLaunchHostFunc");
      }
      return absl::OkStatus();
    }
    CUDA_RETURN_IF_ERROR(cudaEventRecord(slot->start, d.stream), "recording the start event");
    absl::Status launched = d.graphs != nullptr
                                ? d.graphs->Run(GraphKey(call), d.stream, enqueue, &info->graph)
                                : enqueue();
    // The status word comes back with the stream, so the wait below is the only host sync.
    cudaError_t err = cudaMemcpyAsync(slot->status_host, slot->status_dev, sizeof(uint32_t),
                                      cudaMemcpyDeviceToHost, d.stream);
    if (err == cudaSuccess) err = cudaEventRecord(slot->done, d.stream);
    if (err != cudaSuccess) {
      // Even a failed launch may have enqueued work: let it finish before the regions go.
      cudaStreamSynchronize(d.stream);
      return CudaError(err, "queueing the status read-back");
    }
    *finish = [slot, ordinal = d.ordinal, launched = std::move(launched),
               name = call.op->name](ExecuteInfo* done_info) -> absl::Status {
      CUDA_RETURN_IF_ERROR(cudaSetDevice(ordinal), "cudaSetDevice");
      CUDA_RETURN_IF_ERROR(cudaEventSynchronize(slot->done), name);
      RETURN_IF_ERROR(launched);
      float ms = 0;
      CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, slot->start, slot->done), "GPU time");
      done_info->gpu = absl::Microseconds(1000.0 * ms);
      if (*slot->status_host & kernels::kDeviceStatusBadCuSeqlens) {
        return absl::InvalidArgumentError(
            absl::StrCat(name,
                         ": cu_seqlens is malformed (it must start at 0, never decrease and end "
                         "at the token count); outputs were not computed"));
      }
      return absl::OkStatus();
    };
    return absl::OkStatus();
  }

  absl::StatusOr<MappedRange> AllocateScratch(int device, uint64_t bytes) override {
    if (device < 0 || device >= num_devices()) {
      return absl::InvalidArgumentError(absl::StrCat("no GPU ", device, " in this daemon"));
    }
    const DeviceState& d = devices_[device];
    CUDA_RETURN_IF_ERROR(cudaSetDevice(d.ordinal), "cudaSetDevice");
    void* ptr = nullptr;
    // cudaMalloc(0) gives no pointer; a region of empty tensors still needs an address.
    if (cudaError_t err = cudaMalloc(&ptr, std::max<uint64_t>(bytes, 256)); err != cudaSuccess) {
      (void)cudaGetLastError();
      return absl::ResourceExhaustedError(
          absl::StrCat("cannot allocate ", bytes, " bytes on GPU ", d.ordinal, " (", d.uuid,
                       ") to capture at start: ", cudaGetErrorString(err)));
    }
    MappedRange range;
    range.base = static_cast<std::byte*>(ptr);
    range.size = bytes;
    range.device = d.ordinal;
    range.gpu_uuid = d.uuid;
    range.mapping = std::make_shared<ScratchMapping>(d.ordinal, ptr);
    return range;
  }

  absl::Status PrepareGraph(const BoundCall& call) override {
    if (call.device < 0 || call.device >= num_devices()) {
      return absl::InternalError("call bound to no device");
    }
    DeviceState& d = devices_[call.device];
    if (d.graphs == nullptr) {
      return absl::FailedPreconditionError("capturing at start needs --cuda_graphs > 0");
    }
    CUDA_RETURN_IF_ERROR(cudaSetDevice(d.ordinal), "cudaSetDevice");
    // As a SYNC call would run: only the status word's address differs between sync slots and
    // event rings, and the replay takes the request's.
    LaunchContext ctx;
    ctx.cuda = true;
    ctx.choices = kernels_;
    ctx.stream = d.stream;
    ctx.device_status = d.sync.front().status_dev;
    RETURN_IF_ERROR(SetWorkspace(call, d, &ctx));
    return d.graphs->Prepare(GraphKey(call), d.stream,
                             [&]() -> absl::Status { return EnqueueCall(call, ctx); });
  }

  size_t graph_cache_capacity() const override {
    return devices_.empty() || devices_.front().graphs == nullptr
               ? 0
               : devices_.front().graphs->capacity();
  }

  absl::StatusOr<std::vector<std::string>> RegisterEvents(
      const std::string& session_id, const std::string& gpu_uuid,
      const std::vector<std::string>& ready_events) override {
    if (ready_events.empty() || ready_events.size() > max_event_slots_) {
      return absl::InvalidArgumentError(
          absl::StrCat("RegisterEvents: between 1 and ", max_event_slots_,
                       " ready_events (--max_event_slots), got ", ready_events.size()));
    }
    ASSIGN_OR_RETURN(const DeviceState* dev, FindDevice(gpu_uuid));
    CUDA_RETURN_IF_ERROR(cudaSetDevice(dev->ordinal), "cudaSetDevice");
    auto ring = std::make_shared<EventRing>();
    ring->device = dev->ordinal;
    const size_t slots = ready_events.size();
    ring->ready.assign(slots, nullptr);
    ring->done.assign(slots, nullptr);
    ring->InitSlots();
    std::vector<std::string> exported;
    for (size_t i = 0; i < slots; ++i) {
      if (ready_events[i].size() != sizeof(cudaIpcEventHandle_t)) {
        return absl::InvalidArgumentError(absl::StrCat("RegisterEvents: ready_events[", i,
                                                       "] must be ", sizeof(cudaIpcEventHandle_t),
                                                       " bytes, got ", ready_events[i].size()));
      }
      cudaIpcEventHandle_t h;
      std::memcpy(&h, ready_events[i].data(), sizeof(h));
      if (cudaError_t err = cudaIpcOpenEventHandle(&ring->ready[i], h); err != cudaSuccess) {
        (void)cudaGetLastError();
        ring->ready[i] = nullptr;
        spdlog::warn("cudaIpcOpenEventHandle: {}", cudaGetErrorString(err));
        return absl::InvalidArgumentError(absl::StrCat(
            "RegisterEvents: cannot open ready_events[", i, "] (", cudaGetErrorString(err),
            "): it must come from cudaIpcGetEventHandle of an event created with "
            "cudaEventInterprocess | cudaEventDisableTiming, in a process running as the "
            "daemon's user with the same /dev/shm"));
      }
      CUDA_RETURN_IF_ERROR(
          cudaEventCreateWithFlags(&ring->done[i], cudaEventDisableTiming | cudaEventInterprocess),
          "creating a done event");
      cudaIpcEventHandle_t out;
      CUDA_RETURN_IF_ERROR(cudaIpcGetEventHandle(&out, ring->done[i]), "exporting a done event");
      exported.emplace_back(reinterpret_cast<const char*>(&out), sizeof(out));
    }
    CUDA_RETURN_IF_ERROR(cudaHostAlloc(reinterpret_cast<void**>(&ring->status_host),
                                       slots * sizeof(uint32_t), cudaHostAllocMapped),
                         "allocating status words");
    std::memset(ring->status_host, 0, slots * sizeof(uint32_t));
    CUDA_RETURN_IF_ERROR(
        cudaHostGetDevicePointer(reinterpret_cast<void**>(&ring->status_dev), ring->status_host, 0),
        "mapping status words");
    Retire(Replace(session_id, std::move(ring)));
    return exported;
  }

  absl::Status CheckEventSlot(const std::string& session_id, int slot, int device) override {
    std::shared_ptr<EventRing> ring = FindRing(session_id);
    if (ring == nullptr) {
      return absl::FailedPreconditionError(
          "EVENT completion needs RegisterEvents first (a ring of interprocess events)");
    }
    if (slot < 0 || slot >= static_cast<int>(ring->ready.size())) {
      return absl::InvalidArgumentError(
          absl::StrCat("completion.slot must be < ", ring->ready.size(), ", got ", slot));
    }
    if (ring->device != device) {
      return absl::InvalidArgumentError(
          "the session's events are on another GPU than this call's tensors");
    }
    return absl::OkStatus();
  }

  void ReleaseSession(const std::string& session_id) override {
    Retire(Replace(session_id, nullptr));
    graveyard_.Take();
  }

 private:
  // The call's own workspace, or the device's when the operator needs one.
  static absl::Status SetWorkspace(const BoundCall& call, const DeviceState& d,
                                   LaunchContext* ctx) {
    if (call.has("workspace")) {
      ctx->workspace = call.tensor("workspace").data;
      ctx->workspace_bytes = static_cast<int64_t>(call.tensor("workspace").bytes);
    } else if (call.op->workspace_bytes) {
      const int64_t need = call.op->workspace_bytes(call.dims);
      if (need > d.workspace_bytes) {
        return absl::ResourceExhaustedError(
            absl::StrCat(call.op->name, " needs ", need,
                         " bytes of workspace for these shapes; the daemon's "
                         "per-device workspace is ",
                         d.workspace_bytes,
                         " bytes (--workspace_bytes). Pass a "
                         "workspace tensor or raise the limit"));
      }
      ctx->workspace = d.workspace;
      ctx->workspace_bytes = d.workspace_bytes;
    }
    return absl::OkStatus();
  }

  // The GPU a client names by UUID (ordinals differ between containers).
  absl::StatusOr<const DeviceState*> FindDevice(const std::string& uuid) const {
    ASSIGN_OR_RETURN(const int ordinal, table_.Find(uuid));
    return &devices_[ordinal];
  }

  std::shared_ptr<EventRing> FindRing(const std::string& session_id) {
    absl::MutexLock lock(&rings_mu_);
    auto it = rings_.find(session_id);
    return it == rings_.end() ? nullptr : it->second;
  }

  // Installs `ring` (or removes the session's with null) and returns the previous one.
  std::shared_ptr<EventRing> Replace(const std::string& session_id,
                                     std::shared_ptr<EventRing> ring) {
    absl::MutexLock lock(&rings_mu_);
    std::shared_ptr<EventRing> old;
    auto it = rings_.find(session_id);
    if (it != rings_.end()) old = std::move(it->second);
    if (ring != nullptr) {
      rings_[session_id] = std::move(ring);
    } else if (it != rings_.end()) {
      rings_.erase(it);
    }
    return old;
  }

  // A ring may still be referenced by a queued call or a pending host callback, and a host
  // callback must never be the one to destroy it (no CUDA calls there): retired rings wait
  // here until this object holds the last reference.
  void Retire(std::shared_ptr<EventRing> ring) {
    absl::MutexLock lock(&rings_mu_);
    if (ring != nullptr) retired_.push_back(std::move(ring));
    std::vector<std::shared_ptr<EventRing>> keep;
    for (auto& r : retired_) {
      if (r.use_count() > 1) keep.push_back(std::move(r));
    }
    retired_ = std::move(keep);  // the others are destroyed here, outside any callback
  }

  // One open mapping per IPC handle, shared by every region registered on that allocation
  // (a process may open a handle only once).
  absl::StatusOr<std::shared_ptr<IpcMapping>> OpenHandle(const DeviceState& dev,
                                                         const std::string& handle) {
    absl::MutexLock lock(&mu_);
    auto it = open_.find(handle);
    if (it != open_.end()) {
      if (auto alive = it->second.lock()) return alive;
    }
    cudaIpcMemHandle_t h;
    std::memcpy(&h, handle.data(), sizeof(h));
    CUDA_RETURN_IF_ERROR(cudaSetDevice(dev.ordinal), "cudaSetDevice");
    void* ptr = nullptr;
    const cudaError_t err = cudaIpcOpenMemHandle(&ptr, h, cudaIpcMemLazyEnablePeerAccess);
    if (err != cudaSuccess) {
      (void)cudaGetLastError();
      spdlog::warn("cudaIpcOpenMemHandle failed: {}", cudaGetErrorString(err));
      return absl::InvalidArgumentError(absl::StrCat(
          "cannot open cuda.ipc_handle (", cudaGetErrorString(err),
          "): it must be the cudaIpcMemHandle of a live allocation in a process that shares this "
          "daemon's PID namespace, on GPU ",
          dev.uuid));
    }
    auto mapping = std::make_shared<IpcMapping>(dev.ordinal, ptr);
    open_[handle] = mapping;
    return mapping;
  }

  std::vector<DeviceState> devices_;
  DeviceTable table_;  // the UUIDs of devices_, in ordinal order
  Graveyard graveyard_;
  size_t max_event_slots_ = 64;
  KernelChoices kernels_;
  absl::Mutex rings_mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<EventRing>> rings_ ABSL_GUARDED_BY(rings_mu_);
  std::vector<std::shared_ptr<EventRing>> retired_ ABSL_GUARDED_BY(rings_mu_);
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::weak_ptr<IpcMapping>> open_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

absl::StatusOr<std::unique_ptr<Backend>> MakeCudaBackend(const CudaBackendOptions& options) {
  auto backend = std::make_unique<CudaBackend>();
  if (absl::Status s = backend->Init(options); !s.ok()) return s;
  return std::unique_ptr<Backend>(std::move(backend));
}

bool CudaDevicePresent() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return count > 0;
}

}  // namespace cakegrad::server
