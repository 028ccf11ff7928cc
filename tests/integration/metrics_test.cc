// The Prometheus endpoint counts what the daemon did.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <random>
#include <string>

#include "common/test_util.h"
#include "daemon_process.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "shm_arena.h"

namespace cakegrad::testing {
namespace {

using ::testing::HasSubstr;

std::string HttpGet(int port, const std::string& path) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string out;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    const std::string req = "GET " + path + " HTTP/1.0\r\nHost: localhost\r\n\r\n";
    if (write(fd, req.data(), req.size()) == static_cast<ssize_t>(req.size())) {
      char buf[4096];
      ssize_t n;
      while ((n = read(fd, buf, sizeof(buf))) > 0) out.append(buf, n);
    }
  }
  close(fd);
  return out;
}

TEST(Metrics, CountsRequestsByOperatorAndCode) {
  const int port = 20000 + static_cast<int>(std::random_device{}() % 20000);
  DaemonProcess daemon;
  ASSERT_TRUE(daemon.Start({"--metrics_port=" + std::to_string(port)}).ok());
  auto client = Client::Connect(daemon.address(), "metrics-test");
  ASSERT_TRUE(client.ok());
  Conv1dCall call(**client, 128, 16);
  Conv1dBackwardArgs& args = call.args;
  ASSERT_TRUE((*client)->Conv1dBackward(args).ok());
  ASSERT_TRUE((*client)->Conv1dBackward(args).ok());
  args.dy.dtype = DType::kFP32;
  ASSERT_FALSE((*client)->Conv1dBackward(args).ok());

  const std::string page = HttpGet(port, "/metrics");
  EXPECT_THAT(page,
              HasSubstr("cakegrad_requests_total{code=\"OK\",operator=\"conv1d_backward\"} 2"));
  EXPECT_THAT(
      page,
      HasSubstr(
          "cakegrad_requests_total{code=\"INVALID_ARGUMENT\",operator=\"conv1d_backward\"} 1"));
  EXPECT_THAT(
      page,
      HasSubstr(
          "cakegrad_request_seconds_count{operator=\"conv1d_backward\",phase=\"compute\"} 2"));
  EXPECT_THAT(page, HasSubstr("cakegrad_sessions 1"));
  EXPECT_THAT(page, HasSubstr("cakegrad_regions 1"));
}

}  // namespace
}  // namespace cakegrad::testing
