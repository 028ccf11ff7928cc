#!/usr/bin/env bash
# Run here (development machine, after scripts/build.sh with CUDA): packs what the GPU machine
# cannot build into .carry/gpu/ and its archive .carry/gpu.tar.xz (git-ignored; name the archive
# and client/python/cakegrad/v1 in the device tool's carry):
#   bin/  cakegradd, cakegrad, the GPU test binaries and kernel benchmarks (stripped)
#   lib/  the gRPC/protobuf/Abseil/spdlog/prometheus shared libraries they need
# The binaries get an RPATH of $ORIGIN/../lib (DT_RPATH, which also serves indirect
# dependencies, unlike RUNPATH). glibc, libstdc++ and the CUDA driver come from the GPU
# machine. Also generates the Python protobuf code the Python GPU test needs.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
command -v patchelf >/dev/null || apt-get install -y -qq patchelf
BUILD=${BUILD_DIR:-build}
out=.carry/gpu
rm -rf "$out"
mkdir -p "$out/bin" "$out/lib"
bins=("$BUILD/server/cakegradd" "$BUILD/client/cakegrad" "$BUILD/tests/gpu/daemon/cakegrad_gpu_daemon_tests"
      "$BUILD/bench/cakegrad_daemon_bench")
for b in "${bins[@]}"; do
  [ -x "$b" ] || { echo "missing $b: build it first (scripts/build.sh)" >&2; exit 1; }
done
# The family test and bench binaries are optional: a daemon-only run needs none of them.
for f in conv1d mhc kda; do
  for b in "$BUILD/tests/cakegrad_gpu_${f}_tests" "$BUILD/bench/cakegrad_${f}_bench"; do
    if [ -x "$b" ]; then bins+=("$b"); else echo "note: $b not built, not packed" >&2; fi
  done
done
for b in "${bins[@]}"; do
  cp "$b" "$out/bin/"
  strip --strip-debug "$out/bin/$(basename "$b")"
  patchelf --force-rpath --set-rpath '$ORIGIN/../lib' "$out/bin/$(basename "$b")"
  ldd "$b" | awk '/=> \// {print $3}' | while read -r lib; do
    case "$(basename "$lib")" in
      libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|ld-linux*|libgcc_s.so*|libstdc++.so*|libcuda.so*) ;;
      *) cp -L -n "$lib" "$out/lib/" ;;
    esac
  done
done
for lib in "$out"/lib/*; do patchelf --force-rpath --set-rpath '$ORIGIN' "$lib"; done
# The commit the binaries were built from (the GPU machine's copy of .git may be older).
src=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$BUILD/CMakeCache.txt")
echo "$(git -C "$src" rev-parse HEAD)$(git -C "$src" diff --quiet HEAD || echo ' (with uncommitted changes)') built in $BUILD on $(date -u +%FT%TZ)" \
  > "$out/SOURCE"
bash client/python/generate_proto.sh >/dev/null
# The tracked tree and the carry share the device tool's 64 MiB, which the binaries alone nearly
# fill: carry [".carry/gpu.tar.xz", "client/python/cakegrad/v1"] instead (runner_lib.sh unpacks it).
rm -f .carry/gpu.tar.xz
tar -cf - "$out" | xz -T0 -6 > .carry/gpu.tar.xz
echo "packed $(ls "$out/bin" | wc -l) binaries, $(ls "$out/lib" | wc -l) libraries: $(du -sh "$out" | cut -f1)," \
  ".carry/gpu.tar.xz $(du -sh .carry/gpu.tar.xz | cut -f1)"
