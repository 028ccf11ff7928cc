// The gRPC surface (callback API). Thin: decode the request, pick the session, hand the call to
// validation and the executor, and finish the reactor when the executor reports back. No
// handler blocks on the GPU or holds a lock across callbacks.
#pragma once

#include <atomic>
#include <memory>
#include <vector>

#include "cakegrad/v1/service.grpc.pb.h"
#include "launch/backend.h"
#include "metrics/metrics.h"
#include "regions/region_registry.h"
#include "schedule/executor.h"
#include "sessions/session_manager.h"

namespace cakegrad::server {

struct ServiceContext {
  Backend* backend = nullptr;
  RegionRegistry* regions = nullptr;
  SessionManager* sessions = nullptr;
  std::vector<std::unique_ptr<Executor>>* executors = nullptr;  // one per device
  Metrics* metrics = nullptr;
  v1::Limits limits;
};

class CakegradService final : public v1::Cakegrad::CallbackService {
 public:
  // The service starts before the backend exists (health answers NOT_SERVING meanwhile):
  // Attach hands it the daemon's parts, then SetReady(true) opens it. Until then, and after
  // SetReady(false) at shutdown, every RPC answers UNAVAILABLE.
  void Attach(ServiceContext ctx) { ctx_ = std::move(ctx); }
  void SetReady(bool ready) { ready_.store(ready); }

  grpc::ServerWriteReactor<v1::SessionEvent>* OpenSession(
      grpc::CallbackServerContext* context, const v1::OpenSessionRequest* request) override;
  grpc::ServerUnaryReactor* CloseSession(grpc::CallbackServerContext* context,
                                         const v1::CloseSessionRequest* request,
                                         v1::CloseSessionResponse* response) override;
  grpc::ServerUnaryReactor* RegisterRegion(grpc::CallbackServerContext* context,
                                           const v1::RegisterRegionRequest* request,
                                           v1::RegisterRegionResponse* response) override;
  grpc::ServerUnaryReactor* UnregisterRegion(grpc::CallbackServerContext* context,
                                             const v1::UnregisterRegionRequest* request,
                                             v1::UnregisterRegionResponse* response) override;
  grpc::ServerUnaryReactor* ListRegions(grpc::CallbackServerContext* context,
                                        const v1::ListRegionsRequest* request,
                                        v1::ListRegionsResponse* response) override;
  grpc::ServerUnaryReactor* RegisterEvents(grpc::CallbackServerContext* context,
                                           const v1::RegisterEventsRequest* request,
                                           v1::RegisterEventsResponse* response) override;
  grpc::ServerUnaryReactor* Run(grpc::CallbackServerContext* context, const v1::RunRequest* request,
                                v1::RunResponse* response) override;
  grpc::ServerUnaryReactor* GetWorkspaceSize(grpc::CallbackServerContext* context,
                                             const v1::WorkspaceSizeRequest* request,
                                             v1::WorkspaceSizeResponse* response) override;
  grpc::ServerUnaryReactor* GetCapabilities(grpc::CallbackServerContext* context,
                                            const v1::GetCapabilitiesRequest* request,
                                            v1::Capabilities* response) override;
  grpc::ServerUnaryReactor* GetServerStatus(grpc::CallbackServerContext* context,
                                            const v1::GetServerStatusRequest* request,
                                            v1::ServerStatus* response) override;

 private:
  absl::Status Ready() const;
  void RecordRun(const std::string& op, const absl::Status& status, absl::Time start,
                 JobTiming timing = {});

  ServiceContext ctx_;
  std::atomic<bool> ready_{false};
  std::atomic<uint64_t> served_{0};
  std::atomic<uint64_t> failed_{0};
};

}  // namespace cakegrad::server
