// One packed-document problem's inputs as the chunked forward's kernels take them, held on the
// host for the KDA emulation drivers (tools/emu), and the forward's two launches over them.
// Include after fwd_emu.inc, which defines kda_cuda's FwdArgs and kernels.
#pragma once
#include <cstdint>
#include <random>
#include <type_traits>
#include <vector>

#include "kda_emu_bf16.h"

namespace kda_emu {

// A packed-document case of the forward drivers: document lengths (empty and 1-token ones
// allowed), heads, the means of dt_bias and g (slow and saturated gates), lower_bound, and the
// state pass instance where a driver runs one.
struct FwdCase {
  std::vector<int64_t> lens;
  int64_t H;
  double dt_mean, g_mean;
  float lower_bound;
  int rows = 32;
};

struct FwdInputs {
  std::vector<int64_t> cu;  // INT64 cu_seqlens, N + 1 offsets (B = 1)
  int64_t H = 0;
  float scale = 0.0f, lower_bound = 0.0f;
  std::vector<uint16_t> q, k, v, g, beta;  // BF16
  std::vector<float> A_log, dt_bias;

  // Arguments over these buffers; the outputs, initial state and checkpoints are the caller's.
  cakegrad::kernels::kda_cuda::FwdArgs Args() const {
    cakegrad::kernels::kda_cuda::FwdArgs f{};
    f.s.cu_seqlens = cu.data();
    f.s.is_int64 = 1;
    f.s.T = cu.back();
    f.s.total_tokens = cu.back();
    f.s.H = H;
    f.s.N = static_cast<int64_t>(cu.size()) - 1;
    f.s.scale = scale;
    f.s.lower_bound = lower_bound;
    f.q = q.data();
    f.k = k.data();
    f.v = v.data();
    f.g = g.data();
    f.beta = beta.data();
    f.A_log = A_log.data();
    f.dt_bias = dt_bias.data();
    return f;
  }
};

// The FP64 reference problem of case cs with the drivers' random inputs, rounded to the BF16 /
// FP32 values the kernels take: q, k, v, beta ~ N(0, 1), g ~ N(g_mean, 1), A_log ~ N(0, 0.5),
// dt_bias ~ N(dt_mean, 0.5), and with with_s0 the initial state ~ N(0, 0.1). rng and nd carry
// over from case to case (nd keeps a cached draw), so a driver's cases stay its reference.
template <typename Problem>
Problem ProblemOf(const FwdCase& cs, std::mt19937_64& rng, std::normal_distribution<double>& nd,
                  bool with_s0) {
  Problem p;
  p.cu = {0};
  for (int64_t l : cs.lens) p.cu.push_back(p.cu.back() + l);
  const int64_t tok = p.cu.back(), N = static_cast<int64_t>(cs.lens.size()), H = cs.H,
                n = tok * H * 128;
  p.total_tokens = tok;
  p.H = H;
  auto fill = [&](std::vector<double>* x, int64_t cnt, double mean, double sd, bool bf) {
    x->resize(cnt);
    for (auto& e : *x) {
      e = mean + sd * nd(rng);
      e = bf ? FromBf(ToBf(static_cast<float>(e))) : static_cast<double>(static_cast<float>(e));
    }
  };
  fill(&p.q, n, 0, 1, true);
  fill(&p.k, n, 0, 1, true);
  fill(&p.v, n, 0, 1, true);
  fill(&p.g, n, cs.g_mean, 1, true);
  fill(&p.beta, tok * H, 0, 1, true);
  fill(&p.A_log, H, 0, 0.5, false);
  fill(&p.dt_bias, H * 128, cs.dt_mean, 0.5, false);
  if (with_s0) fill(&p.s0, N * H * 128 * 128, 0, 0.1, false);
  p.scale = static_cast<double>(0.0883883476f);
  p.lower_bound = cs.lower_bound;
  return p;
}

// The FP64 reference problem's inputs, already BF16 / FP32 values, in the kernels' types.
template <typename Problem>
FwdInputs InputsOf(const Problem& p, float lower_bound) {
  auto bf = [](const std::vector<double>& x) {
    std::vector<uint16_t> o(x.size());
    for (size_t i = 0; i < x.size(); ++i) o[i] = ToBf(static_cast<float>(x[i]));
    return o;
  };
  auto f32 = [](const std::vector<double>& x) { return std::vector<float>(x.begin(), x.end()); };
  FwdInputs in;
  in.cu = p.cu;
  in.H = p.H;
  in.scale = static_cast<float>(p.scale);
  in.lower_bound = lower_bound;
  in.q = bf(p.q);
  in.k = bf(p.k);
  in.v = bf(p.v);
  in.g = bf(p.g);
  in.beta = bf(p.beta);
  in.A_log = f32(p.A_log);
  in.dt_bias = f32(p.dt_bias);
  return in;
}

// The chunked forward's launches as LaunchChunkedForward makes them, on the host: the preparation
// (records into ws), then the state pass with `rows` (16, 32 or 64) state rows a CTA.
inline void EmuPrep(const cakegrad::kernels::kda_cuda::FwdArgs& f, char* ws) {
  namespace kc = cakegrad::kernels::kda_cuda;
  const int64_t slots = cakegrad::kernels::kda_layout::ChunkSlots(f.s.total_tokens, f.s.N);
  EmuLaunch(EmuGrid(kc::ChunkSlotGrid(slots, f.s.H)), kc::kPrepThreads,
            [&] { kc::KdaChunkPrepKernel<kc::kPrepThreads>(f, ws); });
}
// kPlain: the plain instance even where the device launches 2-CTA clusters (its fallback).
template <bool kCheckpoint, bool kPlain = false>
void EmuStatePass(int rows, const cakegrad::kernels::kda_cuda::FwdArgs& f, char* ws) {
  namespace kc = cakegrad::kernels::kda_cuda;
  auto launch = [&](auto r) {
    constexpr int kRows = decltype(r)::value;
    using Tr = kc::StateTraits<kRows, kCheckpoint>;
    // The passes as the device launches them: the 2-CTA cluster instance (kMc), its
    // copies all issued by the emulated CTA, where the staged revision has one (at 32 rows: where
    // it defines McSmem<32>; the checkpoint pass: KDA_EMU_MC_CHECKPOINT, kda_emu_sources.sh).
    constexpr bool kMc32 = kRows == 32 && requires { sizeof(kc::McSmem<kRows>); };
#ifdef KDA_EMU_MC_CHECKPOINT
    constexpr bool kMcHere = true;
#else
    constexpr bool kMcHere = !kCheckpoint;
#endif
    if constexpr ((kRows == 16 || kRows == 64 || kMc32) && kMcHere && !kPlain &&
                  requires { &kc::KdaChunkStateKernel<kRows, kCheckpoint, true>; }) {
      EmuLaunch({unsigned(Tr::kSlices), unsigned(f.s.H), unsigned(f.s.N)}, Tr::kThreads,
                [&] { kc::KdaChunkStateKernel<kRows, kCheckpoint, true>(f, ws); });
    } else {
      EmuLaunch({unsigned(Tr::kSlices), unsigned(f.s.H), unsigned(f.s.N)}, Tr::kThreads,
                [&] { kc::KdaChunkStateKernel<kRows, kCheckpoint>(f, ws); });
    }
  };
  if (rows == 16) launch(std::integral_constant<int, 16>{});
  if (rows == 32) launch(std::integral_constant<int, 32>{});
  if (rows == 64) launch(std::integral_constant<int, 64>{});
}

}  // namespace kda_emu
