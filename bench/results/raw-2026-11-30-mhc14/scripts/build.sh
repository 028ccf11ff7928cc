#!/bin/bash
# Builds DEST/<variant>/ (bench, tests, fhash; stripped) from /tmp/var/<src>.cu
set -euo pipefail
root=/work/wt-mhc14; dest=/work/main/.carry/mhc14; build=$root/build-mhc14
src=$root/kernels/cuda/mhc_forward.cu
cp $root/bench/results/raw-2026-11-30-mhc12/fhash.cu.txt $build/fhash.cu
for pair in "$@"; do
  v=${pair%%=*}; f=${pair#*=}
  cp /tmp/var/$f.cu $src
  ninja -j1 -C $build cakegrad_mhc_bench cakegrad_gpu_mhc_tests > /tmp/var/ninja_$v.log 2>&1 || { echo "build $v failed"; tail -20 /tmp/var/ninja_$v.log; exit 1; }
  mkdir -p $dest/$v
  /usr/local/cuda/bin/nvcc -O3 -std=c++17 --generate-code=arch=compute_90a,code=[compute_90a,sm_90a] \
    -I$root/kernels/include $build/fhash.cu $build/kernels/libcakegrad_cuda_mhc.a $build/kernels/libcakegrad_reference_mhc.a \
    -o $dest/$v/fhash -lcuda -lcudart_static -ldl -lrt -lpthread
  strip --strip-debug $dest/$v/fhash
  strip --strip-debug -o $dest/$v/cakegrad_mhc_bench $build/bench/cakegrad_mhc_bench
  strip --strip-debug -o $dest/$v/cakegrad_gpu_mhc_tests $build/tests/cakegrad_gpu_mhc_tests
  echo "built $v from $f $(md5sum < $src | cut -c1-8)"
done
