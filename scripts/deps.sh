#!/usr/bin/env bash
# Installs what building and testing SCUDA needs on a fresh Debian 12 or
# Ubuntu 24.04 machine: apt packages first (Debian's pycparser included),
# and a virtual environment in build-deps/venv only for what apt lacks
# (NVIDIA's nvidia-nvml-dev wheel, for nvml.h). Safe to run again: it
# installs only what is missing.
#
# Where the headers are goes to build-deps/env, which scripts/test.sh,
# scripts/package.sh and ./scuda read and pass to CMake:
#   CUDA_INCLUDE_DIR  the directory holding cuda.h (default /usr/local/cuda/include)
#   NVML_INCLUDE_DIR  the directory holding nvml.h (default: the wheel's)
# Both are honoured when set in the environment.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { echo "deps: $*"; }
die() { echo "deps: $*" >&2; exit 1; }

SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO=sudo
apt_updated=0
apt_install() {
  command -v apt-get >/dev/null 2>&1 ||
    die "missing: $*; this script knows apt (Debian, Ubuntu): install them with your package manager"
  say "installing $* with apt-get"
  if ((!apt_updated)); then
    $SUDO apt-get update -qq || die "apt-get update failed: check /etc/apt/sources.list* and the network"
    apt_updated=1
  fi
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null ||
    die "apt-get install $* failed (run it by hand to see why)"
}

# ---- apt: tools, libraries, Python modules ----
# cppcheck and gcovr: scripts/cppcheck.sh, scripts/coverage.sh. openssl:
# tests/e2e/tls_ca.c makes certificates. ip: tests/e2e/beyond_loopback.c.
# clang: the libFuzzer job. promtool and prometheus (package prometheus):
# tests/e2e/metrics.c checks and scrapes the server's /metrics. haproxy:
# the pool's load balancer (deploy/haproxy).
need=()
for pair in cmake:cmake ninja:ninja-build gcc:gcc python3:python3 nm:binutils cppcheck:cppcheck \
            gcovr:gcovr openssl:openssl ip:iproute2 clang:clang promtool:prometheus haproxy:haproxy; do
  command -v "${pair%%:*}" >/dev/null 2>&1 || need+=("${pair#*:}")
done
[ -f /usr/include/openssl/ssl.h ] || need+=(libssl-dev)
# Compressed fatbin entries (src/common/fatbin_unpack.c): LZ4 and zstd,
# found with pkg-config.
[ -f /usr/include/lz4.h ] || need+=(liblz4-dev)
[ -f /usr/include/zstd.h ] || need+=(libzstd-dev)
command -v pkg-config >/dev/null 2>&1 || need+=(pkg-config)
# gcc without its recommends lacks the C library's headers; pip needs the CAs.
[ -f /usr/include/stdio.h ] || need+=(libc6-dev)
[ -f /etc/ssl/certs/ca-certificates.crt ] || need+=(ca-certificates)
# The code generator parses cuda.h with pycparser: Debian's own package.
python3 -c 'import pycparser' 2>/dev/null || need+=(python3-pycparser)
((${#need[@]})) && apt_install "${need[@]}"
python3 -c 'import pycparser' 2>/dev/null ||
  die "python3 ($(command -v python3)) cannot import pycparser although python3-pycparser is installed:" \
      "a python3 other than the system's is first on PATH; install pycparser for it (python3 -m pip install pycparser)"

# clang's libFuzzer runtime, for the clang that is installed (14 on
# Debian 12, 18 on Ubuntu 24.04).
clang_major=$(clang --version | sed -n 's/.*clang version \([0-9]*\).*/\1/p' | head -n 1)
if ! ls /usr/lib/llvm-"$clang_major"/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1; then
  apt_install "libclang-rt-$clang_major-dev"
fi

# ---- the CUDA headers ----
cuda_inc=${CUDA_INCLUDE_DIR:-/usr/local/cuda/include}
if [ ! -f "$cuda_inc/cuda.h" ]; then
  cat >&2 <<MSG
deps: cuda.h not found in $cuda_inc. SCUDA builds against the CUDA 13 headers;
      no GPU and no driver are needed for them. Either:
  - NVIDIA's CUDA apt repository (https://developer.nvidia.com/cuda-downloads,
    the "deb (network)" instructions for Debian 12 or Ubuntu 24.04), then
      apt-get install cuda-driver-dev-13-0 cuda-cudart-dev-13-0
    (headers only: no driver, no kernel module), and use /usr/local/cuda-13.0/include;
  - or copy include/ of a CUDA 13 toolkit from any machine that has one;
  then set CUDA_INCLUDE_DIR to that directory and run this again.
MSG
  exit 1
fi

# ---- nvml.h: NVIDIA's wheel, pinned by codegen/nvml_spec.py ----
# The NVML shim is generated from and compiled against it; apt has no
# package of it, so it goes into a virtual environment of our own (never
# the system's Python, which Debian manages).
nvml_pin=$(cd codegen && python3 -c 'import nvml_spec; print("%s==%s" % nvml_spec.NVML_WHEEL)')
find_nvml() { # python: the include directory of the pinned wheel, if that python has it
  "$1" - "$nvml_pin" 2>/dev/null <<'PY'
import glob, os, sys, importlib.metadata as m
name, version = sys.argv[1].split("==")
if m.version(name) != version:
    sys.exit(1)
import nvidia
print(next(os.path.dirname(h) for p in nvidia.__path__ for h in sorted(glob.glob(os.path.join(p, "*", "include", "nvml.h")))))
PY
}
venv=build-deps/venv
nvml_inc=${NVML_INCLUDE_DIR:-}
if [ -n "$nvml_inc" ]; then
  [ -f "$nvml_inc/nvml.h" ] || die "NVML_INCLUDE_DIR=$nvml_inc holds no nvml.h: fix or unset it"
else
  nvml_inc=$(find_nvml python3 || true)
  [ -z "$nvml_inc" ] && [ -x "$venv/bin/python" ] && nvml_inc=$(find_nvml "$venv/bin/python" || true)
  if [ -z "$nvml_inc" ]; then
    python3 -c 'import venv, ensurepip' 2>/dev/null || apt_install python3-venv
    say "installing $nvml_pin (nvml.h) in $venv"
    [ -x "$venv/bin/python" ] || python3 -m venv "$venv" || die "python3 -m venv $venv failed"
    "$venv/bin/python" -m pip install -q --disable-pip-version-check "$nvml_pin" ||
      die "pip could not install $nvml_pin into $venv (network? a pip index in /etc/pip.conf?);" \
          "or set NVML_INCLUDE_DIR to a directory holding nvml.h"
    nvml_inc=$(find_nvml "$venv/bin/python") || die "$nvml_pin is installed in $venv but holds no nvml.h"
  fi
fi

# kubernetes-validate (PyPI; Debian packages none): tests/deploy/k8s_check.py
# checks deploy/k8s/ against the Kubernetes API schema, offline.
kv_pin=kubernetes-validate==1.37.0
if [ ! -x "$venv/bin/kubernetes-validate" ]; then
  python3 -c 'import venv, ensurepip' 2>/dev/null || apt_install python3-venv
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv" || die "python3 -m venv $venv failed"
  say "installing $kv_pin in $venv"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check "$kv_pin" ||
    die "pip could not install $kv_pin into $venv (network? a pip index in /etc/pip.conf?)"
fi

mkdir -p build-deps
printf 'CUDA_INCLUDE_DIR=%q\nNVML_INCLUDE_DIR=%q\n' "$(cd "$cuda_inc" && pwd)" "$nvml_inc" >build-deps/env
say "ready: cuda.h in $cuda_inc, nvml.h in $nvml_inc (build-deps/env)"
