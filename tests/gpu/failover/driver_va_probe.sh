#!/usr/bin/env bash
# driver_va_probe.sh [DIR]: do two sessions on two servers get the driver's
# own mappings at the same addresses? (src/server/driver_va.h;
# docs/architecture.md 9.17a.) Starts servers A and B with
# SCUDA_DRIVER_VA_LOG=1, runs a tiny PyTorch matmul (cuBLAS: its library
# globals are what a migration checks) through SCUDA, GPU hidden, once
# against each, and compares the two CUDA sessions' "driver mapping #N
# placed" lines (size, protection, flags, address; the session's pid cut
# off). Prints SAME, or the first difference with its line number, and one
# SUMMARY line; exit 1 when they differ or a run failed. Logs in DIR
# (default /tmp/driver_va). Run as root (hide.sh), after
# tests/gpu/build_product.sh.
set -uo pipefail
source "$(dirname "$0")/lib.sh"
R=${1:-/tmp/driver_va}
rm -rf "$R" && mkdir -p "$R"
export SCUDA_DRIVER_VA_LOG=1

MATMUL='import torch
a = torch.arange(64 * 64, dtype=torch.float32, device="cuda").reshape(64, 64) / 4096
b = a @ a
torch.cuda.synchronize()
print("matmul ok %.4f" % float(b.sum()))'

pick_gpus
start_server a "$GPU_A" "$R/srvA.log" || exit 1
A_ADDR=$SERVER_ADDR
start_server b "$GPU_B" "$R/srvB.log" || exit 1
B_ADDR=$SERVER_ADDR

ok=1 why=()
for s in a b; do
  addr=$A_ADDR
  [[ $s == b ]] && addr=$B_ADDR
  timeout 120 bash "$HIDE" "$SCUDA" run --server "$addr" -- python3 -c "$MATMUL" >"$R/client_$s.out" 2>"$R/client_$s.err"
  rc=$?
  echo "client on $s ($addr): rc=$rc $(tail -n 1 "$R/client_$s.out")"
  ((rc == 0)) || { ok=0; why+=("client on $s rc=$rc: $(tail -n 1 "$R/client_$s.err")"); }
done
stop_started

# placed LOG OUT: the placements of the server's CUDA session (the session
# with the most of them: an NVML session places none), pid cut off.
placed() {
  local pid
  pid=$(grep -o 'scuda\[session [0-9]*\] debug: driver mapping #' "$1" | awk '{print $2}' | tr -d ']' |
    sort | uniq -c | sort -rn | awk 'NR == 1 {print $2}')
  grep "scuda\[session $pid\] debug: driver mapping #" "$1" | sed 's/^scuda\[session [0-9]*\] debug: //' >"$2"
  echo "$pid"
}
PA=$(placed "$R/srvA.log" "$R/placed_a.txt")
PB=$(placed "$R/srvB.log" "$R/placed_b.txt")
NA=$(wc -l <"$R/placed_a.txt") NB=$(wc -l <"$R/placed_b.txt")
echo "session ${PA:-none} on A: $NA placements, $(grep -c 'kernel (' "$R/srvA.log") left to the kernel;" \
  "session ${PB:-none} on B: $NB placements, $(grep -c 'kernel (' "$R/srvB.log") left to the kernel"
grep -h -E 'arena|driver places' "$R/srvA.log" "$R/srvB.log" | sort -u | head -n 5

if ((NA == 0 || NB == 0)); then
  ok=0 why+=("no placements logged (A $NA, B $NB): is the arena on? see $R/srvA.log")
elif cmp -s "$R/placed_a.txt" "$R/placed_b.txt"; then
  echo "SAME"
  why+=("$NA placements, the same on A and B")
else
  ok=0
  first=$(diff <(nl -ba "$R/placed_a.txt") <(nl -ba "$R/placed_b.txt") | grep -m1 '^[<>]' | awk '{print $2}')
  echo "DIFFERENT at line $first:"
  echo "  A: $(sed -n "${first}p" "$R/placed_a.txt")"
  echo "  B: $(sed -n "${first}p" "$R/placed_b.txt")"
  why+=("placements differ from line $first (A $NA, B $NB lines): $R/placed_a.txt, $R/placed_b.txt")
fi
summary driver_va_probe "$ok" "$(IFS=';'; echo "${why[*]}")"
