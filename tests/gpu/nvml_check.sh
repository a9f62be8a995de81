#!/usr/bin/env bash
# NVML through SCUDA vs native, on a GPU machine (the NVML shim, docs/nvml.md).
# Run from the repo root:
#
#   tests/gpu/nvml_check.sh [--no-build] [--port N]
#
# Natively, then through SCUDA (`scuda server` on loopback; the client in a
# mount namespace with the GPU hidden, tests/gpu/hide.sh, and only the shims
# on LD_LIBRARY_PATH via `scuda run`):
#   nvidia-smi, -L, -q, --query-gpu=...  same output apart from timestamps,
#                                        live readings and the process list
#   the process list                     shows the session of a CUDA client
#                                        running through SCUDA, with its memory
#   pynvml                               count, name, memory, a utilization
#                                        loop; an invalid index gives
#                                        NVML_ERROR_INVALID_ARGUMENT
#   torch.cuda.utilization()/memory_usage()
#   no server                            nvmlInit fails within 5 s naming the address
# and, with the GPU visible and no server, the shim passing through to the
# machine's NVML (SCUDA_NVML_TRACE=1 logs every call and private-table slot).
# SCUDA_BUILD=DIR uses DIR/bin/scuda and DIR/lib (default: build, built here
# unless --no-build). Logs and diffs: $OUT/nvml (if $OUT is set) or build/nvml-check.
# Ends with "N passed, N failed".
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"

BUILD_PRODUCT=1 PORT=''
while (($#)); do
  case $1 in
    --no-build) BUILD_PRODUCT=0 ;;
    --port) PORT=$2; shift ;;
    -h | --help) sed -n '2,22p' "$0"; exit 0 ;;
    *) echo "nvml_check.sh: unknown argument: $1" >&2; exit 2 ;;
  esac
  shift
done

BUILD=${SCUDA_BUILD:-$ROOT/build}
BUILD=$(cd "$BUILD" 2>/dev/null && pwd || echo "$BUILD")
LOG=${OUT:+$OUT/nvml}
LOG=${LOG:-$ROOT/build/nvml-check}
mkdir -p "$LOG"
PY=${PYTHON:-python3}
SMI=$(command -v nvidia-smi || true)
HIDE=(bash "$ROOT/tests/gpu/hide.sh")
NPASS=0 NFAIL=0
pass() { echo "PASS $1${2:+  ($2)}"; NPASS=$((NPASS + 1)); }
fail() { echo "FAIL $1${2:+  ($2)}"; NFAIL=$((NFAIL + 1)); }
now_ms() { date +%s%3N; }

if ((BUILD_PRODUCT)) && [[ -z ${SCUDA_BUILD:-} ]]; then
  echo "== building the product"
  bash "$ROOT/tests/gpu/build_product.sh" "$LOG/build.log" || { echo "build FAILED"; exit 1; }
fi
SCUDA=$BUILD/bin/scuda
for f in "$SCUDA" "$BUILD/lib/libcuda.so.1" "$BUILD/lib/libnvidia-ml.so.1"; do
  [[ -e $f ]] || { echo "missing $f (nvml.h is needed to build the NVML shim: pip install nvidia-nvml-dev)"; exit 1; }
done
[[ -n $SMI ]] || { echo "no nvidia-smi here"; exit 1; }

# ---------------------------------------------------------------- server
PORT=${PORT:-$($PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')}
SERVER_PID='' BG_PID=''
cleanup() {
  [[ -n $BG_PID ]] && kill "$BG_PID" 2>/dev/null
  [[ -n $SERVER_PID ]] && kill "$SERVER_PID" 2>/dev/null && wait "$SERVER_PID" 2>/dev/null
}
trap cleanup EXIT
# SCUDA_GPU_TLS=1: over TLS (tls.sh).
source "$ROOT/tests/gpu/tls.sh"
SCUDA_LOG=info "$SCUDA" server --listen "127.0.0.1:$PORT" "${SERVER_TLS_ARGS[@]}" >"$LOG/server.log" 2>&1 &
SERVER_PID=$!
for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break; sleep 0.1; done
tls_trust "$LOG/server.log"

# scuda_run CMD...: CMD through SCUDA with the GPU hidden.
scuda_run() { timeout -k 5 60 "${HIDE[@]}" env SCUDA_LIB_DIR="$BUILD/lib" "$SCUDA" run --server "127.0.0.1:$PORT" -- "$@"; }

# ---------------------------------------------------------------- normalizing
# norm KIND FILE: what must match. Timestamps, live readings and the process
# list are masked; KIND is smi (the default table), q (-q) or csv.
cat >"$LOG/norm.py" <<'EOF'
import re, sys
kind, path = sys.argv[1], sys.argv[2]
lines = open(path, errors="replace").read().splitlines()
out = []
if kind == "smi":
    for l in lines[1:]:                      # line 1 is the date
        if "Processes:" in l:
            break
        l = re.sub(r"\d+(C|W|MiB|%)", r"#\1", l)
        l = re.sub(r"\bP\d+\b", "P#", l)
        out.append(re.sub(r"\s+", " ", l))
elif kind == "q":
    LIVE = re.compile(r"^(Timestamp|Fan Speed|Performance State|Used|Free|Gpu|Memory|Encoder|Decoder|JPEG|OFA|"
                      r"Average Power Draw|Instantaneous Power Draw|Power Draw|GPU Current Temp|Memory Current Temp|"
                      r"GPU T.Limit Temp|Graphics|SM|Video|Current|Tx Throughput|Rx Throughput|Idle|"
                      r"Applications Clocks Setting|SW Power Cap|HW Slowdown|HW Thermal Slowdown|"
                      r"HW Power Brake Slowdown|Sync Boost|SW Thermal Slowdown|Display Clock Setting|"
                      r"Sampling Period|Max|Min|Avg|Energy Consumption|Volatile|Aggregate)\b")
    stack = []
    skip_indent = None
    for l in lines:
        if not l.strip():
            continue
        ind = len(l) - len(l.lstrip())
        key = l.strip().split(":", 1)[0].strip()
        if skip_indent is not None and ind > skip_indent:
            continue
        skip_indent = None
        if key == "Processes":                # the process list: not compared
            skip_indent = ind
            out.append("Processes")
            continue
        while stack and stack[-1][0] >= ind:
            stack.pop()
        if ":" not in l:
            stack.append((ind, key))
        sect = "/".join(k for _, k in stack)
        live = LIVE.match(key) and re.search(r"Usage|Utilization|Temperature|Power|Clocks|Link|Clocks Event|"
                                            r"Voltage|Stats|Throughput|Counters|Readings|Samples", sect + "/" + key)
        if sect.split("/")[-1] in ("Max Clocks", "Max Customer Boost Clocks", "Default Applications Clocks",
                                   "Applications Clocks"):
            live = False
        if key in ("Timestamp", "Fan Speed", "Performance State"):
            live = True
        if live and ":" in l:
            l = l.split(":", 1)[0] + ": #"
        out.append(re.sub(r"\s+", " ", l.strip()) + ("   [" + sect + "]" if ":" in l else ""))
elif kind == "exact":
    out = lines
elif kind == "csv":
    for l in lines:
        f = [x.strip() for x in l.split(",")]
        if len(f) == 6 and not l.startswith("name"):
            f[3] = f[4] = f[5] = "#"              # memory.used, utilization, temperature
        out.append(", ".join(f))
print("\n".join(out))
EOF
norm() { $PY "$LOG/norm.py" "$1" "$2"; }

# compare NAME KIND: native vs scuda outputs of NAME, after norm.
compare() {
  local name=$1 kind=$2
  norm "$kind" "$LOG/$name.native" >"$LOG/$name.native.norm"
  norm "$kind" "$LOG/$name.scuda" >"$LOG/$name.scuda.norm"
  diff "$LOG/$name.native" "$LOG/$name.scuda" >"$LOG/$name.rawdiff" 2>&1
  local raw; raw=$(grep -c '^[<>]' "$LOG/$name.rawdiff" || true)
  if diff "$LOG/$name.native.norm" "$LOG/$name.scuda.norm" >"$LOG/$name.diff" 2>&1 &&
     [[ -s $LOG/$name.scuda ]] && [[ $(cat "$LOG/$name.scuda.rc") == "$(cat "$LOG/$name.native.rc")" ]]; then
    pass "$name" "$raw raw lines differ, all live readings"
  else
    fail "$name" "see $LOG/$name.diff"
    head -n 40 "$LOG/$name.diff"
  fi
}

# both NAME ARGS...: run nvidia-smi ARGS natively and through SCUDA.
both() {
  local name=$1; shift
  "$SMI" "$@" >"$LOG/$name.native" 2>"$LOG/$name.native.err"; echo $? >"$LOG/$name.native.rc"
  local t0; t0=$(now_ms)
  scuda_run "$SMI" "$@" >"$LOG/$name.scuda" 2>"$LOG/$name.scuda.err"; echo $? >"$LOG/$name.scuda.rc"
  echo "# $name through SCUDA: $(($(now_ms) - t0)) ms" >>"$LOG/timings.txt"
}

{ echo "nvidia-smi: $SMI -> $(readlink -f "$SMI")"; "$SMI" --version; $PY -c 'import pynvml; print("pynvml", pynvml.__file__)'
  ldconfig -p | grep -E 'libnvidia-ml|libcuda\.so'; } >"$LOG/env.txt" 2>&1

echo "== nvidia-smi: native vs SCUDA (GPU hidden)"
QUERY=--query-gpu=name,uuid,memory.total,memory.used,utilization.gpu,temperature.gpu
both smi
both smi-L -L
both smi-q -q
both smi-query "$QUERY" --format=csv
compare smi smi
compare smi-L exact
compare smi-q q
compare smi-query csv

# ---------------------------------------------------------------- pynvml
cat >"$LOG/pynvml_check.py" <<'EOF'
import time
import pynvml as N
N.nvmlInit()
n = N.nvmlDeviceGetCount()
print("count", n)
for i in range(n):
    h = N.nvmlDeviceGetHandleByIndex(i)
    m = N.nvmlDeviceGetMemoryInfo(h)
    print("device", i, N.nvmlDeviceGetName(h), N.nvmlDeviceGetUUID(h), "memory.total", m.total)
    for _ in range(10):
        u = N.nvmlDeviceGetUtilizationRates(h)
        assert 0 <= u.gpu <= 100 and 0 <= u.memory <= 100
        print("# utilization", u.gpu, u.memory)
        time.sleep(0.02)
    print("utilization loop ok")
try:
    N.nvmlDeviceGetHandleByIndex(n)
    print("invalid index: no error")
except N.NVMLError as e:
    print("invalid index:", e.value, "NVML_ERROR_INVALID_ARGUMENT" if e.value == N.NVML_ERROR_INVALID_ARGUMENT else "?", str(e))
N.nvmlShutdown()
EOF
echo "== pynvml"
$PY "$LOG/pynvml_check.py" >"$LOG/pynvml.native" 2>&1
scuda_run $PY "$LOG/pynvml_check.py" >"$LOG/pynvml.scuda" 2>"$LOG/pynvml.scuda.err"
if diff <(grep -v '^# ' "$LOG/pynvml.native") <(grep -v '^# ' "$LOG/pynvml.scuda") >"$LOG/pynvml.diff" &&
   grep -q "utilization loop ok" "$LOG/pynvml.scuda" && grep -q "NVML_ERROR_INVALID_ARGUMENT" "$LOG/pynvml.scuda"; then
  pass pynvml "$(grep -v '^# ' "$LOG/pynvml.scuda" | tr '\n' ';' | cut -c1-200)"
else
  fail pynvml "see $LOG/pynvml.diff"; cat "$LOG/pynvml.diff" "$LOG/pynvml.scuda.err" | head -n 20
fi

# ---------------------------------------------------------------- torch
echo "== torch.cuda.utilization() / memory_usage()"
TORCH='import torch
x = torch.ones(1 << 26, device="cuda")
u, m = torch.cuda.utilization(), torch.cuda.memory_usage()
assert 0 <= u <= 100 and 0 <= m <= 100, (u, m)
print("torch utilization ok", type(u).__name__, type(m).__name__)'
$PY -c "$TORCH" >"$LOG/torch.native" 2>&1
scuda_run $PY -c "$TORCH" >"$LOG/torch.scuda" 2>"$LOG/torch.scuda.err"
if grep -q "torch utilization ok" "$LOG/torch.scuda" && diff -q "$LOG/torch.native" "$LOG/torch.scuda" >/dev/null; then
  pass torch "$(cat "$LOG/torch.scuda")"
else
  fail torch "$(tail -n 3 "$LOG/torch.scuda" "$LOG/torch.scuda.err" | tr '\n' ' ')"
fi

# ---------------------------------------------------------------- process list
echo "== process list: a CUDA client through SCUDA holding 2 GiB"
HOLD='import torch, time
x = torch.empty(2 << 30, dtype=torch.uint8, device="cuda")
torch.cuda.synchronize()
print("holding", flush=True)
time.sleep(60)'
sessions_before=$(grep -c ': session [0-9]' "$LOG/server.log" || true)
scuda_run $PY -c "$HOLD" >"$LOG/hold.out" 2>&1 &
BG_PID=$!
for _ in $(seq 300); do grep -q holding "$LOG/hold.out" && break; sleep 0.1; done
HOLD_SESSIONS=$(grep -o ': session [0-9]*' "$LOG/server.log" | tail -n +"$((sessions_before + 1))" | awk '{print $3}' | tr '\n' ' ')
PROCS='import pynvml as N
N.nvmlInit()
h = N.nvmlDeviceGetHandleByIndex(0)
for p in N.nvmlDeviceGetComputeRunningProcesses(h):
    print("process", p.pid, p.usedGpuMemory // (1 << 20), "MiB", N.nvmlSystemGetProcessName(p.pid))'
scuda_run $PY -c "$PROCS" >"$LOG/procs.scuda" 2>&1
scuda_run "$SMI" >"$LOG/smi-procs.scuda" 2>&1
"$SMI" >"$LOG/smi-procs.native" 2>&1
ok=0
for s in $HOLD_SESSIONS; do
  if awk -v p="$s" '$1 == "process" && $2 == p && $3 >= 2048 {f = 1} END {exit !f}' "$LOG/procs.scuda" &&
     grep -Eq "[[:space:]]$s[[:space:]].*[0-9]+MiB" "$LOG/smi-procs.scuda"; then ok=1; fi
done
if ((ok)); then
  pass process-list "sessions $HOLD_SESSIONS: $(grep '^process' "$LOG/procs.scuda" | tr '\n' ';')"
else
  fail process-list "sessions '$HOLD_SESSIONS'; pynvml: $(tr '\n' ';' <"$LOG/procs.scuda" | cut -c1-300)"
fi
sed -n '/Processes:/,$p' "$LOG/smi-procs.scuda" | head -n 12
kill "$BG_PID" 2>/dev/null; wait "$BG_PID" 2>/dev/null; BG_PID=''

# ---------------------------------------------------------------- no server
echo "== no server"
CLOSED=$($PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
t0=$(now_ms)
timeout 20 "${HIDE[@]}" env SCUDA_LIB_DIR="$BUILD/lib" "$SCUDA" run --no-check --server "127.0.0.1:$CLOSED" -- \
  $PY -c 'import pynvml
try:
    pynvml.nvmlInit(); print("nvmlInit: success")
except pynvml.NVMLError as e:
    print("nvmlInit:", e.value, e)' >"$LOG/noserver.out" 2>"$LOG/noserver.err"
took=$(($(now_ms) - t0))
if grep -q "nvmlInit: 9" "$LOG/noserver.out" && grep -q "127.0.0.1:$CLOSED" "$LOG/noserver.err" && ((took < 5000)); then
  pass no-server "${took} ms: $(head -c 160 "$LOG/noserver.err")"
else
  fail no-server "${took} ms; $(cat "$LOG/noserver.out") $(head -c 300 "$LOG/noserver.err")"
fi

# ---------------------------------------------------------------- passthrough
# No server configured, GPU visible: the shim hands every call to the
# machine's NVML. The trace (every call, every private-table slot with its
# arguments) is how the slots nvidia-smi uses were found.
echo "== passthrough (no server, GPU visible)"
PHOME=$(mktemp -d)
for a in "" -L -q; do
  name=pass${a:-smi}
  env -u SCUDA_SERVER HOME="$PHOME" LD_LIBRARY_PATH="$BUILD/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
    SCUDA_NVML_TRACE=1 "$SMI" $a >"$LOG/$name.out" 2>"$LOG/$name.trace"
done
if diff <(norm smi "$LOG/smi.native") <(norm smi "$LOG/passsmi.out") >/dev/null &&
   diff <(norm q "$LOG/smi-q.native") <(norm q "$LOG/pass-q.out") >"$LOG/pass-q.diff" &&
   grep -q "scuda-nvml-trace" "$LOG/passsmi.trace"; then
  pass passthrough "$(grep -c 'scuda-nvml-trace' "$LOG/pass-q.trace") calls traced in -q"
else
  fail passthrough "see $LOG/pass-q.diff, $LOG/passsmi.trace"
fi
# nvidia-smi hands every line it prints to private slot 26 too; the shim
# answers it NOT_SUPPORTED. Passing through with that slot skipped shows
# nvidia-smi prints all the same.
env -u SCUDA_SERVER HOME="$PHOME" LD_LIBRARY_PATH="$BUILD/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
  SCUDA_NVML_TRACE=1 SCUDA_NVML_TRACE_SKIP=26 "$SMI" -q >"$LOG/skip26-q.out" 2>"$LOG/skip26-q.trace"
if diff <(norm q "$LOG/pass-q.out") <(norm q "$LOG/skip26-q.out") >"$LOG/skip26.diff" &&
   grep -q "slot 26 .*skipped" "$LOG/skip26-q.trace"; then
  pass output-slot "nvidia-smi -q prints the same with slot 26 answered NOT_SUPPORTED"
else
  fail output-slot "see $LOG/skip26.diff"
fi
LD_DEBUG=libs LD_LIBRARY_PATH="$BUILD/lib" "$SMI" -L 2>&1 | grep -i "nvidia-ml" | head -n 20 >"$LOG/ld_debug.txt"
echo "nvidia-smi loads: $(grep -m1 'calling init' "$LOG/ld_debug.txt" || head -n1 "$LOG/ld_debug.txt")"

echo
echo "logs: $LOG"
echo "$NPASS passed, $NFAIL failed"
[[ $NFAIL -eq 0 ]]
