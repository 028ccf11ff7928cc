// The host backend: FP64 reference kernels over POSIX shared memory, for CI and machines
// without a GPU.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/kernel_status.h"
#include "launch/backend.h"
#include "launch/fault_guard.h"
#include "spdlog/spdlog.h"

namespace cakegrad::server {
namespace {

class ShmMapping : public Mapping {
 public:
  ShmMapping(int fd, void* addr, size_t len) : fd_(fd), addr_(addr), len_(len) {}
  ~ShmMapping() override {
    munmap(addr_, len_);
    close(fd_);
  }

  // A client that shrinks the object after registering it would make the daemon fault on the
  // vanished pages: refuse the request instead. (A shrink racing with a running request is
  // caught by the SIGBUS guard on the launcher thread; see launch/fault_guard.h.)
  absl::Status Check() const override {
    struct stat st;
    if (fstat(fd_, &st) != 0 || static_cast<uint64_t>(st.st_size) < len_) {
      return absl::FailedPreconditionError(
          "a host region's shared-memory object was truncated after registration; "
          "re-register it");
    }
    return absl::OkStatus();
  }

 private:
  int fd_;  // kept open so Check can see the object's current size
  void* addr_;
  size_t len_;
};

// shm_open names are "/name" with no further slash (POSIX leaves others undefined).
absl::Status CheckShmName(const std::string& name) {
  if (name.size() < 2 || name.size() > 255 || name[0] != '/' ||
      name.find('/', 1) != std::string::npos || name.find('\0') != std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("host.shm_name must look like \"/name\" (one leading slash, no other, at most "
                     "255 characters), got \"",
                     name, "\""));
  }
  return absl::OkStatus();
}

class HostBackend : public Backend {
 public:
  HostBackend() { InstallFaultGuard(); }

  const char* name() const override { return "host"; }
  RegionKind memory() const override { return RegionKind::kHost; }
  int num_devices() const override { return 1; }

  absl::StatusOr<MappedRange> MapHost(const v1::HostRegion& region) override {
    if (absl::Status s = CheckShmName(region.shm_name()); !s.ok()) return s;
    if (region.byte_size() == 0) {
      return absl::InvalidArgumentError("host.byte_size must be > 0");
    }
    const int fd = shm_open(region.shm_name().c_str(), O_RDWR, 0);
    if (fd < 0) {
      const int err = errno;
      spdlog::warn("shm_open({}) failed: {}", region.shm_name(), std::strerror(err));
      if (err == ENOENT) {
        return absl::NotFoundError(
            absl::StrCat("no shared-memory object named ", region.shm_name()));
      }
      return absl::PermissionDeniedError(absl::StrCat("cannot open shared-memory object ",
                                                      region.shm_name(), ": ", std::strerror(err)));
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      close(fd);
      return absl::InvalidArgumentError(
          absl::StrCat(region.shm_name(), " is not a shared-memory object"));
    }
    if (static_cast<uint64_t>(st.st_size) < region.byte_size()) {
      close(fd);
      return absl::InvalidArgumentError(absl::StrCat("host.byte_size ", region.byte_size(),
                                                     " exceeds the size of ", region.shm_name(),
                                                     " (", st.st_size, " bytes)"));
    }
    void* addr =
        mmap(nullptr, region.byte_size(), PROT_READ | PROT_WRITE, MAP_SHARED, fd, /*offset=*/0);
    const int err = errno;
    if (addr == MAP_FAILED) {
      close(fd);
      spdlog::error("mmap of {} ({} bytes) failed: {}", region.shm_name(), region.byte_size(),
                    std::strerror(err));
      return absl::ResourceExhaustedError(
          absl::StrCat("cannot map ", region.shm_name(), ": ", std::strerror(err)));
    }
    MappedRange range;
    range.mapping = std::make_shared<ShmMapping>(fd, addr, region.byte_size());
    range.base = static_cast<std::byte*>(addr);
    range.size = region.byte_size();
    return range;
  }

  absl::StatusOr<MappedRange> MapCuda(const v1::CudaRegion&) override {
    return absl::FailedPreconditionError(
        "this daemon runs the host backend: register host (POSIX shm) regions, or start "
        "cakegradd with --backend=cuda on a GPU machine");
  }

  void Describe(v1::Capabilities* caps) const override { caps->set_backend("host"); }

  absl::StatusOr<std::vector<std::string>> RegisterEvents(
      const std::string&, const std::string&, const std::vector<std::string>&) override {
    return absl::FailedPreconditionError(
        "EVENT completion orders CUDA streams: this daemon runs the host backend, use SYNC");
  }
  absl::Status CheckEventSlot(const std::string&, int, int) override {
    return absl::FailedPreconditionError(
        "EVENT completion needs the cuda backend; this daemon runs the host backend, use SYNC");
  }
  void ReleaseSession(const std::string&) override {}

  absl::Status Execute(const BoundCall& call, ExecuteInfo*, FinishFn*) override {
    for (const auto& region : call.pins) {
      if (absl::Status s = region->range.mapping->Check(); !s.ok()) return s;
    }
    LaunchContext ctx;  // host: no stream, no workspace, cu_seqlens checked by the reference
    return RunGuarded([&] { return FromKernelStatus(call.op->launch(call, ctx)); });
  }
};

}  // namespace

std::unique_ptr<Backend> MakeHostBackend() { return std::make_unique<HostBackend>(); }

}  // namespace cakegrad::server
