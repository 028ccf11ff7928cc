// The declarative description of one operator: its tensors (names as in the proto request,
// roles, dtypes, symbolic shapes), its extra rules, its workspace size and its launch. All
// operators share one validation path (validate/) and one launch path (launch/) through this.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "cakegrad/kernels/kda.h"
#include "cakegrad/kernels/status.h"
#include "cakegrad/kernels/tensor.h"
#include "google/protobuf/message.h"
#include "regions/region.h"

namespace cakegrad::server {

using kernels::DType;

// One dimension of a shape rule: a literal, or mul * symbol + add (e.g. 4C, N + 1).
struct Dim {
  const char* symbol = nullptr;
  int64_t mul = 1;
  int64_t add = 0;  // the literal when symbol is null
};
inline Dim Lit(int64_t v) { return Dim{nullptr, 1, v}; }
inline Dim Sym(const char* s, int64_t mul = 1, int64_t add = 0) { return Dim{s, mul, add}; }

enum class Role {
  kInput,
  kOptionalInput,
  kOutput,
  kOptionalOutput,
  kWorkspace,  // optional caller-owned UINT8 scratch; its size rule comes from the OpSpec
};

struct TensorSpec {
  std::string name;  // the TensorRef field's name in the operator's request message
  Role role;
  std::vector<DType> dtypes;
  std::vector<Dim> shape;  // ignored for kWorkspace (1-D, any length)
  // Bytes the tensor's address must be a multiple of where the kernels need more than the dtype's
  // size (vector accesses); 0: the dtype's size.
  uint64_t align = 0;
};
// TensorSpec::align of the tensors a family's CUDA kernels access in 16-byte pieces.
constexpr uint64_t kVecAlign = 16;

// A tensor after validation: where it is and what it holds.
struct BoundTensor {
  bool present = false;
  DType dtype = DType::kInvalid;
  std::vector<int64_t> shape;
  std::byte* data = nullptr;  // host or device address in the daemon's space
  uint64_t bytes = 0;
};

struct OpSpec;

// A validated call: every tensor resolved and its region pinned until the call is destroyed.
struct BoundCall {
  const OpSpec* op = nullptr;
  const google::protobuf::Message* request = nullptr;  // the operator's sub-message
  absl::flat_hash_map<std::string, BoundTensor> tensors;
  absl::flat_hash_map<std::string, int64_t> dims;  // bound shape symbols (S, C, T, ...)
  std::vector<std::shared_ptr<const Region>> pins;
  int device = -1;       // CUDA ordinal of the tensors, -1 on the host backend
  std::string gpu_uuid;  // that GPU's UUID (what the response names); empty on the host backend
  std::string session_id;
  int event_slot = -1;  // EVENT completion: the slot of the session's ring; -1: SYNC

  const BoundTensor& tensor(const std::string& name) const;
  bool has(const std::string& name) const { return tensor(name).present; }
  int64_t dim(const std::string& symbol) const;
  template <typename T>
  T* ptr(const std::string& name) const {
    return reinterpret_cast<T*>(tensor(name).data);
  }
  template <typename Request>
  const Request& as() const {
    return static_cast<const Request&>(*request);
  }
};

// What the backend hands an operator's launch function.
// Daemon-wide choices between kernels that meet the same contract (--kda_backward).
struct KernelChoices {
  kernels::KdaBackwardAlgorithm kda_backward = kernels::KdaBackwardAlgorithm::kAuto;
};

struct LaunchContext {
  bool cuda = false;
  KernelChoices choices;
  cudaStream_t stream = nullptr;
  void* workspace = nullptr;  // the request's workspace, or the daemon's own
  int64_t workspace_bytes = 0;
  uint32_t* device_status = nullptr;  // kernels::DeviceStatusBits, device memory
};

// The shape symbols a workspace query can name (S/T tokens, C channels, H heads, B batch,
// N documents), as OpSpec::workspace_bytes reads them.
inline absl::flat_hash_map<std::string, int64_t> WorkspaceDims(int64_t tokens, int64_t channels,
                                                               int64_t heads, int64_t batch,
                                                               int64_t num_docs) {
  return {{"S", tokens}, {"T", tokens}, {"C", channels},
          {"H", heads},  {"B", batch},  {"N", num_docs}};
}

struct OpSpec {
  std::string name;  // also the RunRequest oneof field ("conv1d_backward")
  std::vector<TensorSpec> tensors;
  // Rules beyond dtypes and shapes (options, presence of one argument tied to another).
  std::function<absl::Status(const BoundCall&)> check;
  // Scratch bytes the CUDA program needs for the bound shapes; null when it needs none.
  std::function<int64_t(const absl::flat_hash_map<std::string, int64_t>&)> workspace_bytes;
  // Enqueues (CUDA) or runs (host reference) the operator.
  std::function<kernels::Status(const BoundCall&, const LaunchContext&)> launch;
  // Whether this build has the operator's CUDA kernels (the host reference always exists).
  bool has_cuda = false;
  // Writes every option's effective value into a copy of the request (an unset option becomes
  // its default), so that calls running the same program share a CUDA graph key however the
  // client spelled the options. Null for operators without options.
  std::function<void(google::protobuf::Message*)> canonicalize;
};

}  // namespace cakegrad::server
