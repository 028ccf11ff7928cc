// The kernel library's error value. kernels/ is built on machines without Abseil, so it keeps
// its own small status; the server turns it into absl::Status in one place.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

namespace cakegrad::kernels {

enum class StatusCode : int32_t {
  kOk = 0,
  kInvalidArgument = 1,
  kUnimplemented = 2,
  kResourceExhausted = 3,
  kInternal = 4,
};

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status OkStatus() { return Status(); }
inline Status InvalidArgument(std::string m) {
  return Status(StatusCode::kInvalidArgument, std::move(m));
}
inline Status Unimplemented(std::string m) {
  return Status(StatusCode::kUnimplemented, std::move(m));
}
inline Status ResourceExhausted(std::string m) {
  return Status(StatusCode::kResourceExhausted, std::move(m));
}
inline Status Internal(std::string m) { return Status(StatusCode::kInternal, std::move(m)); }

// Bits of the device status word that kernels raise (atomicOr) when device-resident metadata
// is malformed. Kernels clamp and keep going; the daemon reads the word after completion.
enum DeviceStatusBits : uint32_t {
  kDeviceStatusBadCuSeqlens = 1u << 0,
};

}  // namespace cakegrad::kernels

// The CUDA runtime's stream handle, declared without including cuda_runtime.h so host-only
// code can name the launch functions.
struct CUstream_st;
typedef struct CUstream_st* cudaStream_t;
