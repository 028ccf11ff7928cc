// How fast can one kernel stream-read X = [16384][4][4096] BF16 (537 MB, mHC's X at the bench's
// T = 16384, C = 4096) on this GPU, and what does the access pattern cost? forward_stats reads
// exactly that with a TMA ring (128 CTAs, one an SM, 3 stages of 64 KB: 4 streams x 4 boxes of
// 64 channels x 32 tokens, a 4C/16 k-slice a CTA) and reaches ~3.87 TB/s a stage against a
// 4.27 TB/s copy rate; ncu puts it at 90% of L2 throughput. This probe times the same bytes read
// by access patterns that differ in one thing each (box shape, L2 promotion, eviction hint,
// stages, CTAs an SM, contiguous bulk copies, plain loads and their cache operators and L2
// prefetch sizes, backward_finish's token-kernel pattern over X and dU), with no arithmetic beside
// them, so that the ceiling of each pattern is known before a kernel is redesigned around it.
// Results on the H200: bench/results/mhc_h200.md (twenty-fourth session).
// Build (from the repository root):
//   nvcc -arch=sm_90a -O2 -std=c++17 -I kernels/include -I kernels/cuda -I kernels \
//     -o stream_read_probe tools/gpu/probes/stream_read_probe.cu
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "cluster_sync.cuh"
#include "mhc_common.cuh"
#include "probe_check.h"
#include "tensor_map.h"

using cakegrad::kernels::MbarArriveExpectTx;
using cakegrad::kernels::MbarInit;
using cakegrad::kernels::MbarInitFence;
using cakegrad::kernels::MbarWait;
using cakegrad::kernels::SmemAddr;
using cakegrad::kernels::mhc_cuda::CreateL2PolicyEvictFirst;

constexpr int64_t kT = 16384, kC = 4096;
constexpr int64_t kBytes = kT * 4 * kC * 2;

// Plain 16-byte streaming loads (ld.global.cs), grid-stride, four in flight a thread.
__global__ void __launch_bounds__(256)
    LdgKernel(const uint4* __restrict__ x, int64_t n, uint32_t* out) {
  uint32_t acc = 0;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  for (; i + 3 * stride < n; i += 4 * stride) {
    uint4 v[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) v[u] = __ldcs(x + i + u * stride);
#pragma unroll
    for (int u = 0; u < 4; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  for (; i < n; i += stride) {
    const uint4 v = __ldcs(x + i);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x9e3779b9u) out[0] = acc;  // keeps the loads
}

// One 16-byte load of x + i in one of the forms the plain-load kernels compare.
template <int kMode>
__device__ __forceinline__ uint4 Load16(const uint4* p, uint64_t policy) {
  uint4 v;
  if constexpr (kMode == 0) {
    v = __ldcs(p);
  } else if constexpr (kMode == 1) {
    v = __ldg(p);
  } else if constexpr (kMode == 2) {
    asm volatile("ld.global.nc.L2::128B.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
  } else if constexpr (kMode == 3) {
    asm volatile("ld.global.nc.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
  } else if constexpr (kMode == 4) {
    asm volatile("ld.global.nc.L1::no_allocate.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;\n"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p), "l"(policy));
  } else {
    asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
  }
  return v;
}
constexpr const char* kModeNames[] = {"ld.global.cs",
                                      "ld.global.nc",
                                      "ld.global.nc.L2::128B",
                                      "ld.global.nc.L2::256B",
                                      "nc.L1::no_allocate evict-first",
                                      "nc.L1::no_allocate.L2::256B"};

// The same reads as LdgKernel in load form kMode, kUnroll in flight a thread.
template <int kMode, int kUnroll>
__global__ void __launch_bounds__(256)
    LdgModeKernel(const uint4* __restrict__ x, int64_t n, uint32_t* out) {
  uint64_t policy = 0;
  if (kMode == 4) policy = CreateL2PolicyEvictFirst();
  uint32_t acc = 0;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  for (; i + (kUnroll - 1) * stride < n; i += kUnroll * stride) {
    uint4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) v[u] = Load16<kMode>(x + i + u * stride, policy);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  for (; i < n; i += stride) {
    const uint4 v = Load16<kMode>(x + i, policy);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x9e3779b9u) out[0] = acc;
}

// backward_finish's token kernel's reads: a warp takes 2 tokens and walks their 4 X rows and
// their dU row (C channels each) 256 channels a step, lane l at channel 8 l, the next step's 10
// loads in flight while this step's are used; 4 warps a CTA, 8 tokens.
template <int kMode>
__global__ void __launch_bounds__(128)
    TokenPatternKernel(const uint16_t* __restrict__ X, const uint16_t* __restrict__ dU,
                       uint32_t* out) {
  uint64_t policy = 0;
  if (kMode == 4) policy = CreateL2PolicyEvictFirst();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t t0 = (static_cast<int64_t>(blockIdx.x) * 4 + warp) * 2;
  uint32_t acc = 0;
  auto load = [&](int64_t c, uint4(&r)[10]) {
    const bool ok = c < kC;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
#pragma unroll
      for (int a = 0; a < 4; ++a) {
        r[5 * h + a] =
            ok ? Load16<kMode>(reinterpret_cast<const uint4*>(X + ((t0 + h) * 4 + a) * kC + c),
                               policy)
               : make_uint4(0, 0, 0, 0);
      }
      r[5 * h + 4] =
          ok ? Load16<kMode>(reinterpret_cast<const uint4*>(dU + (t0 + h) * kC + c), policy)
             : make_uint4(0, 0, 0, 0);
    }
  };
  uint4 cur[10], nxt[10];
  load(8 * lane, cur);
  for (int64_t c = 8 * lane; c < kC; c += 256) {
    load(c + 256, nxt);
#pragma unroll
    for (int k = 0; k < 10; ++k) acc ^= cur[k].x ^ cur[k].y ^ cur[k].z ^ cur[k].w;
#pragma unroll
    for (int k = 0; k < 10; ++k) cur[k] = nxt[k];
  }
  if (acc == 0x9e3779b9u) out[0] = acc;
}

// Tensor-copy ring: CTA b plays rank b % 16 of group b / 16 (forward_stats' split-K), stage s of
// group g covers tokens (g + s * groups) * kTok ..; a stage is 4 streams x kBoxes boxes of 64
// channels x kTok tokens (kBoxes = 4: the CTA's 256 channels), or with kAllStreams one box of
// 64 channels x 4 streams x kTok tokens per 64 channels. The consumer reads one word a thread.
struct RingArgs {
  int stages, tok;  // ring depth, tokens a stage
  int hint;         // 0 none, 1 evict first
  int all_streams;  // one 3D box over the 4 streams instead of one a stream
};

__device__ __forceinline__ void Tma3D(uint32_t dst, const CUtensorMap* map, int x, int y, int z,
                                      uint32_t bar, uint64_t policy, bool hint) {
  if (hint) {
    asm volatile(
        "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes.L2::"
        "cache_hint [%0], [%1, {%2, %3, %4}], [%5], %6;\n" ::"r"(dst),
        "l"(reinterpret_cast<uint64_t>(map)), "r"(x), "r"(y), "r"(z), "r"(bar), "l"(policy)
        : "memory");
  } else {
    asm volatile(
        "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, "
        "{%2, %3, %4}], [%5];\n" ::"r"(dst),
        "l"(reinterpret_cast<uint64_t>(map)), "r"(x), "r"(y), "r"(z), "r"(bar)
        : "memory");
  }
}

__device__ __forceinline__ void Bulk1D(uint32_t dst, const void* src, uint32_t bytes, uint32_t bar,
                                       uint64_t policy, bool hint) {
  if (hint) {
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], "
        "[%1], %2, [%3], %4;\n" ::"r"(dst),
        "l"(src), "r"(bytes), "r"(bar), "l"(policy)
        : "memory");
  } else {
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, "
        "[%3];\n" ::"r"(dst),
        "l"(src), "r"(bytes), "r"(bar)
        : "memory");
  }
}

constexpr int kMaxStages = 8;

__global__ void __launch_bounds__(256)
    RingKernel(const __grid_constant__ CUtensorMap map, RingArgs a, uint32_t* out) {
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  __shared__ uint64_t full[kMaxStages];
  const uint32_t smem0 = (SmemAddr(smem_raw) + 1023u) & ~1023u;
  const int rank = blockIdx.x % 16;
  const int64_t group = blockIdx.x / 16, groups = gridDim.x / 16;
  const int64_t nstages_total = kT / a.tok;
  const int64_t mine = group < nstages_total ? (nstages_total - group + groups - 1) / groups : 0;
  const uint32_t stage_bytes = 16u * 64u * 2u * static_cast<uint32_t>(a.tok);
  uint64_t policy = 0;
  if (a.hint == 1) policy = CreateL2PolicyEvictFirst();
  auto issue = [&](int64_t s) {
    if (s >= mine) return;
    const int slot = static_cast<int>(s % a.stages);
    const uint32_t dst = smem0 + slot * stage_bytes;
    const int t0 = static_cast<int>((group + s * groups) * a.tok);
    MbarArriveExpectTx(&full[slot], stage_bytes);
    const uint32_t bar = SmemAddr(&full[slot]);
    if (a.all_streams) {
      for (int i = 0; i < 4; ++i) {
        Tma3D(dst + i * 4 * 128 * a.tok, &map, rank * 256 + 64 * i, 0, t0, bar, policy,
              a.hint == 1);
      }
    } else {
      for (int s4 = 0; s4 < 4; ++s4) {
        for (int i = 0; i < 4; ++i) {
          Tma3D(dst + (4 * s4 + i) * 128 * a.tok, &map, rank * 256 + 64 * i, s4, t0, bar, policy,
                a.hint == 1);
        }
      }
    }
  };
  if (threadIdx.x == 0) {
    for (int s = 0; s < a.stages; ++s) MbarInit(&full[s], 1);
    MbarInitFence();
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int s = 0; s < a.stages; ++s) issue(s);
  }
  uint32_t acc = 0;
  for (int64_t s = 0; s < mine; ++s) {
    const int slot = static_cast<int>(s % a.stages);
    MbarWait(&full[slot], static_cast<uint32_t>((s / a.stages) & 1));
    uint32_t v;
    asm volatile("ld.shared.u32 %0, [%1];\n"
                 : "=r"(v)
                 : "r"(smem0 + slot * stage_bytes + 4 * threadIdx.x));
    acc ^= v;
    __syncthreads();  // everyone is done with the slot
    if (threadIdx.x == 0) issue(s + a.stages);
  }
  if (acc == 0x9e3779b9u) out[0] = acc;
}

// Contiguous bulk copies: CTA b takes chunks b, b + grid, .. of `chunk` bytes of X, `stages` deep.
__global__ void __launch_bounds__(256)
    BulkKernel(const unsigned char* __restrict__ x, uint32_t chunk, int stages, int hint,
               uint32_t* out) {
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  __shared__ uint64_t full[kMaxStages];
  const uint32_t smem0 = (SmemAddr(smem_raw) + 1023u) & ~1023u;
  const int64_t nchunks = kBytes / chunk;
  const int64_t mine =
      blockIdx.x < nchunks ? (nchunks - blockIdx.x + gridDim.x - 1) / gridDim.x : 0;
  uint64_t policy = 0;
  if (hint == 1) policy = CreateL2PolicyEvictFirst();
  auto issue = [&](int64_t s) {
    if (s >= mine) return;
    const int slot = static_cast<int>(s % stages);
    MbarArriveExpectTx(&full[slot], chunk);
    Bulk1D(smem0 + slot * chunk, x + (blockIdx.x + s * gridDim.x) * chunk, chunk,
           SmemAddr(&full[slot]), policy, hint == 1);
  };
  if (threadIdx.x == 0) {
    for (int s = 0; s < stages; ++s) MbarInit(&full[s], 1);
    MbarInitFence();
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int s = 0; s < stages; ++s) issue(s);
  }
  uint32_t acc = 0;
  for (int64_t s = 0; s < mine; ++s) {
    const int slot = static_cast<int>(s % stages);
    MbarWait(&full[slot], static_cast<uint32_t>((s / stages) & 1));
    uint32_t v;
    asm volatile("ld.shared.u32 %0, [%1];\n"
                 : "=r"(v)
                 : "r"(smem0 + slot * chunk + 4 * threadIdx.x));
    acc ^= v;
    __syncthreads();
    if (threadIdx.x == 0) issue(s + stages);
  }
  if (acc == 0x9e3779b9u) out[0] = acc;
}

template <class F>
static double MedianMs(F&& launch, int reps = 15) {
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  for (int i = 0; i < 3; ++i) launch();
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  std::vector<float> ms;
  for (int i = 0; i < reps; ++i) {
    CHECK(cudaEventRecord(e0));
    launch();
    CHECK(cudaEventRecord(e1));
    CHECK(cudaEventSynchronize(e1));
    float t = 0;
    CHECK(cudaEventElapsedTime(&t, e0, e1));
    ms.push_back(t);
  }
  CHECK(cudaGetLastError());
  std::sort(ms.begin(), ms.end());
  CHECK(cudaEventDestroy(e0));
  CHECK(cudaEventDestroy(e1));
  return ms[ms.size() / 2];
}

static CUtensorMap MakeMap(void* x, int tok, bool all_streams, CUtensorMapL2promotion promo) {
  cakegrad::kernels::tensor_map_internal::EncodeTiledFn encode = nullptr;
  if (!cakegrad::kernels::tensor_map_internal::GetEncodeTiled(&encode, "probe").ok()) {
    std::fprintf(stderr, "no cuTensorMapEncodeTiled\n");
    std::exit(1);
  }
  CUtensorMap map;
  const cuuint64_t dims[3] = {kC, 4, kT};
  const cuuint64_t strides[2] = {kC * 2, 4 * kC * 2};
  const cuuint32_t box[3] = {64, all_streams ? 4u : 1u, static_cast<cuuint32_t>(tok)};
  const cuuint32_t ones[3] = {1, 1, 1};
  const CUresult r = encode(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3, x, dims, strides, box, ones,
                            CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, promo,
                            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    std::fprintf(stderr, "encode failed %d\n", static_cast<int>(r));
    std::exit(1);
  }
  return map;
}

int main() {
  int dev = 0, sms = 0;
  CHECK(cudaGetDevice(&dev));
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, dev));
  std::printf("device: %s, %d SMs, L2 %d MiB\n", prop.name, sms, prop.l2CacheSize >> 20);
  void* x = nullptr;
  uint32_t* out = nullptr;
  CHECK(cudaMalloc(&x, kBytes));
  CHECK(cudaMalloc(&out, 4));
  CHECK(cudaMemset(x, 0x3c, kBytes));
  // The copy rate as the mHC bench measures it: 2 x 2.15 GB device to device.
  {
    const size_t cb = size_t{2150} << 20;
    void *a = nullptr, *b = nullptr;
    CHECK(cudaMalloc(&a, cb));
    CHECK(cudaMalloc(&b, cb));
    CHECK(cudaMemset(a, 1, cb));
    const double ms =
        MedianMs([&] { CHECK(cudaMemcpyAsync(b, a, cb, cudaMemcpyDeviceToDevice)); }, 7);
    std::printf("%-58s %8.4f ms %8.1f GB/s (read + write)\n", "copy 2.25 GB device to device", ms,
                2.0 * cb / ms / 1e6);
    CHECK(cudaFree(a));
    CHECK(cudaFree(b));
  }
  auto report = [&](const char* what, double ms) {
    std::printf("%-58s %8.4f ms %8.1f GB/s\n", what, ms, kBytes / ms / 1e6);
  };
  for (int per_sm : {4, 8, 16}) {
    const int grid = sms * per_sm;
    const double ms =
        MedianMs([&] { LdgKernel<<<grid, 256>>>(static_cast<const uint4*>(x), kBytes / 16, out); });
    char name[96];
    std::snprintf(name, sizeof name, "ldg.cs 16 B, %d CTAs of 256 an SM", per_sm);
    report(name, ms);
  }
  // The load forms, 8 CTAs of 256 an SM, 4 and 8 loads in flight a thread.
  auto mode_case = [&](auto kernel, int mode, int unroll) {
    const double ms =
        MedianMs([&] { kernel<<<sms * 8, 256>>>(static_cast<const uint4*>(x), kBytes / 16, out); });
    char name[96];
    std::snprintf(name, sizeof name, "%s, %d in flight a thread", kModeNames[mode], unroll);
    report(name, ms);
  };
  mode_case(LdgModeKernel<0, 4>, 0, 4);
  mode_case(LdgModeKernel<1, 4>, 1, 4);
  mode_case(LdgModeKernel<2, 4>, 2, 4);
  mode_case(LdgModeKernel<3, 4>, 3, 4);
  mode_case(LdgModeKernel<4, 4>, 4, 4);
  mode_case(LdgModeKernel<5, 4>, 5, 4);
  mode_case(LdgModeKernel<0, 8>, 0, 8);
  mode_case(LdgModeKernel<3, 8>, 3, 8);
  // The token kernel's pattern over X and a dU of [T][C] (671 MB together).
  {
    void* du = nullptr;
    CHECK(cudaMalloc(&du, kT * kC * 2));
    CHECK(cudaMemset(du, 0x3c, kT * kC * 2));
    const double bytes = kBytes + kT * kC * 2.0;
    auto token_case = [&](auto kernel, int mode) {
      const double ms = MedianMs([&] {
        kernel<<<kT / 8, 128>>>(static_cast<const uint16_t*>(x), static_cast<const uint16_t*>(du),
                                out);
      });
      std::printf("%-58s %8.4f ms %8.1f GB/s\n",
                  (std::string("token pattern (X + dU), ") + kModeNames[mode]).c_str(), ms,
                  bytes / ms / 1e6);
    };
    token_case(TokenPatternKernel<1>, 1);
    token_case(TokenPatternKernel<0>, 0);
    token_case(TokenPatternKernel<2>, 2);
    token_case(TokenPatternKernel<3>, 3);
    token_case(TokenPatternKernel<4>, 4);
    CHECK(cudaFree(du));
  }
  struct RingCase {
    const char* name;
    int grid_per16;  // groups of 16 CTAs
    int stages, tok, hint, all;
    CUtensorMapL2promotion promo;
  };
  const RingCase cases[] = {
      {"ring 128 CTAs, 3 x 64 KB, promo 256 (forward_stats)", 8, 3, 32, 0, 0,
       CU_TENSOR_MAP_L2_PROMOTION_L2_256B},
      {"  same, evict-first hint", 8, 3, 32, 1, 0, CU_TENSOR_MAP_L2_PROMOTION_L2_256B},
      {"  same, promo none", 8, 3, 32, 0, 0, CU_TENSOR_MAP_L2_PROMOTION_NONE},
      {"  same, promo 128", 8, 3, 32, 0, 0, CU_TENSOR_MAP_L2_PROMOTION_L2_128B},
      {"  same, one box over the 4 streams", 8, 3, 32, 0, 1, CU_TENSOR_MAP_L2_PROMOTION_L2_256B},
      {"ring 128 CTAs, 6 x 32 KB (16 tokens)", 8, 6, 16, 0, 0, CU_TENSOR_MAP_L2_PROMOTION_L2_256B},
      {"ring 128 CTAs, 2 x 64 KB", 8, 2, 32, 0, 0, CU_TENSOR_MAP_L2_PROMOTION_L2_256B},
      {"ring 256 CTAs (2 an SM), 3 x 32 KB", 16, 3, 16, 0, 0, CU_TENSOR_MAP_L2_PROMOTION_L2_256B},
      {"ring 112 CTAs (forward_prepare's SMs), 3 x 64 KB", 7, 3, 32, 0, 0,
       CU_TENSOR_MAP_L2_PROMOTION_L2_256B},
  };
  for (const RingCase& c : cases) {
    const CUtensorMap map = MakeMap(x, c.tok, c.all != 0, c.promo);
    const int smem = c.stages * 16 * 64 * 2 * c.tok + 1024;
    CHECK(cudaFuncSetAttribute(RingKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    const RingArgs a{c.stages, c.tok, c.hint, c.all};
    report(c.name, MedianMs([&] { RingKernel<<<16 * c.grid_per16, 256, smem>>>(map, a, out); }));
  }
  struct BulkCase {
    const char* name;
    int per_sm, stages;
    uint32_t chunk;
    int hint;
  };
  const BulkCase bulks[] = {
      {"bulk contiguous, 1 CTA an SM, 3 x 64 KB", 1, 3, 65536, 0},
      {"  same, evict-first hint", 1, 3, 65536, 1},
      {"bulk contiguous, 2 CTAs an SM, 3 x 32 KB", 2, 3, 32768, 0},
      {"bulk contiguous, 1 CTA an SM, 6 x 32 KB", 1, 6, 32768, 0},
      {"bulk contiguous, 1 CTA an SM, 3 x 16 KB", 1, 3, 16384, 0},
  };
  for (const BulkCase& c : bulks) {
    const int smem = c.stages * static_cast<int>(c.chunk) + 1024;
    CHECK(cudaFuncSetAttribute(BulkKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    report(c.name, MedianMs([&] {
             BulkKernel<<<sms * c.per_sm, 256, smem>>>(static_cast<const unsigned char*>(x),
                                                       c.chunk, c.stages, c.hint, out);
           }));
  }
  // 128 vs 132 CTAs for contiguous chunks: what the 4 SMs forward_stats leaves idle are worth.
  {
    const int smem = 3 * 65536 + 1024;
    CHECK(cudaFuncSetAttribute(BulkKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    report("bulk contiguous, 128 CTAs, 3 x 64 KB", MedianMs([&] {
             BulkKernel<<<128, 256, smem>>>(static_cast<const unsigned char*>(x), 65536, 3, 0, out);
           }));
  }
  CHECK(cudaFree(x));
  CHECK(cudaFree(out));
  return 0;
}
