// How many clusters of 2, 4, 8 CTAs (256 threads, the cluster pass's shared memory) fit at once.
#include <cstdio>
#include <cuda_runtime.h>
__global__ void K(int* p) { extern __shared__ int s[]; if (p) p[0] = s[0]; }
int main() {
  const int smems[2] = {219696, 222272};  // main's kMc instance, kda18's
  cudaFuncSetAttribute(K, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
  for (int smem : smems) {
    if (cudaFuncSetAttribute(K, cudaFuncAttributeMaxDynamicSharedMemorySize, smem) != cudaSuccess) {
      printf("smem %d: attribute failed\n", smem); continue; }
    for (int cs : {1, 2, 4, 8}) {
      cudaLaunchAttribute attr[1];
      attr[0].id = cudaLaunchAttributeClusterDimension;
      attr[0].val.clusterDim.x = cs; attr[0].val.clusterDim.y = 1; attr[0].val.clusterDim.z = 1;
      cudaLaunchConfig_t cfg = {};
      cfg.gridDim = dim3(8, 16, 1); cfg.blockDim = dim3(256); cfg.dynamicSmemBytes = smem;
      cfg.attrs = attr; cfg.numAttrs = 1;
      int n = -1;
      cudaError_t e = cudaOccupancyMaxActiveClusters(&n, K, &cfg);
      printf("smem %d cluster %d: max active clusters %d (%d CTAs) %s\n", smem, cs, n, n * cs,
             cudaGetErrorString(e));
    }
  }
  return 0;
}
