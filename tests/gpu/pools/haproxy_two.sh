#!/usr/bin/env bash
# haproxy_two.sh [DIR]: two clients through HAProxy land on different GPU
# servers. Server A serves GPU 0 (`--gpus 0`) and server B GPU 1 (both GPU
# 0 on a one-GPU machine), each with its agent (`--agent`); a real HAProxy
# runs tests/e2e/haproxy.cfg (deploy/haproxy/haproxy.cfg's rules, the
# third server slot pointing at B again). Two clients, with the GPU hidden,
# leave from 127.0.0.2 and 127.0.0.3 (SCUDA_SOURCE_ADDR: HAProxy sticks a
# client address to a server) and each runs a CUDA program that holds
# its session; both must pass, and each server must log one client's
# session. HAPROXY=PATH picks the binary (default: haproxy on PATH).
# One SUMMARY line; exit 1 on failure. Logs in DIR (default /tmp/haproxy_two).
set -uo pipefail
source "$(dirname "$0")/../failover/lib.sh"
R=${1:-/tmp/haproxy_two}
mkdir -p "$R"
HAPROXY=${HAPROXY:-haproxy}
command -v "$HAPROXY" >/dev/null || { summary haproxy_two 0 "no HAProxy binary ($HAPROXY); install Debian's haproxy or set HAPROXY"; exit 1; }
pick_gpus
AA=$(free_port) AB=$(free_port)
start_server A "$GPU_A" "$R/srvA.log" --gpus 0 --agent "127.0.0.1:$AA" || exit 1
A_ADDR=$SERVER_ADDR
start_server B "$GPU_B" "$R/srvB.log" --gpus 0 --agent "127.0.0.1:$AB" || exit 1
B_ADDR=$SERVER_ADDR
FRONT=127.0.0.1:$(free_port)
sed -e "s#@FRONT@#$FRONT#" -e "s#@STATS@#$R/stats.sock#" -e "s#@S1@#$A_ADDR#" -e "s#@A1@#$AA#" \
  -e "s#@S2@#$B_ADDR#" -e "s#@A2@#$AB#" -e "/server gpu3/d" "$ROOT/tests/e2e/haproxy.cfg" >"$R/haproxy.cfg"
"$HAPROXY" -f "$R/haproxy.cfg" -db >"$R/haproxy.log" 2>&1 &
STARTED+=("$!")
wait_for 10 listening "${FRONT##*:}" "$!" || { summary haproxy_two 0 "HAProxy did not listen on $FRONT: $(tail -n 3 "$R/haproxy.log")"; exit 1; }
sleep 3 # two agent checks: both servers weighted
# Each client holds its session for a while, so leastconn sees the first
# when the second connects.
client() {
  SCUDA_SERVER=$FRONT SCUDA_SOURCE_ADDR=$1 timeout 120 bash "$HIDE" "$SCUDA" run -- \
    python3 -c 'import ctypes, time, sys
cu = ctypes.CDLL("libcuda.so.1"); n = ctypes.c_int()
assert cu.cuInit(0) == 0, "cuInit"; assert cu.cuDeviceGetCount(ctypes.byref(n)) == 0
name = ctypes.create_string_buffer(100); cu.cuDeviceGetName(name, 100, 0)
ctx = ctypes.c_void_p(); assert cu.cuCtxCreate_v2(ctypes.byref(ctx), 0, 0) == 0, "cuCtxCreate"
p = ctypes.c_uint64(); assert cu.cuMemAlloc_v2(ctypes.byref(p), 1 << 20) == 0, "cuMemAlloc"
print("devices", n.value, name.value.decode()); sys.stdout.flush(); time.sleep(6)
assert cu.cuMemFree_v2(p) == 0; print("ok")' >"$R/client_$1.out" 2>"$R/client_$1.err"
}
client 127.0.0.2 & C1=$!
sleep 2
client 127.0.0.3 & C2=$!
wait $C1; R1=$?
wait $C2; R2=$?
ok=1 why=()
((R1 == 0 && R2 == 0)) || { ok=0; why+=("client exit $R1 and $R2 ($(tail -n 1 "$R/client_127.0.0.2.err") / $(tail -n 1 "$R/client_127.0.0.3.err"))"); }
grep -q '^ok' "$R/client_127.0.0.2.out" && grep -q '^ok' "$R/client_127.0.0.3.out" || { ok=0; why+=("a client did not finish its CUDA work"); }
# Each server names the client address its session came from (HAProxy's own
# address, 127.0.0.1, in TCP mode), so count the sessions each served.
na=$(grep -c "session started:" "$R/srvA.log")
nb=$(grep -c "session started:" "$R/srvB.log")
((na >= 1 && nb >= 1)) || { ok=0; why+=("sessions per server: A $na, B $nb (both clients went to one server)"); }
((ok)) && why+=("client 127.0.0.2 and 127.0.0.3 on different servers (A: $na, B: $nb session lines); $(head -n 1 "$R/client_127.0.0.2.out")")
summary haproxy_two "$ok" "$(IFS=';'; echo "${why[*]}")"
