#!/usr/bin/env bash
# The client's kernel reader (src/common/image_kernels.c) against this
# machine's driver, over the fatbins of real libraries: PyTorch's CUDA
# library, cuDNN, cuBLAS and cuBLASLt (tests/gpu/read_kernels_probe.c).
# Run on a GPU machine from the repo root:
#
#   tests/gpu/read_kernels.sh [PROBE]     # PROBE: build/bin/read_kernels_probe
#
# Prints the probe's disagreements and its summary per library; exits 1
# when any image disagrees. MAX_IMAGES (default 4000) bounds each library.
set -uo pipefail
PROBE=${1:-build/bin/read_kernels_probe}
MAX_IMAGES=${MAX_IMAGES:-4000}
[ -x "$PROBE" ] || { echo "read_kernels.sh: no probe at $PROBE (cmake --build build --target read_kernels_probe)" >&2; exit 2; }
libs=()
torch_lib=$(python3 -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib"))' 2>/dev/null)
site=$(python3 -c 'import site; print(site.getsitepackages()[0])' 2>/dev/null)
for f in "$torch_lib"/libtorch_cuda.so "$site"/nvidia/cudnn/lib/libcudnn_*.so* "$site"/nvidia/cublas/lib/libcublas*.so* \
         /usr/local/cuda/lib64/libcublasLt.so.* /usr/local/cuda/lib64/libcudnn_*.so.*; do
  [ -f "$f" ] && ! [ -L "$f" ] && libs+=("$f")
done
((${#libs[@]})) || { echo "read_kernels.sh: no CUDA libraries found" >&2; exit 2; }
rc=0
for f in "${libs[@]}"; do
  echo "== $f"
  timeout 300 "$PROBE" --max-images "$MAX_IMAGES" "$f" || rc=1
done
exit $rc
