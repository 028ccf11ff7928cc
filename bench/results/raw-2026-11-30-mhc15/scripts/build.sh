#!/bin/bash
# build.sh v=file ...: builds /work/main/.carry/mhc15/<v>.tar.xz (bench, tests, fhash; stripped) from /tmp/mhc15var/<file>.cu
set -euo pipefail
root=/work/wt-mhc15; dest=/work/main/.carry/mhc15; build=$root/build-mhc15
src=$root/kernels/cuda/mhc_forward.cu
cp $root/bench/results/raw-2026-11-30-mhc12/fhash.cu.txt $build/fhash.cu
for pair in "$@"; do
  v=${pair%%=*}; f=${pair#*=}
  cp /tmp/mhc15var/$f.cu $src
  ninja -j1 -C $build cakegrad_mhc_bench cakegrad_gpu_mhc_tests > /tmp/mhc15var/ninja_$v.log 2>&1 || { echo "build $v failed"; tail -20 /tmp/mhc15var/ninja_$v.log; exit 1; }
  d=/tmp/mhc15var/out/$v; rm -rf $d; mkdir -p $d
  /usr/local/cuda/bin/nvcc -O3 -std=c++17 --generate-code=arch=compute_90a,code=[compute_90a,sm_90a] \
    -I$root/kernels/include $build/fhash.cu $build/kernels/libcakegrad_cuda_mhc.a $build/kernels/libcakegrad_reference_mhc.a \
    -o $d/fhash -lcuda -lcudart_static -ldl -lrt -lpthread
  strip --strip-debug $d/fhash
  strip --strip-debug -o $d/cakegrad_mhc_bench $build/bench/cakegrad_mhc_bench
  strip --strip-debug -o $d/cakegrad_gpu_mhc_tests $build/tests/cakegrad_gpu_mhc_tests
  /tmp/cuobj/nvidia/cu13/bin/cuobjdump -sass $d/cakegrad_mhc_bench | grep -v '^\s*$' | sed 's@/\*[0-9a-f]*\*/@@g' | md5sum | cut -c1-8 > $d/sass.md5
  [ "$v" = fin ] || tar cJf $dest/$v.tar.xz -C /tmp/mhc15var/out $v
  echo "built $v from $f src $(md5sum < $src | cut -c1-8) sass $(cat $d/sass.md5) $(du -h $dest/$v.tar.xz | cut -f1)"
done
cp /tmp/mhc15var/final_fmt.cu $src
