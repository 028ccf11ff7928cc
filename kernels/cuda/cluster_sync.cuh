// Thread-block clusters and mbarriers (sm_90): the primitives of the mHC and KDA kernels whose
// CTAs fill shared memory by tensor / bulk copies or share it across a cluster. One copy, so that
// every kernel gets the same "memory" clobbers and barrier semantics.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace cakegrad::kernels {

__device__ __forceinline__ uint32_t SmemAddr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ uint32_t ClusterCtaRank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}
__device__ __forceinline__ uint32_t ClusterId() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%clusterid.x;\n" : "=r"(r));
  return r;
}
__device__ __forceinline__ uint32_t ClusterCount() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%nclusterid.x;\n" : "=r"(r));
  return r;
}
// The address of the same shared variable in CTA `rank` of the cluster.
__device__ __forceinline__ uint32_t MapaShared(uint32_t s, uint32_t rank) {
  uint32_t r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(r) : "r"(s), "r"(rank));
  return r;
}
// Barrier of n threads (a multiple of 32) under id 1..15 (0 is __syncthreads'): the threads of a
// block's part that exchange through shared memory wait only for each other.
__device__ __forceinline__ void NamedBarrierSync(int id, int n) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(n) : "memory");
}
// Split cluster barrier: arrive publishes this thread's earlier (shared) writes, wait returns
// once every thread of the cluster has arrived and makes their writes visible.
__device__ __forceinline__ void ClusterArrive() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n" ::: "memory");
}
// Arrive without ordering this thread's earlier memory accesses (another thread's release must).
__device__ __forceinline__ void ClusterArriveRelaxed() {
  asm volatile("barrier.cluster.arrive.relaxed.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void ClusterWait() {
  asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}
// Every thread of the cluster, once: all earlier shared memory writes (mbarrier inits included)
// are visible cluster-wide after it.
__device__ __forceinline__ void ClusterSync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::
                   : "memory");
}

__device__ __forceinline__ void MbarInit(uint64_t* bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(SmemAddr(bar)), "r"(count)
               : "memory");
}
// Makes the inits visible to the copy engine (the async proxy) and to a peer CTA's remote
// arrives; a block (or, for peers, cluster) barrier must follow before either uses them.
__device__ __forceinline__ void MbarInitFence() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
// This thread's arrival, announcing `bytes` more bytes for the current phase.
__device__ __forceinline__ void MbarArriveExpectTx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(SmemAddr(bar)),
               "r"(bytes)
               : "memory");
}
// Returns once the phase of the given parity (0 for the first phase, then alternating) has
// completed.
__device__ __forceinline__ void MbarWait(uint64_t* bar, uint32_t parity) {
  asm volatile(
      "{\n .reg .pred p;\n MBAR_WAIT_%=:\n"
      " mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n @!p bra MBAR_WAIT_%=;\n}\n" ::"r"(
          SmemAddr(bar)),
      "r"(parity)
      : "memory");
}

}  // namespace cakegrad::kernels
