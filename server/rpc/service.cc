#include "rpc/service.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/status_macros.h"
#include "ops/op_registry.h"
#include "ops/request_fields.h"
#include "spdlog/spdlog.h"
#include "validate/bind.h"

namespace cakegrad::server {
namespace {

grpc::Status ToGrpc(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}

// Finishes a unary call with the status of `fn`, run right here in the reactor thread.
template <typename Fn>
grpc::ServerUnaryReactor* Answer(grpc::CallbackServerContext* context, Fn&& fn) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpc(fn()));
  return reactor;
}

// The OpenSession stream: writes the session id, then stays open until the client goes away
// (OnCancel) or the session is closed by CloseSession (on_close finishes it).
class SessionStream : public grpc::ServerWriteReactor<v1::SessionEvent> {
 public:
  SessionStream(SessionManager* sessions, const std::string& client_name)
      : sessions_(sessions), link_(std::make_shared<Link>()) {
    link_->stream = this;
    std::weak_ptr<Link> weak = link_;
    auto opened = sessions_->Open(client_name, [weak] {
      if (auto link = weak.lock()) FinishOnce(*link, grpc::Status::OK);
    });
    if (!opened.ok()) {
      FinishOnce(*link_, ToGrpc(opened.status()));
      return;
    }
    id_ = *opened;
    event_.set_session_id(id_);
    StartWrite(&event_);
  }

  void OnWriteDone(bool ok) override {
    if (!ok) End(grpc::Status(grpc::StatusCode::CANCELLED, "session stream broke"));
  }
  void OnCancel() override { End(grpc::Status::CANCELLED); }
  void OnDone() override {
    sessions_->Close(id_, /*notify=*/false);
    {
      absl::MutexLock lock(&link_->mu);
      link_->stream = nullptr;
    }
    delete this;
  }

 private:
  struct Link {
    absl::Mutex mu;
    SessionStream* stream ABSL_GUARDED_BY(mu) = nullptr;
    bool finishing ABSL_GUARDED_BY(mu) = false;
  };

  // Finish exactly once, whichever of CloseSession, cancellation or a broken write comes first.
  static void FinishOnce(Link& link, grpc::Status status) {
    SessionStream* stream;
    {
      absl::MutexLock lock(&link.mu);
      if (link.stream == nullptr || link.finishing) return;
      link.finishing = true;
      stream = link.stream;
    }
    stream->Finish(std::move(status));
  }

  void End(grpc::Status status) {
    if (!id_.empty()) sessions_->Close(id_, /*notify=*/false);
    FinishOnce(*link_, std::move(status));
  }

  SessionManager* const sessions_;
  std::shared_ptr<Link> link_;
  std::string id_;
  v1::SessionEvent event_;
};

}  // namespace

absl::Status CakegradService::Ready() const {
  if (!ready_.load()) {
    return absl::UnavailableError("cakegradd is starting or shutting down; retry shortly");
  }
  return absl::OkStatus();
}

grpc::ServerWriteReactor<v1::SessionEvent>* CakegradService::OpenSession(
    grpc::CallbackServerContext*, const v1::OpenSessionRequest* request) {
  if (absl::Status s = Ready(); !s.ok()) {
    class Refused : public grpc::ServerWriteReactor<v1::SessionEvent> {
     public:
      explicit Refused(grpc::Status s) { Finish(std::move(s)); }
      void OnDone() override { delete this; }
    };
    return new Refused(ToGrpc(s));
  }
  return new SessionStream(ctx_.sessions, request->client_name());
}

grpc::ServerUnaryReactor* CakegradService::CloseSession(grpc::CallbackServerContext* context,
                                                        const v1::CloseSessionRequest* request,
                                                        v1::CloseSessionResponse*) {
  return Answer(context, [&]() -> absl::Status {
    RETURN_IF_ERROR(Ready());
    if (!ctx_.sessions->Close(request->session_id())) {
      return absl::NotFoundError("unknown or already closed session");
    }
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* CakegradService::RegisterRegion(grpc::CallbackServerContext* context,
                                                          const v1::RegisterRegionRequest* request,
                                                          v1::RegisterRegionResponse* response) {
  return Answer(context, [&]() -> absl::Status {
    RETURN_IF_ERROR(Ready());
    RETURN_IF_ERROR(ctx_.sessions->Check(request->session_id()));
    // Refuse an oversize region before mapping anything.
    const uint64_t claimed =
        request->has_host() ? request->host().byte_size() : request->cuda().byte_size();
    if (claimed > ctx_.limits.max_region_bytes()) {
      return absl::ResourceExhaustedError(absl::StrCat("region of ", claimed,
                                                       " bytes exceeds --max_region_bytes (",
                                                       ctx_.limits.max_region_bytes(), ")"));
    }
    MappedRange range;
    RegionKind kind;
    switch (request->memory_case()) {
      case v1::RegisterRegionRequest::kHost: {
        kind = RegionKind::kHost;
        ASSIGN_OR_RETURN(range, ctx_.backend->MapHost(request->host()));
        break;
      }
      case v1::RegisterRegionRequest::kCuda: {
        kind = RegionKind::kCuda;
        ASSIGN_OR_RETURN(range, ctx_.backend->MapCuda(request->cuda()));
        break;
      }
      default:
        return absl::InvalidArgumentError("RegisterRegion: memory (cuda or host) is required");
    }
    ASSIGN_OR_RETURN(uint64_t id, ctx_.regions->Add(request->session_id(), request->label(), kind,
                                                    std::move(range)));
    response->set_region_id(id);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* CakegradService::UnregisterRegion(
    grpc::CallbackServerContext* context, const v1::UnregisterRegionRequest* request,
    v1::UnregisterRegionResponse*) {
  return Answer(context, [&]() -> absl::Status {
    RETURN_IF_ERROR(Ready());
    RETURN_IF_ERROR(ctx_.sessions->Check(request->session_id()));
    return ctx_.regions->Remove(request->session_id(), request->region_id());
  });
}

grpc::ServerUnaryReactor* CakegradService::ListRegions(grpc::CallbackServerContext* context,
                                                       const v1::ListRegionsRequest* request,
                                                       v1::ListRegionsResponse* response) {
  return Answer(context, [&]() -> absl::Status {
    RETURN_IF_ERROR(Ready());
    RETURN_IF_ERROR(ctx_.sessions->Check(request->session_id()));
    for (const auto& region : ctx_.regions->List(request->session_id())) {
      v1::RegionInfo* info = response->add_regions();
      info->set_region_id(region->id);
      info->set_label(region->label);
      info->set_byte_size(region->range.size);
      info->set_kind(RegionKindName(region->kind));
      info->set_gpu_uuid(region->range.gpu_uuid);
      // The registry's own reference and this listing's copy are not in-flight requests.
      info->set_in_flight(
          static_cast<uint32_t>(region.use_count() > 2 ? region.use_count() - 2 : 0));
    }
    return absl::OkStatus();
  });
}

void CakegradService::RecordRun(const std::string& op, const absl::Status& status, absl::Time start,
                                JobTiming timing) {
  (status.ok() ? served_ : failed_).fetch_add(1);
  if (ctx_.metrics == nullptr) return;
  ctx_.metrics->RecordRun(op, status.code(), timing.queued, timing.compute, timing.info.gpu,
                          absl::Now() - start, timing.info.graph);
  ctx_.metrics->SetHoldings(ctx_.sessions->size(), ctx_.regions->size(),
                            ctx_.regions->mapped_bytes());
}

grpc::ServerUnaryReactor* CakegradService::Run(grpc::CallbackServerContext* context,
                                               const v1::RunRequest* request,
                                               v1::RunResponse* response) {
  const absl::Time start = absl::Now();
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  std::string name = "unknown";
  auto fail = [&](const absl::Status& s) {
    if (ready_.load()) RecordRun(name, s, start);
    reactor->Finish(ToGrpc(s));
    return reactor;
  };
  if (absl::Status s = Ready(); !s.ok()) return fail(s);
  if (absl::Status s = ctx_.sessions->Check(request->session_id()); !s.ok()) return fail(s);

  const auto* field = OperatorField(*request);
  if (field == nullptr) return fail(absl::InvalidArgumentError("Run: no operator request given"));
  name = field->name();
  const OpSpec* op = FindOp(name);
  if (op == nullptr) {
    return fail(absl::UnimplementedError(absl::StrCat(name, " is not implemented yet")));
  }
  if (ctx_.backend->memory() == RegionKind::kCuda && !op->has_cuda) {
    return fail(absl::UnimplementedError(
        absl::StrCat(name, " has no CUDA kernel in this build of cakegradd")));
  }
  if (!v1::Completion::Mode_IsValid(request->completion().mode())) {
    return fail(absl::InvalidArgumentError("Run: completion.mode must be SYNC or EVENT"));
  }
  BindOptions options;
  options.memory = ctx_.backend->memory();
  options.needs_workspace = options.memory == RegionKind::kCuda;
  auto bound = Bind(*op, request->GetReflection()->GetMessage(*request, field),
                    request->session_id(), *ctx_.regions, options);
  if (!bound.ok()) return fail(bound.status());

  bound->session_id = request->session_id();
  if (request->completion().mode() == v1::Completion::EVENT) {
    const int slot = static_cast<int>(request->completion().slot());
    if (absl::Status s = ctx_.backend->CheckEventSlot(request->session_id(), slot, bound->device);
        !s.ok()) {
      return fail(s);
    }
    bound->event_slot = slot;
  }
  const int device = bound->device < 0 ? 0 : bound->device;
  Job job;
  job.session_id = request->session_id();
  job.call = std::make_unique<BoundCall>(*std::move(bound));
  job.done = [this, reactor, response, name, start, gpu_uuid = job.call->gpu_uuid](
                 absl::Status status, JobTiming timing) {
    if (status.ok()) {
      response->set_operator_(name);
      response->set_gpu_uuid(gpu_uuid);
      response->set_queue_us(absl::ToDoubleMicroseconds(timing.queued));
      response->set_compute_us(absl::ToDoubleMicroseconds(timing.compute));
      response->set_gpu_us(absl::ToDoubleMicroseconds(timing.info.gpu));
      response->set_graph(GraphOutcomeName(timing.info.graph));
    }
    RecordRun(name, status, start, timing);
    reactor->Finish(ToGrpc(status));
  };
  if (absl::Status s = (*ctx_.executors)[device]->Submit(std::move(job)); !s.ok()) return fail(s);
  return reactor;
}

grpc::ServerUnaryReactor* CakegradService::RegisterEvents(grpc::CallbackServerContext* context,
                                                          const v1::RegisterEventsRequest* request,
                                                          v1::RegisterEventsResponse* response) {
  return Answer(context, [&]() -> absl::Status {
    RETURN_IF_ERROR(Ready());
    RETURN_IF_ERROR(ctx_.sessions->Check(request->session_id()));
    const std::vector<std::string> ready(request->ready_events().begin(),
                                         request->ready_events().end());
    ASSIGN_OR_RETURN(
        std::vector<std::string> done,
        ctx_.backend->RegisterEvents(request->session_id(), request->gpu_uuid(), ready));
    for (std::string& handle : done) response->add_done_events(std::move(handle));
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* CakegradService::GetWorkspaceSize(grpc::CallbackServerContext* context,
                                                            const v1::WorkspaceSizeRequest* request,
                                                            v1::WorkspaceSizeResponse* response) {
  return Answer(context, [&]() -> absl::Status {
    RETURN_IF_ERROR(Ready());
    const OpSpec* op = FindOp(request->operator_());
    if (op == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("GetWorkspaceSize: unknown operator \"", request->operator_(), "\""));
    }
    if (request->tokens() < 0 || request->channels() < 0 || request->heads() < 0 ||
        request->batch() < 0 || request->num_docs() < 0) {
      return absl::InvalidArgumentError("GetWorkspaceSize: sizes must be >= 0");
    }
    if (!op->workspace_bytes) {
      response->set_bytes(0);
      return absl::OkStatus();
    }
    response->set_bytes(static_cast<uint64_t>(
        op->workspace_bytes(WorkspaceDims(request->tokens(), request->channels(), request->heads(),
                                          request->batch(), request->num_docs()))));
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* CakegradService::GetCapabilities(grpc::CallbackServerContext* context,
                                                           const v1::GetCapabilitiesRequest*,
                                                           v1::Capabilities* response) {
  return Answer(context, [&]() -> absl::Status {
    RETURN_IF_ERROR(Ready());
    response->set_version(CAKEGRAD_VERSION);
    response->set_protocol("cakegrad.v1");
    ctx_.backend->Describe(response);
    const auto* oneof = v1::RunRequest::descriptor()->FindOneofByName("op");
    for (int i = 0; i < oneof->field_count(); ++i) {
      const std::string& name = oneof->field(i)->name();
      const OpSpec* op = FindOp(name);
      v1::OperatorInfo* info = response->add_operators();
      info->set_name(name);
      info->set_implemented(op != nullptr &&
                            (ctx_.backend->memory() == RegionKind::kHost || op->has_cuda));
    }
    *response->mutable_limits() = ctx_.limits;
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* CakegradService::GetServerStatus(grpc::CallbackServerContext* context,
                                                           const v1::GetServerStatusRequest*,
                                                           v1::ServerStatus* response) {
  return Answer(context, [&]() -> absl::Status {
    RETURN_IF_ERROR(Ready());
    response->set_sessions(ctx_.sessions->size());
    response->set_regions(ctx_.regions->size());
    response->set_mapped_bytes(ctx_.regions->mapped_bytes());
    response->set_requests_served(served_.load());
    response->set_requests_failed(failed_.load());
    return absl::OkStatus();
  });
}

}  // namespace cakegrad::server
