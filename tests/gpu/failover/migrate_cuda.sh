#!/usr/bin/env bash
# migrate_cuda.sh [DIR]: tests/gpu/programs/migrate_phases.cu (nvcc's defaults:
# static cudart, so its kernels are a library; device globals, __managed__
# variables, cudaMallocManaged memory, streams and events) natively, then
# through SCUDA (GPU hidden) on server A, moved with `scuda migrate` to
# server B at its pause point (after phase 2 of 4). Its whole stdout must
# equal the native run's, byte for byte, and the move must have happened.
# One SUMMARY line; exit 1 on failure. Logs in DIR (default /tmp/mig_cuda).
# NVCC_FLAGS adds nvcc options: `-compress-mode=size` compresses the cubin
# (zstd), whose variables A must decompress to list. PROGRAM=migrate_graph
# runs tests/gpu/programs/migrate_graph.cu instead (graphs, executable
# graphs changed before the move), under the same contract.
set -uo pipefail
source "$(dirname "$0")/lib.sh"
R=${1:-/tmp/mig_cuda}
mkdir -p "$R"
S=$R/pause
rm -rf "$S" && mkdir -p "$S"
PROGRAM=${PROGRAM:-migrate_phases}
BIN=$R/$PROGRAM
read -ra EXTRA_FLAGS <<<"${NVCC_FLAGS:-}"
if ! nvcc -arch="${GPU_ARCH:-sm_90}" "${EXTRA_FLAGS[@]}" "$ROOT/tests/gpu/programs/$PROGRAM.cu" -o "$BIN" >"$R/build.log" 2>&1; then
  summary migrate_cuda 0 "the program did not build: $R/build.log"
  exit 1
fi
timeout 120 "$BIN" >"$R/native.out" 2>&1
NRC=$?
echo "native rc=$NRC: $(grep -c '^phase' "$R/native.out") phases"

pick_gpus
start_server b "$GPU_B" "$R/srvB.log" || exit 1
B_ADDR=$SERVER_ADDR
start_server a "$GPU_A" "$R/srvA.log" || exit 1
A_PID=$SERVER_PID A_ADDR=$SERVER_ADDR
timeout 300 bash "$HIDE" "$SCUDA" run --server "$A_ADDR" -- "$BIN" --pause-dir "$S" >"$R/scuda.out" 2>"$R/client.err" &
CL=$!
STARTED+=("$CL")
MRC=none
if wait_for 120 test -e "$S/reached"; then
  SESS=$(cuda_session_of "$A_PID")
  echo "session $SESS on A at the pause point (after phase 2); device memory in use: $(gpu_mem_of "$SESS") MiB"
  T0=$(now)
  "$SCUDA" migrate --session "$SESS" --to "$B_ADDR" --control "$R/a.sock" >"$R/migrate.out" 2>&1 &
  MIG=$!
  wait_for 120 log_has "$R/srvA.log" "session $SESS: held for the move" # images loaded ahead, the session held: let the program go on
  touch "$S/go"
  wait "$MIG"
  MRC=$?
  echo "scuda migrate rc=$MRC after $(secs_since "$T0") s: $(cat "$R/migrate.out")"
else
  echo "the program never reached its pause point (client.err: $(tail -n 2 "$R/client.err"))"
  touch "$S/go"
fi
wait "$CL"
CRC=$?
echo "client rc=$CRC"
move_lines "$R/client.err" "$R/srvA.log" "$R/srvB.log"

ok=1 why=()
((NRC == 0)) || { ok=0; why+=("native rc=$NRC"); }
if [[ $MRC != 0 ]] || ! grep -q "moved to" "$R/migrate.out"; then ok=0 why+=("not moved (migrate rc=$MRC)"); fi
log_has "$R/srvB.log" "resumed here" || { ok=0; why+=("the client never resumed on B"); }
((CRC == 0)) || { ok=0; why+=("client rc=$CRC"); }
if cmp -s "$R/native.out" "$R/scuda.out"; then
  why+=("output identical ($(wc -l <"$R/native.out") lines)")
else
  ok=0
  why+=("output differs")
  diff "$R/native.out" "$R/scuda.out" | head -n 8
fi
summary migrate_cuda "$ok" "$(IFS=';'; echo "${why[*]}")"
