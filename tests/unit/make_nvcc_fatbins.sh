#!/usr/bin/env bash
# Writes tests/unit/nvcc_fatbins.h: fatbins nvcc made of one small kernel
# with three variables, each kind of entry compressed and not, so that the
# unit test checks the listing against the toolkit's real bytes (header
# fields, padding, LZ4 block and zstd frame layout). Needs nvcc with
# -compress-mode (CUDA 12.8+); run it again only to refresh the bytes.
set -euo pipefail
out="$(cd "$(dirname "$0")" && pwd)/nvcc_fatbins.h"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/vars.cu" <<'CU'
__device__ int counter;
__device__ float table[64] = {1.0f, 2.0f, 3.0f};
__constant__ int coeffs[16];
extern "C" __global__ void bump(int *out) { counter += 1; table[threadIdx.x % 64] += coeffs[threadIdx.x % 16]; out[0] = counter; }
CU
# `speed` leaves a cubin this small uncompressed, so LZ4 comes with PTX only.
for mode in none size speed; do
  nvcc -fatbin -gencode arch=compute_90,code=sm_90 -compress-mode=$mode "$tmp/vars.cu" -o "$tmp/elf_$mode.fatbin"
  nvcc -fatbin -gencode arch=compute_90,code=compute_90 -compress-mode=$mode "$tmp/vars.cu" -o "$tmp/ptx_$mode.fatbin"
done
python3 "$(dirname "$0")/../tools/c_bytes.py" "$out" SCUDA_TEST_NVCC_FATBINS_H \
  "nvcc_fatbins.h - written by make_nvcc_fatbins.sh (nvcc -fatbin, sm_90 cubin or
compute_90 PTX, -compress-mode none, size (zstd) and speed (LZ4)) from a
kernel with the variables counter, table and coeffs." \
  nvcc_elf_plain="$tmp/elf_none.fatbin" nvcc_elf_zstd="$tmp/elf_size.fatbin" \
  nvcc_ptx_plain="$tmp/ptx_none.fatbin" nvcc_ptx_zstd="$tmp/ptx_size.fatbin" nvcc_ptx_lz4="$tmp/ptx_speed.fatbin"
echo "wrote $out"
