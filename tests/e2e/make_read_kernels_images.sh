#!/usr/bin/env bash
# Writes tests/e2e/read_kernels_images.h: fatbins of an sm_90 cubin and
# sm_90 PTX, for e2e/module_read_kernels. The client reads the kernels of
# the cubin (src/common/image_kernels.c); the CPU stand-in loads the PTX
# and runs its built-in kernels of these names (tests/standin/README.md).
#   rk_good   the cubin and the PTX of the same three kernels
#   rk_bad    the cubin of three kernels, the PTX of two of them: the
#             session's driver lists other kernels than the client read
#   rk_layout the cubin, and PTX whose copy_params_pair takes an int where
#             the cubin's takes a char: the same names, another layout
#   rk_global the three kernels and a global, rk_g (4 words: 1 2 3 4), in
#             the cubin and the PTX (e2e/migrate_order)
# Needs nvcc and fatbinary; run it again only to refresh the bytes.
set -euo pipefail
out="$(cd "$(dirname "$0")" && pwd)/read_kernels_images.h"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/a.cu" <<'CU'
extern "C" __global__ void fill_u32(unsigned *out, unsigned value, unsigned long long n) { for (unsigned long long i = threadIdx.x; i < n; i += blockDim.x) out[i] = value; }
extern "C" __global__ void vec_add(const float *a, const float *b, float *c, int n) { for (int i = threadIdx.x; i < n; i += blockDim.x) c[i] = a[i] + b[i]; }
extern "C" __global__ void copy_params_pair(char *out, char c, long long v) { out[8] = c; *(long long *)(out + 16) = v; }
CU
grep -v copy_params_pair "$tmp/a.cu" > "$tmp/b.cu"
sed 's/char c, long long v/int c, long long v/' "$tmp/a.cu" > "$tmp/c.cu"
{ cat "$tmp/a.cu"; echo '__device__ unsigned rk_g[4] = {1, 2, 3, 4};'; } > "$tmp/g.cu"
grep -q 'int c, long long v' "$tmp/c.cu"
nvcc -cubin -arch=sm_90 "$tmp/a.cu" -o "$tmp/a.cubin"
nvcc -ptx -arch=sm_90 "$tmp/a.cu" -o "$tmp/a.ptx"
nvcc -ptx -arch=sm_90 "$tmp/b.cu" -o "$tmp/b.ptx"
nvcc -ptx -arch=sm_90 "$tmp/c.cu" -o "$tmp/c.ptx"
nvcc -cubin -arch=sm_90 "$tmp/g.cu" -o "$tmp/g.cubin"
nvcc -ptx -arch=sm_90 "$tmp/g.cu" -o "$tmp/g.ptx"
grep -q 'rk_g\[16\]' "$tmp/g.ptx"
fatbinary --compress=false --create="$tmp/good.fatbin" -64 --image3=kind=elf,sm=90,file="$tmp/a.cubin" --image3=kind=ptx,sm=90,file="$tmp/a.ptx"
fatbinary --compress=false --create="$tmp/bad.fatbin" -64 --image3=kind=elf,sm=90,file="$tmp/a.cubin" --image3=kind=ptx,sm=90,file="$tmp/b.ptx"
fatbinary --compress=false --create="$tmp/layout.fatbin" -64 --image3=kind=elf,sm=90,file="$tmp/a.cubin" --image3=kind=ptx,sm=90,file="$tmp/c.ptx"
fatbinary --compress=false --create="$tmp/global.fatbin" -64 --image3=kind=elf,sm=90,file="$tmp/g.cubin" --image3=kind=ptx,sm=90,file="$tmp/g.ptx"
python3 "$(dirname "$0")/../tools/c_bytes.py" --aligned "$out" SCUDA_TEST_READ_KERNELS_IMAGES_H \
  "read_kernels_images.h - written by make_read_kernels_images.sh (fatbins of an
sm_90 cubin and sm_90 PTX)." \
  rk_good="$tmp/good.fatbin" rk_bad="$tmp/bad.fatbin" rk_layout="$tmp/layout.fatbin" rk_global="$tmp/global.fatbin"
echo "wrote $out"
