// Tensors of one test placed in one cudaMalloc'd allocation on one GPU, registered with the
// daemon as one region.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "cakegrad/client/client.h"
#include "cakegrad/kernels/tensor.h"

namespace cakegrad::testing {

// Makes `device` current for its scope (no-op for -1) and restores the previous one.
class ScopedDevice {
 public:
  explicit ScopedDevice(int device) {
    EXPECT_EQ(cudaGetDevice(&previous_), cudaSuccess);
    if (device >= 0) {
      EXPECT_EQ(cudaSetDevice(device), cudaSuccess);
    }
  }
  ~ScopedDevice() { cudaSetDevice(previous_); }
  ScopedDevice(const ScopedDevice&) = delete;
  ScopedDevice& operator=(const ScopedDevice&) = delete;

 private:
  int previous_ = 0;
};

// Poisoned at birth (0xFF: NaN in BF16 and FP32). `device` -1: the current device.
class DeviceArena {
 public:
  explicit DeviceArena(uint64_t bytes, int device = -1) : bytes_(bytes) {
    if (device < 0) {
      EXPECT_EQ(cudaGetDevice(&device), cudaSuccess);
    }
    device_ = device;
    ScopedDevice on(device_);
    EXPECT_EQ(cudaMalloc(&base_, bytes), cudaSuccess);
    EXPECT_EQ(cudaMemset(base_, 0xFF, bytes), cudaSuccess);  // poison: NaN in BF16 and FP32
  }
  ~DeviceArena() {
    ScopedDevice on(device_);
    cudaFree(base_);
  }
  DeviceArena(const DeviceArena&) = delete;
  DeviceArena& operator=(const DeviceArena&) = delete;
  void Register(Client& client) {
    auto id = client.RegisterCudaBuffer(base_, bytes_, "arena");
    ASSERT_TRUE(id.ok()) << id.status();
    region_ = *id;
  }
  Tensor Alloc(DType dtype, std::vector<int64_t> shape) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    Tensor t{region_, next_, dtype, std::move(shape)};
    next_ += (static_cast<uint64_t>(n * kernels::DTypeBytes(dtype)) + 255) / 256 * 256;
    EXPECT_LE(next_, bytes_);
    return t;
  }
  template <typename T>
  Tensor Put(DType dtype, std::vector<int64_t> shape, const std::vector<T>& values) {
    Tensor t = Alloc(dtype, std::move(shape));
    ScopedDevice on(device_);
    EXPECT_EQ(
        cudaMemcpy(ptr<void>(t), values.data(), values.size() * sizeof(T), cudaMemcpyHostToDevice),
        cudaSuccess);
    return t;
  }
  static size_t ByteSize(const Tensor& t) {
    int64_t n = kernels::DTypeBytes(t.dtype);
    for (int64_t d : t.shape) n *= d;
    return static_cast<size_t>(n);
  }
  void Poison(const Tensor& t) {
    ScopedDevice on(device_);
    EXPECT_EQ(cudaMemset(ptr<void>(t), 0xFF, ByteSize(t)), cudaSuccess);
  }
  template <typename T>
  T* ptr(const Tensor& t) const {
    return reinterpret_cast<T*>(static_cast<char*>(base_) + t.offset);
  }
  std::vector<uint8_t> Bytes(const Tensor& t) const {
    std::vector<uint8_t> out(ByteSize(t));
    ScopedDevice on(device_);
    EXPECT_EQ(cudaMemcpy(out.data(), ptr<void>(t), out.size(), cudaMemcpyDeviceToHost),
              cudaSuccess);
    return out;
  }
  void* base() const { return base_; }
  uint64_t region() const { return region_; }
  int device() const { return device_; }

 private:
  int device_ = 0;
  void* base_ = nullptr;
  uint64_t bytes_;
  uint64_t region_ = 0;
  uint64_t next_ = 0;
};

}  // namespace cakegrad::testing
