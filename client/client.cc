#include "cakegrad/client/client.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <future>
#include <utility>

#include "absl/strings/str_cat.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/create_channel.h"

#if defined(CAKEGRAD_WITH_CUDA)
#include <cuda_runtime.h>

#include "cakegrad/kernels/cuda_memory.h"
#endif

namespace cakegrad {
namespace {

absl::Status FromGrpc(const grpc::Status& s) {
  if (s.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
}

std::chrono::system_clock::time_point Deadline(double seconds) {
  return std::chrono::system_clock::now() +
         std::chrono::microseconds(static_cast<int64_t>(seconds * 1e6));
}

#if defined(CAKEGRAD_WITH_CUDA)
// Makes `device` the current CUDA device for its scope and restores the caller's.
class ScopedCudaDevice {
 public:
  explicit ScopedCudaDevice(int device) {
    ok_ = cudaGetDevice(&previous_) == cudaSuccess && cudaSetDevice(device) == cudaSuccess;
  }
  ~ScopedCudaDevice() {
    if (ok_) (void)cudaSetDevice(previous_);
  }
  ScopedCudaDevice(const ScopedCudaDevice&) = delete;
  ScopedCudaDevice& operator=(const ScopedCudaDevice&) = delete;
  bool ok() const { return ok_; }

 private:
  int previous_ = 0;
  bool ok_ = false;
};
#endif

void Set(v1::TensorRef* out, const Tensor& t) { *out = ToProto(t); }
void Set(v1::TensorRef* out, const std::optional<Tensor>& t) {
  if (t.has_value()) *out = ToProto(*t);
}
// Setters for optional message fields take the mutable pointer only when there is a value.
#define CAKEGRAD_SET_OPT(msg, field, value) \
  if ((value).has_value()) Set((msg)->mutable_##field(), (value))

void SetMhcOptions(v1::MhcOptions* out, const MhcOptions& o) {
  out->set_rms_eps(o.rms_eps);
  out->set_hc_eps(o.hc_eps);
  out->set_sinkhorn_iters(o.sinkhorn_iters);
}

void SetKdaOptions(v1::KdaOptions* out, const KdaOptions& o) {
  out->set_scale(o.scale);
  out->set_lower_bound(o.lower_bound);
}

}  // namespace

std::string DefaultAddress() {
  const char* env = std::getenv("CAKEGRAD_ADDRESS");
  if (env != nullptr && env[0] != '\0') return env;
  return "unix:///run/cakegrad/cakegrad.sock";
}

v1::TensorRef ToProto(const Tensor& t) {
  v1::TensorRef ref;
  ref.set_region_id(t.region_id);
  ref.set_offset(t.offset);
  ref.set_dtype(static_cast<v1::DType>(t.dtype));
  for (int64_t d : t.shape) ref.add_shape(d);
  return ref;
}

absl::Status CheckHealth(const std::string& address, double timeout_s) {
  auto channel = grpc::CreateChannel(address.empty() ? DefaultAddress() : address,
                                     grpc::InsecureChannelCredentials());
  auto stub = grpc::health::v1::Health::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(Deadline(timeout_s));
  ctx.set_wait_for_ready(true);
  grpc::health::v1::HealthCheckRequest request;
  grpc::health::v1::HealthCheckResponse response;
  if (grpc::Status s = stub->Check(&ctx, request, &response); !s.ok()) return FromGrpc(s);
  if (response.status() != grpc::health::v1::HealthCheckResponse::SERVING) {
    return absl::UnavailableError(
        absl::StrCat("cakegradd at ", address, " is ",
                     grpc::health::v1::HealthCheckResponse::ServingStatus_Name(response.status())));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Client>> Client::Connect(const std::string& address,
                                                        const std::string& client_name,
                                                        double timeout_s) {
  std::unique_ptr<Client> client(new Client());
  client->address_ = address.empty() ? DefaultAddress() : address;
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  args.SetMaxReceiveMessageSize(4 << 20);
  client->channel_ =
      grpc::CreateCustomChannel(client->address_, grpc::InsecureChannelCredentials(), args);
  if (!client->channel_->WaitForConnected(Deadline(timeout_s))) {
    return absl::UnavailableError(absl::StrCat("no cakegradd answers at ", client->address_,
                                               ": is it running, and is the socket path right? "
                                               "(start it with `cakegradd --socket=PATH`)"));
  }
  client->stub_ = v1::Cakegrad::NewStub(client->channel_);

  // The session lives as long as this stream: a reader thread keeps it open.
  client->session_context_ = std::make_unique<grpc::ClientContext>();
  std::promise<absl::StatusOr<std::string>> opened;
  auto opened_future = opened.get_future();
  v1::OpenSessionRequest request;
  request.set_client_name(client_name.empty() ? absl::StrCat("cakegrad-cpp-", getpid())
                                              : client_name);
  client->session_reader_ = std::thread([c = client.get(), request, &opened] {
    auto reader = c->stub_->OpenSession(c->session_context_.get(), request);
    v1::SessionEvent event;
    bool first = true;
    while (reader->Read(&event)) {
      if (first) {
        opened.set_value(event.session_id());
        first = false;
      }
    }
    grpc::Status status = reader->Finish();
    if (first) {
      opened.set_value(status.ok() ? absl::UnavailableError("session stream ended at once")
                                   : FromGrpc(status));
    }
  });
  if (opened_future.wait_for(std::chrono::microseconds(static_cast<int64_t>(timeout_s * 1e6))) !=
      std::future_status::ready) {
    client->session_context_->TryCancel();
    client->session_reader_.join();
    return absl::DeadlineExceededError("cakegradd did not open a session in time");
  }
  absl::StatusOr<std::string> id = opened_future.get();
  if (!id.ok()) {
    client->session_reader_.join();
    return id.status();
  }
  client->session_id_ = *id;
  client->closed_ = false;
  return client;
}

Client::~Client() { (void)Close(); }

absl::Status Client::Close() {
  if (closed_) return absl::OkStatus();
  closed_ = true;
#if defined(CAKEGRAD_WITH_CUDA)
  // The daemon's kernels may still run on our regions: wait for each slot's done event (owned
  // here, unlike the caller's stream, which may already be destroyed) before the session ends.
  absl::Status event_status;
  for (void* e : done_events_) {
    if (cudaError_t err = cudaEventSynchronize(static_cast<cudaEvent_t>(e));
        err != cudaSuccess && event_status.ok()) {
      event_status = absl::InternalError(
          absl::StrCat("waiting for the daemon's work at close: ", cudaGetErrorString(err)));
    }
  }
  for (std::vector<void*>* events : {&ready_events_, &done_events_}) {
    for (void* e : *events) {
      // Destroying an event still pending is legal: CUDA frees it once it completes.
      if (cudaError_t err = cudaEventDestroy(static_cast<cudaEvent_t>(e));
          err != cudaSuccess && event_status.ok()) {
        event_status = absl::InternalError(
            absl::StrCat("cudaEventDestroy at close: ", cudaGetErrorString(err)));
      }
    }
    events->clear();
  }
  event_stream_ = nullptr;
#endif
  grpc::ClientContext ctx;
  ctx.set_deadline(Deadline(5));
  v1::CloseSessionRequest request;
  request.set_session_id(session_id_);
  v1::CloseSessionResponse response;
  const grpc::Status s = stub_->CloseSession(&ctx, request, &response);
  session_context_->TryCancel();
  if (session_reader_.joinable()) session_reader_.join();
#if defined(CAKEGRAD_WITH_CUDA)
  if (!event_status.ok()) return event_status;
#endif
  return FromGrpc(s);
}

absl::StatusOr<uint64_t> Client::RegisterHostRegion(const std::string& shm_name, uint64_t bytes,
                                                    const std::string& label) {
  v1::RegisterRegionRequest request;
  request.set_session_id(session_id_);
  request.set_label(label);
  request.mutable_host()->set_shm_name(shm_name);
  request.mutable_host()->set_byte_size(bytes);
  grpc::ClientContext ctx;
  v1::RegisterRegionResponse response;
  if (grpc::Status s = stub_->RegisterRegion(&ctx, request, &response); !s.ok()) {
    return FromGrpc(s);
  }
  return response.region_id();
}

absl::StatusOr<uint64_t> Client::RegisterCudaBuffer(const void* device_ptr, uint64_t bytes,
                                                    const std::string& label) {
#if defined(CAKEGRAD_WITH_CUDA)
  cudaPointerAttributes attrs;
  if (cudaError_t e = cudaPointerGetAttributes(&attrs, device_ptr); e != cudaSuccess) {
    (void)cudaGetLastError();
    return absl::InvalidArgumentError(
        absl::StrCat("RegisterCudaBuffer: not a CUDA pointer (", cudaGetErrorString(e), ")"));
  }
  if (attrs.type != cudaMemoryTypeDevice) {
    return absl::InvalidArgumentError(
        "RegisterCudaBuffer: the pointer is not device memory (host, managed or unregistered)");
  }
  // The allocation's range and IPC handle are looked up in the context of the GPU that holds
  // it, which need not be the caller's current device.
  ScopedCudaDevice on_its_gpu(attrs.device);
  if (!on_its_gpu.ok()) {
    return absl::InternalError(
        absl::StrCat("RegisterCudaBuffer: cannot switch to GPU ", attrs.device));
  }
  uintptr_t base = 0;
  size_t alloc_size = 0;
  if (kernels::Status s = kernels::CudaAllocationRange(device_ptr, &base, &alloc_size); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("RegisterCudaBuffer: ", s.message()));
  }
  const uint64_t offset = reinterpret_cast<uintptr_t>(device_ptr) - base;
  if (bytes > alloc_size - offset) {
    return absl::InvalidArgumentError(absl::StrCat(
        "RegisterCudaBuffer: ", bytes, " bytes from the pointer exceed its allocation (",
        alloc_size - offset, " bytes left)"));
  }
  cudaIpcMemHandle_t handle;
  if (cudaError_t e = cudaIpcGetMemHandle(&handle, reinterpret_cast<void*>(base));
      e != cudaSuccess) {
    (void)cudaGetLastError();
    return absl::InvalidArgumentError(
        absl::StrCat("RegisterCudaBuffer: this memory cannot be shared through CUDA IPC (",
                     cudaGetErrorString(e),
                     "); allocate it with cudaMalloc (for PyTorch: do not use "
                     "expandable segments)"));
  }
  std::string uuid;
  if (kernels::Status st = kernels::CudaDeviceUuid(attrs.device, &uuid); !st.ok()) {
    return absl::InternalError(st.message());
  }
  v1::RegisterRegionRequest request;
  request.set_session_id(session_id_);
  request.set_label(label);
  v1::CudaRegion* cuda = request.mutable_cuda();
  cuda->set_ipc_handle(std::string(reinterpret_cast<const char*>(&handle), sizeof(handle)));
  cuda->set_byte_size(bytes);
  cuda->set_gpu_uuid(uuid);
  cuda->set_offset_in_allocation(offset);
  grpc::ClientContext ctx;
  v1::RegisterRegionResponse response;
  if (grpc::Status s = stub_->RegisterRegion(&ctx, request, &response); !s.ok()) {
    return FromGrpc(s);
  }
  return response.region_id();
#else
  (void)device_ptr;
  (void)bytes;
  (void)label;
  return absl::UnimplementedError("this cakegrad client was built without CUDA");
#endif
}

absl::Status Client::UnregisterRegion(uint64_t region_id) {
  v1::UnregisterRegionRequest request;
  request.set_session_id(session_id_);
  request.set_region_id(region_id);
  grpc::ClientContext ctx;
  v1::UnregisterRegionResponse response;
  return FromGrpc(stub_->UnregisterRegion(&ctx, request, &response));
}

absl::StatusOr<std::vector<v1::RegionInfo>> Client::ListRegions() {
  v1::ListRegionsRequest request;
  request.set_session_id(session_id_);
  grpc::ClientContext ctx;
  v1::ListRegionsResponse response;
  if (grpc::Status s = stub_->ListRegions(&ctx, request, &response); !s.ok()) return FromGrpc(s);
  return std::vector<v1::RegionInfo>(response.regions().begin(), response.regions().end());
}

absl::StatusOr<v1::Capabilities> Client::GetCapabilities() {
  grpc::ClientContext ctx;
  v1::Capabilities response;
  if (grpc::Status s = stub_->GetCapabilities(&ctx, {}, &response); !s.ok()) return FromGrpc(s);
  return response;
}

absl::StatusOr<v1::ServerStatus> Client::GetServerStatus() {
  grpc::ClientContext ctx;
  v1::ServerStatus response;
  if (grpc::Status s = stub_->GetServerStatus(&ctx, {}, &response); !s.ok()) return FromGrpc(s);
  return response;
}

absl::StatusOr<uint64_t> Client::GetWorkspaceSize(const v1::WorkspaceSizeRequest& request) {
  grpc::ClientContext ctx;
  v1::WorkspaceSizeResponse response;
  if (grpc::Status s = stub_->GetWorkspaceSize(&ctx, request, &response); !s.ok()) {
    return FromGrpc(s);
  }
  return response.bytes();
}

absl::StatusOr<v1::RunResponse> Client::Run(v1::RunRequest request) {
  request.set_session_id(session_id_);
#if defined(CAKEGRAD_WITH_CUDA)
  const size_t slot = ready_events_.empty() ? 0 : next_slot_++ % ready_events_.size();
  if (!ready_events_.empty()) {
    if (cudaError_t e =
            cudaEventRecord(static_cast<cudaEvent_t>(ready_events_[slot]), event_stream_);
        e != cudaSuccess) {
      return absl::InternalError(absl::StrCat("cudaEventRecord: ", cudaGetErrorString(e)));
    }
    request.mutable_completion()->set_mode(v1::Completion::EVENT);
    request.mutable_completion()->set_slot(static_cast<uint32_t>(slot));
  }
#endif
  grpc::ClientContext ctx;
  v1::RunResponse response;
  if (grpc::Status s = stub_->Run(&ctx, request, &response); !s.ok()) return FromGrpc(s);
#if defined(CAKEGRAD_WITH_CUDA)
  if (!done_events_.empty()) {
    if (cudaError_t e =
            cudaStreamWaitEvent(event_stream_, static_cast<cudaEvent_t>(done_events_[slot]), 0);
        e != cudaSuccess) {
      return absl::InternalError(absl::StrCat("cudaStreamWaitEvent: ", cudaGetErrorString(e)));
    }
  }
#endif
  return response;
}

absl::Status Client::EnableEventCompletion(cudaStream_t stream, int slots) {
#if defined(CAKEGRAD_WITH_CUDA)
  if (slots < 1) return absl::InvalidArgumentError("EnableEventCompletion: slots must be >= 1");
  if (!ready_events_.empty()) {
    return absl::FailedPreconditionError("EnableEventCompletion: already enabled");
  }
  int device = 0;
  if (cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) {
    return absl::InternalError(absl::StrCat("cudaGetDevice: ", cudaGetErrorString(e)));
  }
  v1::RegisterEventsRequest request;
  request.set_session_id(session_id_);
  std::string uuid;
  if (kernels::Status st = kernels::CudaDeviceUuid(device, &uuid); !st.ok()) {
    return absl::InternalError(st.message());
  }
  request.set_gpu_uuid(uuid);
  std::vector<void*> ready;
  auto destroy = [](std::vector<void*>& events) {
    for (void* e : events) cudaEventDestroy(static_cast<cudaEvent_t>(e));
    events.clear();
  };
  for (int i = 0; i < slots; ++i) {
    cudaEvent_t e;
    cudaIpcEventHandle_t h;
    if (cudaEventCreateWithFlags(&e, cudaEventDisableTiming | cudaEventInterprocess) !=
            cudaSuccess ||
        cudaIpcGetEventHandle(&h, e) != cudaSuccess) {
      destroy(ready);
      return absl::InternalError("cannot create an interprocess CUDA event");
    }
    ready.push_back(e);
    request.add_ready_events(std::string(reinterpret_cast<const char*>(&h), sizeof(h)));
  }
  grpc::ClientContext ctx;
  v1::RegisterEventsResponse response;
  if (grpc::Status s = stub_->RegisterEvents(&ctx, request, &response); !s.ok()) {
    destroy(ready);
    return FromGrpc(s);
  }
  std::vector<void*> done;
  for (const std::string& handle : response.done_events()) {
    cudaIpcEventHandle_t h;
    cudaEvent_t e;
    if (handle.size() != sizeof(h)) {
      destroy(ready);
      destroy(done);
      return absl::InternalError("the daemon returned a malformed event handle");
    }
    std::memcpy(&h, handle.data(), sizeof(h));
    if (cudaError_t err = cudaIpcOpenEventHandle(&e, h); err != cudaSuccess) {
      destroy(ready);
      destroy(done);
      return absl::FailedPreconditionError(absl::StrCat(
          "cannot open the daemon's events (", cudaGetErrorString(err),
          "): EVENT completion needs this process to run as the daemon's user with the same "
          "/dev/shm"));
    }
    done.push_back(e);
  }
  event_stream_ = stream;
  ready_events_ = std::move(ready);
  done_events_ = std::move(done);
  return absl::OkStatus();
#else
  (void)stream;
  (void)slots;
  return absl::UnimplementedError("this cakegrad client was built without CUDA");
#endif
}

absl::StatusOr<v1::RunResponse> Client::Conv1dForward(const Conv1dForwardArgs& a) {
  v1::RunRequest r;
  auto* m = r.mutable_conv1d_forward();
  Set(m->mutable_x(), a.x);
  Set(m->mutable_weight(), a.weight);
  Set(m->mutable_cu_seqlens(), a.cu_seqlens);
  CAKEGRAD_SET_OPT(m, bias, a.bias);
  Set(m->mutable_y(), a.y);
  return Run(std::move(r));
}

absl::StatusOr<v1::RunResponse> Client::Conv1dBackward(const Conv1dBackwardArgs& a) {
  v1::RunRequest r;
  auto* m = r.mutable_conv1d_backward();
  Set(m->mutable_x(), a.x);
  Set(m->mutable_weight(), a.weight);
  Set(m->mutable_cu_seqlens(), a.cu_seqlens);
  Set(m->mutable_dy(), a.dy);
  CAKEGRAD_SET_OPT(m, bias, a.bias);
  if (a.silu_grad_preactivation == "bf16") {
    m->set_silu_grad_preactivation(v1::SILU_GRAD_PREACTIVATION_BF16);
  } else if (a.silu_grad_preactivation == "fp32") {
    m->set_silu_grad_preactivation(v1::SILU_GRAD_PREACTIVATION_FP32);
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("silu_grad_preactivation must be \"bf16\" or \"fp32\", got \"",
                     a.silu_grad_preactivation, "\""));
  }
  CAKEGRAD_SET_OPT(m, workspace, a.workspace);
  Set(m->mutable_dx(), a.dx);
  Set(m->mutable_dweight(), a.dweight);
  CAKEGRAD_SET_OPT(m, dbias, a.dbias);
  return Run(std::move(r));
}

absl::StatusOr<v1::RunResponse> Client::MhcForwardPrepare(const MhcForwardPrepareArgs& a) {
  v1::RunRequest r;
  auto* m = r.mutable_mhc_forward_prepare();
  Set(m->mutable_x(), a.x);
  Set(m->mutable_fn(), a.fn);
  Set(m->mutable_scale(), a.scale);
  Set(m->mutable_base(), a.base);
  SetMhcOptions(m->mutable_options(), a.options);
  Set(m->mutable_u(), a.u);
  Set(m->mutable_stats(), a.stats);
  return Run(std::move(r));
}

absl::StatusOr<v1::RunResponse> Client::MhcForwardStats(const MhcForwardStatsArgs& a) {
  v1::RunRequest r;
  auto* m = r.mutable_mhc_forward_stats();
  Set(m->mutable_x(), a.x);
  Set(m->mutable_fn(), a.fn);
  Set(m->mutable_scale(), a.scale);
  Set(m->mutable_base(), a.base);
  SetMhcOptions(m->mutable_options(), a.options);
  Set(m->mutable_stats(), a.stats);
  return Run(std::move(r));
}

absl::StatusOr<v1::RunResponse> Client::MhcForwardFinish(const MhcForwardFinishArgs& a) {
  v1::RunRequest r;
  auto* m = r.mutable_mhc_forward_finish();
  Set(m->mutable_x(), a.x);
  Set(m->mutable_b(), a.b);
  Set(m->mutable_stats(), a.stats);
  Set(m->mutable_y(), a.y);
  return Run(std::move(r));
}

absl::StatusOr<v1::RunResponse> Client::MhcBackwardPrepare(const MhcBackwardPrepareArgs& a) {
  v1::RunRequest r;
  auto* m = r.mutable_mhc_backward_prepare();
  Set(m->mutable_x(), a.x);
  Set(m->mutable_dy(), a.dy);
  Set(m->mutable_b(), a.b);
  Set(m->mutable_stats(), a.stats);
  Set(m->mutable_db(), a.db);
  Set(m->mutable_grad_stats(), a.grad_stats);
  return Run(std::move(r));
}

absl::StatusOr<v1::RunResponse> Client::MhcBackwardFinish(const MhcBackwardFinishArgs& a) {
  v1::RunRequest r;
  auto* m = r.mutable_mhc_backward_finish();
  Set(m->mutable_x(), a.x);
  Set(m->mutable_dy(), a.dy);
  Set(m->mutable_du(), a.du);
  CAKEGRAD_SET_OPT(m, b, a.b);
  Set(m->mutable_fn(), a.fn);
  Set(m->mutable_scale(), a.scale);
  Set(m->mutable_base(), a.base);
  Set(m->mutable_stats(), a.stats);
  Set(m->mutable_grad_stats(), a.grad_stats);
  SetMhcOptions(m->mutable_options(), a.options);
  m->set_accumulate(a.accumulate);
  CAKEGRAD_SET_OPT(m, workspace, a.workspace);
  Set(m->mutable_dx(), a.dx);
  Set(m->mutable_dfn(), a.dfn);
  Set(m->mutable_dscale(), a.dscale);
  Set(m->mutable_dbase(), a.dbase);
  return Run(std::move(r));
}

absl::StatusOr<v1::RunResponse> Client::KdaForward(const KdaForwardArgs& a) {
  v1::RunRequest r;
  auto* m = r.mutable_kda_forward();
  Set(m->mutable_q(), a.q);
  Set(m->mutable_k(), a.k);
  Set(m->mutable_v(), a.v);
  Set(m->mutable_g(), a.g);
  Set(m->mutable_beta(), a.beta);
  Set(m->mutable_a_log(), a.a_log);
  Set(m->mutable_dt_bias(), a.dt_bias);
  CAKEGRAD_SET_OPT(m, initial_state, a.initial_state);
  CAKEGRAD_SET_OPT(m, cu_seqlens, a.cu_seqlens);
  SetKdaOptions(m->mutable_options(), a.options);
  CAKEGRAD_SET_OPT(m, workspace, a.workspace);
  Set(m->mutable_o(), a.o);
  Set(m->mutable_final_state(), a.final_state);
  return Run(std::move(r));
}

absl::StatusOr<v1::RunResponse> Client::KdaBackward(const KdaBackwardArgs& a) {
  v1::RunRequest r;
  auto* m = r.mutable_kda_backward();
  Set(m->mutable_q(), a.q);
  Set(m->mutable_k(), a.k);
  Set(m->mutable_v(), a.v);
  Set(m->mutable_g(), a.g);
  Set(m->mutable_beta(), a.beta);
  Set(m->mutable_a_log(), a.a_log);
  Set(m->mutable_dt_bias(), a.dt_bias);
  CAKEGRAD_SET_OPT(m, initial_state, a.initial_state);
  Set(m->mutable_do_(), a.d_o);
  CAKEGRAD_SET_OPT(m, dfinal_state, a.dfinal_state);
  CAKEGRAD_SET_OPT(m, cu_seqlens, a.cu_seqlens);
  SetKdaOptions(m->mutable_options(), a.options);
  CAKEGRAD_SET_OPT(m, workspace, a.workspace);
  Set(m->mutable_dq(), a.dq);
  Set(m->mutable_dk(), a.dk);
  Set(m->mutable_dv(), a.dv);
  Set(m->mutable_dg(), a.dg);
  Set(m->mutable_dbeta(), a.dbeta);
  Set(m->mutable_da_log(), a.da_log);
  Set(m->mutable_ddt_bias(), a.ddt_bias);
  Set(m->mutable_dinitial_state(), a.dinitial_state);
  return Run(std::move(r));
}

}  // namespace cakegrad
