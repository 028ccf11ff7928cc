# Sourced by run.sh (call 2, 15:29 UTC): chunked backward as KdaBackwardCuda's default; whole
# suite, bench, per-kernel ncu times, sanitizers, the sequential path with the switch at 0.
# (A last step, ncu sections over the whole bench, was cut off by its 40 s limit.)
T=$D/cakegrad_gpu_kda_tests
B=$D/cakegrad_kda_bench
step all 130 $T
step bench 70 $B
cat "$OUT/bench.log"
step ncu 80 ncu --clock-control none --metrics gpu__time_duration.sum -k regex:KdaChunk --csv --log-file "$OUT/ncu.csv" $B
step memcheck 30 compute-sanitizer --tool memcheck --error-exitcode 9 $T --gtest_filter='KdaKernels.SanitizeChunkedBackward*'
step racecheck 100 compute-sanitizer --tool racecheck --error-exitcode 9 $T --gtest_filter='KdaKernels.SanitizeChunkedBackward*'
CAKEGRAD_KDA_CHUNKED_BWD=0 step seq 45 $T --gtest_filter='Shapes/KdaKernelsAccuracy.*:KdaKernels.BitwiseDeterministic*'
