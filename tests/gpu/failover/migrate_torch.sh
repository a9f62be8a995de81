#!/usr/bin/env bash
# migrate_torch.sh [DIR]: train_gpt.py natively, then through SCUDA (GPU
# hidden) on server A, moved with `scuda migrate` to server B after step
# 100; every step's loss must equal the native run's. Prints the pause and
# its parts (hold+sync, replay, memory), the device memory the session
# used, and checks the target: pause <= 1 s + memory / link bandwidth, the
# link's one-stream figure from `scuda bench` to B (LINK_GBPS=G overrides
# it; a loopback TCP stream measured here stands in if the bench fails).
# One SUMMARY line; exit 1 on failure. Logs in DIR (default /tmp/mig).
set -uo pipefail
source "$(dirname "$0")/lib.sh"
R=${1:-/tmp/mig}
mkdir -p "$R"
S=$R/sig
rm -rf "$S" && mkdir -p "$S"
timeout 120 python3 "$FAILOVER/train_gpt.py" "$R/native.txt" >"$R/native.out" 2>&1
NRC=$?
echo "native rc=$NRC"

pick_gpus
start_server b "$GPU_B" "$R/srvB.log" || exit 1
B_ADDR=$SERVER_ADDR
start_server a "$GPU_A" "$R/srvA.log" || exit 1
A_PID=$SERVER_PID A_ADDR=$SERVER_ADDR
link_bandwidth "$B_ADDR"
echo "link: $LINK_GBPS GB/s ($LINK_FROM)"

timeout 240 bash "$HIDE" "$SCUDA" run --server "$A_ADDR" -- python3 "$FAILOVER/train_gpt.py" "$R/scuda.txt" "$S" \
  >"$R/client.out" 2>"$R/client.err" &
CL=$!
STARTED+=("$CL")
MRC=none MEM='?'
if wait_for 120 test -e "$S/step100"; then
  SESS=$(cuda_session_of "$A_PID")
  MEM=$(gpu_mem_of "$SESS")
  echo "session $SESS on A after step 100; device memory in use: $MEM MiB (nvidia-smi)"
  "$SCUDA" migrate --session "$SESS" --to "$B_ADDR" --control "$R/a.sock" >"$R/migrate.out" 2>&1 &
  MIG=$!
  wait_for 120 log_has "$R/srvA.log" "session $SESS: held for the move" # images loaded ahead, the session held: let the training go on
  touch "$S/go"
  wait "$MIG"
  MRC=$?
  echo "scuda migrate rc=$MRC: $(cat "$R/migrate.out")"
else
  echo "the training never reached step 100 (client.err: $(tail -n 2 "$R/client.err"))"
  touch "$S/go"
fi
wait "$CL"
CRC=$?
echo "client rc=$CRC"
move_lines "$R/client.err" "$R/srvA.log" "$R/srvB.log"

# The pause as the application saw it (the client's line), and its parts (A's line).
PAUSE_MS=$(grep -o -m1 'session moved from [^ ]* to [^ ]* in [0-9.]* ms' "$R/client.err" | awk '{print $(NF-1)}')
read -r HOLD REPLAY MIB COPY < <(grep -m1 'migrated session' "$R/srvA.log" |
  sed -n 's/.*hold+sync \([0-9.]*\) ms, replay \([0-9.]*\) ms, \([0-9.]*\) MiB memory in \([0-9.]*\) ms.*/\1 \2 \3 \4/p')
ok=1 why=()
((NRC == 0)) || { ok=0; why+=("native rc=$NRC"); }
if [[ $MRC != 0 ]] || ! grep -q "moved to" "$R/migrate.out"; then ok=0 why+=("not moved (migrate rc=$MRC)"); fi
((CRC == 0)) || { ok=0; why+=("client rc=$CRC"); }
if [[ -n $PAUSE_MS && -n ${MIB:-} ]]; then
  TARGET_MS=$(python3 -c "import sys; print('%.0f' % (1000 + float(sys.argv[1]) * 2**20 / (float(sys.argv[2]) * 1e9) * 1000))" "$MIB" "$LINK_GBPS")
  echo "pause $PAUSE_MS ms (the client's): hold+sync $HOLD ms, replay $REPLAY ms, $MIB MiB memory in $COPY ms;" \
    "device memory in use $MEM MiB; target 1 s + $MIB MiB / $LINK_GBPS GB/s = $TARGET_MS ms"
  if python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) <= float(sys.argv[2]) else 1)" "$PAUSE_MS" "$TARGET_MS"; then
    why+=("pause $PAUSE_MS ms <= target $TARGET_MS ms")
  else
    ok=0 why+=("pause $PAUSE_MS ms over target $TARGET_MS ms")
  fi
else
  ok=0 why+=("no pause in the logs")
fi
if cmp -s "$R/native.txt" "$R/scuda.txt"; then
  why+=("losses identical ($(wc -l <"$R/scuda.txt") steps)")
else
  ok=0 why+=("losses differ")
  diff "$R/native.txt" "$R/scuda.txt" | head -n 6
fi
summary migrate_torch "$ok" "$(IFS=';'; echo "${why[*]}")"
