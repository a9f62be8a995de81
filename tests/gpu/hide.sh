#!/usr/bin/env bash
# hide.sh CMD...: runs CMD in a mount namespace where this machine's GPU is
# gone: /dev/null over the GPU device nodes and an empty tmpfs over the
# driver directory, proven before CMD starts (exit 97 if the hiding
# failed). A SCUDA client run this way can only reach a GPU through SCUDA.
# Needs root (unshare -m). Used by run.sh and the PyTorch suite.
[ "${1:-}" = "--inside" ] || exec unshare -m -- bash "$0" --inside "$@"
shift
set -eu
fail() { echo "hidden_run: $*" >&2; exit 97; }
nodes=$(ls -d /dev/nvidia0 /dev/nvidiactl /dev/nvidia-uvm /dev/nvidia-uvm-tools /dev/nvidia-modeset /dev/nvidia[0-9]* \
  /dev/nvidia-caps/* 2>/dev/null | sort -u || true)
for d in $nodes; do mount --bind /dev/null "$d" || fail "cannot bind /dev/null over $d"; done
if [ -d /usr/local/nvidia/lib64 ]; then
  mount -t tmpfs -o size=1m,mode=755 scuda-hidden /usr/local/nvidia/lib64 || fail "cannot mount tmpfs on /usr/local/nvidia/lib64"
  [ -z "$(ls -A /usr/local/nvidia/lib64)" ] || fail "/usr/local/nvidia/lib64 is not empty"
fi
for d in $nodes; do
  [ "$(stat -L -c %t:%T "$d")" = "1:3" ] || fail "$d is still a GPU device"
done
# The real libcuda.so.1 (a symlink into the driver directory: /lib/libcuda.so.1
# on the H200 image, /lib/x86_64-linux-gnu/libcuda.so.1 elsewhere) must dangle now.
# Any other copy the loader cache knows (an unusual layout: a real file, a
# compat directory) is covered with /dev/null, loudly.
libs="/lib/x86_64-linux-gnu/libcuda.so.1 /usr/lib/x86_64-linux-gnu/libcuda.so.1
      $(ldconfig -p 2>/dev/null | awk "/(libcuda|libnvidia-ml)\\.so\\.1 /{print \$NF}" || true)"
for l in $libs; do
  if [ -e "$l" ] && [ "$(stat -L -c %t:%T "$l")" != "1:3" ]; then
    echo "hidden_run: note: $l survived the tmpfs; covering it with /dev/null" >&2
    mount --bind /dev/null "$l" || fail "$l can still be loaded"
  fi
done
if [ -e /lib/x86_64-linux-gnu/libcuda.so.1 ] && [ "$(stat -L -c %t:%T /lib/x86_64-linux-gnu/libcuda.so.1)" != "1:3" ]; then
  fail "/lib/x86_64-linux-gnu/libcuda.so.1 can still be loaded"
fi
# And the dynamic loader, with this environment, finds no libcuda.so.1.
if command -v python3 >/dev/null; then
  python3 -c "import ctypes,sys
try: ctypes.CDLL(\"libcuda.so.1\")
except OSError: sys.exit(0)
sys.exit(1)" || fail "dlopen(libcuda.so.1) still succeeds"
fi
exec "$@"
