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

absl::StatusOr<cudaGraph_t> GraphCache::Capture(cudaStream_t stream,
                                                const std::function<absl::Status()>& enqueue) {
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
  return graph;
}

absl::StatusOr<cudaGraphExec_t> GraphCache::Install(const std::string& key, cudaGraph_t graph,
                                                    GraphOutcome* outcome) {
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
  return exec;
}

absl::Status GraphCache::Run(const std::string& key, cudaStream_t stream,
                             const std::function<absl::Status()>& enqueue, GraphOutcome* outcome) {
  *outcome = GraphOutcome::kNotUsed;
  absl::StatusOr<cudaGraph_t> graph = Capture(stream, enqueue);
  if (!graph.ok()) return graph.status();
  absl::StatusOr<cudaGraphExec_t> exec = Install(key, *graph, outcome);
  if (!exec.ok()) return exec.status();
  if (cudaError_t err = cudaGraphLaunch(*exec, stream); err != cudaSuccess) {
    return CudaError(err, "cudaGraphLaunch");
  }
  return absl::OkStatus();
}

absl::Status GraphCache::Prepare(const std::string& key, cudaStream_t stream,
                                 const std::function<absl::Status()>& enqueue) {
  absl::StatusOr<cudaGraph_t> graph = Capture(stream, enqueue);
  if (!graph.ok()) return graph.status();
  GraphOutcome outcome = GraphOutcome::kNotUsed;
  return Install(key, *graph, &outcome).status();
}

}  // namespace cakegrad::server
