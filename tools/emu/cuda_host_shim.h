// Just enough of CUDA to run simple kernels' source on the host (tools/emu): one std::thread per
// CUDA thread, blocks one after another, std::barrier for __syncthreads and for warp shuffles
// (which therefore must be reached by all 32 lanes, as __shfl_xor_sync with a full mask must).
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <thread>
#include <vector>
struct EmuDim3 {
  unsigned x = 0, y = 0, z = 0;
};
inline thread_local EmuDim3 threadIdx;
inline EmuDim3 blockIdx;
inline std::barrier<>* g_block_bar = nullptr;
inline std::vector<std::unique_ptr<std::barrier<>>> g_warp_bar;
inline float g_shfl[64][32];
inline void __syncthreads() { g_block_bar->arrive_and_wait(); }
inline float __shfl_xor_sync(unsigned, float x, int o) {
  const int w = threadIdx.x / 32, l = threadIdx.x % 32;
  g_shfl[w][l] = x;
  g_warp_bar[w]->arrive_and_wait();
  const float y = g_shfl[w][l ^ o];
  g_warp_bar[w]->arrive_and_wait();
  return y;
}
inline float __uint_as_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }
inline float __fmul_rn(float a, float b) { return a * b; }
inline unsigned atomicOr(uint32_t* p, uint32_t v) {
  return std::atomic_ref<uint32_t>(*p).fetch_or(v);
}
using std::max;
using std::min;
inline void EmuLaunch(EmuDim3 grid, int threads, const std::function<void()>& body) {
  for (unsigned z = 0; z < std::max(1u, grid.z); ++z)
    for (unsigned y = 0; y < std::max(1u, grid.y); ++y)
      for (unsigned x = 0; x < std::max(1u, grid.x); ++x) {
        blockIdx = {x, y, z};
        std::barrier<> bar(threads);
        g_block_bar = &bar;
        g_warp_bar.clear();
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
