// Prometheus metrics of the daemon (prometheus-cpp): requests by operator and status code,
// latency histograms by phase, and the sessions/regions/mapped bytes it holds. Served over
// HTTP on --metrics_address:--metrics_port when the port is set (never tensors: text only).
#pragma once

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "launch/execute_info.h"
#include "prometheus/counter.h"
#include "prometheus/exposer.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace cakegrad::server {

class Metrics {
 public:
  Metrics();

  // Serves /metrics on address:port (e.g. "127.0.0.1", 9464).
  absl::Status Expose(const std::string& address, int port);

  // One finished Run: queue and compute are zero for requests refused before the executor.
  // gpu: zero where unknown (not observed then).
  void RecordRun(const std::string& op, absl::StatusCode code, absl::Duration queue,
                 absl::Duration compute, absl::Duration gpu, absl::Duration total,
                 GraphOutcome graph);
  // One graph captured at start (--capture_at_start), on one device.
  void RecordGraphPrepared(const std::string& op);
  void SetHoldings(uint64_t sessions, uint64_t regions, uint64_t mapped_bytes);

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  prometheus::Family<prometheus::Counter>& requests_;
  prometheus::Family<prometheus::Histogram>& latency_;
  prometheus::Family<prometheus::Counter>& graphs_;
  prometheus::Gauge& sessions_;
  prometheus::Gauge& regions_;
  prometheus::Gauge& mapped_bytes_;
};

}  // namespace cakegrad::server
