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
#include "absl/status/statusor.h"
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

  // Captures and instantiates what `enqueue` launches, without launching anything, so the first
  // Run of `key` is a hit (start-up capture of configured shapes). The pointers captured may be
  // freed afterwards: an entry is only ever launched after Run updated it with its own call's.
  // Called before the launcher threads start, or from the device's launcher thread.
  absl::Status Prepare(const std::string& key, cudaStream_t stream,
                       const std::function<absl::Status()>& enqueue);

  size_t size() const { return lru_.size(); }
  size_t capacity() const { return capacity_; }
  bool contains(const std::string& key) const { return index_.contains(key); }

 private:
  // What `enqueue` launches on `stream`, as a graph the caller owns.
  absl::StatusOr<cudaGraph_t> Capture(cudaStream_t stream,
                                      const std::function<absl::Status()>& enqueue);
  // The executable of `key`, updated to `graph` when cached (a hit) or instantiated from it and
  // cached (a miss), most recently used first. Destroys `graph`.
  absl::StatusOr<cudaGraphExec_t> Install(const std::string& key, cudaGraph_t graph,
                                          GraphOutcome* outcome);

  struct Entry {
    std::string key;
    cudaGraphExec_t exec;
  };
  const size_t capacity_;
  std::list<Entry> lru_;  // most recently used first
  absl::flat_hash_map<std::string, std::list<Entry>::iterator> index_;
};

}  // namespace cakegrad::server
