// Captured CUDA graphs, one executable per (operator, route, shapes), replayed with each
// request's pointers. A request's launches are captured on the device's stream; a cached
// executable of the same key is updated in place with the new capture's parameters
// (cudaGraphExecUpdate), so a replay runs exactly the kernels an eager call would, and gives
// the same bits. When the update is refused (another kernel was chosen, e.g. by pointer
// alignment) the executable is instantiated anew. The cache is bounded (LRU).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <list>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "launch/execute_info.h"

namespace cakegrad::server {

class GraphCache {
 public:
  explicit GraphCache(size_t capacity) : capacity_(capacity) {}
  ~GraphCache();
  GraphCache(const GraphCache&) = delete;
  GraphCache& operator=(const GraphCache&) = delete;

  // Captures what `enqueue` launches on `stream` and launches it as a graph. Called from the
  // device's launcher thread only.
  absl::Status Run(const std::string& key, cudaStream_t stream,
                   const std::function<absl::Status()>& enqueue, GraphOutcome* outcome);

  size_t size() const { return lru_.size(); }

 private:
  struct Entry {
    std::string key;
    cudaGraphExec_t exec;
  };
  const size_t capacity_;
  std::list<Entry> lru_;  // most recently used first
  absl::flat_hash_map<std::string, std::list<Entry>::iterator> index_;
};

}  // namespace cakegrad::server
