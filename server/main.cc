// cakegradd: the per-node gradient compute daemon. See README.md and docs/.
#include <signal.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "absl/debugging/failure_signal_handler.h"
#include "absl/debugging/symbolize.h"
#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "daemon/daemon.h"
#include "spdlog/spdlog.h"

ABSL_FLAG(std::string, socket, "/run/cakegrad/cakegrad.sock", "Unix socket path to listen on");
ABSL_FLAG(std::string, socket_mode, "0660", "octal file mode of the socket");
ABSL_FLAG(std::string, backend, "auto", "auto (cuda when a GPU is visible), cuda or host");
ABSL_FLAG(std::string, config, "",
          "file of further flags, one --flag=value per line (absl --flagfile syntax)");
ABSL_FLAG(std::string, log_level, "info", "trace, debug, info, warn, error");
ABSL_FLAG(uint64_t, max_sessions, 1024, "sessions served at once");
ABSL_FLAG(uint64_t, max_regions_per_session, 4096, "regions one session may hold");
ABSL_FLAG(uint64_t, max_region_bytes, 1ull << 40, "largest region that may be registered");
ABSL_FLAG(uint64_t, max_queue_depth, 1024, "requests queued per device before RESOURCE_EXHAUSTED");
ABSL_FLAG(int64_t, workspace_bytes, 256ll << 20, "per-device workspace preallocated at start");
ABSL_FLAG(std::string, workspace_for, "",
          "largest shapes to serve, e.g. \"conv1d_backward:S=1048576,C=12288;mhc_backward_finish:"
          "T=65536,C=4096\": the per-device workspace grows to fit them");
ABSL_FLAG(uint64_t, cuda_graphs, 0,
          "captured CUDA graphs kept per GPU (LRU); 0 launches every call eagerly. Replays are "
          "bitwise equal to eager launches");
ABSL_FLAG(std::string, capture_at_start, "",
          "text-format cakegrad.v1.WarmupPlan file (request { conv1d_backward { x { dtype: BF16 "
          "shape: [4096, 2048] } ... } } ...): these shapes are captured as CUDA graphs on every "
          "GPU before health turns SERVING, so their first request is a cache hit. Needs "
          "--cuda_graphs >= the number of shapes and the cuda backend");
ABSL_FLAG(uint64_t, max_event_slots, 64, "EVENT completion: slots of one session's event ring");
ABSL_FLAG(std::string, kda_backward, "auto",
          "KDA backward kernels of the cuda backend: auto (chunked from 4 heads on, sequential "
          "below), sequential (the recurrence token by token) or chunked (tensor cores; 5x-8x "
          "faster on the H200, but with few heads its dA_log misses SPEC's 1e-4 on some random "
          "draws)");
ABSL_FLAG(int, metrics_port, 0, "Prometheus /metrics HTTP port; 0 disables it");
ABSL_FLAG(std::string, metrics_address, "127.0.0.1", "address the metrics endpoint binds");

int main(int argc, char** argv) {
  // A crash logs a symbolized stack trace to stderr (the journal / container log) before dying.
  absl::InitializeSymbolizer(argv[0]);
  absl::InstallFailureSignalHandler(absl::FailureSignalHandlerOptions());
  absl::SetProgramUsageMessage("cakegradd --socket=PATH [--backend=auto|cuda|host] ...");
  // --config is absl's --flagfile under the name the deployment files use.
  std::vector<std::string> args(argv, argv + argc);
  for (std::string& a : args) {
    if (a.rfind("--config=", 0) == 0) a = "--flagfile=" + a.substr(9);
  }
  std::vector<char*> argp;
  for (std::string& a : args) argp.push_back(a.data());
  absl::ParseCommandLine(static_cast<int>(argp.size()), argp.data());

  spdlog::set_level(spdlog::level::from_str(absl::GetFlag(FLAGS_log_level)));
  cakegrad::server::DaemonOptions options;
  options.socket_path = absl::GetFlag(FLAGS_socket);
  const std::string mode_text = absl::GetFlag(FLAGS_socket_mode);
  char* mode_end = nullptr;
  const long mode = std::strtol(mode_text.c_str(), &mode_end, 8);
  if (mode_text.empty() || *mode_end != '\0' || mode < 0 || mode > 0777) {
    spdlog::critical("--socket_mode must be an octal mode like 0660, got \"{}\"",
                     absl::GetFlag(FLAGS_socket_mode));
    return 2;
  }
  options.socket_mode = static_cast<unsigned>(mode);
  options.backend = absl::GetFlag(FLAGS_backend);
  options.max_sessions = absl::GetFlag(FLAGS_max_sessions);
  options.max_regions_per_session = absl::GetFlag(FLAGS_max_regions_per_session);
  options.max_region_bytes = absl::GetFlag(FLAGS_max_region_bytes);
  options.max_queue_depth = absl::GetFlag(FLAGS_max_queue_depth);
  options.workspace_bytes = absl::GetFlag(FLAGS_workspace_bytes);
  options.workspace_for = absl::GetFlag(FLAGS_workspace_for);
  options.cuda_graphs = absl::GetFlag(FLAGS_cuda_graphs);
  options.capture_at_start = absl::GetFlag(FLAGS_capture_at_start);
  options.max_event_slots = absl::GetFlag(FLAGS_max_event_slots);
  options.kda_backward = absl::GetFlag(FLAGS_kda_backward);
  options.metrics_port = absl::GetFlag(FLAGS_metrics_port);
  options.metrics_address = absl::GetFlag(FLAGS_metrics_address);

  // Signals are taken synchronously by this thread (sigwait), never by gRPC's threads.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  auto daemon = cakegrad::server::Daemon::Start(options);
  if (!daemon.ok()) {
    spdlog::critical("cakegradd cannot start: {}", daemon.status().ToString());
    return 1;
  }
  int sig = 0;
  sigwait(&stop_signals, &sig);
  spdlog::info("received signal {}", sig);
  (*daemon)->Shutdown();
  return 0;
}
