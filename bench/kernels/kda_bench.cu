// Times the KDA CUDA forward and backward at the three tuned shapes: median over timed runs
// (CUDA events, after warm-up), achieved TFLOP/s and GB/s, and the ratio to the floor.
//
// FLOPs count the exact recurrence's state work per token and head (an FMA is 2):
//   forward  7 per state element (decay 1, S kh 2, rank-1 update 2, S qh 2),
//   backward 20 per state element (the forward-recompute pass 5, then dS += do qh 2, du 2,
//            dS u 2, dpred S 2, dSd 2, dSd S 2, dS *= d 1, do S 2)
// which is FP32 FMA work (the exact FP32-state recurrence has no tensor-core form), so the
// compute floor uses the FP32 rate. Bytes are the tensors each pass must read and write once.
// The forward is chunked (tensor cores), so its line also gives the chunked algorithm's floor
// (bench/results/kda_h200.md: C = 64, BF16x3 state-path products at the BF16 rate, TF32 output
// products, per token and head kk 16384 + solve 2731 + W/Uv 32768 + state 65536 FLOP at x3, out
// 65536 FLOP at the TF32 rate).
// The "bwd" line times the sequential backward (kda_backward.cu), the "bwd chunked" line the
// chunked one (kda_chunked_backward.cu; mma.sync products) with the same FLOP and byte counts,
// and compares its outputs with the sequential backward's (rel-L2 of the chunked against the
// sequential, both device results). The "bwd default" line names the one KdaBackwardCuda runs
// by default at the shape (KdaBackwardAlgorithm::kAuto: chunked from 4 heads on).
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "cakegrad/kernels/kda.h"
#include "cuda/kda_chunked_backward.cuh"

namespace {

using cakegrad::kernels::DType;
using cakegrad::kernels::KdaBackwardWorkspaceBytes;
using cakegrad::kernels::KdaBwdParams;
using cakegrad::kernels::KdaForwardCuda;
using cakegrad::kernels::KdaForwardWorkspaceBytes;
using cakegrad::kernels::KdaFwdParams;
using cakegrad::kernels::Status;

constexpr double kFp32FlopsPerS = 67e12;   // H200 SXM datasheet FP32 (non-tensor)
constexpr double kBytesPerS = 4.8e12;      // H200 HBM3e datasheet
constexpr double kBf16FlopsPerS = 990e12;  // dense BF16 tensor core, datasheet
constexpr double kTf32FlopsPerS = 495e12;
// Seconds per (token, head) of the chunked forward's matmuls on the tensor cores (see above).
constexpr double kChunkedFwdSecondsPerPair =
    3.0 * (16384 + 2731 + 32768 + 65536) / kBf16FlopsPerS + 65536 / kTf32FlopsPerS;
// The same for the chunked backward (bench/results/kda_h200.md, "FLOPs, bytes and floors (C =
// 64)"): per token and head 644,437 FLOP of products, of which the decayed intra-chunk products of
// the gate path (dkk 49,152 + dkkd 16,384) need about FP32-exact operands (three parts, at the TF32
// rate in the study's count) and the rest BF16x3: the least tensor-core time of an accurate
// chunked backward. Its bytes add the S0 and dS1 checkpoints, each written and read once.
constexpr double kChunkedBwdGateFlop = 49152 + 16384;
constexpr double kChunkedBwdSecondsPerPair = 3.0 * (644437 - kChunkedBwdGateFlop) / kBf16FlopsPerS +
                                             3.0 * kChunkedBwdGateFlop / kTf32FlopsPerS;
constexpr double kChunkedBwdCheckpointBytesPerPair = 4.0 * 128 * 128 * 4 / 64;
constexpr int64_t kD = 128;

#define BENCH_CUDA(expr)                                                                        \
  do {                                                                                          \
    cudaError_t e = (expr);                                                                     \
    if (e != cudaSuccess) {                                                                     \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #expr, cudaGetErrorString(e)); \
      std::exit(1);                                                                             \
    }                                                                                           \
  } while (0)

template <typename T>
T* Alloc(size_t n) {
  T* p = nullptr;
  BENCH_CUDA(cudaMalloc(&p, std::max<size_t>(n, 1) * sizeof(T)));
  return p;
}

// KDA_BENCH_FWD_ONLY=1: time the forward alone, with the inputs drawn on all host threads
// (other values, same distribution), for quick variant sweeps; KDA_BENCH_CASES=0,2 picks cases.
bool FwdOnly() {
  const char* e = std::getenv("KDA_BENCH_FWD_ONLY");
  return e != nullptr && std::strcmp(e, "1") == 0;
}

// KDA_BENCH_CHUNKED_ONLY=1: the forward and the chunked backward alone (no sequential backward,
// no comparison), inputs drawn as with KDA_BENCH_FWD_ONLY: an A/B of the chunked backward's
// kernels in seconds per run where the whole bench takes tens (host draws, sequential backward).
bool ChunkedOnly() {
  const char* e = std::getenv("KDA_BENCH_CHUNKED_ONLY");
  return e != nullptr && std::strcmp(e, "1") == 0;
}

// Random BF16 N(0,1) (never zeros: they can run faster than real data).
uint16_t* RandomBf16(size_t n, std::mt19937& rng, float stddev = 1.0f) {
  std::vector<uint16_t> h(n);
  auto fill = [&](std::mt19937& r, size_t lo, size_t hi) {
    std::normal_distribution<float> dist(0.f, stddev);
    for (size_t i = lo; i < hi; ++i) {
      const float f = dist(r);
      uint32_t bits;
      std::memcpy(&bits, &f, 4);
      h[i] = static_cast<uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
    }
  };
  const size_t workers =
      FwdOnly() || ChunkedOnly() ? std::max(1u, std::thread::hardware_concurrency()) : 1;
  if (workers == 1) {
    fill(rng, 0, n);
  } else {
    std::vector<std::thread> pool;
    const unsigned base = rng();
    for (size_t w = 0; w < workers; ++w) {
      pool.emplace_back([&, w] {
        std::mt19937 r(base + static_cast<unsigned>(w));
        fill(r, n * w / workers, n * (w + 1) / workers);
      });
    }
    for (auto& t : pool) t.join();
  }
  uint16_t* d = Alloc<uint16_t>(n);
  BENCH_CUDA(cudaMemcpy(d, h.data(), n * 2, cudaMemcpyHostToDevice));
  return d;
}

float* RandomF32(size_t n, std::mt19937& rng, float lo, float hi, bool normal) {
  std::normal_distribution<float> nd(lo, hi);
  std::uniform_real_distribution<float> ud(lo, hi);
  std::vector<float> h(n);
  for (auto& x : h) x = normal ? nd(rng) : ud(rng);
  float* d = Alloc<float>(n);
  BENCH_CUDA(cudaMemcpy(d, h.data(), n * 4, cudaMemcpyHostToDevice));
  return d;
}

template <typename Fn>
double MedianMs(const Fn& fn, int warmup, int reps) {
  cudaEvent_t a, b;
  BENCH_CUDA(cudaEventCreate(&a));
  BENCH_CUDA(cudaEventCreate(&b));
  for (int i = 0; i < warmup; ++i) fn();
  BENCH_CUDA(cudaDeviceSynchronize());
  std::vector<float> ms;
  for (int i = 0; i < reps; ++i) {
    BENCH_CUDA(cudaEventRecord(a));
    fn();
    BENCH_CUDA(cudaEventRecord(b));
    BENCH_CUDA(cudaEventSynchronize(b));
    float t = 0.f;
    BENCH_CUDA(cudaEventElapsedTime(&t, a, b));
    ms.push_back(t);
  }
  BENCH_CUDA(cudaEventDestroy(a));
  BENCH_CUDA(cudaEventDestroy(b));
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// The mean of `reps` calls issued back to back between one event pair: host launch time hides
// behind the GPU's queue, as in a training step (and as bench/kda_public_bench.py's "queued"
// column times the public Triton kernels, whose Python launches a per-call timing would expose).
template <typename Fn>
double QueuedMs(const Fn& fn, int reps) {
  cudaEvent_t a, b;
  BENCH_CUDA(cudaEventCreate(&a));
  BENCH_CUDA(cudaEventCreate(&b));
  fn();
  BENCH_CUDA(cudaDeviceSynchronize());
  BENCH_CUDA(cudaEventRecord(a));
  for (int i = 0; i < reps; ++i) fn();
  BENCH_CUDA(cudaEventRecord(b));
  BENCH_CUDA(cudaEventSynchronize(b));
  float t = 0.f;
  BENCH_CUDA(cudaEventElapsedTime(&t, a, b));
  BENCH_CUDA(cudaEventDestroy(a));
  BENCH_CUDA(cudaEventDestroy(b));
  return t / reps;
}

struct Case {
  std::string name;
  int64_t T, H, docs;  // docs > 1: equal-length packed documents with int64 cu_seqlens
  double fwd_target_ms, bwd_target_ms;
};

void Run(const Case& c) {
  std::mt19937 rng(1234 + static_cast<unsigned>(c.T * c.H));
  const int64_t N = c.docs;
  const size_t tok = c.T * c.H * kD;
  uint16_t* q = RandomBf16(tok, rng);
  uint16_t* k = RandomBf16(tok, rng);
  uint16_t* v = RandomBf16(tok, rng);
  uint16_t* g = RandomBf16(tok, rng);
  uint16_t* beta = RandomBf16(c.T * c.H, rng);
  uint16_t* d_o = RandomBf16(tok, rng);
  float* A_log = RandomF32(c.H, rng, -1.f, 1.f, false);
  float* dt_bias = RandomF32(c.H * kD, rng, 0.f, 0.5f, true);
  float* s0 = RandomF32(N * c.H * kD * kD, rng, 0.f, 0.1f, true);
  float* dfs = RandomF32(N * c.H * kD * kD, rng, 0.f, 1.f, true);
  int64_t* cu = nullptr;
  if (N > 1) {
    std::vector<int64_t> h(N + 1);
    for (int64_t i = 0; i <= N; ++i) h[i] = i * c.T / N;
    cu = Alloc<int64_t>(N + 1);
    BENCH_CUDA(cudaMemcpy(cu, h.data(), (N + 1) * 8, cudaMemcpyHostToDevice));
  }
  uint16_t* o = Alloc<uint16_t>(tok);
  float* fs = Alloc<float>(N * c.H * kD * kD);
  uint16_t *dq = Alloc<uint16_t>(tok), *dk = Alloc<uint16_t>(tok), *dv = Alloc<uint16_t>(tok),
           *dg = Alloc<uint16_t>(tok), *dbeta = Alloc<uint16_t>(c.T * c.H);
  float *dA = Alloc<float>(c.H), *ddt = Alloc<float>(c.H * kD),
        *ds0 = Alloc<float>(N * c.H * kD * kD);
  const int64_t num_docs = N > 1 ? N : 0;
  const int64_t wsb = std::max(KdaBackwardWorkspaceBytes(1, c.T, c.H, num_docs),
                               KdaForwardWorkspaceBytes(1, c.T, c.H, num_docs));
  void* ws = Alloc<uint8_t>(static_cast<size_t>(wsb));

  KdaFwdParams f;
  f.q = q;
  f.k = k;
  f.v = v;
  f.g = g;
  f.beta = beta;
  f.A_log = A_log;
  f.dt_bias = dt_bias;
  f.initial_state = s0;
  f.cu_seqlens = cu;
  f.seqlens_dtype = DType::kINT64;
  f.o = o;
  f.final_state = fs;
  f.workspace = ws;
  f.workspace_bytes = wsb;
  f.B = 1;
  f.T = c.T;
  f.H = c.H;
  f.num_docs = num_docs;
  KdaBwdParams b;
  b.q = q;
  b.k = k;
  b.v = v;
  b.g = g;
  b.beta = beta;
  b.A_log = A_log;
  b.dt_bias = dt_bias;
  b.initial_state = s0;
  b.d_o = d_o;
  b.dfinal_state = dfs;
  b.cu_seqlens = cu;
  b.seqlens_dtype = DType::kINT64;
  b.dq = dq;
  b.dk = dk;
  b.dv = dv;
  b.dg = dg;
  b.dbeta = dbeta;
  b.dA_log = dA;
  b.ddt_bias = ddt;
  b.dinitial_state = ds0;
  b.workspace = ws;
  b.workspace_bytes = wsb;
  b.B = 1;
  b.T = c.T;
  b.H = c.H;
  b.num_docs = num_docs;

  auto check = [](const Status& s) {
    if (!s.ok()) {
      std::fprintf(stderr, "kda: %s\n", s.message().c_str());
      std::exit(1);
    }
  };
  auto free_all = [&] {
    for (void* p : {static_cast<void*>(q),     static_cast<void*>(k),
                    static_cast<void*>(v),     static_cast<void*>(g),
                    static_cast<void*>(beta),  static_cast<void*>(d_o),
                    static_cast<void*>(A_log), static_cast<void*>(dt_bias),
                    static_cast<void*>(s0),    static_cast<void*>(dfs),
                    static_cast<void*>(cu),    static_cast<void*>(o),
                    static_cast<void*>(fs),    static_cast<void*>(dq),
                    static_cast<void*>(dk),    static_cast<void*>(dv),
                    static_cast<void*>(dg),    static_cast<void*>(dbeta),
                    static_cast<void*>(dA),    static_cast<void*>(ddt),
                    static_cast<void*>(ds0),   ws}) {
      if (p != nullptr) BENCH_CUDA(cudaFree(p));
    }
  };
  const double fwd = MedianMs([&] { check(KdaForwardCuda(f, nullptr)); }, 3, 15);
  if (FwdOnly()) {
    std::printf("%-28s fwd  median %8.3f ms  target %5.2f ms %s\n", c.name.c_str(), fwd,
                c.fwd_target_ms, fwd <= c.fwd_target_ms ? "MET" : "missed");
    free_all();
    return;
  }
  const double pairs = static_cast<double>(c.T) * c.H;
  const double state = static_cast<double>(N) * c.H * kD * kD * 4;
  const double fwd_flop = pairs * kD * kD * 7;
  const double bwd_flop = pairs * kD * kD * 20;
  // fwd: q k v g (bf16) + beta in, o out, initial and final state.
  const double fwd_bytes = pairs * (5 * kD * 2 + 2) + 2 * state;
  // bwd: q k v g do + beta in, dq dk dv dg + dbeta out, initial, dfinal, dinitial states.
  const double bwd_bytes = pairs * (9 * kD * 2 + 4) + 3 * state;
  auto line = [&](const char* dir, double ms, double flop, double bytes, double target) {
    const double floor_ms = 1e3 * std::max(flop / kFp32FlopsPerS, bytes / kBytesPerS);
    std::printf(
        "%-28s %s  median %8.3f ms  %6.2f TFLOP/s  %7.1f GB/s  floor %6.3f ms  "
        "x%5.2f floor  target %5.2f ms %s\n",
        c.name.c_str(), dir, ms, flop / ms / 1e9, bytes / ms / 1e6, floor_ms, ms / floor_ms, target,
        ms <= target ? "MET" : "missed");
  };
  // The chunked algorithm's own floor (tensor-core time or bytes), for the forward and backward.
  auto chunked_floor = [&](const char* dir, double ms, double seconds_per_pair, double bytes) {
    const double floor_ms = 1e3 * std::max(pairs * seconds_per_pair, bytes / kBytesPerS);
    std::printf("%-28s %s  chunked-algorithm floor %6.3f ms  x%5.2f\n", c.name.c_str(), dir,
                floor_ms, ms / floor_ms);
  };
  const double chunked_bwd_bytes = bwd_bytes + pairs * kChunkedBwdCheckpointBytesPerPair;
  if (ChunkedOnly()) {
    const double chunked = MedianMs(
        [&] { check(cakegrad::kernels::kda_cuda::KdaBackwardChunkedCuda(b, nullptr)); }, 3, 15);
    BENCH_CUDA(cudaGetLastError());
    line("fwd", fwd, fwd_flop, fwd_bytes, c.fwd_target_ms);
    line("bwd chunked", chunked, bwd_flop, bwd_bytes, c.bwd_target_ms);
    chunked_floor("bwd", chunked, kChunkedBwdSecondsPerPair, chunked_bwd_bytes);
    free_all();
    return;
  }
  const double bwd = MedianMs(
      [&] { check(cakegrad::kernels::kda_cuda::KdaBackwardSequentialCuda(b, nullptr)); }, 3, 15);
  BENCH_CUDA(cudaGetLastError());
  BENCH_CUDA(cudaDeviceSynchronize());
  // The chunked backward: outputs of one sequential run saved, then timed, then compared.
  const size_t n_state = N * c.H * kD * kD;
  std::vector<std::vector<float>> seq_out;
  auto download = [&](std::vector<std::vector<float>>* out) {
    out->clear();
    for (uint16_t* p : {dq, dk, dv, dg, dbeta}) {
      const size_t n = p == dbeta ? static_cast<size_t>(c.T * c.H) : tok;
      std::vector<uint16_t> h(n);
      BENCH_CUDA(cudaMemcpy(h.data(), p, n * 2, cudaMemcpyDeviceToHost));
      std::vector<float> x(n);
      for (size_t i = 0; i < n; ++i) {
        const uint32_t bits = uint32_t(h[i]) << 16;
        std::memcpy(&x[i], &bits, 4);
      }
      out->push_back(std::move(x));
    }
    for (auto [p, n] : {std::pair<float*, size_t>{dA, c.H}, {ddt, c.H * kD}, {ds0, n_state}}) {
      std::vector<float> x(n);
      BENCH_CUDA(cudaMemcpy(x.data(), p, n * 4, cudaMemcpyDeviceToHost));
      out->push_back(std::move(x));
    }
  };
  check(cakegrad::kernels::kda_cuda::KdaBackwardSequentialCuda(b, nullptr));
  BENCH_CUDA(cudaDeviceSynchronize());
  download(&seq_out);
  const double bwd_chunked = MedianMs(
      [&] { check(cakegrad::kernels::kda_cuda::KdaBackwardChunkedCuda(b, nullptr)); }, 3, 15);
  BENCH_CUDA(cudaGetLastError());
  BENCH_CUDA(cudaDeviceSynchronize());
  std::vector<std::vector<float>> chunked_out;
  download(&chunked_out);
  const double fwd_queued = QueuedMs([&] { check(KdaForwardCuda(f, nullptr)); }, 15);
  const double bwd_queued =
      QueuedMs([&] { check(cakegrad::kernels::kda_cuda::KdaBackwardChunkedCuda(b, nullptr)); }, 15);

  line("fwd", fwd, fwd_flop, fwd_bytes, c.fwd_target_ms);
  chunked_floor("fwd", fwd, kChunkedFwdSecondsPerPair, fwd_bytes);
  line("bwd", bwd, bwd_flop, bwd_bytes, c.bwd_target_ms);
  line("bwd chunked", bwd_chunked, bwd_flop, bwd_bytes, c.bwd_target_ms);
  chunked_floor("bwd", bwd_chunked, kChunkedBwdSecondsPerPair, chunked_bwd_bytes);
  std::printf("%-28s queued (mean of 15 calls back to back): fwd %.3f ms, bwd chunked %.3f ms\n",
              c.name.c_str(), fwd_queued, bwd_queued);
  const bool auto_chunked = cakegrad::kernels::ResolveKdaBackwardAlgorithm(
                                cakegrad::kernels::KdaBackwardAlgorithm::kAuto, c.H) ==
                            cakegrad::kernels::KdaBackwardAlgorithm::kChunked;
  std::printf("%-28s bwd default (auto at H = %lld): %s, %.3f ms\n", c.name.c_str(),
              static_cast<long long>(c.H), auto_chunked ? "chunked" : "sequential",
              auto_chunked ? bwd_chunked : bwd);
  static const char* const kNames[] = {"dq",    "dk",     "dv",       "dg",
                                       "dbeta", "dA_log", "ddt_bias", "dinit"};
  std::printf("%-28s bwd chunked vs sequential rel-L2:", c.name.c_str());
  for (size_t i = 0; i < seq_out.size(); ++i) {
    double num = 0.0, den = 0.0;
    for (size_t j = 0; j < seq_out[i].size(); ++j) {
      const double d = double(chunked_out[i][j]) - double(seq_out[i][j]);
      num += d * d;
      den += double(seq_out[i][j]) * double(seq_out[i][j]);
    }
    std::printf(" %s %.2e", kNames[i], den > 0 ? std::sqrt(num / den) : std::sqrt(num));
  }
  std::printf("\n");

  free_all();
}

}  // namespace

int main() {
  cudaDeviceProp prop;
  BENCH_CUDA(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s, %d SMs\n", prop.name, prop.multiProcessorCount);
  const std::vector<Case> cases = {
      {"B1 T8192 H32", 8192, 32, 1, 0.97, 2.6},
      {"B1 T32768 H16", 32768, 16, 1, 2.24, 5.6},
      {"16 docs x 2048 H16 (packed)", 32768, 16, 16, 1.87, 5.3},
  };
  const char* pick = std::getenv("KDA_BENCH_CASES");
  // KDA_BENCH_T=<tokens> replaces every picked case's T (a wave-count probe: e.g. 32704 tokens at
  // H = 16 make 8176 preparation CTAs, under 31 waves of two per SM on 132 SMs; 32768 make 8192).
  const char* t_env = std::getenv("KDA_BENCH_T");
  const int64_t t_over = t_env != nullptr ? std::atoll(t_env) : 0;
  // KDA_BENCH_H=<heads> replaces every picked case's H (below 4 heads the default backward is the
  // sequential one, kda.h).
  const char* h_env = std::getenv("KDA_BENCH_H");
  const int64_t h_over = h_env != nullptr ? std::atoll(h_env) : 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    if (pick != nullptr && std::strchr(pick, static_cast<char>('0' + i)) == nullptr) continue;
    Case c = cases[i];
    if (t_over > 0) {
      c.T = t_over;
      c.name += " T=" + std::to_string(t_over);
    }
    if (h_over > 0) {
      c.H = h_over;
      c.name += " H=" + std::to_string(h_over);
    }
    Run(c);
  }
  return 0;
}
