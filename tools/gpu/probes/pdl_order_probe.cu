// Which stream work waits for a programmatic launch's primary? Kernel A spins ~200 us and triggers
// its dependents at its start; B is launched programmatically (PDL) after it and never calls
// cudaGridDependencySynchronize (GDS); C follows in one of several ways. Each case prints when B
// and C started against A's end (globaltimer, us). A design that lets B's successors run before
// A ends (or relies on them not doing so) needs this answered on the device it runs on.
// Build: nvcc -arch=sm_90a -O2 -std=c++17 -o pdl_order_probe tools/gpu/probes/pdl_order_probe.cu
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#include "probe_check.h"

__device__ unsigned long long Now() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// stamps: [0] A start, [1] A end, [2] B start, [3] B end, [4] C start
__global__ void KernelA(unsigned long long* stamps, unsigned long long spin_ns) {
  cudaTriggerProgrammaticLaunchCompletion();
  const unsigned long long t0 = Now();
  if (threadIdx.x == 0 && blockIdx.x == 0) stamps[0] = t0;
  while (Now() - t0 < spin_ns) {
  }
  if (threadIdx.x == 0 && blockIdx.x == 0) stamps[1] = Now();
}

__global__ void KernelB(unsigned long long* stamps, int gds_at_start) {
  if (gds_at_start) cudaGridDependencySynchronize();
  if (threadIdx.x == 0 && blockIdx.x == 0) stamps[2] = Now();
  if (threadIdx.x == 0 && blockIdx.x == 0) stamps[3] = Now();
}

__global__ void KernelC(unsigned long long* stamps, int gds_at_start) {
  if (gds_at_start) cudaGridDependencySynchronize();
  if (threadIdx.x == 0 && blockIdx.x == 0) stamps[4] = Now();
}

void LaunchPdl(void (*k)(unsigned long long*, int), unsigned long long* st, int gds,
               cudaStream_t s) {
  cudaLaunchAttribute attr[1] = {};
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(4);
  cfg.blockDim = dim3(32);
  cfg.stream = s;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  CHECK(cudaLaunchKernelEx(&cfg, k, st, gds));
}

int main() {
  unsigned long long* st = nullptr;
  CHECK(cudaMalloc(&st, 8 * sizeof(unsigned long long)));
  cudaStream_t s1, s2;
  CHECK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
  CHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
  cudaEvent_t ev;
  CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
  const unsigned long long spin = 200000;  // 200 us
  const char* names[] = {"1: A; B (PDL, no GDS); C ordinary launch, same stream",
                         "2: A; B (PDL, no GDS); event on s1 after B; C on s2 after the event",
                         "3: A; B (PDL, no GDS); C (PDL, GDS at its start), same stream",
                         "4: A; B (PDL, GDS at its start); C ordinary launch (sanity)",
                         "5: case 1 captured into a graph and replayed",
                         "6: A; B (PDL, no GDS); cudaMemsetAsync on s1; C ordinary launch"};
  for (int cs = 0; cs < 6; ++cs) {
    for (int rep = 0; rep < 3; ++rep) {
      CHECK(cudaMemset(st, 0, 8 * sizeof(unsigned long long)));
      CHECK(cudaDeviceSynchronize());
      auto enqueue = [&](cudaStream_t s) {
        KernelA<<<4, 32, 0, s>>>(st, spin);
        CHECK(cudaGetLastError());
        LaunchPdl(KernelB, st, cs == 3 ? 1 : 0, s);
        if (cs == 1) {
          CHECK(cudaEventRecord(ev, s));
          CHECK(cudaStreamWaitEvent(s2, ev, 0));
          KernelC<<<4, 32, 0, s2>>>(st, 0);
        } else if (cs == 2) {
          LaunchPdl(KernelC, st, 1, s);
        } else if (cs == 5) {
          CHECK(cudaMemsetAsync(st + 6, 0, 8, s));
          KernelC<<<4, 32, 0, s>>>(st, 0);
        } else {
          KernelC<<<4, 32, 0, s>>>(st, 0);
        }
        CHECK(cudaGetLastError());
      };
      if (cs == 4) {
        cudaGraph_t g;
        cudaGraphExec_t ge;
        CHECK(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal));
        enqueue(s1);
        CHECK(cudaStreamEndCapture(s1, &g));
        CHECK(cudaGraphInstantiate(&ge, g, 0));
        CHECK(cudaGraphLaunch(ge, s1));
        CHECK(cudaStreamSynchronize(s1));
        CHECK(cudaGraphExecDestroy(ge));
        CHECK(cudaGraphDestroy(g));
      } else {
        enqueue(s1);
      }
      CHECK(cudaDeviceSynchronize());
      unsigned long long h[8];
      CHECK(cudaMemcpy(h, st, sizeof(h), cudaMemcpyDeviceToHost));
      auto rel = [&](unsigned long long v) { return (double(v) - double(h[1])) / 1000.0; };
      std::printf(
          "%s, rep %d: B start %+.1f us, C start %+.1f us relative to A's end (A ran %.1f us)%s\n",
          names[cs], rep, rel(h[2]), rel(h[4]), (double(h[1]) - double(h[0])) / 1000.0,
          rel(h[4]) < 0 ? "  <-- C before A ended" : "");
    }
  }
  return 0;
}
