// What a backend reports about how it ran one call, for metrics.
#pragma once

namespace cakegrad::server {

// Eagerly, or as a captured CUDA graph whose executable was found in (hit) or added to (miss)
// the cache.
enum class GraphOutcome { kNotUsed, kHit, kMiss };

struct ExecuteInfo {
  GraphOutcome graph = GraphOutcome::kNotUsed;
};

}  // namespace cakegrad::server
