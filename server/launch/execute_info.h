// What a backend reports about how it ran one call, for metrics.
#pragma once

#include <functional>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace cakegrad::server {

// Eagerly, or as a captured CUDA graph whose executable was found in (hit) or added to (miss)
// the cache.
enum class GraphOutcome { kNotUsed, kHit, kMiss };

// As RunResponse.graph and the metrics' result label say it: "hit", "miss", "" (eager).
inline const char* GraphOutcomeName(GraphOutcome outcome) {
  switch (outcome) {
    case GraphOutcome::kHit:
      return "hit";
    case GraphOutcome::kMiss:
      return "miss";
    case GraphOutcome::kNotUsed:
      break;
  }
  return "";
}

struct ExecuteInfo {
  GraphOutcome graph = GraphOutcome::kNotUsed;
  // The call's time on the GPU (CUDA events around its launches); zero where unknown (host
  // backend, EVENT calls, whose completion the daemon does not wait for).
  absl::Duration gpu = absl::ZeroDuration();
};

// Completes a call that a backend left in flight (see Backend::Execute).
using FinishFn = std::function<absl::Status(ExecuteInfo* info)>;

}  // namespace cakegrad::server
