# Sourced by run.sh (call 1, 15:09 UTC, commit 0633bc7): the first-run list of kda_h200.md.
T=$D/cakegrad_gpu_kda_tests
B=$D/cakegrad_kda_bench
step chunked 100 $T --gtest_filter='*ChunkedBackward*:KdaKernels.Rejects*'
step bench 90 $B
step ncu 110 ncu --clock-control none --metrics gpu__time_duration.sum -k regex:KdaChunk --csv --log-file "$OUT/ncu.csv" $B
step all 60 $T
CAKEGRAD_KDA_CHUNKED_BWD=1 step env1 60 $T --gtest_filter='Shapes/KdaKernelsAccuracy.*:KdaKernels.*'
step memcheck 60 compute-sanitizer --tool memcheck --error-exitcode 9 $T --gtest_filter='KdaKernels.SanitizeChunkedBackward*'
step racecheck 120 compute-sanitizer --tool racecheck --error-exitcode 9 $T --gtest_filter='KdaKernels.SanitizeChunkedBackward*'
