// The SIGBUS guard: touching pages of a shared-memory object that shrank after mapping fails
// the one guarded call instead of killing the daemon.
#include "launch/fault_guard.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <string>

namespace cakegrad::server {
namespace {

TEST(FaultGuard, TruncatedMappingFailsTheCallNotTheProcess) {
  InstallFaultGuard();
  const std::string name = "/cakegrad-fault-guard-" + std::to_string(getpid());
  const int fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  ASSERT_GE(fd, 0);
  const size_t len = 1 << 16;
  ASSERT_EQ(ftruncate(fd, len), 0);
  void* addr = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ASSERT_NE(addr, MAP_FAILED);
  volatile char* bytes = static_cast<volatile char*>(addr);
  EXPECT_TRUE(RunGuarded([&] {
                bytes[len - 1] = 1;
                return absl::OkStatus();
              }).ok());
  ASSERT_EQ(ftruncate(fd, 0), 0);
  absl::Status faulted = RunGuarded([&] {
    bytes[len - 1] = 2;  // beyond the object's end now: SIGBUS
    return absl::OkStatus();
  });
  EXPECT_EQ(faulted.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(faulted.message().find("truncated"), std::string::npos);
  // The guard is re-armed for the next call.
  EXPECT_EQ(RunGuarded([&] {
              (void)bytes[0];
              return absl::OkStatus();
            }).code(),
            absl::StatusCode::kFailedPrecondition);
  munmap(addr, len);
  close(fd);
  shm_unlink(name.c_str());
}

}  // namespace
}  // namespace cakegrad::server
