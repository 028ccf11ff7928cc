#include "cakegrad/client/shared_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"

namespace cakegrad {

absl::StatusOr<SharedMemoryBuffer> SharedMemoryBuffer::Create(uint64_t bytes) {
  if (bytes == 0) return absl::InvalidArgumentError("shared-memory buffer of 0 bytes");
  static std::atomic<uint64_t> counter{0};
  SharedMemoryBuffer buf;
  buf.name_ =
      absl::StrCat("/cakegrad-", getpid(), "-", counter.fetch_add(1), "-", std::random_device{}());
  const int fd = shm_open(buf.name_.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  if (fd < 0) {
    return absl::InternalError(absl::StrCat("shm_open ", buf.name_, ": ", std::strerror(errno)));
  }
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    const int err = errno;
    close(fd);
    shm_unlink(buf.name_.c_str());
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot size ", buf.name_, " to ", bytes, " bytes: ", std::strerror(err)));
  }
  void* addr = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int err = errno;
  close(fd);
  if (addr == MAP_FAILED) {
    shm_unlink(buf.name_.c_str());
    return absl::ResourceExhaustedError(absl::StrCat("mmap ", buf.name_, ": ", std::strerror(err)));
  }
  buf.data_ = static_cast<std::byte*>(addr);
  buf.size_ = bytes;
  return buf;
}

SharedMemoryBuffer::SharedMemoryBuffer(SharedMemoryBuffer&& other) noexcept
    : name_(std::move(other.name_)), data_(other.data_), size_(other.size_) {
  other.data_ = nullptr;
  other.size_ = 0;
  other.name_.clear();
}

SharedMemoryBuffer& SharedMemoryBuffer::operator=(SharedMemoryBuffer&& other) noexcept {
  if (this != &other) {
    Release();
    name_ = std::move(other.name_);
    data_ = other.data_;
    size_ = other.size_;
    other.data_ = nullptr;
    other.size_ = 0;
    other.name_.clear();
  }
  return *this;
}

void SharedMemoryBuffer::Release() {
  if (data_ != nullptr) munmap(data_, size_);
  if (!name_.empty()) shm_unlink(name_.c_str());
  data_ = nullptr;
  size_ = 0;
  name_.clear();
}

SharedMemoryBuffer::~SharedMemoryBuffer() { Release(); }

}  // namespace cakegrad
