#include "daemon/daemon.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "daemon/capture_plan.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/server_builder.h"
#include "launch/workspace_plan.h"
#include "spdlog/spdlog.h"

namespace cakegrad::server {
namespace {

// A leftover socket file from a crashed daemon would make the bind fail; anything else at that
// path is not ours to delete.
absl::Status ClearStaleSocket(const std::string& path) {
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) return absl::OkStatus();
  if (!S_ISSOCK(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat("--socket=", path, " exists and is not a socket; refusing to replace it"));
  }
  if (unlink(path.c_str()) != 0) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot remove the stale socket ", path, ": ", std::strerror(errno)));
  }
  spdlog::warn("removed a stale socket file at {}", path);
  return absl::OkStatus();
}

absl::StatusOr<kernels::KdaBackwardAlgorithm> ParseKdaBackward(const std::string& name) {
  if (name == "auto") return kernels::KdaBackwardAlgorithm::kAuto;
  if (name == "sequential") return kernels::KdaBackwardAlgorithm::kSequential;
  if (name == "chunked") return kernels::KdaBackwardAlgorithm::kChunked;
  return absl::InvalidArgumentError(
      absl::StrCat("--kda_backward must be auto, sequential or chunked, got \"", name, "\""));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Daemon>> Daemon::Start(const DaemonOptions& options) {
  std::unique_ptr<Daemon> daemon(new Daemon());
  RETURN_IF_ERROR(daemon->Listen(options));
  absl::Status assembled = daemon->Assemble(options);
  if (!assembled.ok()) {
    daemon->Shutdown();
    return assembled;
  }
  return daemon;
}

absl::Status Daemon::Listen(const DaemonOptions& options) {
  socket_path_ = options.socket_path;
  RETURN_IF_ERROR(ClearStaleSocket(socket_path_));
  service_ = std::make_unique<CakegradService>();
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  int bound_port = 0;
  builder.AddListeningPort("unix:" + socket_path_, grpc::InsecureServerCredentials(), &bound_port);
  builder.RegisterService(service_.get());
  // Dead clients are noticed by the socket closing; keepalive pings also catch a hung peer.
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 5000);
  builder.SetMaxReceiveMessageSize(4 << 20);
  // The socket is created with the umask in force: make it no wider than the requested mode
  // from its first instant, then set the mode exactly.
  const mode_t old_umask = umask(~options.socket_mode & 0777);
  server_ = builder.BuildAndStart();
  umask(old_umask);
  if (server_ == nullptr) {
    return absl::UnavailableError(absl::StrCat("cannot listen on unix:", socket_path_,
                                               " (does the directory exist and is it writable?)"));
  }
  if (chmod(socket_path_.c_str(), options.socket_mode) != 0) {
    spdlog::warn("chmod {:o} {}: {}", options.socket_mode, socket_path_, std::strerror(errno));
  }
  server_->GetHealthCheckService()->SetServingStatus(false);
  spdlog::info("listening on unix:{} (mode {:o}), NOT_SERVING until ready", socket_path_,
               options.socket_mode);
  return absl::OkStatus();
}

absl::Status Daemon::Assemble(const DaemonOptions& options) {
  // A bad plan is a configuration error on any backend: refuse to start.
  ASSIGN_OR_RETURN(int64_t planned_workspace, WorkspaceBytesForPlan(options.workspace_for));
  RETURN_IF_ERROR(
      CheckCaptureOptions(options.capture_at_start, options.cuda_graphs, options.backend));
  std::optional<CapturePlan> capture;
  if (!options.capture_at_start.empty()) {
    ASSIGN_OR_RETURN(capture, LoadCapturePlan(options.capture_at_start, options.cuda_graphs));
    // The shapes named for capture are shapes to serve: the workspace fits them too.
    planned_workspace = std::max(planned_workspace, capture->workspace_bytes);
  }
  ASSIGN_OR_RETURN(const kernels::KdaBackwardAlgorithm kda_backward,
                   ParseKdaBackward(options.kda_backward));
  const std::string& choice = options.backend;
  if (choice == "host" || (choice == "auto" && !CudaDevicePresent())) {
    backend_ = MakeHostBackend();
  } else if (choice == "cuda" || choice == "auto") {
    CudaBackendOptions cuda;
    cuda.workspace_bytes = std::max(options.workspace_bytes, planned_workspace);
    cuda.graph_cache_size = options.cuda_graphs;
    cuda.max_event_slots = options.max_event_slots;
    cuda.kernels.kda_backward = kda_backward;
    ASSIGN_OR_RETURN(backend_, MakeCudaBackend(cuda));
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("--backend must be auto, cuda or host, got \"", choice, "\""));
  }
  if (capture.has_value() && backend_->memory() != RegionKind::kCuda) {
    return absl::InvalidArgumentError(
        absl::StrCat(capture->source, " captures CUDA graphs, but --backend=", choice,
                     " chose the ", backend_->name(), " backend (no GPU is visible)"));
  }
  metrics_ = std::make_unique<Metrics>();
  if (options.metrics_port != 0) {
    RETURN_IF_ERROR(metrics_->Expose(options.metrics_address, options.metrics_port));
  }
  if (capture.has_value()) {
    // Before the executors exist: the graph caches have no other user yet, and health stays
    // NOT_SERVING until every shape is captured.
    const absl::Time start = absl::Now();
    RETURN_IF_ERROR(CaptureAtStart(*capture, backend_.get(), metrics_.get()));
    spdlog::info("captured {} shape(s) on {} GPU(s) in {:.1f} ms", capture->entries.size(),
                 backend_->num_devices(), absl::ToDoubleMilliseconds(absl::Now() - start));
  }
  regions_ = std::make_unique<RegionRegistry>(options.max_regions_per_session);
  Backend* backend = backend_.get();
  sessions_ = std::make_unique<SessionManager>(
      regions_.get(), options.max_sessions,
      [backend](const std::string& session) { backend->ReleaseSession(session); });
  for (int d = 0; d < backend_->num_devices(); ++d) {
    executors_.push_back(std::make_unique<Executor>(backend_.get(), d, options.max_queue_depth));
  }
  ServiceContext ctx;
  ctx.backend = backend_.get();
  ctx.regions = regions_.get();
  ctx.sessions = sessions_.get();
  ctx.executors = &executors_;
  ctx.metrics = metrics_.get();
  ctx.limits.set_max_regions_per_session(options.max_regions_per_session);
  ctx.limits.set_max_region_bytes(options.max_region_bytes);
  ctx.limits.set_max_sessions(options.max_sessions);
  ctx.limits.set_max_request_bytes(4 << 20);
  service_->Attach(std::move(ctx));
  service_->SetReady(true);
  server_->GetHealthCheckService()->SetServingStatus(true);
  spdlog::info("backend {} ready with {} executor(s): SERVING", backend_->name(),
               executors_.size());
  return absl::OkStatus();
}

void Daemon::Shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  spdlog::info("shutting down: finishing in-flight work");
  if (server_ != nullptr) server_->GetHealthCheckService()->SetServingStatus(false);
  if (service_ != nullptr) service_->SetReady(false);
  for (auto& executor : executors_) executor->Drain();
  if (sessions_ != nullptr) sessions_->CloseAll();
  if (server_ != nullptr) {
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
    server_->Wait();
  }
  executors_.clear();
  sessions_.reset();
  regions_.reset();
  backend_.reset();
  if (!socket_path_.empty() && server_ != nullptr) unlink(socket_path_.c_str());
  spdlog::info("stopped");
}

Daemon::~Daemon() { Shutdown(); }

}  // namespace cakegrad::server
