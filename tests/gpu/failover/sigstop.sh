#!/usr/bin/env bash
# sigstop.sh [DIR]: a PyTorch training loop (loop.py) through SCUDA (GPU
# hidden); once it has trained 200 steps its session process is stopped
# with SIGSTOP. The application must get its CUDA error within
# SCUDA_DEAD_AFTER + 1 s (11 s) and exit. One SUMMARY line; exit 1 on
# failure. Logs in DIR (default /tmp/live).
set -uo pipefail
source "$(dirname "$0")/lib.sh"
R=${1:-/tmp/live}
mkdir -p "$R"
DEAD_AFTER=10
pick_gpus # one server: on GPU_A
start_server live "$GPU_A" "$R/live_srv.log" || exit 1
SRV=$SERVER_PID
SCUDA_DEAD_AFTER=$DEAD_AFTER timeout 60 bash "$HIDE" "$SCUDA" run --server "$SERVER_ADDR" -- \
  python3 "$FAILOVER/loop.py" >"$R/live_client.out" 2>"$R/live_client.err" &
CL=$!
STARTED+=("$CL")
wait_for 60 log_has "$R/live_client.out" "^step" # training, not start-up
SESS=$(cuda_session_of "$SRV")
echo "session pid $SESS; steps so far: $(tail -n 1 "$R/live_client.out")"
T0=$(now)
kill -STOP "$SESS"
echo "sigstop_at_epoch $T0"
wait "$CL"
RC=$?
EXIT_S=$(secs_since "$T0")
echo "client exit $RC after SIGSTOP: $EXIT_S s"
tail -n 3 "$R/live_client.err"
E=$(grep -o "error_at_epoch [0-9.]*" "$R/live_client.out" | cut -d" " -f2)
ERR_S=''
[[ -n $E ]] && ERR_S=$(python3 -c "import sys; print('%.2f' % (float(sys.argv[1]) - float(sys.argv[2])))" "$E" "$T0")
[[ -n $ERR_S ]] && echo "the app got its CUDA error $ERR_S s after SIGSTOP"
# The stopped session belongs to the server this script started: end it.
kill -CONT "$SESS" 2>/dev/null
kill "$SESS" 2>/dev/null

ok=1 why=()
if [[ -z $ERR_S ]]; then
  ok=0 why+=("the app got no CUDA error (client rc=$RC)")
elif python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) <= float(sys.argv[2]) + 1 else 1)" "$ERR_S" "$DEAD_AFTER"; then
  why+=("CUDA error $ERR_S s after SIGSTOP (bound $((DEAD_AFTER + 1)) s)")
else
  ok=0 why+=("CUDA error $ERR_S s after SIGSTOP, over the bound of $((DEAD_AFTER + 1)) s")
fi
((RC != 0 && RC != 124)) || { ok=0; why+=("client rc=$RC"); }
why+=("client exited after $EXIT_S s")
summary sigstop "$ok" "$(IFS=';'; echo "${why[*]}")"
