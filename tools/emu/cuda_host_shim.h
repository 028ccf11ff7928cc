// Just enough of CUDA to run simple kernels' source on the host (tools/emu): one std::thread per
// CUDA thread, blocks one after another, std::barrier for __syncthreads and for warp shuffles
// (which therefore must be reached by all 32 lanes, as shuffles with a full mask must).
#pragma once
// kda_mma.cuh: its inline-PTX helpers (ex2.approx, mma.sync) take the emulations below.
#define CAKEGRAD_KDA_HOST_EMU 1
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>
struct EmuDim3 {
  unsigned x = 0, y = 0, z = 0;
};
inline thread_local EmuDim3 threadIdx;
inline EmuDim3 blockIdx;
inline EmuDim3 gridDim;
inline std::barrier<>* g_block_bar = nullptr;
inline std::vector<std::unique_ptr<std::barrier<>>> g_warp_bar;
inline float g_shfl[64][32];
alignas(16) inline unsigned char g_dyn_smem[232448];  // dynamic shared memory of the block
// Work counters for structural comparisons (tools/emu/kda_prep_records_emu.cc): barriers per
// block (counted by thread 0) and mma.sync per warp (counted by lane 0).
inline std::atomic<long> g_emu_syncs{0};
inline std::atomic<long> g_emu_mma[64];
inline void __syncthreads() {
  if (threadIdx.x == 0) g_emu_syncs.fetch_add(1, std::memory_order_relaxed);
  g_block_bar->arrive_and_wait();
}
// bar.sync id, n (cluster_sync.cuh): a barrier per id, made by the first of the block's threads
// to reach it, for n threads.
inline std::mutex g_named_mu;
inline std::unique_ptr<std::barrier<>> g_named_bar[16];
inline void NamedBarrierSync(int id, int n) {
  std::barrier<>* b;
  {
    std::lock_guard<std::mutex> lock(g_named_mu);
    if (!g_named_bar[id]) g_named_bar[id] = std::make_unique<std::barrier<>>(n);
    b = g_named_bar[id].get();
  }
  b->arrive_and_wait();
}
// All 32 lanes must reach it (the kernels call it outside divergent code).
inline void __syncwarp(unsigned = 0xffffffffu) { g_warp_bar[threadIdx.x / 32]->arrive_and_wait(); }
// A warp's exchange through buf (one slot per lane): every lane writes x, then reads lane
// src_of(lane)'s value. FP32 and FP64 (the sequential backward's row passes) have a buffer each.
inline double g_shfl64[64][32];
template <typename T, typename Src>
inline T EmuShuffle(T (&buf)[64][32], T x, Src src_of) {
  const int w = threadIdx.x / 32, l = threadIdx.x % 32;
  buf[w][l] = x;
  g_warp_bar[w]->arrive_and_wait();
  const T y = buf[w][src_of(l)];
  g_warp_bar[w]->arrive_and_wait();
  return y;
}
inline float __shfl_xor_sync(unsigned, float x, int o) {
  return EmuShuffle(g_shfl, x, [o](int l) { return l ^ o; });
}
inline double __shfl_xor_sync(unsigned, double x, int o) {
  return EmuShuffle(g_shfl64, x, [o](int l) { return l ^ o; });
}
inline float __shfl_sync(unsigned, float x, int src) {
  return EmuShuffle(g_shfl, x, [src](int) { return src & 31; });
}
inline float __uint_as_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }
inline float __fmul_rn(float a, float b) { return a * b; }
inline double __fma_rn(double a, double b, double c) { return std::fma(a, b, c); }
inline double __dmul_rn(double a, double b) { return a * b; }
inline unsigned atomicOr(uint32_t* p, uint32_t v) {
  return std::atomic_ref<uint32_t>(*p).fetch_or(v);
}
using std::max;
using std::min;
// m16n8k16 BF16 mma.sync with FP32 accumulation, the PTX fragment layouts (groupID = lane / 4,
// threadID_in_group = lane % 4; A row-major 16 x 16, B column-major 16 x 8, C / D 16 x 8). All
// 32 lanes must call it together. The sum order inside an MMA is not the hardware's.
inline uint32_t g_mma_a[64][32][4], g_mma_b[64][32][2];
inline float EmuBf16Half(uint32_t reg, int half) {
  return __uint_as_float(half ? (reg & 0xffff0000u) : (reg << 16));
}
inline void EmuMma(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  const int w = threadIdx.x / 32, l = threadIdx.x % 32;
  if (l == 0) g_emu_mma[w].fetch_add(1, std::memory_order_relaxed);
  for (int i = 0; i < 4; ++i) g_mma_a[w][l][i] = a[i];
  for (int i = 0; i < 2; ++i) g_mma_b[w][l][i] = b[i];
  g_warp_bar[w]->arrive_and_wait();
  auto A = [&](int r, int c) {
    return EmuBf16Half(g_mma_a[w][(r % 8) * 4 + (c % 8) / 2][(r >= 8) + 2 * (c >= 8)], c % 2);
  };
  auto B = [&](int k, int n) {
    return EmuBf16Half(g_mma_b[w][n * 4 + (k % 8) / 2][k >= 8], k % 2);
  };
  const int g = l / 4, tq = l % 4;
  // EMU_MMA_RZ=1: the sum of the accumulator and the 16 (exact) products formed exactly and
  // rounded toward zero once, a model of the tensor cores' truncating accumulation (by default the
  // products are summed in FP32, rounded to nearest, then added).
  static const bool rz = std::getenv("EMU_MMA_RZ") != nullptr;
  // EMU_MMA_TRUNC=n: the accumulator and the 16 exact products aligned to the largest exponent
  // among them, each truncated toward zero n significant bits below it, summed exactly, and the
  // sum rounded toward zero to FP32: the published model of the tensor cores' accumulation (Fasi
  // et al., "Numerical behavior of NVIDIA tensor cores", 2021), a stronger form of EMU_MMA_RZ.
  // n = 26 is what the H200 does (tools/gpu/probes/mma_accum_probe.cu: terms 2^-25 below the
  // largest kept, 2^-26 dropped, the sum rounded toward zero).
  static const char* const trunc_env = std::getenv("EMU_MMA_TRUNC");
  static const int trunc_bits = trunc_env != nullptr ? std::atoi(trunc_env) : 0;
  for (int i = 0; i < 4; ++i) {
    const int row = g + 8 * (i >> 1), col = 2 * tq + (i & 1);
    if (rz || trunc_bits > 0) {  // the accumulator and the 16 exact products, summed in FP64
      double t[17];
      t[0] = d[i];
      for (int k = 0; k < 16; ++k) t[k + 1] = static_cast<double>(A(row, k)) * B(k, col);
      if (trunc_bits > 0) {  // each term cut to the leading term's grid first
        int emax = -100000;
        for (double v : t) {
          if (v != 0.0) emax = std::max(emax, std::ilogb(v));
        }
        if (emax > -100000) {
          const double q = std::ldexp(1.0, emax - (trunc_bits - 1));
          for (double& v : t) v = std::trunc(v / q) * q;
        }
      }
      double x = 0.0;
      for (double v : t) x += v;
      float f = static_cast<float>(x);
      if (std::fabs(static_cast<double>(f)) > std::fabs(x)) f = std::nextafter(f, 0.f);
      d[i] = f;
      continue;
    }
    float acc = 0.f;
    for (int k = 0; k < 16; ++k) acc += A(row, k) * B(k, col);
    d[i] += acc;
  }
  g_warp_bar[w]->arrive_and_wait();
}

// A launch's dim3 (e.g. the kernels' ChunkSlotGrid) as EmuLaunch's grid.
inline EmuDim3 EmuGrid(dim3 g) { return {g.x, g.y, g.z}; }
inline void EmuLaunch(EmuDim3 grid, int threads, const std::function<void()>& body) {
  gridDim = {std::max(1u, grid.x), std::max(1u, grid.y), std::max(1u, grid.z)};
  for (unsigned z = 0; z < std::max(1u, grid.z); ++z)
    for (unsigned y = 0; y < std::max(1u, grid.y); ++y)
      for (unsigned x = 0; x < std::max(1u, grid.x); ++x) {
        blockIdx = {x, y, z};
        // EMU_SMEM_FILL=<byte>: shared memory refilled before every block, so a read of a word
        // no thread of the block wrote shows up as a change of the outputs between two fills.
        if (const char* f = std::getenv("EMU_SMEM_FILL"))
          std::memset(g_dyn_smem, std::atoi(f), sizeof(g_dyn_smem));
        std::barrier<> bar(threads);
        g_block_bar = &bar;
        g_warp_bar.clear();
        for (auto& nb : g_named_bar) nb.reset();
        for (int w = 0; w < threads / 32; ++w)
          g_warp_bar.push_back(std::make_unique<std::barrier<>>(32));
        std::vector<std::thread> ts;
        for (int t = 0; t < threads; ++t)
          ts.emplace_back([t, &body] {
            threadIdx = {unsigned(t), 0, 0};
            body();
          });
        for (auto& th : ts) th.join();
      }
}

// cp.async as plain copies (kernels/cuda/cp_async.cuh is device-only): each emulated thread runs
// its copies at once, so commit and wait have nothing to order.
namespace cakegrad::kernels {
template <int kBytes>
inline void CpAsync(void* smem, const void* gmem) {
  std::memcpy(smem, gmem, kBytes);
}
template <int kBytes>
inline void CpAsyncZfill(void* smem, const void* gmem, bool valid) {
  if (valid) {
    std::memcpy(smem, gmem, kBytes);
  } else {
    std::memset(smem, 0, kBytes);
  }
}
inline void CpAsyncCommit() {}
template <int kPending>
inline void CpAsyncWait() {}
inline void PrefetchL2(const void*, uint32_t) {}  // a cache hint: nothing to emulate
// Programmatic dependent launch: kernels run one after another here, so both are no-ops.
inline void cudaTriggerProgrammaticLaunchCompletion() {}
inline void cudaGridDependencySynchronize() {}
}  // namespace cakegrad::kernels

// Kernel-source keywords for the host build (after the CUDA headers, which define some of them).
#undef __device__
#undef __global__
#undef __forceinline__
#undef __launch_bounds__
#undef __grid_constant__
#undef __align__
#define __device__
#define __global__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __grid_constant__
#define __align__(x)
