#!/usr/bin/env bash
# compress_link.sh - compressed copies over a slow link (SCUDA_COMPRESS,
# docs/architecture.md, "Compressed copies"), on the GPU machine: linkem makes a WAN (10 ms
# each way, 1 Gbit/s) in front of one server; bench/compress_bw copies
# 256 MiB of zeros and of random bytes each way, with SCUDA_COMPRESS=off and
# auto. A table: seconds per copy, the rate in Mbit/s, and the ratios to the
# link's raw rate (the time its bits take at RATE Mbit/s) and to off.
# Targets: zeros, auto >= 2x raw; random, auto >= 0.95x off.
#
#   bench/compress_link.sh [--out DIR] [--mib N] [--delay-ms D] [--rate-mbit R]
#
# SERVER_ARGS adds options to the server (e.g. --driver PATH). Builds only
# compress_bw: run after `cmake --build build`. Stops only the processes it
# started, by PID.
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT" || exit 1

OUTDIR=${OUT:-bench-out} MIB=256 DELAY=10 RATE=1000
while (($#)); do
  case $1 in
    --out) OUTDIR=$2; shift ;;
    --mib) MIB=$2; shift ;;
    --delay-ms) DELAY=$2; shift ;;
    --rate-mbit) RATE=$2; shift ;;
    -h | --help) sed -n '2,14p' "$0"; exit 0 ;;
    *) echo "compress_link.sh: unknown argument: $1" >&2; exit 2 ;;
  esac
  shift
done
mkdir -p "$OUTDIR"
SCUDA=$ROOT/build/bin/scuda LINKEM=$ROOT/build/bin/linkem
for f in "$SCUDA" "$LINKEM"; do
  [[ -x $f ]] || { echo "compress_link.sh: missing $f: build first (cmake --build build)" >&2; exit 1; }
done
CUDA_INC=${CUDA_INCLUDE_DIR:-/usr/local/cuda/include}
BW=$OUTDIR/compress_bw
cc -O2 -I"$CUDA_INC" bench/compress_bw.c -o "$BW" -L"$ROOT/build/lib" -l:libcuda.so.1 ||
  { echo "compress_link.sh: compress_bw: build failed" >&2; exit 1; }

source "$ROOT/bench/link_lib.sh"
start_link_server compress_link.sh || exit 1
relay compress_link.sh "$DELAY" "$RATE" || exit 1
RELAY=$RELAY_PORT

status=0
declare -A T
for data in zeros random; do
  for mode in off auto; do
    out=$OUTDIR/compress_${data}_$mode.txt
    if ! LD_LIBRARY_PATH=$ROOT/build/lib SCUDA_SERVER=127.0.0.1:$RELAY SCUDA_COMPRESS=$mode SCUDA_LOG=info \
      "$BW" --mib "$MIB" --data "$data" >"$out" 2>"$OUTDIR/compress_${data}_$mode.err"; then
      echo "compress_link.sh: $data $mode failed (see $OUTDIR/compress_${data}_$mode.err)" >&2
      status=1
      continue
    fi
    T[$data.$mode.h2d]=$(awk '$1 == "h2d_s" {print $2}' "$out")
    T[$data.$mode.d2h]=$(awk '$1 == "d2h_s" {print $2}' "$out")
  done
done

{
  printf 'link: %s ms each way, %s Mbit/s (linkem); %s MiB per copy; raw: %.2f s a copy\n' "$DELAY" "$RATE" "$MIB" \
    "$(awk -v m="$MIB" -v r="$RATE" 'BEGIN {print m * 1048576 * 8 / (r * 1e6)}')"
  printf '%-7s %-4s %-5s %9s %9s %8s %8s\n' data dir mode seconds Mbit/s x_raw x_off
  for data in zeros random; do
    for dir in h2d d2h; do
      for mode in off auto; do
        s=${T[$data.$mode.$dir]:-}
        off=${T[$data.off.$dir]:-}
        [[ -n $s ]] || { printf '%-7s %-4s %-5s %9s\n' "$data" "$dir" "$mode" FAILED; continue; }
        awk -v d="$data" -v dir="$dir" -v m="$mode" -v s="$s" -v off="$off" -v mib="$MIB" -v r="$RATE" 'BEGIN {
          bits = mib * 1048576 * 8; raw = bits / (r * 1e6)
          printf "%-7s %-4s %-5s %9.3f %9.0f %8.2f %8s\n", d, dir, m, s, bits / s / 1e6, raw / s,
            off == "" ? "-" : sprintf("%.2f", off / s) }'
      done
    done
  done
  echo "targets: zeros auto x_raw >= 2; random auto x_off >= 0.95"
} | tee "$OUTDIR/compress_link.txt"
exit $status
