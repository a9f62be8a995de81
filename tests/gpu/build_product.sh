#!/usr/bin/env bash
# build_product.sh LOGFILE: builds the product (scuda, libcuda.so.1 and the
# NVML shim libnvidia-ml.so.1) into build/ for the GPU suites, as Release and
# without CI's tests. Used by run.sh and nvml_check.sh; the PyTorch and JAX
# suites expect it to have run.
#
# nvml.h comes from NVIDIA's nvidia-nvml-dev wheel. The GPU machine may have
# no package registry: a wheel in .whl/ (git-ignored; fetch it elsewhere with
# `pip download --no-deps -d .whl nvidia-nvml-dev==VERSION`, VERSION as pinned
# in codegen/nvml_spec.py) is installed from there. Without nvml.h the NVML
# shim is left out, and programs that ask NVML for GPUs (JAX, nvidia-smi)
# see none.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
LOG=${1:-/dev/stdout}
cd "$ROOT"
gen="Unix Makefiles"; command -v ninja >/dev/null 2>&1 && gen=Ninja
nvml=()
whl=$(ls "$ROOT"/.whl/nvidia_nvml_dev-*.whl 2>/dev/null | head -n 1 || true)
if [[ -n $whl ]] && python3 -m pip install -q --no-index --no-deps --target /tmp/scuda-nvml-dev "$whl" >/dev/null 2>&1; then
  nvml=(-DNVML_INCLUDE_DIR="$(dirname /tmp/scuda-nvml-dev/nvidia/*/include/nvml.h)")
fi
{ cmake -S . -B build -G "$gen" -DCMAKE_BUILD_TYPE=Release -DSCUDA_BUILD_TESTS=OFF "${nvml[@]}" &&
  cmake --build build -j "$(nproc)"; } >"$LOG" 2>&1 || { [[ $LOG == /dev/stdout ]] || tail -n 40 "$LOG"; exit 1; }
[[ -e build/lib/libnvidia-ml.so.1 ]] || echo "build_product: warning: no NVML shim (nvml.h missing; see $0)" >&2
exit 0
