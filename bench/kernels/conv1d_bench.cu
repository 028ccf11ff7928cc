// Times the conv1d forward and backward kernels against their memory floor on this GPU:
// the bytes of x and y (forward) or x, dy and dx (backward) moved once, over the device-to-device
// copy bandwidth measured in the same run. Median of CUDA-event times after warm-up; input sets
// rotate so that no call finds its inputs in L2. Prints one table.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cakegrad/kernels/conv1d.h"

namespace {

using cakegrad::kernels::Conv1dBwdParams;
using cakegrad::kernels::Conv1dFwdParams;
using cakegrad::kernels::DType;
using cakegrad::kernels::SiluGradPreactivation;

#define CHECK_CUDA(expr)                                                \
  do {                                                                  \
    cudaError_t cuda_err = (expr);                                      \
    if (cuda_err != cudaSuccess) {                                      \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #expr, \
                   cudaGetErrorString(cuda_err));                       \
      std::exit(1);                                                     \
    }                                                                   \
  } while (0)

#define CHECK_OK(expr)                                                                        \
  do {                                                                                        \
    const cakegrad::kernels::Status s = (expr);                                               \
    if (!s.ok()) {                                                                            \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #expr, s.message().c_str()); \
      std::exit(1);                                                                           \
    }                                                                                         \
  } while (0)

constexpr int kWarmup = 3;
constexpr int kIters = 30;

// How each measurement (the copy and every row) starts. The H200 limits its board power (700 W)
// on a running average over about a second (nvidia-smi's power.draw climbs ~90 W per 100 ms under
// the backward): back-to-back rows reach the limit within ~1 s and then run at 1400-1700 MHz, so
// a row's time depended on its place in the table (up to 30% at 65536 x 12288, 2026-11-29).
//   rest_ms:  idle time before each measurement, so that each one starts from the same rested
//             state (default 1500 ms);
//   warm_ms:  back-to-back calls before timing. 50 ms by default: with only kWarmup calls, the
//             first configuration timed after the allocations and fills ran ~9% slower than the
//             same kernel timed later (the GPU had idled while the host allocated). A long
//             warm-up (CAKEGRAD_BENCH_SUSTAIN_MS, e.g. 3000, with CAKEGRAD_BENCH_REST_MS=0)
//             times the copy and each row in the power-limited steady state instead.
struct Timing {
  double rest_ms = 1500.0;
  double warm_ms = 50.0;
};
Timing g_timing;

double EnvMs(const char* name, double fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || v[0] == '\0') return fallback;
  char* end = nullptr;
  const double ms = std::strtod(v, &end);
  if (end == v || *end != '\0' || ms < 0.0) {
    std::fprintf(stderr, "%s=%s: expected a non-negative number of milliseconds\n", name, v);
    std::exit(2);
  }
  return ms;
}

// Roughly normal BF16 values from a counter hash (sum of four uniforms), never zeros.
__global__ void FillRandomBf16(uint16_t* p, int64_t n, uint64_t seed) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    uint64_t h = (static_cast<uint64_t>(i) + 1) * 0x9E3779B97F4A7C15ull ^ seed;
    float acc = 0.0f;
    for (int k = 0; k < 4; ++k) {
      h ^= h >> 31;
      h *= 0xBF58476D1CE4E5B9ull;
      h ^= h >> 29;
      acc += static_cast<float>(h >> 40) * (1.0f / 16777216.0f);
    }
    const float v = (acc - 2.0f) * 1.7320508f;
    p[i] = static_cast<uint16_t>(__float_as_uint(v) >> 16);
  }
}

template <typename T>
T* DeviceAlloc(size_t n) {
  T* p = nullptr;
  CHECK_CUDA(cudaMalloc(&p, std::max<size_t>(n, 1) * sizeof(T)));
  return p;
}

double Median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

// Times `call(i)` kIters times back to back, one event pair per call; returns the median in us.
template <typename F>
double TimeMedianUs(F&& call, cudaStream_t stream) {
  CHECK_CUDA(cudaStreamSynchronize(stream));
  std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(g_timing.rest_ms));
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0;; ++i) {
    call(i);
    if (i + 1 < kWarmup || (i + 1) % 4 != 0) continue;
    CHECK_CUDA(cudaStreamSynchronize(stream));
    const std::chrono::duration<double, std::milli> ms = std::chrono::steady_clock::now() - start;
    if (ms.count() >= g_timing.warm_ms) break;
  }
  std::vector<cudaEvent_t> ev(kIters + 1);
  for (auto& e : ev) CHECK_CUDA(cudaEventCreate(&e));
  CHECK_CUDA(cudaEventRecord(ev[0], stream));
  for (int i = 0; i < kIters; ++i) {
    call(i);
    CHECK_CUDA(cudaEventRecord(ev[i + 1], stream));
  }
  CHECK_CUDA(cudaEventSynchronize(ev[kIters]));
  CHECK_CUDA(cudaGetLastError());
  std::vector<float> ms(kIters);
  for (int i = 0; i < kIters; ++i) CHECK_CUDA(cudaEventElapsedTime(&ms[i], ev[i], ev[i + 1]));
  for (auto& e : ev) CHECK_CUDA(cudaEventDestroy(e));
  return Median(ms) * 1e3;
}

// Device-to-device copy bandwidth, counting bytes read plus bytes written.
double CopyBandwidthGBs(cudaStream_t stream) {
  const size_t bytes = size_t{2} << 30;
  uint8_t* a = DeviceAlloc<uint8_t>(bytes);
  uint8_t* b = DeviceAlloc<uint8_t>(bytes);
  CHECK_CUDA(cudaMemsetAsync(a, 0x5A, bytes, stream));
  const double us = TimeMedianUs(
      [&](int i) {
        CHECK_CUDA(
            cudaMemcpyAsync(i % 2 ? a : b, i % 2 ? b : a, bytes, cudaMemcpyDeviceToDevice, stream));
      },
      stream);
  CHECK_CUDA(cudaFree(a));
  CHECK_CUDA(cudaFree(b));
  return 2.0 * bytes / (us * 1e-6) / 1e9;
}

struct Set {
  uint16_t *x, *dy, *dx, *y;
};

struct Shape {
  int64_t S, C;
};

void PrintRow(const char* op, const Shape& sh, const char* policy, bool bias, int vec_pad,
              double us, double bytes, double copy_gbs, double target) {
  const double gbs = bytes / (us * 1e-6) / 1e9;
  const double floor_us = bytes / (copy_gbs * 1e9) * 1e6;
  const double ratio = us / floor_us;
  std::printf(
      "| %-8s | %6lld | %5lld | %-6s | %-4s | %-5s | %9.1f | %7.0f | %8.1f | %5.2fx | "
      "%5.2fx %s |\n",
      op, static_cast<long long>(sh.S), static_cast<long long>(sh.C), policy, bias ? "yes" : "no",
      vec_pad == 0   ? "16 B"
      : vec_pad == 4 ? "8 B"
      : vec_pad == 2 ? "4 B"
                     : "2 B",
      us, gbs, floor_us, ratio, target, ratio <= target ? "met" : "MISSED");
}

}  // namespace

int main() {
  // CAKEGRAD_BENCH_NO_BIAS_FIRST=1 times each policy's no-bias row before its bias row, to tell
  // a bias/no-bias difference (one kernel serves both) from the order: the large shape's rows run
  // while the H200 climbs to its 700 W cap and its SM clock swings within ~100 ms.
  const char* order = std::getenv("CAKEGRAD_BENCH_NO_BIAS_FIRST");
  const bool no_bias_first = order != nullptr && order[0] == '1';
  g_timing.rest_ms = EnvMs("CAKEGRAD_BENCH_REST_MS", g_timing.rest_ms);
  g_timing.warm_ms = EnvMs("CAKEGRAD_BENCH_SUSTAIN_MS", g_timing.warm_ms);
  cudaDeviceProp prop;
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const double copy_gbs = CopyBandwidthGBs(stream);
  std::printf("device: %s, %d SMs, L2 %d MB\n", prop.name, prop.multiProcessorCount,
              prop.l2CacheSize >> 20);
  std::printf("device-to-device copy (read + write): %.0f GB/s (median of %d, 2 GiB)\n", copy_gbs,
              kIters);
  std::printf("each measurement: %.0f ms idle, then %.0f ms of warm-up calls, then %d timed\n",
              g_timing.rest_ms, g_timing.warm_ms, kIters);
  std::printf(
      "| op       |      S |     C | policy | bias | loads | median us |    GB/s | floor us |"
      "  ratio | target     |\n");
  std::printf(
      "|----------|--------|-------|--------|------|-------|-----------|---------|----------|"
      "--------|------------|\n");

  std::mt19937_64 rng(20261129);
  for (const Shape sh : {Shape{32768, 4096}, Shape{65536, 12288}}) {
    const int64_t S = sh.S, C = sh.C, n = S * C;
    // 16 documents of random lengths (fixed seed, so runs compare).
    std::vector<int64_t> cuts(15);
    for (auto& c : cuts) c = static_cast<int64_t>(rng() % static_cast<uint64_t>(S + 1));
    cuts.push_back(0);
    cuts.push_back(S);
    std::sort(cuts.begin(), cuts.end());
    std::vector<int32_t> cu(cuts.begin(), cuts.end());
    int32_t* d_cu = DeviceAlloc<int32_t>(cu.size());
    CHECK_CUDA(cudaMemcpy(d_cu, cu.data(), cu.size() * sizeof(int32_t), cudaMemcpyHostToDevice));

    std::normal_distribution<float> dist(0.0f, 0.5f);
    std::vector<float> w(static_cast<size_t>(C) * 4), b(static_cast<size_t>(C));
    for (auto& v : w) v = dist(rng);
    for (auto& v : b) v = dist(rng);
    float* d_w = DeviceAlloc<float>(w.size());
    float* d_b = DeviceAlloc<float>(b.size());
    float* d_dw = DeviceAlloc<float>(w.size());
    float* d_db = DeviceAlloc<float>(b.size());
    CHECK_CUDA(cudaMemcpy(d_w, w.data(), w.size() * 4, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(d_b, b.data(), b.size() * 4, cudaMemcpyHostToDevice));
    const int64_t ws_bytes = cakegrad::kernels::Conv1dBackwardWorkspaceBytes(S, C);
    uint8_t* d_ws = DeviceAlloc<uint8_t>(static_cast<size_t>(ws_bytes));
    uint32_t* d_status = DeviceAlloc<uint32_t>(1);
    CHECK_CUDA(cudaMemset(d_status, 0, 4));

    // Two sets of activations (each far larger than L2); +8 elements of slack for the
    // misaligned-route rows.
    Set sets[2];
    for (int s = 0; s < 2; ++s) {
      sets[s].x = DeviceAlloc<uint16_t>(n + 8);
      sets[s].dy = DeviceAlloc<uint16_t>(n + 8);
      sets[s].dx = DeviceAlloc<uint16_t>(n + 8);
      sets[s].y = DeviceAlloc<uint16_t>(n + 8);
      FillRandomBf16<<<1024, 256, 0, stream>>>(sets[s].x, n + 8, 1234 + s);
      FillRandomBf16<<<1024, 256, 0, stream>>>(sets[s].dy, n + 8, 5678 + s);
      CHECK_CUDA(cudaGetLastError());
    }
    CHECK_CUDA(cudaStreamSynchronize(stream));

    for (bool bias : {true, false}) {
      const double us = TimeMedianUs(
          [&](int i) {
            Conv1dFwdParams f;
            f.x = sets[i % 2].x;
            f.weight = d_w;
            f.bias = bias ? d_b : nullptr;
            f.cu_seqlens = d_cu;
            f.seqlens_dtype = DType::kINT32;
            f.y = sets[i % 2].y;
            f.S = S;
            f.C = C;
            f.num_docs = static_cast<int64_t>(cu.size()) - 1;
            f.device_status = d_status;
            CHECK_OK(cakegrad::kernels::Conv1dForwardCuda(f, stream));
          },
          stream);
      PrintRow("forward", sh, "-", bias, 0, us, 4.0 * n, copy_gbs, 1.15);
    }
    for (int pad : {0, 4, 2}) {
      for (SiluGradPreactivation policy :
           {SiluGradPreactivation::kBF16, SiluGradPreactivation::kFP32}) {
        for (bool bias_first : {true, false}) {
          const bool bias = bias_first != no_bias_first;
          if (pad != 0 && (policy != SiluGradPreactivation::kBF16 || !bias)) continue;
          const double us = TimeMedianUs(
              [&](int i) {
                Conv1dBwdParams p;
                p.x = sets[i % 2].x + pad;
                p.weight = d_w;
                p.bias = bias ? d_b : nullptr;
                p.cu_seqlens = d_cu;
                p.seqlens_dtype = DType::kINT32;
                p.dy = sets[i % 2].dy + pad;
                p.policy = policy;
                p.dx = sets[i % 2].dx + pad;
                p.dweight = d_dw;
                p.dbias = bias ? d_db : nullptr;
                p.workspace = d_ws;
                p.workspace_bytes = ws_bytes;
                p.S = S;
                p.C = C;
                p.num_docs = static_cast<int64_t>(cu.size()) - 1;
                p.device_status = d_status;
                CHECK_OK(cakegrad::kernels::Conv1dBackwardCuda(p, stream));
              },
              stream);
          const bool bf16 = policy == SiluGradPreactivation::kBF16;
          PrintRow("backward", sh, bf16 ? "bf16" : "fp32", bias, pad, us, 6.0 * n, copy_gbs,
                   bf16 ? 1.25 : 1.5);
        }
      }
    }
    uint32_t status = 0;
    CHECK_CUDA(cudaMemcpy(&status, d_status, 4, cudaMemcpyDeviceToHost));
    if (status != 0) std::printf("device status %u: cu_seqlens flagged (bench bug)\n", status);
    for (Set& s : sets) {
      CHECK_CUDA(cudaFree(s.x));
      CHECK_CUDA(cudaFree(s.dy));
      CHECK_CUDA(cudaFree(s.dx));
      CHECK_CUDA(cudaFree(s.y));
    }
    for (void* p : {static_cast<void*>(d_cu), static_cast<void*>(d_w), static_cast<void*>(d_b),
                    static_cast<void*>(d_dw), static_cast<void*>(d_db), static_cast<void*>(d_ws),
                    static_cast<void*>(d_status)}) {
      CHECK_CUDA(cudaFree(p));
    }
    std::printf("(S=%lld C=%lld: %lld documents, workspace %.1f MB of partial rows)\n",
                static_cast<long long>(S), static_cast<long long>(C),
                static_cast<long long>(cu.size() - 1), ws_bytes / 1e6);
  }
  CHECK_CUDA(cudaStreamDestroy(stream));
  return 0;
}
