#!/usr/bin/env bash
# links.sh - the performance figures (docs/architecture.md, 7 Performance) in
# one run, on the GPU machine: `scuda bench`
# and bench/torch_bench.py over loopback, over an emulated LAN (0.1 ms each
# way, 10 Gbit/s) and over an emulated WAN (10 ms each way, 1 Gbit/s), both
# made by tests/tools/linkem in front of the same server. Every figure is
# taken against that link's own raw round trip and bandwidth, which
# `scuda bench` measures through the same relay.
#
#   bench/links.sh [--out DIR] [--links "loopback lan wan"] [--quick]
#                  [--torch LIST] [--wan-torch LIST] [--no-torch] [--deadline S] [--hide]
#
#   --out DIR       where the tables and JSON go (default: $OUT, else bench-out)
#   --links LIST    which links (default: all three)
#   --quick         `scuda bench --quick` and `torch_bench --quick` everywhere
#   --torch LIST    torch_bench workloads on loopback and LAN (default: all)
#   --wan-torch L   torch_bench workloads on the WAN (default: the ones a
#                   10 ms link can finish in minutes)
#   --no-torch      only `scuda bench`
#   --deadline S    bound each torch_bench run to S seconds (what is left is
#                   reported SKIPPED)
#   --hide          torch_bench's SCUDA runs under tests/gpu/hide.sh (root):
#                   the client processes cannot see this machine's GPU
#
# SERVER_ARGS adds options to the server (e.g. --driver PATH).
# Builds nothing: run after `cmake --build build`. Stops only the processes
# it started, by PID.
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT" || exit 1

OUTDIR=${OUT:-bench-out} LINKS="loopback lan wan" QUICK=() TORCH='' NO_TORCH=0 DEADLINE=() HIDE=()
WAN_TORCH=startup,launch,item,h2d,d2h,small_tf
while (($#)); do
  case $1 in
    --out) OUTDIR=$2; shift ;;
    --links) LINKS=$2; shift ;;
    --quick) QUICK=(--quick) ;;
    --torch) TORCH=$2; shift ;;
    --wan-torch) WAN_TORCH=$2; shift ;;
    --no-torch) NO_TORCH=1 ;;
    --deadline) DEADLINE=(--deadline "$2"); shift ;;
    --hide) HIDE=(--hide) ;;
    -h | --help) sed -n '2,22p' "$0"; exit 0 ;;
    *) echo "links.sh: unknown argument: $1" >&2; exit 2 ;;
  esac
  shift
done
mkdir -p "$OUTDIR"
SCUDA=$ROOT/build/bin/scuda LINKEM=$ROOT/build/bin/linkem
for f in "$SCUDA" "$LINKEM"; do
  [[ -x $f ]] || { echo "links.sh: missing $f: build first (cmake --build build)" >&2; exit 1; }
done

source "$ROOT/bench/link_lib.sh"
start_link_server links.sh || exit 1

status=0
for link in $LINKS; do
  case $link in
    loopback) addr=127.0.0.1:$PORT; native=(--native); only=$TORCH ;;
    lan) relay links.sh 0.1 10000 || exit 1; addr=127.0.0.1:$RELAY_PORT; native=(); only=$TORCH ;;
    wan) relay links.sh 10 1000 || exit 1; addr=127.0.0.1:$RELAY_PORT; native=(); only=$WAN_TORCH ;;
    *) echo "links.sh: unknown link $link" >&2; exit 2 ;;
  esac
  echo "=== $link: scuda bench (server $addr)"
  "$SCUDA" bench --server "$addr" "${native[@]}" "${QUICK[@]}" --json "$OUTDIR/$link.bench.json" \
    | tee "$OUTDIR/$link.bench.txt" || status=1
  ((NO_TORCH)) && continue
  echo "=== $link: torch_bench"
  python3 bench/torch_bench.py --server "$addr" "${QUICK[@]}" "${DEADLINE[@]}" "${HIDE[@]}" ${only:+--only "$only"} \
    --link-json "$OUTDIR/$link.bench.json" --json "$OUTDIR/$link.torch.json" --log-dir "$OUTDIR/$link.torch-logs" \
    | tee "$OUTDIR/$link.torch.txt" || status=1
done
exit $status
