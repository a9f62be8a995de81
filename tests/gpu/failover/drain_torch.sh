#!/usr/bin/env bash
# drain_torch.sh [DIR]: train_gpt.py natively, then through SCUDA (GPU
# hidden) on server A, started with `--peer B`; after step 100 A's parent
# gets SIGTERM, which drains: the session moves to B and A exits. The job
# must finish on B with every step's loss equal to the native run's.
# Prints the pause lines and A's exit. One SUMMARY line; exit 1 on failure.
# Logs in DIR (default /tmp/drain).
set -uo pipefail
source "$(dirname "$0")/lib.sh"
R=${1:-/tmp/drain}
mkdir -p "$R"
S=$R/sig
rm -rf "$S" && mkdir -p "$S"
timeout 120 python3 "$FAILOVER/train_gpt.py" "$R/native.txt" >"$R/native.out" 2>&1
NRC=$?
echo "native rc=$NRC"

# running PID: alive and not a zombie (a child of ours stays one until reaped).
running() {
  local st
  st=$(ps -o stat= -p "$1" 2>/dev/null)
  [[ -n $st && $st != Z* ]]
}
stopped() { ! running "$1"; }

pick_gpus
start_server b "$GPU_B" "$R/srvB.log" || exit 1
B_ADDR=$SERVER_ADDR
start_server a "$GPU_A" "$R/srvA.log" --peer "$B_ADDR" || exit 1
A_PID=$SERVER_PID A_ADDR=$SERVER_ADDR
timeout 240 bash "$HIDE" "$SCUDA" run --server "$A_ADDR" -- python3 "$FAILOVER/train_gpt.py" "$R/scuda.txt" "$S" \
  >"$R/client.out" 2>"$R/client.err" &
CL=$!
STARTED+=("$CL")
ARC=none A_SECS=999
if wait_for 120 test -e "$S/step100"; then
  SESS=$(cuda_session_of "$A_PID")
  echo "session $SESS on A after step 100; device memory in use:" \
    "$(gpu_mem_of "$SESS") MiB; SIGTERM to A's parent ($A_PID)"
  T0=$(now)
  kill -TERM "$A_PID"
  wait_for 120 log_has "$R/srvA.log" "session $SESS: held for the move" # images loaded ahead, the training's session held by the drain: let the training go on
  touch "$S/go"
  if wait_for 120 stopped "$A_PID"; then
    wait "$A_PID"
    ARC=$?
    A_SECS=$(secs_since "$T0")
    echo "server A exited with status $ARC, $A_SECS s after SIGTERM"
  else
    echo "server A still runs 120 s after SIGTERM"
  fi
else
  echo "the training never reached step 100 (client.err: $(tail -n 2 "$R/client.err"))"
  touch "$S/go"
fi
wait "$CL"
CRC=$?
echo "client rc=$CRC"
move_lines "$R/client.err" "$R/srvA.log" "$R/srvB.log"

ok=1 why=()
((NRC == 0)) || { ok=0; why+=("native rc=$NRC"); }
[[ $ARC == 0 ]] || { ok=0; why+=("server A: exit $ARC"); }
log_has "$R/srvB.log" "resumed here" || { ok=0; why+=("the client never resumed on B"); }
# Every session moves, the idle NVML one included, and A exits well
# before the resume window (30 s) it would wait for a client that stays.
log_has "$R/srvA.log" "stays until its client ends it" && { ok=0; why+=("a session stayed on A"); }
python3 -c "import sys; sys.exit(float(sys.argv[1]) >= 20)" "$A_SECS" || { ok=0; why+=("A exited ${A_SECS} s after SIGTERM"); }
((CRC == 0)) || { ok=0; why+=("client rc=$CRC"); }
if cmp -s "$R/native.txt" "$R/scuda.txt"; then
  why+=("losses identical ($(wc -l <"$R/scuda.txt") steps)")
else
  ok=0 why+=("losses differ")
  diff "$R/native.txt" "$R/scuda.txt" | head -n 6
fi
summary drain_torch "$ok" "$(IFS=';'; echo "${why[*]}")"
