// Runs the chunked KDA forward's preparation kernel (KdaChunkPrepKernel) on the host (tools/emu)
// and writes the whole workspace (every chunk record, gap slots and padding included) to a file,
// so that two versions of the kernel can be compared byte for byte
// (tools/emu/run_kda_prep_records_compare.sh). Cases: several packed documents (empty, 1-token,
// chunk-edge and ragged lengths), normal, slow (dt_bias ~ N(-6, .5)) and saturated gates
// (g ~ N(6, 1) at lower_bound -5), and a mild lower_bound (-0.3).
#include <cstdio>
#include <random>

#include "cuda_host_shim.h"
#include "fwd_emu.inc"
}  // namespace kda_cuda
}  // namespace cakegrad::kernels

#include "kda_emu_bf16.h"

using namespace cakegrad::kernels;
using kda_emu::ToBf;

// -DPREP_THREADS=n runs the kernel's n-thread instance (a version with a thread-count template).
#ifdef PREP_THREADS
#define PREP_KERNEL KdaChunkPrepKernel<PREP_THREADS>
constexpr int kPrepThreads = PREP_THREADS;
#else
#define PREP_KERNEL KdaChunkPrepKernel
constexpr int kPrepThreads = kda_cuda::kPrepThreads;  // the shipped instance
#endif

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  std::FILE* out = std::fopen(argv[1], "wb");
  if (out == nullptr) return 2;
  struct Case {
    std::vector<int64_t> lens;
    int64_t H;
    double dt_mean, g_mean;
    float lower_bound;
  };
  const Case cases[] = {{{70, 0, 1, 130, 64}, 2, 0.0, 0.0, -5.f},
                        {{129, 63}, 1, -6.0, 0.0, -5.f},
                        {{200}, 1, 0.0, 6.0, -5.f},
                        {{65, 127}, 1, 0.0, 0.0, -0.3f}};
  std::mt19937_64 rng(11);
  std::normal_distribution<double> nd(0.0, 1.0);
  for (const Case& cs : cases) {
    std::vector<int64_t> cu = {0};
    for (int64_t l : cs.lens) cu.push_back(cu.back() + l);
    const int64_t tok = cu.back(), N = cs.lens.size(), H = cs.H, n = tok * H * 128;
    auto bf = [&](int64_t cnt, double mean) {
      std::vector<uint16_t> x(cnt);
      for (auto& e : x) e = ToBf(float(mean + nd(rng)));
      return x;
    };
    std::vector<uint16_t> q = bf(n, 0), k = bf(n, 0), v = bf(n, 0), g = bf(n, cs.g_mean),
                          beta = bf(tok * H, 0);
    std::vector<float> A_log(H), dt_bias(H * 128);
    for (auto& e : A_log) e = float(0.5 * nd(rng));
    for (auto& e : dt_bias) e = float(cs.dt_mean + 0.5 * nd(rng));
    const int64_t slots = kda_layout::ChunkSlots(tok, N);
    std::vector<unsigned char> ws(kda_layout::FwdWorkspaceBytes(1, tok, H, N), 0xA5);
    kda_cuda::FwdArgs f{};
    f.s.cu_seqlens = cu.data();
    f.s.is_int64 = 1;
    f.s.T = tok;
    f.s.total_tokens = tok;
    f.s.H = H;
    f.s.N = N;
    f.s.scale = 0.088388f;
    f.s.lower_bound = cs.lower_bound;
    f.q = q.data();
    f.k = k.data();
    f.v = v.data();
    f.g = g.data();
    f.beta = beta.data();
    f.A_log = A_log.data();
    f.dt_bias = dt_bias.data();
    char* wsp = reinterpret_cast<char*>(ws.data());
    g_emu_syncs = 0;
    for (auto& m : g_emu_mma) m = 0;
    EmuLaunch({unsigned(slots), unsigned(H), 1}, kPrepThreads,
              [&] { kda_cuda::PREP_KERNEL(f, wsp); });
    // Per block: barriers, and the mma.sync of the busiest warp (its tensor critical path) against
    // the mean over warps (gap slots run no barrier and no mma, so blocks = those with a barrier).
    long mma_max = 0, mma_sum = 0;
    for (int w = 0; w < kPrepThreads / 32; ++w) {
      mma_max = std::max(mma_max, long(g_emu_mma[w]));
      mma_sum += g_emu_mma[w];
    }
    int64_t chunks = 0;
    for (int64_t l : cs.lens) chunks += (l + 63) / 64 * H;
    std::printf("  per chunk: barriers %.1f, mma.sync per warp: max %.1f, mean %.1f\n",
                double(g_emu_syncs) / chunks, double(mma_max) / chunks,
                double(mma_sum) / (kPrepThreads / 32) / chunks);
    std::fwrite(ws.data(), 1, ws.size(), out);
    std::printf("case: %lld tokens, %lld docs, H %lld, %lld slots\n", (long long)tok, (long long)N,
                (long long)H, (long long)slots);
  }
  std::fclose(out);
  return 0;
}
