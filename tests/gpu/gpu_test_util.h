// Helpers for GPU tests: skip cleanly without a GPU, own device memory, check every CUDA call.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

// Skips the test, with the reason, when no CUDA device is visible (CI, laptops).
#define CAKEGRAD_REQUIRE_GPU()                                                                     \
  do {                                                                                             \
    int cakegrad_device_count = 0;                                                                 \
    if (cudaGetDeviceCount(&cakegrad_device_count) != cudaSuccess || cakegrad_device_count == 0) { \
      (void)cudaGetLastError();                                                                    \
      GTEST_SKIP() << "no CUDA device visible: GPU test skipped (run "                             \
                      "tools/gpu/run_gpu_tests.sh on the GPU machine)";                            \
    }                                                                                              \
  } while (0)

#define CUDA_ASSERT_OK(expr)                                                                   \
  do {                                                                                         \
    cudaError_t cakegrad_err = (expr);                                                         \
    ASSERT_EQ(cakegrad_err, cudaSuccess) << #expr << ": " << cudaGetErrorString(cakegrad_err); \
  } while (0)

namespace cakegrad::testing {

// FNV-1a of a host copy, printed by the *HashesForCrossBuildComparison tests.
inline unsigned long long Fnv1a(const void* data, size_t bytes) {
  uint64_t x = 1469598103934665603ull;
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < bytes; ++i) x = (x ^ p[i]) * 1099511628211ull;
  return static_cast<unsigned long long>(x);
}

// Owns a device allocation of `n` elements of T. Fails the current test on CUDA errors.
template <typename T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t n) : n_(n) {
    if (n_ > 0) {
      EXPECT_EQ(cudaMalloc(&ptr_, n_ * sizeof(T)), cudaSuccess);
    }
  }
  explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size()) { Upload(host); }
  ~DeviceBuffer() {
    if (ptr_ != nullptr) cudaFree(ptr_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), n_(o.n_) {
    o.ptr_ = nullptr;
    o.n_ = 0;
  }

  T* get() const { return ptr_; }
  size_t size() const { return n_; }
  size_t bytes() const { return n_ * sizeof(T); }

  void Upload(const std::vector<T>& host) {
    ASSERT_EQ(host.size(), n_);
    if (n_ > 0) {
      EXPECT_EQ(cudaMemcpy(ptr_, host.data(), bytes(), cudaMemcpyHostToDevice), cudaSuccess);
    }
  }
  std::vector<T> Download() const {
    std::vector<T> host(n_);
    if (n_ > 0) {
      EXPECT_EQ(cudaMemcpy(host.data(), ptr_, bytes(), cudaMemcpyDeviceToHost), cudaSuccess);
    }
    return host;
  }
  // Fills every byte with `byte` (0xFF poisons BF16/FP32 with NaNs).
  void Fill(uint8_t byte) {
    if (n_ > 0) {
      EXPECT_EQ(cudaMemset(ptr_, byte, bytes()), cudaSuccess);
    }
  }

 private:
  T* ptr_ = nullptr;
  size_t n_ = 0;
};

}  // namespace cakegrad::testing
