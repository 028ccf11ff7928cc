// A POSIX shared-memory buffer the client creates and the host backend maps: how CPU tensors
// reach the daemon without a copy. The object is unlinked and unmapped on destruction.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace cakegrad {

class SharedMemoryBuffer {
 public:
  // A fresh object of `bytes` bytes (mode 0600), named "/cakegrad-<pid>-<n>-<random>".
  static absl::StatusOr<SharedMemoryBuffer> Create(uint64_t bytes);

  SharedMemoryBuffer(SharedMemoryBuffer&& other) noexcept;
  SharedMemoryBuffer& operator=(SharedMemoryBuffer&& other) noexcept;
  SharedMemoryBuffer(const SharedMemoryBuffer&) = delete;
  SharedMemoryBuffer& operator=(const SharedMemoryBuffer&) = delete;
  ~SharedMemoryBuffer();

  std::byte* data() const { return data_; }
  uint64_t size() const { return size_; }
  const std::string& name() const { return name_; }
  template <typename T>
  T* as(uint64_t byte_offset = 0) const {
    return reinterpret_cast<T*>(data_ + byte_offset);
  }

 private:
  SharedMemoryBuffer() = default;
  void Release();

  std::string name_;
  std::byte* data_ = nullptr;
  uint64_t size_ = 0;
};

}  // namespace cakegrad
