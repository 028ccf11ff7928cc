#include "launch/graph_cache.h"

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

namespace cakegrad::server {
namespace {

absl::Status CudaError(cudaError_t err, const char* what) {
  spdlog::error("{}: {}", what, cudaGetErrorString(err));
  return absl::InternalError(absl::StrCat(what, ": ", cudaGetErrorString(err)));
}

}  // namespace

GraphCache::~GraphCache() {
  for (Entry& e : lru_) {
    if (cudaError_t err = cudaGraphExecDestroy(e.exec); err != cudaSuccess) {
      spdlog::error("cudaGraphExecDestroy: {}", cudaGetErrorString(err));
    }
  }
}

absl::Status GraphCache::Run(const std::string& key, cudaStream_t stream,
                             const std::function<absl::Status()>& enqueue, GraphOutcome* outcome) {
  *outcome = GraphOutcome::kNotUsed;
  if (cudaError_t err = cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal);
      err != cudaSuccess) {
    return CudaError(err, "cudaStreamBeginCapture");
  }
  const absl::Status enqueued = enqueue();
  cudaGraph_t graph = nullptr;
  // End the capture whatever happened, so the stream is usable again.
  const cudaError_t ended = cudaStreamEndCapture(stream, &graph);
  if (!enqueued.ok()) {
    if (graph != nullptr) cudaGraphDestroy(graph);
    return enqueued;
  }
  if (ended != cudaSuccess) return CudaError(ended, "cudaStreamEndCapture");

  cudaGraphExec_t exec = nullptr;
  auto it = index_.find(key);
  if (it != index_.end()) {
    cudaGraphExecUpdateResultInfo info;
    if (cudaGraphExecUpdate(it->second->exec, graph, &info) == cudaSuccess) {
      exec = it->second->exec;
      lru_.splice(lru_.begin(), lru_, it->second);
      *outcome = GraphOutcome::kHit;
    } else {
      (void)cudaGetLastError();
      cudaGraphExecDestroy(it->second->exec);
      lru_.erase(it->second);
      index_.erase(it);
    }
  }
  if (exec == nullptr) {
    if (cudaError_t err = cudaGraphInstantiate(&exec, graph, 0); err != cudaSuccess) {
      cudaGraphDestroy(graph);
      return CudaError(err, "cudaGraphInstantiate");
    }
    lru_.push_front(Entry{key, exec});
    index_[key] = lru_.begin();
    *outcome = GraphOutcome::kMiss;
    while (lru_.size() > capacity_) {
      cudaGraphExecDestroy(lru_.back().exec);
      index_.erase(lru_.back().key);
      lru_.pop_back();
    }
  }
  cudaGraphDestroy(graph);
  if (cudaError_t err = cudaGraphLaunch(exec, stream); err != cudaSuccess) {
    return CudaError(err, "cudaGraphLaunch");
  }
  return absl::OkStatus();
}

}  // namespace cakegrad::server
