# lib.sh: what the failover checks share; sourced by sigstop.sh,
# migrate_torch.sh, migrate_cuda.sh and drain_torch.sh. It starts servers
# on free loopback ports, one GPU each where the machine has two, and at
# exit stops only the processes the script started, by PID.
#
# Environment:
#   FAILOVER_DRIVER=PATH  the servers load this driver (--driver), e.g. the
#                         CPU stand-in for a dry run of the plumbing
#   SCUDA_BIN=PATH        the scuda binary (default build/bin/scuda)
# shellcheck shell=bash
# shellcheck disable=SC2034  # HIDE, FAILOVER, GPU_A and GPU_B are for the scripts that source this
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
SCUDA=${SCUDA_BIN:-$ROOT/build/bin/scuda}
HIDE=$ROOT/tests/gpu/hide.sh
FAILOVER=$ROOT/tests/gpu/failover
STARTED=()

stop_started() {
  local p
  for p in "${STARTED[@]}"; do kill "$p" 2>/dev/null; done
  for p in "${STARTED[@]}"; do wait "$p" 2>/dev/null; done
  STARTED=()
}
trap stop_started EXIT

now() { date +%s.%N; }
secs_since() { python3 -c "import sys; print('%.2f' % (float(sys.argv[2]) - float(sys.argv[1])))" "$1" "$(now)"; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# wait_for TIMEOUT_S CMD...: until CMD succeeds (0) or the time is up (1).
wait_for() {
  local t=$1 i
  shift
  for ((i = 0; i < t * 20; i++)); do
    "$@" && return 0
    sleep 0.05
  done
  return 1
}
log_has() { grep -q -- "$2" "$1" 2>/dev/null; }

# GPU_A and GPU_B: each server's CUDA_VISIBLE_DEVICES. Two GPUs: one each.
pick_gpus() {
  local n
  n=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
  if ((n >= 2)); then
    GPU_A=0 GPU_B=1
    echo "gpus: $n on this machine: server A on GPU 0, server B on GPU 1"
  else
    GPU_A=0 GPU_B=0
    echo "gpus: ${n:-0} on this machine: servers A and B both on GPU 0"
  fi
}

# start_server NAME GPU LOG [ARGS...]: a server on a free loopback port,
# its control socket beside LOG. Sets SERVER_PID and SERVER_ADDR; 1 when it
# did not listen within 10 s.
start_server() {
  local name=$1 gpu=$2 log=$3 port sock driver=()
  shift 3
  port=$(free_port)
  sock=$(dirname "$log")/$name.sock
  [[ -n ${FAILOVER_DRIVER:-} ]] && driver=(--driver "$FAILOVER_DRIVER")
  CUDA_VISIBLE_DEVICES=$gpu SCUDA_LOG=info "$SCUDA" server --listen "127.0.0.1:$port" \
    --control "$sock" "${driver[@]}" "$@" >"$log" 2>&1 &
  SERVER_PID=$! SERVER_ADDR=127.0.0.1:$port
  STARTED+=("$SERVER_PID")
  if ! wait_for 10 listening "$port" "$SERVER_PID"; then
    echo "server $name did not listen on $SERVER_ADDR within 10 s; its log:" >&2
    tail -n 20 "$log" >&2
    return 1
  fi
  echo "server $name: pid $SERVER_PID on $SERVER_ADDR (CUDA_VISIBLE_DEVICES=$gpu)"
}
listening() { kill -0 "$2" 2>/dev/null && (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# The CUDA session of server PID $1: the child that holds a GPU context
# (a client's NVML connection is a session too, without one); else the first.
cuda_session_of() {
  local kids k apps
  kids=$(pgrep -P "$1")
  apps=$(nvidia-smi --query-compute-apps=pid --format=csv,noheader 2>/dev/null | tr -d ' ')
  for k in $kids; do
    if grep -qx "$k" <<<"$apps"; then echo "$k"; return; fi
  done
  head -n 1 <<<"$kids"
}
# Device memory the process uses, MiB, as nvidia-smi sees it ("?" when it cannot).
gpu_mem_of() {
  local m
  m=$(nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits 2>/dev/null |
    awk -F', *' -v p="$1" '$1 == p {print $2}')
  echo "${m:-?}"
}

# The lines that say how a move went, from the logs given.
move_lines() {
  grep -h -E "migrated session|imported a session|session moved|moved to|cannot move|refused|not rebuilt|draining|resumed here|took the session back|asked to move|held for the move" \
    "$@" 2>/dev/null | head -n 20
}

# summary NAME OK DETAIL: the one summary line; returns 0 when OK is 1.
# loopback_gbps: one TCP stream over loopback, 1 GiB, GB/s.
loopback_gbps() {
  python3 - <<'PY'
import socket, threading, time
N, CH = 1 << 30, 1 << 22
srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen(1)
def sink():
    c, _ = srv.accept(); buf = bytearray(CH); got = 0
    while got < N:
        n = c.recv_into(buf)
        if not n: break
        got += n
t = threading.Thread(target=sink); t.start()
s = socket.create_connection(srv.getsockname()); data = b"\0" * CH
t0 = time.time()
for _ in range(N // CH): s.sendall(data)
s.close(); t.join()
print("%.3f" % (N / (time.time() - t0) / 1e9))
PY
}

# link_bandwidth ADDR: LINK_GBPS, LINK_K_GBPS and LINK_FROM, the bandwidth a memory copy
# to the server at ADDR can hope for (LINK_GBPS set beforehand stands).
link_bandwidth() {
  if [[ -n ${LINK_GBPS:-} ]]; then LINK_FROM="LINK_GBPS"; return; fi
  timeout 180 "$SCUDA" bench --server "$1" --quick --json "$R/bench.json" >"$R/bench.out" 2>&1
  LINK_GBPS=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))["raw_link"]["one_stream"]; print(d["gbps"] if d["ok"] else "")' \
    "$R/bench.json" 2>/dev/null)
  # The same link over several streams at once (LINK_K_GBPS, "" when not
  # measured): a copy over several connections is also held against it.
  LINK_K_GBPS=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))["raw_link"]["k_streams"]; print("%s %s" % (d["gbps"], d["streams"]) if d["ok"] else "")' \
    "$R/bench.json" 2>/dev/null)
  if [[ -n $LINK_GBPS ]]; then
    LINK_FROM="scuda bench to server $1, raw link, one stream"
  else
    LINK_GBPS=$(loopback_gbps)
    LINK_FROM="a loopback TCP stream measured by this script (scuda bench failed: $R/bench.out)"
  fi
}

summary() {
  if (($2)); then echo "SUMMARY $1: PASS $3"; else echo "SUMMARY $1: FAIL $3"; fi
  (($2))
}
