#!/usr/bin/env bash
# Installs what building and testing SCUDA needs, on a fresh Debian/Ubuntu
# machine. Safe to run again: it only installs what is missing.
set -euo pipefail

need_apt=()
# cppcheck and gcovr: scripts/cppcheck.sh and scripts/coverage.sh.
for tool in cmake ninja gcc python3 nm cppcheck gcovr; do
  command -v "$tool" >/dev/null 2>&1 || need_apt+=("$tool")
done
# TLS (src/common/tls.c) builds against OpenSSL 3.
[ -f /usr/include/openssl/ssl.h ] || need_apt+=(libssl-dev)
# Compressed fatbin entries (src/server/fatbin_unpack.c): LZ4 and zstd,
# found with pkg-config.
[ -f /usr/include/lz4.h ] || need_apt+=(liblz4-dev)
[ -f /usr/include/zstd.h ] || need_apt+=(libzstd-dev)
command -v pkg-config >/dev/null 2>&1 || need_apt+=(pkg-config)
# The `openssl` command: tests/e2e/tls_ca.c makes its CA and certificates.
command -v openssl >/dev/null 2>&1 || need_apt+=(openssl)
# The `ip` command: tests/e2e/beyond_loopback.c makes a veth pair.
command -v ip >/dev/null 2>&1 || need_apt+=(ip)
if ((${#need_apt[@]})); then
  pkgs=()
  for t in "${need_apt[@]}"; do
    case "$t" in
      ninja) pkgs+=(ninja-build) ;;
      nm) pkgs+=(binutils) ;;
      ip) pkgs+=(iproute2) ;;
      *) pkgs+=("$t") ;;
    esac
  done
  echo "deps: installing ${pkgs[*]} with apt-get"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${pkgs[@]}" >/dev/null
fi

# clang and its libFuzzer runtime: the fuzz job (tests/fuzz/libfuzzer/).
need_fuzz=()
command -v clang >/dev/null 2>&1 || need_fuzz+=(clang)
if ! ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1; then
  need_fuzz+=(libclang-rt-14-dev)
fi
if ((${#need_fuzz[@]})); then
  echo "deps: installing ${need_fuzz[*]} with apt-get"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_fuzz[@]}" >/dev/null
fi

# The code generator parses cuda.h with pycparser.
if ! python3 -c 'import pycparser' 2>/dev/null; then
  echo "deps: installing pycparser with pip"
  python3 -m pip install -q pycparser || python3 -m pip install -q --break-system-packages pycparser
fi

# The NVML shim is generated from and compiled against nvml.h, which the CUDA
# toolkit headers here lack: NVIDIA's nvidia-nvml-dev wheel has it. The
# version is pinned in codegen/nvml_spec.py (the generated files depend on it).
nvml_pin=$(cd "$(dirname "$0")/../codegen" && python3 -c 'import nvml_spec; print("%s==%s" % nvml_spec.NVML_WHEEL)')
if [ -z "${NVML_INCLUDE_DIR:-}" ] &&
   ! python3 -c "import sys, importlib.metadata as m; n, v = sys.argv[1].split('=='); sys.exit(m.version(n) != v)" "$nvml_pin" 2>/dev/null; then
  echo "deps: installing $nvml_pin with pip (nvml.h)"
  python3 -m pip install -q "$nvml_pin" || python3 -m pip install -q --break-system-packages "$nvml_pin"
fi

if [ ! -f "${CUDA_INCLUDE_DIR:-/usr/local/cuda/include}/cuda.h" ]; then
  echo "deps: cuda.h not found in ${CUDA_INCLUDE_DIR:-/usr/local/cuda/include}." >&2
  echo "      Install the CUDA 13 toolkit headers, or set CUDA_INCLUDE_DIR." >&2
  exit 1
fi
