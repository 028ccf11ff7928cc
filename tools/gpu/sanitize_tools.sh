# Sourced by the device scripts that run compute-sanitizer on *Sanitize* tests (run_all_gpu.sh,
# run_gpu_tests.sh, ab_bench.sh), so that their default tool list is one list: SANITIZE_TOOLS as
# the caller set it, else all four tools.
SANITIZE_TOOLS=${SANITIZE_TOOLS:-memcheck racecheck synccheck initcheck}
