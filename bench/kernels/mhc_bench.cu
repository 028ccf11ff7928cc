// Times the five mHC CUDA functions at T in {4096, 16384}, C = 4096, sinkhorn_iters = 20:
// median of CUDA-event-timed calls after warm-up, over two rotating buffer sets (each larger
// than L2), against the memory floor (each input read once, each output written once) at the
// device-to-device copy bandwidth measured in the same run.
//   cakegrad_mhc_bench             the table
//   cakegrad_mhc_bench --profile   one call of each function at T = 16384 (for ncu)
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "cakegrad/kernels/mhc.h"

namespace {

using namespace cakegrad::kernels;  // NOLINT: a benchmark's main file

#define BENCH_CUDA(expr)                                                \
  do {                                                                  \
    cudaError_t bench_err = (expr);                                     \
    if (bench_err != cudaSuccess) {                                     \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #expr, \
                   cudaGetErrorString(bench_err));                      \
      std::exit(1);                                                     \
    }                                                                   \
  } while (0)

#define BENCH_OK(expr)                                                  \
  do {                                                                  \
    Status bench_st = (expr);                                           \
    if (!bench_st.ok()) {                                               \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #expr, \
                   bench_st.message().c_str());                         \
      std::exit(1);                                                     \
    }                                                                   \
  } while (0)

// Deterministic pseudo-random fill (never zeros): BF16 ~ U(-2, 2) * amp, FP32 likewise.
__device__ uint32_t Hash(uint64_t i, uint32_t seed) {
  uint64_t x = i * 0x9E3779B97F4A7C15ull + seed;
  x ^= x >> 31;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 29;
  return static_cast<uint32_t>(x);
}
__global__ void FillBf16(uint16_t* p, int64_t n, uint32_t seed, float amp) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float v = amp * (static_cast<float>(Hash(i, seed) >> 8) * (4.0f / 16777216.0f) - 2.0f);
    p[i] = static_cast<uint16_t>(__float_as_uint(v) >> 16);
  }
}
__global__ void FillF32(float* p, int64_t n, uint32_t seed, float lo, float hi) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    p[i] = lo + (hi - lo) * static_cast<float>(Hash(i, seed) >> 8) / 16777216.0f;
  }
}

template <typename T>
T* Alloc(int64_t n) {
  T* p = nullptr;
  BENCH_CUDA(cudaMalloc(&p, std::max<int64_t>(n, 1) * sizeof(T)));
  return p;
}

struct Set {
  uint16_t *X, *B, *dY, *dU, *U, *Y, *dB, *dX;
  float *fn, *scale, *base, *stats, *grad_stats, *dfn, *dscale, *dbase;
  void* ws;
  int64_t ws_bytes;
};

Set MakeSet(int64_t T, int64_t C, uint32_t seed) {
  const int64_t K = 4 * C;
  Set s;
  s.X = Alloc<uint16_t>(T * K);
  s.B = Alloc<uint16_t>(T * C);
  s.dY = Alloc<uint16_t>(T * K);
  s.dU = Alloc<uint16_t>(T * C);
  s.U = Alloc<uint16_t>(T * C);
  s.Y = Alloc<uint16_t>(T * K);
  s.dB = Alloc<uint16_t>(T * C);
  s.dX = Alloc<uint16_t>(T * K);
  s.fn = Alloc<float>(24 * K);
  s.scale = Alloc<float>(3);
  s.base = Alloc<float>(24);
  s.stats = Alloc<float>(T * 64);
  s.grad_stats = Alloc<float>(T * 32);
  s.dfn = Alloc<float>(24 * K);
  s.dscale = Alloc<float>(3);
  s.dbase = Alloc<float>(24);
  s.ws_bytes = std::max(MhcBackwardFinishWorkspaceBytes(T, C), MhcForwardWorkspaceBytes(T, C));
  s.ws = Alloc<uint8_t>(s.ws_bytes);
  FillBf16<<<1024, 256>>>(s.X, T * K, seed + 1, 1.0f);
  FillBf16<<<1024, 256>>>(s.B, T * C, seed + 2, 1.0f);
  FillBf16<<<1024, 256>>>(s.dY, T * K, seed + 3, 1.0f);
  FillBf16<<<1024, 256>>>(s.dU, T * C, seed + 4, 1.0f);
  FillF32<<<256, 256>>>(s.fn, 24 * K, seed + 5, -0.02f, 0.02f);
  FillF32<<<1, 32>>>(s.scale, 3, seed + 6, 0.01f, 1.0f);
  FillF32<<<1, 32>>>(s.base, 24, seed + 7, -1.0f, 1.0f);
  FillF32<<<256, 256>>>(s.grad_stats, T * 32, seed + 8, -1.0f, 1.0f);
  BENCH_CUDA(cudaGetLastError());
  return s;
}

double MedianMs(const std::function<void(int)>& call, int warmup, int reps) {
  for (int i = 0; i < warmup; ++i) call(i);
  std::vector<cudaEvent_t> ev(2 * reps);
  for (auto& e : ev) BENCH_CUDA(cudaEventCreate(&e));
  for (int i = 0; i < reps; ++i) {
    BENCH_CUDA(cudaEventRecord(ev[2 * i]));
    call(i);
    BENCH_CUDA(cudaEventRecord(ev[2 * i + 1]));
  }
  BENCH_CUDA(cudaDeviceSynchronize());
  std::vector<float> ms(reps);
  for (int i = 0; i < reps; ++i) BENCH_CUDA(cudaEventElapsedTime(&ms[i], ev[2 * i], ev[2 * i + 1]));
  for (auto& e : ev) BENCH_CUDA(cudaEventDestroy(e));
  std::sort(ms.begin(), ms.end());
  return ms[reps / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const bool profile = argc > 1 && std::string(argv[1]) == "--profile";
  int dev = 0;
  BENCH_CUDA(cudaGetDevice(&dev));
  cudaDeviceProp prop;
  BENCH_CUDA(cudaGetDeviceProperties(&prop, dev));
  std::printf("device: %s, %d SMs, L2 %d MiB\n", prop.name, prop.multiProcessorCount,
              prop.l2CacheSize >> 20);

  // Copy bandwidth: bytes read + bytes written of a 2 GiB device-to-device copy.
  const int64_t copy_bytes = int64_t{2} << 30;
  uint8_t* src = Alloc<uint8_t>(copy_bytes);
  uint8_t* dst = Alloc<uint8_t>(copy_bytes);
  BENCH_CUDA(cudaMemset(src, 0x5A, copy_bytes));
  const double copy_ms = MedianMs(
      [&](int) { BENCH_CUDA(cudaMemcpyAsync(dst, src, copy_bytes, cudaMemcpyDeviceToDevice)); }, 3,
      15);
  const double bw = 2.0 * copy_bytes / (copy_ms * 1e-3);  // bytes / s
  std::printf("device-to-device copy: %.3f ms for 2 x %.2f GB -> %.1f GB/s (the floor's rate)\n",
              copy_ms, copy_bytes / 1e9, bw / 1e9);
  BENCH_CUDA(cudaFree(src));
  BENCH_CUDA(cudaFree(dst));

  const int64_t C = 4096;
  const int iters = 20;
  std::printf("\n| function | T | median ms | GB/s | floor ms | ratio | GFLOP |\n");
  std::printf("|---|---|---|---|---|---|---|\n");
  std::vector<int64_t> token_counts =
      profile ? std::vector<int64_t>{16384} : std::vector<int64_t>{4096, 16384};
  // MHC_BENCH_T=8192,12288: other token counts (e.g. to find where two paths cross over).
  if (const char* env = std::getenv("MHC_BENCH_T"); env != nullptr && !profile) {
    token_counts.clear();
    for (const char* p = env; *p != '\0';) {
      char* end = nullptr;
      const long long t = std::strtoll(p, &end, 10);
      if (end == p || t <= 0) {
        std::fprintf(stderr, "MHC_BENCH_T: bad token count list '%s'\n", env);
        return 1;
      }
      token_counts.push_back(t);
      p = *end == ',' ? end + 1 : end;
    }
  }
  for (int64_t T : token_counts) {
    const int64_t K = 4 * C;
    Set sets[2] = {MakeSet(T, C, 100), MakeSet(T, C, 200)};
    for (Set& s : sets) {
      MhcFwdStatsParams p;
      p.X = s.X;
      p.fn = s.fn;
      p.scale = s.scale;
      p.base = s.base;
      p.stats = s.stats;
      p.T = T;
      p.C = C;
      p.sinkhorn_iters = iters;
      p.workspace = s.ws;
      p.workspace_bytes = s.ws_bytes;
      BENCH_OK(MhcForwardStatsCuda(p, nullptr));
    }
    BENCH_CUDA(cudaDeviceSynchronize());
    const double bf = 2.0, f32 = 4.0;
    const double x_bytes = bf * T * K, tc_bytes = bf * T * C, fn_bytes = f32 * 24 * K;
    const double stats_bytes = f32 * 64 * T, gs_bytes = f32 * 32 * T;
    const double gemm_gflop = 2.0 * 24 * K * T / 1e9;  // one [T,4C]x[4C,24] product
    struct Row {
      const char* name;
      double bytes;
      double gflop;
      std::function<void(Set&)> call;
    };
    std::vector<Row> rows = {
        {"forward_prepare", x_bytes + fn_bytes + tc_bytes + stats_bytes, gemm_gflop,
         [&](Set& s) {
           MhcFwdPrepareParams p;
           p.X = s.X;
           p.fn = s.fn;
           p.scale = s.scale;
           p.base = s.base;
           p.U = s.U;
           p.stats = s.stats;
           p.T = T;
           p.C = C;
           p.sinkhorn_iters = iters;
           p.workspace = s.ws;
           p.workspace_bytes = s.ws_bytes;
           BENCH_OK(MhcForwardPrepareCuda(p, nullptr));
         }},
        {"forward_stats", x_bytes + fn_bytes + stats_bytes, gemm_gflop,
         [&](Set& s) {
           MhcFwdStatsParams p;
           p.X = s.X;
           p.fn = s.fn;
           p.scale = s.scale;
           p.base = s.base;
           p.stats = s.stats;
           p.T = T;
           p.C = C;
           p.sinkhorn_iters = iters;
           p.workspace = s.ws;
           p.workspace_bytes = s.ws_bytes;
           BENCH_OK(MhcForwardStatsCuda(p, nullptr));
         }},
        {"forward_finish", x_bytes + tc_bytes + stats_bytes + x_bytes, 0.0,
         [&](Set& s) {
           MhcFwdFinishParams p;
           p.X = s.X;
           p.B = s.B;
           p.stats = s.stats;
           p.Y = s.Y;
           p.T = T;
           p.C = C;
           BENCH_OK(MhcForwardFinishCuda(p, nullptr));
         }},
        {"backward_prepare", 2 * x_bytes + tc_bytes + stats_bytes + tc_bytes + gs_bytes, 0.0,
         [&](Set& s) {
           MhcBwdPrepareParams p;
           p.X = s.X;
           p.dY = s.dY;
           p.B = s.B;
           p.stats = s.stats;
           p.dB = s.dB;
           p.grad_stats = s.grad_stats;
           p.T = T;
           p.C = C;
           BENCH_OK(MhcBackwardPrepareCuda(p, nullptr));
         }},
        {"backward_finish",
         2 * x_bytes + tc_bytes + fn_bytes + stats_bytes + gs_bytes + x_bytes + fn_bytes + 27 * 4,
         2 * gemm_gflop,
         [&](Set& s) {
           MhcBwdFinishParams p;
           p.X = s.X;
           p.dY = s.dY;
           p.dU = s.dU;
           p.fn = s.fn;
           p.scale = s.scale;
           p.base = s.base;
           p.stats = s.stats;
           p.grad_stats = s.grad_stats;
           p.dX = s.dX;
           p.dfn = s.dfn;
           p.dscale = s.dscale;
           p.dbase = s.dbase;
           p.T = T;
           p.C = C;
           p.sinkhorn_iters = iters;
           p.workspace = s.ws;
           p.workspace_bytes = s.ws_bytes;
           BENCH_OK(MhcBackwardFinishCuda(p, nullptr));
         }},
    };
    double prep_plus_finish = 0.0;
    for (const Row& r : rows) {
      const double ms =
          MedianMs([&](int i) { r.call(sets[i & 1]); }, profile ? 0 : 4, profile ? 1 : 30);
      const double floor_ms = r.bytes / bw * 1e3;
      std::printf("| %s | %lld | %.4f | %.0f | %.4f | %.2f | %.1f |\n", r.name,
                  static_cast<long long>(T), ms, r.bytes / (ms * 1e-3) / 1e9, floor_ms,
                  ms / floor_ms, r.gflop);
      if (std::string(r.name) == "forward_prepare" || std::string(r.name) == "forward_finish") {
        prep_plus_finish += ms;
      }
    }
    std::printf("| prepare+finish | %lld | %.4f | | | | |\n", static_cast<long long>(T),
                prep_plus_finish);
    for (Set& s : sets) {
      for (void* p :
           {static_cast<void*>(s.X), static_cast<void*>(s.B), static_cast<void*>(s.dY),
            static_cast<void*>(s.dU), static_cast<void*>(s.U), static_cast<void*>(s.Y),
            static_cast<void*>(s.dB), static_cast<void*>(s.dX), static_cast<void*>(s.fn),
            static_cast<void*>(s.scale), static_cast<void*>(s.base), static_cast<void*>(s.stats),
            static_cast<void*>(s.grad_stats), static_cast<void*>(s.dfn),
            static_cast<void*>(s.dscale), static_cast<void*>(s.dbase), s.ws}) {
        BENCH_CUDA(cudaFree(p));
      }
    }
  }
  return 0;
}
