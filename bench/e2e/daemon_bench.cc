// What the daemon adds on top of the kernels, measured as a client sees it.
//
//   cakegrad_daemon_bench --address=unix:///run/cakegrad/cakegrad.sock latency [--event]
//     conv1d backward (S=2048, C=1024 unless --tokens/--channels) submitted back to back: client
//     round-trip p50/p99, the daemon's own queue, compute and GPU times, and the kernel alone
//     called in this process (CUDA events on the cuda backend, wall clock of the reference on the
//     host backend).
//     --event: EVENT completion. The client's stream first runs a 3 ms spin kernel, as a
//     trainer's host runs ahead of its GPU; events bracketing the call on that stream then
//     measure what the call costs the stream: the daemon's wait on the ready event, its
//     kernel, and the done event's signal back. The host round trip is printed beside it.
//   cakegrad_daemon_bench --address=... rpc
//     the gRPC floor: round trips of a call that does no work (GetServerStatus).
//   cakegrad_daemon_bench --address=... busy --clients=1,4,16 --seconds=5
//     K client processes set up, then submit mHC backward_finish (T=4096, C=4096) back to back
//     (SYNC) over the same wall-clock window; prints the GPU's busy fraction of that window:
//     the sum of the daemon's per-call GPU times (CUDA events) / window / devices. With several
//     GPUs, client i allocates on GPU i mod G (its CUDA ordinal; the daemon routes by UUID),
//     and each GPU's own busy fraction of the common window is printed too: all near 100%
//     means the daemon kept every GPU busy at the same time.
//
// Memory is CUDA (IPC) or POSIX shm by the daemon's backend. Prints a table; results are kept
// in bench/results/.
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "cakegrad/client/client.h"
#include "cakegrad/client/shared_memory.h"
#include "cakegrad/kernels/conv1d.h"
#include "cakegrad/kernels/mhc.h"

#if defined(CAKEGRAD_WITH_CUDA)
#include <cuda_runtime.h>

#include "slow_producer.h"
#endif

ABSL_FLAG(std::string, address, "", "daemon address (default $CAKEGRAD_ADDRESS or the socket)");
ABSL_FLAG(int, iters, 2000, "latency: requests");
ABSL_FLAG(int64_t, tokens, 2048, "latency: S of conv1d_backward");
ABSL_FLAG(int64_t, channels, 1024, "latency: C of conv1d_backward");
ABSL_FLAG(bool, event, false, "latency: EVENT completion (cuda backend) instead of SYNC");
ABSL_FLAG(std::string, clients, "1,4,16", "busy: client process counts");
ABSL_FLAG(double, seconds, 5, "busy: seconds each client submits");
ABSL_FLAG(int64_t, mhc_tokens, 4096, "busy: T of mhc_backward_finish");
ABSL_FLAG(std::string, role, "", "internal: worker");
ABSL_FLAG(int, device, 0, "internal: the worker's CUDA device");
ABSL_FLAG(int64_t, start_at_us, 0, "internal: the worker's start, microseconds since the epoch");

extern char** environ;

namespace {

using cakegrad::Client;
using cakegrad::DType;
using cakegrad::Tensor;
namespace k = cakegrad::kernels;
using Clock = std::chrono::steady_clock;

[[noreturn]] void Die(const absl::Status& s) {
  std::fprintf(stderr, "cakegrad_daemon_bench: %s\n", s.ToString().c_str());
  std::exit(1);
}

#if defined(CAKEGRAD_WITH_CUDA)
void CudaCheck(cudaError_t err, const char* what) {
  if (err != cudaSuccess)
    Die(absl::InternalError(absl::StrCat(what, ": ", cudaGetErrorString(err))));
}
#define BENCH_CUDA(expr) CudaCheck((expr), #expr)
#endif

// One registered buffer holding all tensors of a call, in GPU or shared memory.
class Arena {
 public:
  Arena(Client& client, bool cuda, uint64_t bytes) : cuda_(cuda), bytes_(bytes) {
    if (cuda_) {
#if defined(CAKEGRAD_WITH_CUDA)
      BENCH_CUDA(cudaMalloc(&base_, bytes));
      auto id = client.RegisterCudaBuffer(base_, bytes, "bench");
      if (!id.ok()) Die(id.status());
      region_ = *id;
#else
      Die(absl::UnimplementedError("built without CUDA"));
#endif
    } else {
      auto shm = cakegrad::SharedMemoryBuffer::Create(bytes);
      if (!shm.ok()) Die(shm.status());
      shm_ = std::make_unique<cakegrad::SharedMemoryBuffer>(*std::move(shm));
      base_ = shm_->data();
      auto id = client.RegisterHostRegion(shm_->name(), bytes, "bench");
      if (!id.ok()) Die(id.status());
      region_ = *id;
    }
  }
  ~Arena() {
#if defined(CAKEGRAD_WITH_CUDA)
    if (cuda_) BENCH_CUDA(cudaFree(base_));
#endif
  }
  // Random (never zero) contents: timings on zeros flatter the hardware.
  Tensor Add(DType dtype, std::vector<int64_t> shape) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    const uint64_t size = static_cast<uint64_t>(n * k::DTypeBytes(dtype));
    if (next_ + size > bytes_) Die(absl::ResourceExhaustedError("arena too small"));
    Tensor t{region_, next_, dtype, std::move(shape)};
    // A 1 MiB random block repeated: drawing every value would make a client's set-up take
    // seconds for the largest shapes, and the kernels' speed does not depend on the pattern.
    std::vector<uint16_t> block(512 * 1024);
    std::mt19937 rng(static_cast<unsigned>(next_));
    std::normal_distribution<float> normal(0.f, 0.5f);
    for (auto& v : block) v = k::FloatToBf16(normal(rng));
    std::vector<uint16_t> fill((size + 1) / 2);
    for (size_t i = 0; i < fill.size(); i += block.size()) {
      std::copy_n(block.begin(), std::min(block.size(), fill.size() - i), fill.begin() + i);
    }
    Copy(t, fill.data(), size);
    next_ += (size + 255) / 256 * 256;
    return t;
  }
  void Copy(const Tensor& t, const void* src, uint64_t size) {
#if defined(CAKEGRAD_WITH_CUDA)
    if (cuda_) {
      BENCH_CUDA(cudaMemcpy(ptr(t), src, size, cudaMemcpyHostToDevice));
      return;
    }
#endif
    std::memcpy(ptr(t), src, size);
  }
  void* ptr(const Tensor& t) const { return static_cast<char*>(base_) + t.offset; }

 private:
  bool cuda_;
  uint64_t bytes_;
  void* base_ = nullptr;
  std::unique_ptr<cakegrad::SharedMemoryBuffer> shm_;
  uint64_t region_ = 0;
  uint64_t next_ = 0;
};

double Percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[std::min(v.size() - 1, static_cast<size_t>(p * v.size()))];
}

int Latency(Client& client, bool cuda) {
  const int64_t S = absl::GetFlag(FLAGS_tokens), C = absl::GetFlag(FLAGS_channels);
  Arena arena(client, cuda, 64ull << 20);
  cakegrad::Conv1dBackwardArgs a;
  a.x = arena.Add(DType::kBF16, {S, C});
  a.weight = arena.Add(DType::kFP32, {C, 4});
  a.cu_seqlens = arena.Add(DType::kINT32, {2});
  const int32_t cuts[2] = {0, static_cast<int32_t>(S)};
  arena.Copy(a.cu_seqlens, cuts, sizeof(cuts));
  a.dy = arena.Add(DType::kBF16, {S, C});
  a.dx = arena.Add(DType::kBF16, {S, C});
  a.dweight = arena.Add(DType::kFP32, {C, 4});
  std::vector<double> rtt, queue, compute, gpu, stream_us;
  int late_replies = 0;  // EVENT: replies that came after the stream had caught up
  const int iters = absl::GetFlag(FLAGS_iters);
  const bool event = absl::GetFlag(FLAGS_event);
  constexpr int kSpinUs = 3000;
#if defined(CAKEGRAD_WITH_CUDA)
  cudaStream_t stream = nullptr;
  cudaEvent_t s0 = nullptr, s1 = nullptr;
  if (event) {
    if (!cuda) Die(absl::FailedPreconditionError("--event needs the cuda backend"));
    BENCH_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    BENCH_CUDA(cudaEventCreate(&s0));
    BENCH_CUDA(cudaEventCreate(&s1));
    if (absl::Status s = client.EnableEventCompletion(stream, 8); !s.ok()) Die(s);
  }
#else
  if (event) Die(absl::UnimplementedError("--event needs a CUDA build"));
#endif
  for (int i = 0; i < iters + 50; ++i) {
#if defined(CAKEGRAD_WITH_CUDA)
    if (event) {
      BENCH_CUDA(cakegrad::testing::SpinOnStream(stream, kSpinUs));
      BENCH_CUDA(cudaEventRecord(s0, stream));
    }
#endif
    const auto t0 = Clock::now();
    auto r = client.Conv1dBackward(a);
    const double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
    if (!r.ok()) Die(r.status());
#if defined(CAKEGRAD_WITH_CUDA)
    if (event) {
      BENCH_CUDA(cudaEventRecord(s1, stream));
      BENCH_CUDA(cudaEventSynchronize(s1));
      float ms = 0;
      BENCH_CUDA(cudaEventElapsedTime(&ms, s0, s1));
      if (i >= 50) {
        stream_us.push_back(ms * 1e3);
        late_replies += us > kSpinUs;
      }
    }
#endif
    if (i < 50) continue;  // warm-up
    rtt.push_back(us);
    queue.push_back(r->queue_us());
    compute.push_back(r->compute_us());
    gpu.push_back(r->gpu_us());
  }
  // The kernel alone, in this process, on the same memory.
  k::Conv1dBwdParams p;
  p.x = static_cast<const uint16_t*>(arena.ptr(a.x));
  p.weight = arena.ptr(a.weight);
  p.cu_seqlens = arena.ptr(a.cu_seqlens);
  p.dy = static_cast<const uint16_t*>(arena.ptr(a.dy));
  p.dx = static_cast<uint16_t*>(arena.ptr(a.dx));
  p.dweight = arena.ptr(a.dweight);
  p.S = S;
  p.C = C;
  p.num_docs = 1;
  std::vector<double> kernel;
#if defined(CAKEGRAD_WITH_CUDA)
  void* ws = nullptr;
  cudaEvent_t e0, e1;
  if (cuda) {
    BENCH_CUDA(cudaMalloc(&ws, std::max<int64_t>(k::Conv1dBackwardWorkspaceBytes(S, C), 16)));
    p.workspace = ws;
    p.workspace_bytes = k::Conv1dBackwardWorkspaceBytes(S, C);
    BENCH_CUDA(cudaEventCreate(&e0));
    BENCH_CUDA(cudaEventCreate(&e1));
  }
#endif
  for (int i = 0; i < 200; ++i) {
#if defined(CAKEGRAD_WITH_CUDA)
    if (cuda) {
      BENCH_CUDA(cudaEventRecord(e0));
      if (!k::Conv1dBackwardCuda(p, nullptr).ok()) Die(absl::InternalError("kernel"));
      BENCH_CUDA(cudaEventRecord(e1));
      BENCH_CUDA(cudaEventSynchronize(e1));
      float ms = 0;
      BENCH_CUDA(cudaEventElapsedTime(&ms, e0, e1));
      kernel.push_back(ms * 1e3);
      continue;
    }
#endif
    const auto t0 = Clock::now();
    if (!k::Conv1dBackwardReference(p).ok()) Die(absl::InternalError("reference"));
    kernel.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  const double k50 = Percentile(kernel, 0.5);
  std::printf("conv1d_backward S=%lld C=%lld, %d requests, %s completion, backend %s\n",
              static_cast<long long>(S), static_cast<long long>(C), iters, event ? "EVENT" : "SYNC",
              cuda ? "cuda" : "host");
  std::printf("| measure | p50 us | p99 us |\n|---|---|---|\n");
  std::printf("| client round trip | %.1f | %.1f |\n", Percentile(rtt, 0.5), Percentile(rtt, 0.99));
  std::printf("| daemon queue | %.1f | %.1f |\n", Percentile(queue, 0.5), Percentile(queue, 0.99));
  std::printf("| daemon compute (launch to completion) | %.1f | %.1f |\n", Percentile(compute, 0.5),
              Percentile(compute, 0.99));
  if (!event) {
    std::printf("| daemon GPU time (CUDA events) | %.1f | %.1f |\n", Percentile(gpu, 0.5),
                Percentile(gpu, 0.99));
  }
  std::printf("| kernel alone, in process | %.1f | %.1f |\n", k50, Percentile(kernel, 0.99));
  if (event) {
    std::printf(
        "| client stream, call bracketed by events (host ahead by a %d us spin) | %.1f "
        "| %.1f |\n",
        kSpinUs, Percentile(stream_us, 0.5), Percentile(stream_us, 0.99));
    std::printf("| added to the stream by the daemon (stream - kernel) | %.1f | %.1f |\n",
                Percentile(stream_us, 0.5) - k50, Percentile(stream_us, 0.99) - k50);
    std::printf("replies later than the spin (their stream time includes host time): %d of %d\n",
                late_replies, iters);
  } else {
    std::printf("| added by the daemon (round trip - kernel) | %.1f | %.1f |\n",
                Percentile(rtt, 0.5) - k50, Percentile(rtt, 0.99) - k50);
  }
  return 0;
}

// The gRPC floor: a call that does no work (GetServerStatus), back to back.
int Rpc(Client& client) {
  std::vector<double> rtt;
  const int iters = absl::GetFlag(FLAGS_iters);
  for (int i = 0; i < iters + 50; ++i) {
    const auto t0 = Clock::now();
    auto r = client.GetServerStatus();
    const double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
    if (!r.ok()) Die(r.status());
    if (i >= 50) rtt.push_back(us);
  }
  std::printf("GetServerStatus, %d calls: round trip p50 %.1f us, p99 %.1f us\n", iters,
              Percentile(rtt, 0.5), Percentile(rtt, 0.99));
  return 0;
}

int64_t NowUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// One client process: sets up, waits for the common start, then submits mHC backward_finish
// back to back until the window ends; prints "requests gpu_us compute_us queue_us rtt_us
// late_start" (sums over its requests).
int Worker(Client& client, bool cuda) {
  const int64_t T = absl::GetFlag(FLAGS_mhc_tokens), C = 4096;
#if defined(CAKEGRAD_WITH_CUDA)
  if (cuda) {
    BENCH_CUDA(cudaSetDevice(absl::GetFlag(FLAGS_device)));
  }
#endif
  Arena arena(client, cuda, static_cast<uint64_t>(T) * C * 24 + (64ull << 20));
  cakegrad::MhcBackwardFinishArgs a;
  a.x = arena.Add(DType::kBF16, {T, 4, C});
  a.dy = arena.Add(DType::kBF16, {T, 4, C});
  a.du = arena.Add(DType::kBF16, {T, C});
  a.fn = arena.Add(DType::kFP32, {24, 4 * C});
  a.scale = arena.Add(DType::kFP32, {3});
  a.base = arena.Add(DType::kFP32, {24});
  a.stats = arena.Add(DType::kFP32, {T, 64});
  a.grad_stats = arena.Add(DType::kFP32, {T, 32});
  a.dx = arena.Add(DType::kBF16, {T, 4, C});
  a.dfn = arena.Add(DType::kFP32, {24, 4 * C});
  a.dscale = arena.Add(DType::kFP32, {3});
  a.dbase = arena.Add(DType::kFP32, {24});
  const int64_t start = absl::GetFlag(FLAGS_start_at_us);
  const int64_t end = start + static_cast<int64_t>(absl::GetFlag(FLAGS_seconds) * 1e6);
  const bool late = NowUs() > start;  // set-up took longer than the master allowed
  while (NowUs() < start) std::this_thread::sleep_for(std::chrono::microseconds(200));
  int64_t n = 0;
  double gpu = 0, compute = 0, queue = 0, rtt = 0;
  while (NowUs() < end) {
    const int64_t t0 = NowUs();
    auto r = client.MhcBackwardFinish(a);
    if (!r.ok()) Die(r.status());
    rtt += static_cast<double>(NowUs() - t0);
    ++n;
    gpu += r->gpu_us();
    compute += r->compute_us();
    queue += r->queue_us();
  }
  std::printf("%lld %.1f %.1f %.1f %.1f %d\n", static_cast<long long>(n), gpu, compute, queue, rtt,
              late ? 1 : 0);
  return 0;
}

int Busy(const char* self, int devices, bool cuda) {
  if (!cuda) {
    std::printf("busy: the host backend reports no GPU time; nothing to measure\n");
    return 0;
  }
  int visible = devices;
#if defined(CAKEGRAD_WITH_CUDA)
  BENCH_CUDA(cudaGetDeviceCount(&visible));
#endif
  // Clients spread over the GPUs this process sees; the daemon must serve all of them.
  const int gpus = std::max(1, std::min(devices, visible));
  const double seconds = absl::GetFlag(FLAGS_seconds);
  std::printf("mhc_backward_finish T=%lld C=4096, SYNC, every client over the same %.1f s\n",
              static_cast<long long>(absl::GetFlag(FLAGS_mhc_tokens)), seconds);
  std::printf(
      "| clients | requests | requests/s | GPU busy (sum of GPU time / window / GPUs) "
      "| each GPU busy | mean GPU us | mean compute us | mean queue us | mean round trip us |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|\n");
  for (absl::string_view count : absl::StrSplit(absl::GetFlag(FLAGS_clients), ',')) {
    const int clients = std::stoi(std::string(count));
    // Set-up (allocation, random fill, registration) happens before the common start.
    const int64_t start_at = NowUs() + 4000000 + 250000 * clients;
    std::vector<FILE*> workers;
    for (int i = 0; i < clients; ++i) {
      const std::string cmd =
          absl::StrCat(self, " --role=worker --address=", absl::GetFlag(FLAGS_address),
                       " --seconds=", seconds, " --mhc_tokens=", absl::GetFlag(FLAGS_mhc_tokens),
                       " --start_at_us=", start_at, " --device=", i % gpus);
      workers.push_back(popen(cmd.c_str(), "r"));
    }
    long long requests = 0;
    double gpu_us = 0, compute_us = 0, queue_us = 0, rtt_us = 0;
    std::vector<double> gpu_us_of(gpus, 0.0);
    int late = 0;
    for (size_t i = 0; i < workers.size(); ++i) {
      FILE* w = workers[i];
      long long n = 0;
      double g = 0, c = 0, q = 0, r = 0;
      int l = 0;
      if (w == nullptr || std::fscanf(w, "%lld %lf %lf %lf %lf %d", &n, &g, &c, &q, &r, &l) != 6) {
        Die(absl::InternalError("a worker printed no result"));
      }
      if (pclose(w) != 0) Die(absl::InternalError("worker failed"));
      requests += n;
      gpu_us += g;
      gpu_us_of[i % gpus] += g;
      compute_us += c;
      queue_us += q;
      rtt_us += r;
      late += l;
    }
    const double per = static_cast<double>(std::max(1ll, requests));
    std::string each;
    for (int d = 0; d < gpus; ++d) {
      absl::StrAppend(&each, d == 0 ? "" : " / ",
                      absl::StrFormat("%.1f%%", 100.0 * gpu_us_of[d] / 1e6 / seconds));
    }
    std::printf("| %d | %lld | %.0f | %.1f%% | %s | %.1f | %.1f | %.1f | %.1f |%s\n", clients,
                requests, requests / seconds, 100.0 * gpu_us / 1e6 / seconds / devices,
                each.c_str(), gpu_us / per, compute_us / per, queue_us / per, rtt_us / per,
                late > 0 ? absl::StrCat(" (", late, " workers started late)").c_str() : "");
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<char*> args = absl::ParseCommandLine(argc, argv);
  auto client = Client::Connect(absl::GetFlag(FLAGS_address), "daemon-bench");
  if (!client.ok()) Die(client.status());
  auto caps = (*client)->GetCapabilities();
  if (!caps.ok()) Die(caps.status());
  const bool cuda = caps->backend() == "cuda";
  if (absl::GetFlag(FLAGS_role) == "worker") return Worker(**client, cuda);
  const std::string mode = args.size() > 1 ? args[1] : "latency";
  if (mode == "latency") return Latency(**client, cuda);
  if (mode == "rpc") return Rpc(**client);
  if (mode == "busy") {
    return Busy(argv[0], std::max(1, caps->devices_size()), cuda);
  }
  std::fprintf(stderr, "usage: cakegrad_daemon_bench [--address=...] latency|busy|rpc\n");
  return 2;
}
