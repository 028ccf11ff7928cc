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
#include "kda_emu_fwd_inputs.h"

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
// -DPREP_SLOTS_ALONG_X: the grid of versions before ChunkSlotGrid (slots along x, heads along y).
#ifdef PREP_SLOTS_ALONG_X
#define PREP_GRID(slots, H) \
  EmuDim3 { unsigned(slots), unsigned(H), 1 }
#else
#define PREP_GRID(slots, H) EmuGrid(kda_cuda::ChunkSlotGrid(slots, H))
#endif

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  std::FILE* out = std::fopen(argv[1], "wb");
  if (out == nullptr) return 2;
  const kda_emu::FwdCase cases[] = {{{70, 0, 1, 130, 64}, 2, 0.0, 0.0, -5.f},
                                    {{129, 63}, 1, -6.0, 0.0, -5.f},
                                    {{200}, 1, 0.0, 6.0, -5.f},
                                    {{65, 127}, 1, 0.0, 0.0, -0.3f}};
  std::mt19937_64 rng(11);
  std::normal_distribution<double> nd(0.0, 1.0);
  for (const kda_emu::FwdCase& cs : cases) {
    kda_emu::FwdInputs in;
    in.cu = {0};
    for (int64_t l : cs.lens) in.cu.push_back(in.cu.back() + l);
    const int64_t tok = in.cu.back(), N = cs.lens.size(), H = cs.H, n = tok * H * 128;
    auto bf = [&](int64_t cnt, double mean) {
      std::vector<uint16_t> x(cnt);
      for (auto& e : x) e = ToBf(float(mean + nd(rng)));
      return x;
    };
    // In this order: the draws are the records' reference (run_kda_prep_records_compare.sh).
    in.q = bf(n, 0);
    in.k = bf(n, 0);
    in.v = bf(n, 0);
    in.g = bf(n, cs.g_mean);
    in.beta = bf(tok * H, 0);
    in.A_log.resize(H);
    in.dt_bias.resize(H * 128);
    for (auto& e : in.A_log) e = float(0.5 * nd(rng));
    for (auto& e : in.dt_bias) e = float(cs.dt_mean + 0.5 * nd(rng));
    in.H = H;
    in.scale = 0.088388f;
    in.lower_bound = cs.lower_bound;
    const int64_t slots = kda_layout::ChunkSlots(tok, N);
    std::vector<unsigned char> ws(kda_layout::FwdWorkspaceBytes(1, tok, H, N), 0xA5);
    const kda_cuda::FwdArgs f = in.Args();
    char* wsp = reinterpret_cast<char*>(ws.data());
    g_emu_syncs = 0;
    for (auto& m : g_emu_mma) m = 0;
    EmuLaunch(PREP_GRID(slots, H), kPrepThreads, [&] { kda_cuda::PREP_KERNEL(f, wsp); });
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
