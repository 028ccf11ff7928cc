# Device call of 2026-12-02 02:22 UTC (thirty-seventh session), carry [".carry/gpu.tar.xz"]
# (tools/gpu/package_for_gpu.sh on 060f692 with the SANITIZE_TOOLS change of tools/gpu/run_all_gpu.sh),
# timeout 580 s; wall 103 s. Every (family, tool) sanitizer run of stage 3 at once.
S=$(date +%s); tar xJf .carry/gpu.tar.xz; export PATH=$PATH:/usr/local/cuda/bin; SKIP="1 2 4 5 6 7" SANITIZE_TOOLS="synccheck initcheck memcheck racecheck" timeout 540 bash tools/gpu/run_all_gpu.sh; echo "rc=$? wall $(( $(date +%s)-S )) s"; cp /tmp/cakegrad-gpu-logs/sanitize_* $OUT/ 2>/dev/null; ls $OUT | head -40
