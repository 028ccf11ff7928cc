// How many clusters of 1, 2, 4 CTAs of the 64-row state pass's shape (512 threads, one CTA per SM
// by registers) fit at once: main's plain instance (196096 B) and kda19's cluster one (220224 B).
#include <cstdio>
#include <cuda_runtime.h>
__global__ void __launch_bounds__(512, 1) K(int* p) {
  extern __shared__ int s[];
  if (p) p[0] = s[0];
}
int main() {
  const int smems[2] = {196096, 220224};
  cudaFuncSetAttribute(K, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
  for (int smem : smems) {
    if (cudaFuncSetAttribute(K, cudaFuncAttributeMaxDynamicSharedMemorySize, smem) != cudaSuccess) {
      printf("smem %d: attribute failed\n", smem);
      continue;
    }
    for (int cs : {1, 2, 4}) {
      cudaLaunchAttribute attr[1];
      attr[0].id = cudaLaunchAttributeClusterDimension;
      attr[0].val.clusterDim.x = cs;
      attr[0].val.clusterDim.y = 1;
      attr[0].val.clusterDim.z = 1;
      cudaLaunchConfig_t cfg = {};
      cfg.gridDim = dim3(4, 16, 16);
      cfg.blockDim = dim3(512);
      cfg.dynamicSmemBytes = smem;
      cfg.attrs = attr;
      cfg.numAttrs = 1;
      int n = -1;
      cudaError_t e = cudaOccupancyMaxActiveClusters(&n, K, &cfg);
      printf("smem %d cluster %d: max active clusters %d (%d CTAs) %s\n", smem, cs, n, n * cs,
             cudaGetErrorString(e));
    }
  }
  return 0;
}
