#!/usr/bin/env bash
# Writes tests/unit/nvcc_limits.h: a cubin nvcc made (sm_90) of kernels
# with and without __launch_bounds__, static shared memory and a register
# cap, so that the unit test checks the launch limits the kernel reader
# (src/common/image_kernels.c) finds against the toolkit's real bytes.
# Run it again only to refresh the bytes.
set -euo pipefail
out="$(cd "$(dirname "$0")" && pwd)/nvcc_limits.h"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/l.cu" <<'CU'
extern "C" __global__ void __launch_bounds__(64) bounded64(float *x)
{
    __shared__ float s[100];
    s[threadIdx.x] = x[threadIdx.x];
    __syncthreads();
    x[threadIdx.x] = s[63 - threadIdx.x];
}
extern "C" __global__ void __launch_bounds__(256, 2) bounded256(float *x) { x[threadIdx.x] += 1; }
extern "C" __global__ void plain(float *x, int n)
{
    extern __shared__ float d[];
    d[threadIdx.x] = x[threadIdx.x];
    __syncthreads();
    x[threadIdx.x] = d[n];
}
extern "C" __global__ void __maxnreg__(40) capped(float *x) { x[threadIdx.x] *= 2; }
CU
nvcc -cubin -arch=sm_90 "$tmp/l.cu" -o "$tmp/l.cubin"
python3 "$(dirname "$0")/../tools/c_bytes.py" "$out" SCUDA_TEST_NVCC_LIMITS_H \
  "nvcc_limits.h - written by make_nvcc_limits.sh from its kernels (nvcc -cubin for sm_90)." \
  limits_cubin="$tmp/l.cubin"
echo "wrote $out"
