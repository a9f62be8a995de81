#!/usr/bin/env bash
# peer_link.sh: a copy between the devices of two servers, server to server
# over a peer link (docs/architecture.md, 3.12), on a machine with two GPUs.
# Run from the repo root:
#
#   tests/gpu/peer_link.sh [--no-build] [--mib N] [--port P]
#
# Two servers on loopback, one per GPU (`scuda server --gpus 0` on port P,
# `--gpus 1` on P+1); bench/peer_bw (a raw client, built here) holds a
# session on each, sets the link up, and copies N MiB (default 1024) from
# GPU 0's server to GPU 1's three times: it prints the median GB/s next to
# the raw link's (one TCP stream to the second server, the same bytes).
# Both figures go over loopback here, so they compare the copy's path (DMA,
# staging, the link) with TCP alone. SCUDA_GPU_TLS=1 runs over TLS
# (tls.sh). Exit status 0 when the copy succeeded; the figures are for the
# reader. Logs in $OUT/peer_link (if $OUT is set) or build/peer-link.
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
source tests/gpu/tls.sh

BUILD_PRODUCT=1 MIB=1024 PORT=7790
while (($#)); do
  case $1 in
    --no-build) BUILD_PRODUCT=0 ;;
    --mib) MIB=$2; shift ;;
    --port) PORT=$2; shift ;;
    -h | --help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "peer_link.sh: unknown argument: $1" >&2; exit 2 ;;
  esac
  shift
done

LOGDIR=${OUT:+$OUT/peer_link}
LOGDIR=${LOGDIR:-$ROOT/build/peer-link}
mkdir -p "$LOGDIR" && LOGDIR=$(cd "$LOGDIR" && pwd) # absolute: XDG_CONFIG_HOME below
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
if ((gpus < 2)); then
  echo "peer_link.sh: needs two GPUs, nvidia-smi lists ${gpus:-0}" >&2
  exit 1
fi
if ((BUILD_PRODUCT)); then
  echo "== building the product (log: $LOGDIR/build.log)"
  tests/gpu/build_product.sh "$LOGDIR/build.log" || exit 1
fi
CUDA_INC=${CUDA_INCLUDE_DIR:-/usr/local/cuda/include}
cc -O2 -std=c11 -D__CUDA_API_VERSION_INTERNAL=1 -Isrc -I"$CUDA_INC" bench/peer_bw.c build/libscuda_common.a \
  -lssl -lcrypto -lpthread -ldl -o "$LOGDIR/peer_bw" || exit 1

PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done; }
trap cleanup EXIT
A=127.0.0.1:$PORT B=127.0.0.1:$((PORT + 1))
tls_b=("${SERVER_TLS_ARGS[@]}")
((${#tls_b[@]})) && tls_b=(--tls --state-dir "$(mktemp -d /tmp/scuda-gpu-tls.XXXXXX)")
build/bin/scuda server --listen "$A" --gpus 0 "${SERVER_TLS_ARGS[@]}" >"$LOGDIR/server-a.log" 2>&1 &
PIDS+=($!)
build/bin/scuda server --listen "$B" --gpus 1 "${tls_b[@]}" >"$LOGDIR/server-b.log" 2>&1 &
PIDS+=($!)
for log in "$LOGDIR/server-a.log" "$LOGDIR/server-b.log"; do
  for _ in $(seq 100); do grep -q 'listening on' "$log" 2>/dev/null && break; sleep 0.1; done
  grep -q 'listening on' "$log" || { echo "peer_link.sh: a server did not start; see $log" >&2; exit 1; }
done
# Each server makes a certificate of its own (tls.sh): pin both, in a
# known_hosts of this run's own (`scuda trust --yes`).
if [[ ${SCUDA_GPU_TLS:-0} == 1 ]]; then
  export SCUDA_TLS=1 XDG_CONFIG_HOME=$LOGDIR/xdg
  mkdir -p "$XDG_CONFIG_HOME"
  build/bin/scuda trust --yes "$A" >/dev/null && build/bin/scuda trust --yes "$B" >/dev/null ||
    { echo "peer_link.sh: cannot pin the servers' certificates" >&2; exit 1; }
fi

echo "== $MIB MiB from GPU 0's server ($A) to GPU 1's ($B)"
if ! "$LOGDIR/peer_bw" "$A" "$B" "$MIB" | tee "$LOGDIR/result.tsv"; then
  echo "peer_link.sh: FAILED; servers' logs in $LOGDIR" >&2
  exit 1
fi
awk -F'\t' '/^peer_copy_GBps/ {p=$2} /^raw_link_GBps/ {r=$2}
  END {printf "peer copy %s GB/s, raw link %s GB/s (%.0f%%)\n", p, r, r > 0 ? 100 * p / r : 0}' "$LOGDIR/result.tsv"
