#include "metrics/metrics.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

namespace cakegrad::server {
namespace {

// 10 us .. ~10 s, a factor of 2 apart: daemon overhead and long backwards in one histogram.
prometheus::Histogram::BucketBoundaries LatencyBuckets() {
  prometheus::Histogram::BucketBoundaries b;
  for (double s = 10e-6; s < 20.0; s *= 2) b.push_back(s);
  return b;
}

}  // namespace

Metrics::Metrics()
    : registry_(std::make_shared<prometheus::Registry>()),
      requests_(prometheus::BuildCounter()
                    .Name("cakegrad_requests_total")
                    .Help("Run requests by operator and gRPC status code")
                    .Register(*registry_)),
      latency_(
          prometheus::BuildHistogram()
              .Name("cakegrad_request_seconds")
              .Help("Run latency by phase: queue (waiting for the device's launcher), "
                    "compute (launch to completion), gpu (the kernels' own time, CUDA events; SYNC "
                    "calls on the cuda backend), total (the handler's view)")
              .Register(*registry_)),
      graphs_(prometheus::BuildCounter()
                  .Name("cakegrad_graph_cache_total")
                  .Help("Runs replayed from a cached CUDA graph (hit) or captured anew (miss); "
                        "graphs captured at start, per device (prepared)")
                  .Register(*registry_)),
      sessions_(prometheus::BuildGauge()
                    .Name("cakegrad_sessions")
                    .Help("Open client sessions")
                    .Register(*registry_)
                    .Add({})),
      regions_(prometheus::BuildGauge()
                   .Name("cakegrad_regions")
                   .Help("Registered memory regions")
                   .Register(*registry_)
                   .Add({})),
      mapped_bytes_(prometheus::BuildGauge()
                        .Name("cakegrad_mapped_bytes")
                        .Help("Bytes of client memory mapped by the daemon")
                        .Register(*registry_)
                        .Add({})) {}

absl::Status Metrics::Expose(const std::string& address, int port) {
  const std::string bind = absl::StrCat(address, ":", port);
  try {
    exposer_ = std::make_unique<prometheus::Exposer>(bind);
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat("cannot serve metrics on ", bind, ": ", e.what()));
  }
  exposer_->RegisterCollectable(registry_);
  spdlog::info("metrics on http://{}/metrics", bind);
  return absl::OkStatus();
}

void Metrics::RecordRun(const std::string& op, absl::StatusCode code, absl::Duration queue,
                        absl::Duration compute, absl::Duration gpu, absl::Duration total,
                        GraphOutcome graph) {
  if (graph != GraphOutcome::kNotUsed) {
    graphs_.Add({{"operator", op}, {"result", GraphOutcomeName(graph)}}).Increment();
  }
  requests_.Add({{"operator", op}, {"code", absl::StatusCodeToString(code)}}).Increment();
  static const auto buckets = LatencyBuckets();
  if (code == absl::StatusCode::kOk) {
    latency_.Add({{"operator", op}, {"phase", "queue"}}, buckets)
        .Observe(absl::ToDoubleSeconds(queue));
    latency_.Add({{"operator", op}, {"phase", "compute"}}, buckets)
        .Observe(absl::ToDoubleSeconds(compute));
    if (gpu > absl::ZeroDuration()) {
      latency_.Add({{"operator", op}, {"phase", "gpu"}}, buckets)
          .Observe(absl::ToDoubleSeconds(gpu));
    }
  }
  latency_.Add({{"operator", op}, {"phase", "total"}}, buckets)
      .Observe(absl::ToDoubleSeconds(total));
}

void Metrics::RecordGraphPrepared(const std::string& op) {
  graphs_.Add({{"operator", op}, {"result", "prepared"}}).Increment();
}

void Metrics::SetHoldings(uint64_t sessions, uint64_t regions, uint64_t mapped_bytes) {
  sessions_.Set(static_cast<double>(sessions));
  regions_.Set(static_cast<double>(regions));
  mapped_bytes_.Set(static_cast<double>(mapped_bytes));
}

}  // namespace cakegrad::server
