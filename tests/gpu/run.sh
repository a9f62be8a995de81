#!/usr/bin/env bash
# SCUDA GPU suite (docs/architecture.md, 6 Tests). Run from the repo root on a
# GPU machine.
#
#   tests/gpu/run.sh [--native] [--no-build] [--only REGEX] [--timeout SEC] [--port N]
#
#   (default)   build, then run every program natively AND through SCUDA
#               (server on loopback, client in a mount namespace with the GPU
#               hidden); compare stdout minus lines starting "# "; plus the
#               special tests (exports, no server, SIGKILL cleanup, fault isolation).
#   --native    run every program natively only, twice (the second run checks
#               that stdout minus "# " lines is deterministic); print the results
#               table (plus the special tests that make sense without SCUDA).
#   --no-build  skip the cmake build of the product (programs are still built).
#   --only RE   run only the tests whose name matches the bash regex RE.
#   --timeout S per-test timeout in seconds (default 60).
#   --port N    server port (default: a free one).
#
# Ends with "N passed, N failed"; exits nonzero if any test failed.
# Logs: one file per test in $OUT/gpu-tests/ if $OUT is set, else build/gpu-tests/logs/.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"

MODE=scuda BUILD_PRODUCT=1 TIMEOUT=60 ONLY='' PORT=''
while (($#)); do
  case $1 in
    --native) MODE=native ;;
    --no-build) BUILD_PRODUCT=0 ;;
    --only) ONLY=$2; shift ;;
    --timeout) TIMEOUT=$2; shift ;;
    --port) PORT=$2; shift ;;
    -h | --help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "run.sh: unknown argument: $1" >&2; exit 2 ;;
  esac
  shift
done

SRC=$ROOT/tests/gpu/programs
BIN=$ROOT/build/gpu-tests
LOGDIR=${OUT:+$OUT/gpu-tests}
LOGDIR=${LOGDIR:-$BIN/logs}
SCUDA=$ROOT/build/bin/scuda
SHIM=$ROOT/build/lib/libcuda.so.1
ARCH=${GPU_ARCH:-sm_90}
EXPORTS=$ROOT/tests/gpu/data/libcuda-580-exports.txt
# Programs that are also built with -cudart shared (as NAME_cudart_shared).
SHARED_CUDART=(vector_add rt_device_query memcpy_kinds streams_events device_printf host_callback cuda_graph graph_nodes)
RESUME_WITHIN_S=3     # the suite's server keeps a broken session this long for a resume
KILL_DEADLINE_S=$((RESUME_WITHIN_S + 2))  # SIGKILL test: session gone and memory back within this
NO_SERVER_LIMIT_S=5   # no-server test: the client must give up within this

mkdir -p "$BIN" "$LOGDIR"
NPASS=0 NFAIL=0
RESULTS=()

# record NAME PASS|FAIL DETAIL
record() {
  local line
  line=$(printf '%-4s %-34s %s' "$2" "$1" "$3")
  RESULTS+=("$line")
  echo "$line"
  if [[ $2 == PASS ]]; then NPASS=$((NPASS + 1)); else NFAIL=$((NFAIL + 1)); fi
}

selected() { [[ -z $ONLY || $1 =~ $ONLY ]]; }
now_ms() { date +%s%3N; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
no_comments() { grep -v '^# ' "$1" || true; }  # drop the non-deterministic lines

# ---------------------------------------------------------------- hiding the GPU
HIDDEN=(bash "$ROOT/tests/gpu/hide.sh")

# hidden_run CMD...: run CMD (with the per-test timeout) where the GPU is hidden.
hidden_run() { timeout -k 5 "$TIMEOUT" "${HIDDEN[@]}" "$@"; }

# ---------------------------------------------------------------- server
# SCUDA_GPU_TLS=1: the whole suite over TLS (tls.sh).
source "$ROOT/tests/gpu/tls.sh"
SERVER_PID=''
start_server() {
  PORT=${PORT:-$(free_port)}
  SCUDA_LOG=${SCUDA_SERVER_LOG:-info} "$SCUDA" server --listen "127.0.0.1:$PORT" "${SERVER_TLS_ARGS[@]}" \
    --resume-within "$RESUME_WITHIN_S" \
    >"$LOGDIR/server.log" 2>&1 &
  SERVER_PID=$!
  for _ in $(seq 100); do
    if ! kill -0 "$SERVER_PID" 2>/dev/null; then
      echo "scuda server exited at start; see $LOGDIR/server.log" >&2
      tail -n 20 "$LOGDIR/server.log" >&2 || true
      exit 1
    fi
    if (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; then
      echo "scuda server pid $SERVER_PID listening on 127.0.0.1:$PORT"
      tls_trust "$LOGDIR/server.log"
      return 0
    fi
    sleep 0.1
  done
  echo "scuda server did not listen on 127.0.0.1:$PORT within 10 s" >&2
  exit 1
}
stop_server() {
  # Only the server we started, by its PID.
  if [[ -n $SERVER_PID ]] && kill -0 "$SERVER_PID" 2>/dev/null; then
    kill "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
  fi
}
trap stop_server EXIT

# PIDs whose parent is $1 (the server's session processes).
children_of() {
  local p pp
  for p in /proc/[0-9]*; do
    pp=$(awk '/^PPid:/{print $2}' "$p/status" 2>/dev/null || true)
    if [[ $pp == "$1" ]]; then echo "${p#/proc/}"; fi
  done
}
# $1 and all its descendants, deepest last.
tree_of() {
  local c
  echo "$1"
  for c in $(children_of "$1"); do tree_of "$c"; done
}
gpu_mem_used() { nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits | head -n1 | tr -d ' '; }

# ---------------------------------------------------------------- build
if ((BUILD_PRODUCT)); then
  echo "== building the product"
  if ! bash "$ROOT/tests/gpu/build_product.sh" "$LOGDIR/product-build.log"; then
    echo "product build FAILED (log: $LOGDIR/product-build.log)"
    exit 1
  fi
fi
if [[ $MODE == scuda ]]; then
  for f in "$SCUDA" "$SHIM"; do
    [[ -e $f ]] || { echo "missing $f: build the product first (or drop --no-build)" >&2; exit 1; }
  done
fi

CUDA_LIB=$(cd "$(dirname "$(command -v nvcc)")/../lib64" && pwd)

# compile_one "NAME|SRC|FLAGS": one program; failures are reported as test failures later.
compile_one() {
  local name src flags
  IFS='|' read -r name src flags <<<"$1"
  rm -f "$BIN/$name"
  # shellcheck disable=SC2086  # FLAGS is split into words on purpose
  nvcc -arch="$ARCH" "$src" -o "$BIN/$name" $flags >"$BIN/build-logs/$name.log" 2>&1 ||
    echo "build failed: $name (log: $BIN/build-logs/$name.log)"
}
export -f compile_one
export ARCH BIN

echo "== building test programs into $BIN"
mkdir -p "$BIN/build-logs"
# Module images for drv_module_* and drv_library, beside the programs.
K=$SRC/kernels/module_kernels.cu
{
  nvcc -arch="$ARCH" -ptx "$K" -o "$BIN/module_kernels.ptx" &&
    nvcc -arch="$ARCH" -cubin "$K" -o "$BIN/module_kernels.cubin" &&
    nvcc -gencode "arch=compute_${ARCH#sm_},code=$ARCH" -gencode "arch=compute_${ARCH#sm_},code=compute_${ARCH#sm_}" \
      -fatbin "$K" -o "$BIN/module_kernels.fatbin"
} >"$BIN/build-logs/module_kernels.log" 2>&1 || echo "build failed: module images (log: $BIN/build-logs/module_kernels.log)"

# Job list "NAME|SRC|FLAGS". Extra flags come from "// BUILD:" lines in each source.
JOBS=$BIN/jobs.txt
: >"$JOBS"
for src in "$SRC"/*.cu; do
  name=$(basename "$src" .cu)
  flags=$(sed -n 's#^// BUILD:##p' "$src" | tr '\n' ' ')
  flags=${flags//@CUDA_LIB@/$CUDA_LIB}
  echo "$name|$src|$flags" >>"$JOBS"
  for s in "${SHARED_CUDART[@]}"; do
    if [[ $s == "$name" ]]; then
      echo "${name}_cudart_shared|$src|$flags -cudart shared -Xlinker -rpath=$CUDA_LIB" >>"$JOBS"
    fi
  done
done
# Everything is built (the special tests use several programs); --only filters what runs.
# shellcheck disable=SC2016
xargs -d '\n' -P "$(nproc)" -n1 bash -c 'compile_one "$1"' _ <"$JOBS" || true
ALL=() TESTS=()
while IFS='|' read -r name _; do
  ALL+=("$name")
  if selected "$name"; then TESTS+=("$name"); fi
done <"$JOBS"
echo "built $(for t in "${ALL[@]}"; do if [[ -x $BIN/$t ]]; then echo; fi; done | wc -l) of ${#ALL[@]} programs"

# ---------------------------------------------------------------- runners
# run_native LOGPREFIX PROG ARGS...: stdout/stderr to LOGPREFIX.{out,err}; sets RC, MS.
run_native() {
  local p=$1 prog=$2; shift 2
  local t0; t0=$(now_ms)
  RC=0
  (cd "$BIN" && timeout -k 5 "$TIMEOUT" "./$prog" "$@") >"$p.out" 2>"$p.err" || RC=$?
  MS=$(($(now_ms) - t0))
}
# run_scuda LOGPREFIX PROG ARGS...: same, as a SCUDA client with the GPU hidden.
run_scuda() {
  local p=$1 prog=$2; shift 2
  local t0; t0=$(now_ms)
  RC=0
  (cd "$BIN" && hidden_run "$SCUDA" run --server "127.0.0.1:$PORT" -- "./$prog" "$@") >"$p.out" 2>"$p.err" || RC=$?
  MS=$(($(now_ms) - t0))
}
# write_log NAME: the per-test log from the pieces in $LOGDIR/.tmp
write_log() {
  local name=$1 f
  {
    for f in "$LOGDIR/.tmp/$name".*; do
      [[ -e $f ]] || continue
      echo "===== ${f##*/}"
      cat "$f"
    done
  } >"$LOGDIR/$name.log"
  rm -f "$LOGDIR/.tmp/$name".*
}
mkdir -p "$LOGDIR/.tmp"

describe_rc() {
  case $1 in
    0) echo "ok" ;;
    97) echo "GPU hiding failed" ;;
    124 | 137) echo "timeout ${TIMEOUT}s" ;;
    *) echo "rc=$1" ;;
  esac
}

# ---------------------------------------------------------------- regular tests
[[ $MODE == scuda ]] && start_server
echo "== running ${#TESTS[@]} programs ($MODE)"
for t in "${TESTS[@]}"; do
  T=$LOGDIR/.tmp/$t
  if [[ ! -x $BIN/$t ]]; then
    cp "$BIN/build-logs/$t.log" "$T.build" 2>/dev/null || true
    write_log "$t"
    record "$t" FAIL "build failed"
    continue
  fi
  run_native "$T.native" "$t"
  NRC=$RC NMS=$MS
  echo "rc=$NRC ms=$NMS" >"$T.native.rc"
  native_ok=0
  if [[ $NRC == 0 ]] && grep -qx PASS "$T.native.out"; then native_ok=1; fi
  if [[ $MODE == native ]]; then
    # A second run checks the output contract: stdout minus "# " lines is deterministic.
    if ((native_ok)); then
      run_native "$T.native2" "$t"
      echo "rc=$RC ms=$MS" >"$T.native2.rc"
      diff <(no_comments "$T.native.out") <(no_comments "$T.native2.out") >"$T.diff" || true
    fi
    if ((!native_ok)); then
      record "$t" FAIL "native $(describe_rc "$NRC")"
    elif [[ $RC != 0 || -s $T.diff ]]; then
      record "$t" FAIL "second native run differs (rc=$RC, $(grep -c '^[<>]' "$T.diff") lines)"
    else
      record "$t" PASS "${NMS} ms"
    fi
    write_log "$t"
    continue
  fi
  run_scuda "$T.scuda" "$t"
  SRC_RC=$RC SMS=$MS
  echo "rc=$SRC_RC ms=$SMS" >"$T.scuda.rc"
  diff <(no_comments "$T.native.out") <(no_comments "$T.scuda.out") >"$T.diff" || true
  if ((!native_ok)); then
    record "$t" FAIL "native run failed: $(describe_rc "$NRC")"
  elif [[ $SRC_RC != "$NRC" ]]; then
    record "$t" FAIL "scuda $(describe_rc "$SRC_RC"), native rc=$NRC"
  elif [[ -s $T.diff ]]; then
    record "$t" FAIL "stdout differs ($(grep -c '^[<>]' "$T.diff") lines)"
  else
    record "$t" PASS "native ${NMS} ms, scuda ${SMS} ms"
  fi
  write_log "$t"
done

# ---------------------------------------------------------------- special tests
# Each is one test. A leading "special:" keeps them apart from programs.

# (0) The mount namespace really hides the GPU: without SCUDA, a driver-API
#     program cannot load libcuda.so.1 and a runtime program finds no device.
special_hidden() {
  local name=special:gpu_hidden T=$LOGDIR/.tmp/special_gpu_hidden rc1=0 rc2=0
  (cd "$BIN" && hidden_run ./drv_probe_init) >"$T.probe.out" 2>"$T.probe.err" || rc1=$?
  (cd "$BIN" && hidden_run ./rt_device_query) >"$T.rtquery.out" 2>"$T.rtquery.err" || rc2=$?
  # What the namespace looks like, for the log.
  # shellcheck disable=SC2016
  hidden_run bash -c 'ls -la /usr/local/nvidia/lib64 /dev/nvidia* 2>&1
    for l in /lib/x86_64-linux-gnu/libcuda.so.1 $(ldconfig -p | awk "/libcuda\\.so\\.1 /{print \$NF}"); do
      echo "$l -> $(readlink "$l" || echo "(not a link)"): $([ -e "$l" ] && echo present || echo dangling/absent)"
    done' \
    >"$T.namespace" 2>&1 || true
  echo "probe rc=$rc1 rt_device_query rc=$rc2" >"$T.rc"
  write_log special_gpu_hidden
  if [[ $rc1 == 97 || $rc2 == 97 ]]; then
    record $name FAIL "hiding failed: $(grep -m1 'hidden_run:' "$LOGDIR/special_gpu_hidden.log" || true)"
  elif [[ $rc1 == 0 || $rc2 == 0 ]] || grep -q 'cuInit = 0 ' "$LOGDIR/special_gpu_hidden.log"; then
    record $name FAIL "a program still reached the GPU inside the namespace"
  else
    record $name PASS "probe rc=$rc1, rt_device_query rc=$rc2"
  fi
}

# (1) The shim exports every symbol of driver 580's libcuda.so.1.
special_exports() {
  local name=special:exports T=$LOGDIR/.tmp/special_exports
  nm -D --defined-only "$SHIM" | awk '{print $NF}' | sed 's/@.*//' | LC_ALL=C sort -u >"$T.have" || true
  LC_ALL=C sort -u "$EXPORTS" | LC_ALL=C comm -23 - "$T.have" >"$T.missing"
  local miss; miss=$(wc -l <"$T.missing")
  rm -f "$T.have"
  write_log special_exports
  if ((miss == 0)); then record $name PASS "$(wc -l <"$EXPORTS") symbols"; else record $name FAIL "$miss of $(wc -l <"$EXPORTS") symbols missing"; fi
}

# (2) No server reachable: `scuda run` fails fast and names the address, and a
#     driver-API probe run anyway (--no-check skips run's own reachability
#     check) sees cuInit = CUDA_ERROR_NO_DEVICE (100) from the client library.
special_no_server() {
  local name=special:no_server T=$LOGDIR/.tmp/special_no_server closed rc=0 prc=0 t0 ms
  closed=$(free_port)  # bound then released: nothing listens there
  t0=$(now_ms)
  (cd "$BIN" && hidden_run "$SCUDA" run --server "127.0.0.1:$closed" -- ./vector_add) >"$T.vadd.out" 2>"$T.vadd.err" || rc=$?
  ms=$(($(now_ms) - t0))
  (cd "$BIN" && hidden_run "$SCUDA" run --no-check --server "127.0.0.1:$closed" -- ./drv_probe_init) >"$T.probe.out" 2>"$T.probe.err" || prc=$?
  echo "vector_add rc=$rc ms=$ms; probe rc=$prc" >"$T.rc"
  local why=''
  [[ $rc != 0 && $rc != 97 ]] || why+="vector_add rc=$rc; "
  ((ms < NO_SERVER_LIMIT_S * 1000)) || why+="took ${ms} ms; "
  grep -qF "127.0.0.1:$closed" "$T.vadd.err" || why+="stderr does not name 127.0.0.1:$closed; "
  grep -q '^cuInit = 100 ' "$T.probe.out" || why+="probe printed '$(head -n1 "$T.probe.out" 2>/dev/null)'; "
  write_log special_no_server
  if [[ -z $why ]]; then record $name PASS "failed in ${ms} ms"; else record $name FAIL "$why"; fi
}

# (3) A client killed with SIGKILL while it holds 2 GiB: its session waits
#     --resume-within for the client to come back (it cannot tell a dead
#     client from a broken path), then within 2 s more its process (SCUDA)
#     is gone and the GPU's used memory is back to its baseline.
special_sigkill() {
  local name=special:sigkill_cleanup T=$LOGDIR/.tmp/special_sigkill base during pid sessions_before new_sessions='' victims=()
  base=$(gpu_mem_used || true)
  if [[ ! $base =~ ^[0-9]+$ ]]; then record $name FAIL "nvidia-smi memory.used unreadable: '$base'"; return; fi
  if [[ $MODE == scuda ]]; then
    sessions_before=$(children_of "$SERVER_PID" | LC_ALL=C sort)
    (cd "$BIN" && hidden_run "$SCUDA" run --server "127.0.0.1:$PORT" -- ./alloc_hold --forever) >"$T.out" 2>"$T.err" &
  else
    (cd "$BIN" && timeout -k 5 "$TIMEOUT" ./alloc_hold --forever) >"$T.out" 2>"$T.err" &
  fi
  pid=$!
  for _ in $(seq 300); do
    if grep -q '^allocated' "$T.out" 2>/dev/null || ! kill -0 "$pid" 2>/dev/null; then break; fi
    sleep 0.1
  done
  if ! grep -q '^allocated' "$T.out"; then
    mapfile -t victims < <(tree_of "$pid")
    kill -KILL "${victims[@]}" 2>/dev/null || true
    { wait "$pid"; } 2>/dev/null || true
    write_log special_sigkill
    record $name FAIL "client never reported its allocation"
    return
  fi
  during=$(gpu_mem_used || true)
  [[ $during =~ ^[0-9]+$ ]] || during=0
  if [[ $MODE == scuda ]]; then
    new_sessions=$(LC_ALL=C comm -13 <(echo "$sessions_before") <(children_of "$SERVER_PID" | LC_ALL=C sort) | tr '\n' ' ')
  fi
  # SIGKILL the whole client: the subshell, timeout/unshare, scuda run, the program.
  local t0
  mapfile -t victims < <(tree_of "$pid")
  t0=$(now_ms)
  kill -KILL "${victims[@]}" 2>/dev/null || true
  local now used gone ms=-1
  for _ in $(seq 100); do
    used=$(gpu_mem_used || true)
    [[ $used =~ ^[0-9]+$ ]] || used=999999
    gone=1
    for s in $new_sessions; do if kill -0 "$s" 2>/dev/null; then gone=0; fi; done
    now=$(now_ms)
    if ((used <= base + 256 && gone)); then ms=$((now - t0)); break; fi
    if ((now - t0 > 10000)); then break; fi
    sleep 0.1
  done
  { wait "$pid"; } 2>/dev/null || true  # (the braces also silence bash's "Killed")
  echo "baseline=${base}MiB during=${during}MiB after=${used}MiB sessions=[$new_sessions] killed=[${victims[*]}] cleanup_ms=$ms" >"$T.info"
  write_log special_sigkill
  if ((during < base + 1800)); then
    record $name FAIL "2 GiB allocation not visible (baseline $base, during $during MiB)"
  elif [[ $MODE == scuda && -z ${new_sessions// /} ]]; then
    record $name FAIL "no session process found for the client"
  elif ((ms < 0 || ms > KILL_DEADLINE_S * 1000)); then
    record $name FAIL "not cleaned up within ${KILL_DEADLINE_S}s (used ${used} MiB vs baseline ${base}; ms=$ms)"
  else
    record $name PASS "cleaned up in ${ms} ms (baseline ${base} MiB, during ${during} MiB)"
  fi
}

# (4) One client faults (illegal address, sticky) and stays alive; a second
#     client on the same server meanwhile passes vector_add.
special_fault_isolation() {
  local name=special:fault_isolation T=$LOGDIR/.tmp/special_fault_isolation pid arc=0
  if [[ $MODE == scuda ]]; then
    (cd "$BIN" && hidden_run "$SCUDA" run --server "127.0.0.1:$PORT" -- ./illegal_address --hold 4) >"$T.faulty.out" 2>"$T.faulty.err" &
  else
    (cd "$BIN" && timeout -k 5 "$TIMEOUT" ./illegal_address --hold 4) >"$T.faulty.out" 2>"$T.faulty.err" &
  fi
  pid=$!
  for _ in $(seq 300); do
    if grep -q '^illegal address reported' "$T.faulty.out" 2>/dev/null || ! kill -0 "$pid" 2>/dev/null; then break; fi
    sleep 0.1
  done
  local faulted=0 still=0
  grep -q '^illegal address reported' "$T.faulty.out" && faulted=1
  kill -0 "$pid" 2>/dev/null && still=1
  if [[ $MODE == scuda ]]; then run_scuda "$T.second" vector_add; else run_native "$T.second" vector_add; fi
  local brc=$RC second_pass=0
  if grep -qx PASS "$T.second.out"; then second_pass=1; fi
  wait "$pid" || arc=$?
  echo "faulty rc=$arc (alive during second client: $still); second rc=$brc" >"$T.rc"
  write_log special_fault_isolation
  if ((!faulted)); then
    record $name FAIL "faulting client did not report cudaErrorIllegalAddress"
  elif [[ $brc != 0 ]] || ((!second_pass)); then
    record $name FAIL "second client failed ($(describe_rc "$brc"))"
  elif ((!still)); then
    record $name FAIL "faulting client exited before the second client ran"
  elif [[ $arc != 0 ]]; then
    record $name FAIL "faulting client rc=$arc"
  else
    record $name PASS "second client passed while the first was poisoned"
  fi
}

echo "== special tests"
selected special:gpu_hidden && special_hidden
if [[ $MODE == scuda ]]; then
  selected special:exports && special_exports
  selected special:no_server && special_no_server
fi
selected special:sigkill_cleanup && special_sigkill
selected special:fault_isolation && special_fault_isolation
rmdir "$LOGDIR/.tmp" 2>/dev/null || true

echo
echo "== results ($MODE)"
if ((${#RESULTS[@]})); then printf '%s\n' "${RESULTS[@]}"; fi
echo "$NPASS passed, $NFAIL failed"
((NFAIL == 0))
