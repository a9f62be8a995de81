#!/usr/bin/env bash
# dry_run.sh [DIR]: the failover scripts' plumbing on a machine without a
# GPU, against the CPU stand-in driver (build/lib/standin): every script
# parses (bash -n; shellcheck where installed); servers start on free ports
# and stop by PID; a small driver-API client (Python ctypes through the
# shim) is moved by `scuda migrate` at its pause point and by a drain
# (`--peer`, SIGTERM), with the same waits and log lines the GPU scripts
# use; its bytes must survive both. One SUMMARY line; exit 1 on failure.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
R=${1:-/tmp/failover_dry}
rm -rf "$R" && mkdir -p "$R"
export FAILOVER_DRIVER=${FAILOVER_DRIVER:-$HERE/../../../build/lib/standin/libcuda-standin.so}
source "$HERE/lib.sh"
ok=1 why=()
for f in "$HERE"/*.sh; do bash -n "$f" || { ok=0; why+=("$(basename "$f") does not parse"); }; done
if command -v shellcheck >/dev/null; then
  (cd "$HERE" && shellcheck -x ./*.sh) >"$R/shellcheck.txt" 2>&1 || { ok=0; why+=("shellcheck: $R/shellcheck.txt"); }
fi

# client SIGDIR ADDR: through the shim to ADDR, writes SIGDIR/step100
# halfway, waits for SIGDIR/go, checks its bytes.
client() {
  "$SCUDA" run --server "$2" -- python3 - "$1" <<'PY'
import ctypes, os, sys, time
cu = ctypes.CDLL("libcuda.so.1")
def ck(r, what):
    if r: print("FAIL", what, r); sys.exit(1)
ck(cu.cuInit(0), "cuInit")
dev, ctx, d = ctypes.c_int(), ctypes.c_void_p(), ctypes.c_uint64()
ck(cu.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
ck(cu.cuCtxCreate_v2(ctypes.byref(ctx), 0, dev), "cuCtxCreate")
n = 48 << 20
ck(cu.cuMemAlloc_v2(ctypes.byref(d), ctypes.c_size_t(n)), "cuMemAlloc")
src = os.urandom(n)
ck(cu.cuMemcpyHtoD_v2(d, src, ctypes.c_size_t(n)), "cuMemcpyHtoD")
open(os.path.join(sys.argv[1], "step100"), "w").close()
t0 = time.time()
while not os.path.exists(os.path.join(sys.argv[1], "go")) and time.time() - t0 < 60: time.sleep(0.05)
# Copies below the striping size (8 MiB): each waits for its reply on the
# main connection, so the first reads the move notice. A striped copy in
# flight while the session moves waits on its bulk connections instead,
# and the client declares A dead (docs/architecture.md 9.17, "Not covered").
back = ctypes.create_string_buffer(n)
piece = 4 << 20
for rnd in range(3):  # calls after the move, spread out
    for off in range(0, n, piece):
        ck(cu.cuMemcpyDtoH_v2(ctypes.byref(back, off), ctypes.c_uint64(d.value + off), ctypes.c_size_t(piece)), "cuMemcpyDtoH")
    time.sleep(0.1)
print("bytes", "identical" if back.raw == src else "DIFFER", flush=True)
sys.exit(0 if back.raw == src else 1)
PY
}

# move HOW: a client on A, moved to B by `scuda migrate` (HOW=migrate) or by a drain (HOW=drain).
move() {
  local how=$1 d=$R/$1 peer=() a_pid a_addr b_addr cl sess rc arc=none
  mkdir -p "$d/sig"
  pick_gpus
  start_server b "$GPU_B" "$d/srvB.log" || return 1
  b_addr=$SERVER_ADDR
  [[ $how == drain ]] && peer=(--peer "$b_addr")
  start_server a "$GPU_A" "$d/srvA.log" "${peer[@]}" || return 1
  a_pid=$SERVER_PID a_addr=$SERVER_ADDR
  client "$d/sig" "$a_addr" >"$d/client.out" 2>"$d/client.err" &
  cl=$!
  STARTED+=("$cl")
  wait_for 30 test -e "$d/sig/step100" || { echo "$how: the client never paused: $(cat "$d/client.err")"; return 1; }
  sess=$(cuda_session_of "$a_pid")
  echo "$how: session $sess on A (device memory: $(gpu_mem_of "$sess") MiB)"
  if [[ $how == migrate ]]; then
    "$SCUDA" migrate --session "$sess" --to "$b_addr" --control "$d/a.sock" >"$d/migrate.out" 2>&1 &
    local mig=$!
    wait_for 120 log_has "$d/srvA.log" "session $sess: held for the move"
    touch "$d/sig/go"
    wait "$mig"
    echo "$how: scuda migrate rc=$?: $(cat "$d/migrate.out")"
  else
    kill -TERM "$a_pid"
    wait_for 120 log_has "$d/srvA.log" "session $sess: held for the move"
    touch "$d/sig/go"
    wait_for 30 bash -c "! ps -o stat= -p $a_pid | grep -qv Z"
    wait "$a_pid"
    arc=$?
    echo "$how: server A exited with status $arc"
  fi
  wait "$cl"
  rc=$?
  move_lines "$d/client.err" "$d/srvA.log" "$d/srvB.log"
  stop_started
  [[ $rc == 0 ]] && log_has "$d/srvB.log" "resumed here" && [[ $how == migrate || $arc == 0 ]]
}
for how in migrate drain; do
  if move "$how"; then why+=("$how moved the client, bytes identical"); else ok=0 why+=("$how failed: $R/$how"); fi
done
summary failover_dry_run "$ok" "$(IFS=';'; echo "${why[*]}")"
