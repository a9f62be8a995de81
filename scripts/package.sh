#!/usr/bin/env bash
# Builds the packages: a Release build without tests (so no test hooks) in
# build-pkg/, then CPack: build-pkg/scuda-VERSION-linux-ARCH.tar.gz (unpack
# anywhere: bin/scuda, lib/scuda/) and build-pkg/scuda_VERSION_ARCH.deb
# (installs under /usr). Prints the two paths. Needs what scripts/deps.sh
# installs; CUDA_INCLUDE_DIR / NVML_INCLUDE_DIR are honoured.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build-pkg}
# Where scripts/deps.sh found the headers (it honoured the variables).
# shellcheck source=/dev/null
[ -f build-deps/env ] && . build-deps/env
args=(-DCMAKE_BUILD_TYPE=Release -DSCUDA_BUILD_TESTS=OFF)
[ -n "${CUDA_INCLUDE_DIR:-}" ] && args+=("-DCUDA_INCLUDE_DIR=$CUDA_INCLUDE_DIR")
[ -n "${NVML_INCLUDE_DIR:-}" ] && args+=("-DNVML_INCLUDE_DIR=$NVML_INCLUDE_DIR")
cmake -S . -B "$dir" -G Ninja "${args[@]}" >"$dir.cmake.log" 2>&1 || { cat "$dir.cmake.log"; exit 1; }
cmake --build "$dir" -j "$(nproc 2>/dev/null || echo 2)" >"$dir.build.log" 2>&1 || { tail -n 60 "$dir.build.log"; exit 1; }
[ -e "$dir/lib/libnvidia-ml.so.1" ] || { echo "package: the NVML shim was not built (nvml.h missing: run scripts/deps.sh or set NVML_INCLUDE_DIR)" >&2; exit 1; }
(cd "$dir" && cpack -G "DEB;TGZ" >cpack.log 2>&1) || { cat "$dir/cpack.log"; exit 1; }
ls "$dir"/scuda*.tar.gz "$dir"/scuda*.deb
