#!/usr/bin/env bash
# from_package.sh TARBALL [SUITE...]: the GPU suites served by a packaged
# SCUDA instead of a build of this tree (docs/deploy.md). TARBALL is the
# .tar.gz of scripts/package.sh (Release, no test hooks). It is unpacked
# into build-pkg-gpu/, and build/bin/scuda and build/lib/ (where the
# suites look) become links into it, so the server, the client shim and
# the NVML shim that run are the package's: scuda finds its shims through
# /proc/self/exe, which resolves the link to the unpacked tree.
#
# SUITE: programs (tests/gpu/run.sh --no-build), torch, jax, nvml
# (tests/gpu/nvml_check.sh --no-build); default all four. Also, on request:
# standby (failover/standby_torch.sh with the 134 M-parameter model, 300
# steps, a snapshot every 30 s, a journal of up to 2 GiB: the model's
# weights alone pass the default 256 MiB at the start), standby-steady (the
# same with a snapshot every 8 s: snapshots of the whole trained state) and
# split (pools/split_train.sh), their logs under $OUT (or /tmp) in standby/,
# standby-steady/ and split_train/. Run as root on
# the GPU machine from the repo root:
#   bash tests/gpu/from_package.sh build-pkg/scuda-0.9.0-linux-x86_64.tar.gz
# Ends with one line per suite and "N passed, N failed" (suites).
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
TARBALL=${1:?usage: $0 TARBALL [programs|torch|jax|nvml...]}
shift
SUITES=("$@")
((${#SUITES[@]})) || SUITES=(programs torch jax nvml)

PKG=$ROOT/build-pkg-gpu
rm -rf "$PKG" && mkdir -p "$PKG"
tar xzf "$TARBALL" -C "$PKG" --strip-components=1 || { echo "from_package: cannot unpack $TARBALL"; exit 1; }
[[ -x $PKG/bin/scuda && -f $PKG/lib/scuda/libcuda.so.1 ]] ||
  { echo "from_package: $TARBALL holds no bin/scuda and lib/scuda/libcuda.so.1"; exit 1; }
"$PKG/bin/scuda" --version

# The suites' paths, pointed at the package (a build there is moved aside).
[[ -e build && ! -L build/bin/scuda ]] && { rm -rf build.before-package; mv build build.before-package; }
mkdir -p build/bin build/lib
ln -sfn "$PKG/bin/scuda" build/bin/scuda
for f in "$PKG"/lib/scuda/*; do ln -sfn "$f" "build/lib/$(basename "$f")"; done

pass=0 fail=0
suite() { # name command...
  local name=$1; shift
  echo "=== $name: $*"
  if "$@"; then echo "suite $name: PASS"; pass=$((pass + 1)); else echo "suite $name: FAIL"; fail=$((fail + 1)); fi
}
for s in "${SUITES[@]}"; do
  case $s in
    programs) suite programs bash tests/gpu/run.sh --no-build ;;
    torch) suite torch python3 -m pytest -q tests/gpu/torch ;;
    jax) suite jax python3 -m pytest -q tests/gpu/jax ;;
    nvml) suite nvml bash tests/gpu/nvml_check.sh --no-build ;;
    standby) suite standby env GPT_SIZE=134m GPT_STEPS=300 SNAPSHOT_EVERY=30 SCUDA_JOURNAL_MAX=2G \
               bash tests/gpu/failover/standby_torch.sh "${OUT:-/tmp}/standby" ;;
    standby-steady) suite standby-steady env GPT_SIZE=134m GPT_STEPS=300 SNAPSHOT_EVERY=8 SCUDA_JOURNAL_MAX=2G \
               bash tests/gpu/failover/standby_torch.sh "${OUT:-/tmp}/standby-steady" ;;
    split) suite split bash tests/gpu/pools/split_train.sh "${OUT:-/tmp}/split_train" ;;
    *) echo "from_package: unknown suite $s (programs, torch, jax, nvml, standby, standby-steady, split)"; fail=$((fail + 1)) ;;
  esac
done
echo "$pass passed, $fail failed"
((fail == 0))
