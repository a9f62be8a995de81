#!/usr/bin/env bash
# split_train.sh [DIR]: one client over two servers. Server A serves GPU 0
# and server B GPU 1 (both GPU 0 on a one-GPU machine); the client, with
# the GPU hidden, has SCUDA_SERVER=A,B and runs split_train.py: PyTorch
# must see cuda:0 and cuda:1, the split model's 50 losses must equal the
# same split run natively, and a 256 MiB copy cuda:0 -> cuda:1 must be
# byte-exact; its bandwidth is printed next to the raw link's (`scuda
# bench` to B). One SUMMARY line; exit 1 on failure. Logs in DIR
# (default /tmp/split_train). Run as root on the GPU machine from the repo
# root, after the product is built (build/bin/scuda).
set -uo pipefail
source "$(dirname "$0")/../failover/lib.sh"
R=${1:-/tmp/split_train}
mkdir -p "$R"
HERE=$(cd "$(dirname "$0")" && pwd)
pick_gpus
DEV1=1
[[ $GPU_A == "$GPU_B" ]] && DEV1=0 # one GPU: the native reference keeps both halves on it
SPLIT_DEV1=$DEV1 timeout 300 python3 "$HERE/split_train.py" "$R/native.txt" >"$R/native.out" 2>&1
echo "native rc=$?: $(grep -c '^[0-9]' "$R/native.txt" 2>/dev/null) steps"
start_server A "$GPU_A" "$R/srvA.log" || exit 1
A_ADDR=$SERVER_ADDR
start_server B "$GPU_B" "$R/srvB.log" || exit 1
B_ADDR=$SERVER_ADDR
timeout 180 "$SCUDA" bench --server "$B_ADDR" --quick --json "$R/bench.json" >"$R/bench.out" 2>&1
LINK=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))["raw_link"]["one_stream"]; print(d["gbps"] if d["ok"] else "")' \
  "$R/bench.json" 2>/dev/null)
SCUDA_SERVER="$A_ADDR,$B_ADDR" timeout 300 bash "$HIDE" "$SCUDA" run -- python3 "$HERE/split_train.py" "$R/scuda.txt" \
  >"$R/client.out" 2>"$R/client.err"
CRC=$?
echo "client rc=$CRC; $(tail -n 2 "$R/client.err")"
ok=1 why=()
devices=$(sed -n 's/^devices //p' "$R/scuda.txt" 2>/dev/null)
[[ $devices == 2 ]] || { ok=0; why+=("PyTorch saw ${devices:-no} devices through SCUDA, not 2"); }
if [[ -s $R/scuda.txt ]] && diff <(grep '^[0-9]' "$R/native.txt") <(grep '^[0-9]' "$R/scuda.txt") >"$R/losses.diff"; then
  why+=("losses identical ($(grep -c '^[0-9]' "$R/scuda.txt") steps)")
else
  ok=0 why+=("losses differ or missing ($R/losses.diff)")
fi
grep -q '^copy byte-exact True' "$R/scuda.txt" 2>/dev/null || { ok=0; why+=("the cross-device copy was not byte-exact"); }
copy=$(sed -n 's/^# copy .* at \([0-9.]*\) GB\/s/\1/p' "$R/scuda.txt" 2>/dev/null)
[[ -n $copy ]] && why+=("copy cuda:0 -> cuda:1 ${copy} GB/s against the raw link's ${LINK:-?} GB/s")
((CRC == 0)) || { ok=0; why+=("client exit $CRC"); }
summary split_train "$ok" "$(IFS=';'; echo "${why[*]}")"
