// Assembles cakegradd: the listening socket, the backend, regions, sessions, executors and the
// service, in the order that lets health say NOT_SERVING until everything is ready, and takes
// them down in the order that lets in-flight work finish.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "grpcpp/server.h"
#include "launch/backend.h"
#include "metrics/metrics.h"
#include "regions/region_registry.h"
#include "rpc/service.h"
#include "schedule/executor.h"
#include "sessions/session_manager.h"

namespace cakegrad::server {

struct DaemonOptions {
  std::string socket_path = "/run/cakegrad/cakegrad.sock";
  unsigned socket_mode = 0660;
  std::string backend = "auto";  // auto | cuda | host
  uint64_t max_sessions = 1024;
  uint64_t max_regions_per_session = 4096;
  uint64_t max_region_bytes = 1ull << 40;
  uint64_t max_queue_depth = 1024;
  int64_t workspace_bytes = 256ll << 20;
  std::string workspace_for;          // largest shapes to serve (launch/workspace_plan.h)
  uint64_t cuda_graphs = 0;           // graph cache entries per GPU; 0: eager launches
  std::string capture_at_start;       // shapes to capture before SERVING (daemon/capture_plan.h)
  uint64_t max_event_slots = 64;      // EVENT completion ring per session
  std::string kda_backward = "auto";  // auto | sequential | chunked (cuda backend's kernels)
  int metrics_port = 0;               // 0: no metrics endpoint
  std::string metrics_address = "127.0.0.1";
};

class Daemon {
 public:
  static absl::StatusOr<std::unique_ptr<Daemon>> Start(const DaemonOptions& options);
  ~Daemon();

  // Drains in-flight work, ends every session (releasing its regions), stops the server and
  // removes the socket file. Idempotent.
  void Shutdown();

  const char* backend_name() const { return backend_->name(); }

 private:
  Daemon() = default;
  absl::Status Listen(const DaemonOptions& options);
  absl::Status Assemble(const DaemonOptions& options);

  std::string socket_path_;
  std::unique_ptr<Metrics> metrics_;
  std::unique_ptr<CakegradService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<RegionRegistry> regions_;
  std::unique_ptr<SessionManager> sessions_;
  std::vector<std::unique_ptr<Executor>> executors_;
  bool shut_down_ = false;
};

}  // namespace cakegrad::server
