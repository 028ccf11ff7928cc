// cakegrad: the command-line client. `cakegrad health` for probes, `cakegrad caps` and
// `cakegrad status` to look at a daemon, `cakegrad demo` to submit a real conv1d forward and
// backward and check them against the FP64 reference computed here.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "cakegrad/client/client.h"
#include "cakegrad/client/shared_memory.h"
#include "cakegrad/kernels/conv1d.h"

ABSL_FLAG(std::string, address, "",
          "daemon address (default: $CAKEGRAD_ADDRESS or "
          "unix:///run/cakegrad/cakegrad.sock)");
ABSL_FLAG(double, timeout, 5.0, "seconds to wait for the daemon");
ABSL_FLAG(int64_t, tokens, 8192, "demo: packed tokens S");
ABSL_FLAG(int64_t, channels, 256, "demo: channels C");
ABSL_FLAG(int64_t, docs, 8, "demo: documents packed into S");
ABSL_FLAG(std::string, policy, "bf16", "demo: silu_grad_preactivation, bf16 or fp32");
ABSL_FLAG(int, regions, 3, "hold-regions: how many regions to register");
ABSL_FLAG(int, repeat, 1, "demo: rounds, each with fresh random inputs");

namespace {

using cakegrad::Client;
using cakegrad::DType;
using cakegrad::SharedMemoryBuffer;
using cakegrad::Tensor;
namespace k = cakegrad::kernels;

int Fail(const absl::Status& s) {
  std::cerr << "cakegrad: " << s << "\n";
  return 1;
}

int Health() {
  absl::Status s =
      cakegrad::CheckHealth(absl::GetFlag(FLAGS_address), absl::GetFlag(FLAGS_timeout));
  if (!s.ok()) return Fail(s);
  std::cout << "SERVING\n";
  return 0;
}

absl::StatusOr<std::unique_ptr<Client>> Connect(const std::string& name) {
  return Client::Connect(absl::GetFlag(FLAGS_address), name, absl::GetFlag(FLAGS_timeout));
}

int Caps() {
  auto client = Connect("cakegrad-cli");
  if (!client.ok()) return Fail(client.status());
  auto caps = (*client)->GetCapabilities();
  if (!caps.ok()) return Fail(caps.status());
  std::cout << caps->DebugString();
  return 0;
}

int Status() {
  auto client = Connect("cakegrad-cli");
  if (!client.ok()) return Fail(client.status());
  auto status = (*client)->GetServerStatus();
  if (!status.ok()) return Fail(status.status());
  std::cout << status->DebugString();
  return 0;
}

// Registers regions and waits to be killed: the tests' stand-in for a trainer that crashes.
int HoldRegions() {
  auto client = Connect("hold-regions");
  if (!client.ok()) return Fail(client.status());
  std::vector<SharedMemoryBuffer> buffers;
  for (int i = 0; i < absl::GetFlag(FLAGS_regions); ++i) {
    auto buf = SharedMemoryBuffer::Create(4096);
    if (!buf.ok()) return Fail(buf.status());
    auto id = (*client)->RegisterHostRegion(buf->name(), buf->size(), "held");
    if (!id.ok()) return Fail(id.status());
    buffers.push_back(*std::move(buf));
  }
  // "ready PID SESSION SHM...": what a test needs to kill this process and clean up after it.
  std::cout << "ready " << getpid() << " " << (*client)->session_id();
  for (const auto& b : buffers) std::cout << " " << b.name();
  std::cout << std::endl;
  for (;;) pause();
}

// Lays tensors out back to back in one shared-memory arena, 64-byte aligned.
class Arena {
 public:
  Tensor Add(DType dtype, std::vector<int64_t> shape) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    Tensor t{0, size_, dtype, std::move(shape)};
    size_ += (static_cast<uint64_t>(n * k::DTypeBytes(dtype)) + 63) / 64 * 64;
    return t;
  }
  uint64_t size() const { return size_ == 0 ? 64 : size_; }

 private:
  uint64_t size_ = 0;
};

double RelL2(const std::vector<double>& out, const std::vector<double>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    if (!std::isfinite(out[i])) return INFINITY;
    num += (out[i] - ref[i]) * (out[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  return den == 0 ? (num == 0 ? 0 : INFINITY) : std::sqrt(num / den);
}

template <typename Get>
std::vector<double> Collect(size_t n, Get get) {
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = get(i);
  return v;
}

int Demo() {
  const int64_t S = absl::GetFlag(FLAGS_tokens), C = absl::GetFlag(FLAGS_channels);
  const int64_t N = absl::GetFlag(FLAGS_docs);
  const int repeat = absl::GetFlag(FLAGS_repeat);
  if (S < 0 || C < 1 || N < 1 || repeat < 1) {
    return Fail(absl::InvalidArgumentError(
        "demo needs --tokens >= 0, --channels >= 1, --docs >= 1, --repeat >= 1"));
  }
  auto client = Connect("cakegrad-demo");
  if (!client.ok()) return Fail(client.status());
  auto caps = (*client)->GetCapabilities();
  if (!caps.ok()) return Fail(caps.status());
  if (caps->backend() != "host") {
    return Fail(absl::FailedPreconditionError(
        "the demo shares host memory; this daemon runs the cuda backend (see tests/gpu for the "
        "CUDA path)"));
  }
  std::printf("cakegradd %s, backend %s, session %.8s...\n", caps->version().c_str(),
              caps->backend().c_str(), (*client)->session_id().c_str());

  Arena arena;
  Tensor x = arena.Add(DType::kBF16, {S, C}), dy = arena.Add(DType::kBF16, {S, C});
  Tensor weight = arena.Add(DType::kFP32, {C, 4}), bias = arena.Add(DType::kFP32, {C});
  Tensor cu = arena.Add(DType::kINT32, {N + 1});
  Tensor y = arena.Add(DType::kBF16, {S, C}), dx = arena.Add(DType::kBF16, {S, C});
  Tensor dweight = arena.Add(DType::kFP32, {C, 4}), dbias = arena.Add(DType::kFP32, {C});
  auto shm = SharedMemoryBuffer::Create(arena.size());
  if (!shm.ok()) return Fail(shm.status());
  auto region = (*client)->RegisterHostRegion(shm->name(), shm->size(), "demo");
  if (!region.ok()) return Fail(region.status());
  for (Tensor* t : {&x, &dy, &weight, &bias, &cu, &y, &dx, &dweight, &dbias})
    t->region_id = *region;

  auto* xs = shm->as<uint16_t>(x.offset);
  auto* dys = shm->as<uint16_t>(dy.offset);
  auto* w = shm->as<float>(weight.offset);
  auto* b = shm->as<float>(bias.offset);
  auto* cus = shm->as<int32_t>(cu.offset);
  std::mt19937_64 rng(std::random_device{}());
  std::normal_distribution<float> normal(0.f, 1.f);
  std::uniform_int_distribution<int64_t> cut(0, S);
  const size_t n = static_cast<size_t>(S * C);
  std::vector<uint16_t> ref_y(n), ref_dx(n);
  std::vector<float> ref_dw(C * 4), ref_db(C);
  int bitwise_equal = 0;
  double compute_us = 0;
  bool ok = true;
  for (int r = 0; r < repeat; ++r) {
    // Fresh inputs every round, and outputs poisoned, so a stale result cannot pass.
    for (size_t i = 0; i < n; ++i) {
      xs[i] = k::FloatToBf16(normal(rng));
      dys[i] = k::FloatToBf16(normal(rng));
    }
    for (int64_t i = 0; i < C * 4; ++i) w[i] = 0.5f * normal(rng);
    for (int64_t i = 0; i < C; ++i) b[i] = 0.1f * normal(rng);
    std::vector<int64_t> cuts(N + 1, 0);
    for (int64_t i = 1; i < N; ++i) cuts[i] = cut(rng);
    cuts[N] = S;
    std::sort(cuts.begin(), cuts.end());
    for (int64_t i = 0; i <= N; ++i) cus[i] = static_cast<int32_t>(cuts[i]);
    for (const Tensor* t : {&y, &dx, &dweight, &dbias}) {
      int64_t bytes = k::DTypeBytes(t->dtype);
      for (int64_t d : t->shape) bytes *= d;
      std::memset(shm->data() + t->offset, 0xFF, bytes);
    }

    auto fwd = (*client)->Conv1dForward({x, weight, cu, bias, y});
    if (!fwd.ok()) return Fail(fwd.status());
    cakegrad::Conv1dBackwardArgs args{
        x, weight, cu, dy, bias, absl::GetFlag(FLAGS_policy), std::nullopt, dx, dweight, dbias};
    auto bwd = (*client)->Conv1dBackward(args);
    if (!bwd.ok()) return Fail(bwd.status());
    compute_us += fwd->compute_us() + bwd->compute_us();

    // The same calls on the FP64 reference in this process, on private outputs.
    k::Conv1dFwdParams fp;
    fp.x = xs;
    fp.weight = w;
    fp.bias = b;
    fp.cu_seqlens = cus;
    fp.seqlens_dtype = DType::kINT32;
    fp.y = ref_y.data();
    fp.S = S;
    fp.C = C;
    fp.num_docs = N;
    if (k::Status s = k::Conv1dForwardReference(fp); !s.ok()) {
      return Fail(absl::InternalError(s.message()));
    }
    k::Conv1dBwdParams bp;
    bp.x = xs;
    bp.weight = w;
    bp.bias = b;
    bp.cu_seqlens = cus;
    bp.seqlens_dtype = DType::kINT32;
    bp.dy = dys;
    bp.policy = absl::GetFlag(FLAGS_policy) == "fp32" ? k::SiluGradPreactivation::kFP32
                                                      : k::SiluGradPreactivation::kBF16;
    bp.dx = ref_dx.data();
    bp.dweight = ref_dw.data();
    bp.dbias = ref_db.data();
    bp.S = S;
    bp.C = C;
    bp.num_docs = N;
    if (k::Status s = k::Conv1dBackwardReference(bp); !s.ok()) {
      return Fail(absl::InternalError(s.message()));
    }
    // The host backend runs this same reference: anything but identical bits is a bug.
    const bool same = std::memcmp(ref_y.data(), shm->as<uint16_t>(y.offset), n * 2) == 0 &&
                      std::memcmp(ref_dx.data(), shm->as<uint16_t>(dx.offset), n * 2) == 0 &&
                      std::memcmp(ref_dw.data(), shm->as<float>(dweight.offset), C * 16) == 0 &&
                      std::memcmp(ref_db.data(), shm->as<float>(dbias.offset), C * 4) == 0;
    bitwise_equal += same;
    if (r + 1 < repeat) continue;

    auto bf16 = [](const uint16_t* p) {
      return [p](size_t i) { return double(k::Bf16ToFloat(p[i])); };
    };
    auto fp32 = [](const float* p) { return [p](size_t i) { return double(p[i]); }; };
    struct Row {
      const char* name;
      double rel;
      double tol;
    };
    const size_t c4 = static_cast<size_t>(C * 4), c1 = static_cast<size_t>(C);
    const std::vector<Row> rows = {
        {"y", RelL2(Collect(n, bf16(shm->as<uint16_t>(y.offset))), Collect(n, bf16(ref_y.data()))),
         4e-3},
        {"dx",
         RelL2(Collect(n, bf16(shm->as<uint16_t>(dx.offset))), Collect(n, bf16(ref_dx.data()))),
         2e-3},
        {"dweight",
         RelL2(Collect(c4, fp32(shm->as<float>(dweight.offset))), Collect(c4, fp32(ref_dw.data()))),
         1e-4},
        {"dbias",
         RelL2(Collect(c1, fp32(shm->as<float>(dbias.offset))), Collect(c1, fp32(ref_db.data()))),
         1e-4},
    };
    std::printf("conv1d forward + backward, S=%lld C=%lld docs=%lld policy=%s: daemon %.0f us\n",
                static_cast<long long>(S), static_cast<long long>(C), static_cast<long long>(N),
                absl::GetFlag(FLAGS_policy).c_str(), compute_us / repeat);
    std::printf("%-8s %-14s %-10s %s\n", "output", "rel-L2 vs ref", "limit", "check");
    for (const Row& row : rows) {
      const bool pass = row.rel <= row.tol;
      ok = ok && pass;
      std::printf("%-8s %-14.3e %-10.0e %s\n", row.name, row.rel, row.tol, pass ? "ok" : "FAIL");
    }
  }
  ok = ok && bitwise_equal == repeat;
  std::printf("%d/%d runs bitwise equal to the FP64 reference computed here\n", bitwise_equal,
              repeat);
  std::printf("%s\n",
              ok ? "demo passed: the daemon's results match the FP64 reference" : "demo FAILED");
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "cakegrad <health|caps|status|demo> [--address=unix:///path.sock] [flags]");
  std::vector<char*> args = absl::ParseCommandLine(argc, argv);
  const std::string cmd = args.size() > 1 ? args[1] : "";
  if (cmd == "health") return Health();
  if (cmd == "caps") return Caps();
  if (cmd == "status") return Status();
  if (cmd == "demo") return Demo();
  if (cmd == "hold-regions") return HoldRegions();
  std::cerr << "usage: cakegrad <health|caps|status|demo> [--address=unix:///path.sock]\n";
  return 2;
}
