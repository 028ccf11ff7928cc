#!/bin/bash
# cc.sh VARIANT: compile /tmp/mhc15var/VARIANT.cu to a cubin, report regs/spills, dump SASS of the with-U kernel
v=$1
cd /tmp/mhc15var
/usr/local/cuda/bin/nvcc -I/work/wt-mhc15/kernels/include -I/work/wt-mhc15/kernels/cuda -I/work/wt-mhc15/kernels -O3 -DNDEBUG \
  -arch=sm_90a -cubin --expt-relaxed-constexpr -std=c++17 -Xptxas -v -x cu $v.cu -o $v.cubin 2> $v.ptxas.txt || { cat $v.ptxas.txt | head -30; exit 1; }
grep -A2 "MhcFwdCluster" $v.ptxas.txt | grep -E "registers|spill" | head
/tmp/cuobj/nvidia/cu13/bin/cuobjdump -sass $v.cubin | awk '/Function : .*MhcFwdClusterKernel.*Lb1E/{p=1} /Function :/ && !/Lb1E/{p=0} p' | sed 's@/\*[0-9a-f]*\*/@@g; s/ \+/ /g' > $v.withu.sass
/tmp/cuobj/nvidia/cu13/bin/cuobjdump -sass $v.cubin | awk '/Function : .*MhcFwdClusterKernel.*Lb0E/{p=1;next} /Function :/{p=0} p' | sed 's@/\*[0-9a-f]*\*/@@g; s/ \+/ /g' > $v.nou.sass
wc -l $v.withu.sass $v.nou.sass | head -2
