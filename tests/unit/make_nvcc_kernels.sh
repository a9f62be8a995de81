#!/usr/bin/env bash
# Writes tests/unit/nvcc_kernels.h: images nvcc made of kernels of every
# binding (extern "C", C++, static, template instances), with a device
# function beside them and parameters of several sizes and alignments, so
# that the unit test checks the kernel reader (src/common/image_kernels.c)
# against the toolkit's real bytes:
#   kernels_cubin      nvcc -cubin -rdc=true for sm_90
#   kernels_fatbin     sm_80 and sm_90 cubins and compute_90 PTX, zstd;
#                      one kernel exists for sm_90 only
#   kernels_fatbin_90a sm_90 and sm_90a cubins: two entries for sm_90
# Run it again only to refresh the bytes.
set -euo pipefail
out="$(cd "$(dirname "$0")" && pwd)/nvcc_kernels.h"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/k.cu" <<'CU'
#include <cstdio>
struct S { double a; char b; int c[5]; };
extern "C" __global__ void first(int *p, char c, double d, S s) { p[0] = c + (int)d + s.c[2]; }
__global__ void second(float4 v, short s, long long l) { if (v.x > 0) printf("%d %lld\n", s, l); }
__global__ void noargs() {}
template <typename T> __global__ void tpl(T *x, T y) { x[0] = y; }
template __global__ void tpl<float>(float *, float);
template __global__ void tpl<double>(double *, double);
static __global__ void stat(int *q) { q[1] = 3; }
__device__ __noinline__ int helper(int x) { return x * 2; }
__global__ void calls(int *q) { q[0] = helper(q[1]); stat<<<1, 1>>>(q); }
#if __CUDA_ARCH__ >= 900
struct Big { char b[300]; };
__global__ void hopper_only(Big big, int after) { if (after) printf("%d\n", big.b[7]); }
#endif
CU
nvcc -cubin -rdc=true -arch=sm_90 "$tmp/k.cu" -o "$tmp/k.cubin"
nvcc -fatbin -rdc=true -compress-mode=size -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 \
  -gencode arch=compute_90,code=compute_90 "$tmp/k.cu" -o "$tmp/k.fatbin"
nvcc -fatbin -rdc=true -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90a,code=sm_90a "$tmp/k.cu" \
  -o "$tmp/k90a.fatbin"
python3 "$(dirname "$0")/../tools/c_bytes.py" "$out" SCUDA_TEST_NVCC_KERNELS_H \
  "nvcc_kernels.h - written by make_nvcc_kernels.sh from its kernels (nvcc -cubin
-rdc=true for sm_90; a zstd fatbin of sm_80 and sm_90 cubins and compute_90
PTX; sm_90 and sm_90a cubins)." \
  kernels_cubin="$tmp/k.cubin" kernels_fatbin="$tmp/k.fatbin" kernels_fatbin_90a="$tmp/k90a.fatbin"
echo "wrote $out"
