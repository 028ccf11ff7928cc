// The C++ client of cakegradd: one session per Client, regions registered once and reused,
// one typed call per operator whose arguments mirror the seed pages (outputs are preallocated
// tensors: the daemon writes into the caller's memory, it never allocates it). Errors are
// absl::Status carrying the daemon's code and message.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "cakegrad/kernels/status.h"
#include "cakegrad/kernels/tensor.h"
#include "cakegrad/v1/service.grpc.pb.h"

namespace cakegrad {

using kernels::DType;

// A contiguous tensor inside a registered region.
struct Tensor {
  uint64_t region_id = 0;
  uint64_t offset = 0;  // bytes from the region's start
  DType dtype = DType::kInvalid;
  std::vector<int64_t> shape;
};

// SPEC.md section 2 / seed 002.
struct Conv1dForwardArgs {
  Tensor x, weight, cu_seqlens;
  std::optional<Tensor> bias;
  Tensor y;  // output
};
struct Conv1dBackwardArgs {
  Tensor x, weight, cu_seqlens, dy;
  std::optional<Tensor> bias;
  std::string silu_grad_preactivation = "bf16";  // "bf16" or "fp32"
  std::optional<Tensor> workspace;
  Tensor dx, dweight;           // outputs
  std::optional<Tensor> dbias;  // output, with bias
};

// SPEC.md section 1 / seed 000.
struct MhcOptions {
  double rms_eps = 1e-5;
  double hc_eps = 1e-6;
  int sinkhorn_iters = 20;
};
struct MhcForwardPrepareArgs {
  Tensor x, fn, scale, base;
  MhcOptions options;
  Tensor u, stats;  // outputs
};
struct MhcForwardStatsArgs {
  Tensor x, fn, scale, base;
  MhcOptions options;
  Tensor stats;  // output
};
struct MhcForwardFinishArgs {
  Tensor x, b, stats;
  Tensor y;  // output
};
struct MhcBackwardPrepareArgs {
  Tensor x, dy, b, stats;
  Tensor db, grad_stats;  // outputs
};
struct MhcBackwardFinishArgs {
  Tensor x, dy, du;
  std::optional<Tensor> b;
  Tensor fn, scale, base, stats, grad_stats;
  MhcOptions options;
  bool accumulate = false;
  std::optional<Tensor> workspace;
  Tensor dx, dfn, dscale, dbase;  // outputs
};

// SPEC.md section 3 / seed 004.
struct KdaOptions {
  double scale = 0.08838834764831845;  // 1 / sqrt(128)
  double lower_bound = -5.0;
};
struct KdaForwardArgs {
  Tensor q, k, v, g, beta, a_log, dt_bias;
  std::optional<Tensor> initial_state, cu_seqlens;
  KdaOptions options;
  std::optional<Tensor> workspace;
  Tensor o, final_state;  // outputs
};
struct KdaBackwardArgs {
  Tensor q, k, v, g, beta, a_log, dt_bias;
  std::optional<Tensor> initial_state;
  Tensor d_o;
  std::optional<Tensor> dfinal_state, cu_seqlens;
  KdaOptions options;
  std::optional<Tensor> workspace;
  Tensor dq, dk, dv, dg, dbeta, da_log, ddt_bias, dinitial_state;  // outputs, seed order
};

class Client {
 public:
  // Connects to `address` ("unix:///run/cakegrad/cakegrad.sock"; empty: $CAKEGRAD_ADDRESS or
  // that default) and opens a session. UNAVAILABLE when no daemon answers within `timeout_s`.
  static absl::StatusOr<std::unique_ptr<Client>> Connect(const std::string& address = "",
                                                         const std::string& client_name = "",
                                                         double timeout_s = 5.0);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  const std::string& session_id() const { return session_id_; }
  const std::string& address() const { return address_; }

  // A POSIX shm object (host backend).
  absl::StatusOr<uint64_t> RegisterHostRegion(const std::string& shm_name, uint64_t bytes,
                                              const std::string& label = "");
  // [device_ptr, device_ptr + bytes) of any CUDA allocation of this process: the allocation's
  // base and the offset in it are found here (cuda backend; UNIMPLEMENTED in a build without
  // CUDA).
  absl::StatusOr<uint64_t> RegisterCudaBuffer(const void* device_ptr, uint64_t bytes,
                                              const std::string& label = "");
  absl::Status UnregisterRegion(uint64_t region_id);
  absl::StatusOr<std::vector<v1::RegionInfo>> ListRegions();

  absl::StatusOr<v1::Capabilities> GetCapabilities();
  absl::StatusOr<v1::ServerStatus> GetServerStatus();
  absl::StatusOr<uint64_t> GetWorkspaceSize(const v1::WorkspaceSizeRequest& request);

  absl::StatusOr<v1::RunResponse> Conv1dForward(const Conv1dForwardArgs& args);
  absl::StatusOr<v1::RunResponse> Conv1dBackward(const Conv1dBackwardArgs& args);
  absl::StatusOr<v1::RunResponse> MhcForwardPrepare(const MhcForwardPrepareArgs& args);
  absl::StatusOr<v1::RunResponse> MhcForwardStats(const MhcForwardStatsArgs& args);
  absl::StatusOr<v1::RunResponse> MhcForwardFinish(const MhcForwardFinishArgs& args);
  absl::StatusOr<v1::RunResponse> MhcBackwardPrepare(const MhcBackwardPrepareArgs& args);
  absl::StatusOr<v1::RunResponse> MhcBackwardFinish(const MhcBackwardFinishArgs& args);
  absl::StatusOr<v1::RunResponse> KdaForward(const KdaForwardArgs& args);
  absl::StatusOr<v1::RunResponse> KdaBackward(const KdaBackwardArgs& args);

  // Any operator request, as built by the caller; the session id (and, once event completion
  // is on, the completion) is filled in here.
  absl::StatusOr<v1::RunResponse> Run(v1::RunRequest request);

  // EVENT completion (cuda backend): creates `slots` interprocess events on the current CUDA
  // device and registers them. From then on each call is ordered on `stream` without a host
  // wait: the daemon waits for the work already enqueued on `stream`, and `stream` waits for
  // the daemon's result; the reply comes as soon as the daemon has enqueued the work. The
  // client must run as the daemon's user (interprocess events live in /dev/shm). Calls on one
  // Client must not overlap in time. `stream` must stay valid while calls are made; Close() does
  // not touch it. UNIMPLEMENTED in a build without CUDA.
  absl::Status EnableEventCompletion(cudaStream_t stream, int slots = 16);

  // Ends the session (the daemon releases its regions). Called by the destructor. With EVENT
  // completion it first waits for the daemon's enqueued work (its done events), so the regions
  // are not released under a running kernel.
  absl::Status Close();

 private:
  Client() = default;

  std::string address_;
  std::string session_id_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Cakegrad::Stub> stub_;
  std::unique_ptr<grpc::ClientContext> session_context_;
  std::thread session_reader_;
  bool closed_ = true;  // until a session is open
  // EVENT completion: cudaEvent_t handles, kept opaque so this header needs no CUDA.
  cudaStream_t event_stream_ = nullptr;
  std::vector<void*> ready_events_, done_events_;
  size_t next_slot_ = 0;
};

// "unix:///run/cakegrad/cakegrad.sock" unless $CAKEGRAD_ADDRESS says otherwise.
std::string DefaultAddress();

v1::TensorRef ToProto(const Tensor& t);

// Checks a daemon's grpc.health.v1 status: OK when SERVING.
absl::Status CheckHealth(const std::string& address, double timeout_s = 2.0);

}  // namespace cakegrad
