#!/bin/bash
# tls_ab.sh: TLS against plain TCP, copies of 1 to 256 MiB, on one machine
# over loopback; optionally A/B against another build of SCUDA.
#
#   bench/tls_ab.sh                        # this tree's build/ (built if missing)
#   BASE=/path/to/other/build bench/tls_ab.sh   # and that build, same rounds
#   EXTRA_BUILDS="tag=/dir ..." bench/tls_ab.sh # more builds (a dir whose bin/scuda
#                                          # wraps this one with other server settings)
#
# Servers (plain and --tls, per build) on cores 0-7, clients on 8-15. Each
# round runs bench/copy_bw (H2D/D2H, pageable/pinned, 1 4 16 64 256 MiB)
# against plain and TLS servers at 4 and 8 bulk streams (the defaults:
# plain 4, TLS 8), alternating, until BENCH_S seconds (default 170) have
# passed; then one `scuda bench --quick --max-copy 4K` per configuration
# for the raw link and the small calls (empty sync call, launches). The
# table gives medians over the rounds and TLS 8 / plain 4, the ratio of
# the defaults. Results and logs: /tmp/tls_bench (tarred into $OUT).
# Then the host's memcpy rate (bench/mem_bw.c), the ceiling on loopback.
# About 5 minutes with BASE, 4 without (build not counted).
# Elsewhere: SERVER_CPUS, CLIENT_CPUS (taskset lists, default 0-7 and 8-15),
# SERVER_ARGS (e.g. "--driver build/lib/standin/libcuda-standin.so").
set -o pipefail
cd "$(dirname "$0")/.."
R=/tmp/tls_bench; rm -rf $R; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | tee $R/gpu.txt
[ -x build/bin/scuda ] || bash tests/gpu/build_product.sh $R/build.log || { echo build failed; exit 1; }
BUILDS="new=$PWD/build"
[ -n "${BASE:-}" ] && { [ -x "$BASE/bin/scuda" ] || { echo "BASE=$BASE has no bin/scuda"; exit 1; }; BUILDS="$BUILDS base=$BASE"; }
for b in ${EXTRA_BUILDS:-}; do  # "tag=dir ...": more builds (or wrappers setting server options), same rounds
  [ -x "${b#*=}/bin/scuda" ] || { echo "EXTRA_BUILDS: ${b#*=} has no bin/scuda"; exit 1; }; BUILDS="$BUILDS $b"
done
CUDA_INC=${CUDA_INCLUDE_DIR:-/usr/local/cuda/include}
cc -O2 -I"$CUDA_INC" bench/copy_bw.c -o $R/copy_bw -Lbuild/lib -l:libcuda.so.1 || { echo "copy_bw: build failed"; exit 1; }

PIDS=""; port=15700; declare -A PORT FP
for b in $BUILDS; do
  tag=${b%%=*}; dir=${b#*=}
  port=$((port+1)); PORT[$tag.plain]=$port
  taskset -c ${SERVER_CPUS:-0-7} $dir/bin/scuda server $SERVER_ARGS --listen 127.0.0.1:$port > $R/srv_${tag}_plain.log 2>&1 & PIDS="$PIDS $!"
  port=$((port+1)); PORT[$tag.tls]=$port
  taskset -c ${SERVER_CPUS:-0-7} $dir/bin/scuda server $SERVER_ARGS --listen 127.0.0.1:$port --tls --state-dir $R/state_$tag > $R/srv_${tag}_tls.log 2>&1 & PIDS="$PIDS $!"
done
sleep 2
for b in $BUILDS; do
  tag=${b%%=*}; FP[$tag]=$(grep -o 'sha256:[0-9a-f]\{64\}' $R/srv_${tag}_tls.log | head -1)
  [ -n "${FP[$tag]}" ] || { echo "the $tag TLS server did not start:"; tail -5 $R/srv_${tag}_tls.log; kill $PIDS; exit 1; }
done

# client TAG BUILD_TAG MODE K CMD...: run CMD against that server with k streams.
client() {
  local out=$1 tag=$2 mode=$3 k=$4; shift 4
  local dir; for b in $BUILDS; do [ ${b%%=*} = $tag ] && dir=${b#*=}; done
  local env=(LD_LIBRARY_PATH=$dir/lib SCUDA_SERVER=127.0.0.1:${PORT[$tag.$mode]} SCUDA_BULK_STREAMS=$k)
  [ $mode = tls ] && env+=(SCUDA_TLS=1 SCUDA_TLS_FINGERPRINT=${FP[$tag]})
  env "${env[@]}" taskset -c ${CLIENT_CPUS:-8-15} timeout 120 "$@" > $out 2> $out.err
  echo "$(basename $out) rc=$?"
}

start=$(date +%s); i=0
while [ $(( $(date +%s) - start )) -lt ${BENCH_S:-170} ]; do
  i=$((i+1))
  for b in $BUILDS; do tag=${b%%=*}
    for cfg in plain:4 tls:8 plain:8 tls:4; do
      client $R/copy_${tag}_${cfg%:*}${cfg#*:}_$i.txt $tag ${cfg%:*} ${cfg#*:} $R/copy_bw
    done
  done
done > $R/rc.txt
for b in $BUILDS; do tag=${b%%=*}
  for cfg in plain:4 tls:8 plain:8 tls:4; do
    client $R/bench_${tag}_${cfg%:*}${cfg#*:}.txt $tag ${cfg%:*} ${cfg#*:} \
      ${b#*=}/bin/scuda bench --quick --max-copy 4K --server 127.0.0.1:${PORT[$tag.${cfg%:*}]} \
      --json $R/bench_${tag}_${cfg%:*}${cfg#*:}.json
  done
done >> $R/rc.txt
kill $PIDS; wait $PIDS 2>/dev/null
echo "rounds: $i"; grep -v "rc=0" $R/rc.txt | head
# The ceiling both ends share on loopback: the host's memcpy rate (mem_bw.c).
cc -O2 -pthread bench/mem_bw.c -o $R/mem_bw && $R/mem_bw 1 8 16 | tee $R/mem_bw.txt

python3 - $R $i "$BUILDS" <<'PY'
import json, os, statistics, sys
R, rounds, builds = sys.argv[1], int(sys.argv[2]), [b.split("=")[0] for b in sys.argv[3].split()]
cfgs = ["plain4", "tls4", "plain8", "tls8"]
def copies(tag, cfg):
    d = {}
    for i in range(1, rounds + 1):
        try:
            for l in open(f"{R}/copy_{tag}_{cfg}_{i}.txt"):
                k, v = l.rstrip("\n").split("\t")
                d.setdefault(k, []).append(float(v))
        except (OSError, ValueError):
            pass
    return {k: statistics.median(v) for k, v in d.items()}
def small(tag, cfg):
    try:
        j = json.load(open(f"{R}/bench_{tag}_{cfg}.json"))
        s, raw = j["scuda"], j["raw_link"]
        return {"raw link, one stream (GB/s)": raw["one_stream"]["gbps"],
                "raw link, k streams (GB/s)": raw["k_streams"]["gbps"],
                "empty sync call, median (us)": s["empty_sync_call_us"]["median"],
                "empty-kernel launches (/s)": s["launch"]["per_s"]}
    except (OSError, KeyError, ValueError):
        return {}
res = {tag: {cfg: {**small(tag, cfg), **copies(tag, cfg)} for cfg in cfgs} for tag in builds}
rows = list(dict.fromkeys(k for tag in builds for cfg in cfgs for k in res[tag][cfg]))
def f(x): return "-" if x is None else (f"{x:.0f}" if x >= 1000 else f"{x:.3g}")
def ratio(a, b): return None if a is None or b is None or b == 0 else a / b
for tag in builds:
    print(f"\n{tag} build ({rounds} rounds; copies: medians; raw link and small calls: one run)")
    print("| figure | plain 4 | TLS 4 | plain 8 | TLS 8 | TLS8/plain4 (defaults) |")
    print("|---|---|---|---|---|---|")
    for k in rows:
        v = [res[tag][c].get(k) for c in cfgs]
        print(f"| {k} | " + " | ".join(f(x) for x in v) + f" | {f(ratio(v[3], v[0]))} |")
if "base" in builds:
    print("\nnew / base (>1: new is faster; for the small-call latency, <1 is faster)")
    print("| figure | plain 4 | TLS 8 | TLS8/plain4 base | TLS8/plain4 new |")
    print("|---|---|---|---|---|")
    for k in rows:
        n, b = res["new"], res["base"]
        print(f"| {k} | {f(ratio(n['plain4'].get(k), b['plain4'].get(k)))} | {f(ratio(n['tls8'].get(k), b['tls8'].get(k)))}"
              f" | {f(ratio(b['tls8'].get(k), b['plain4'].get(k)))} | {f(ratio(n['tls8'].get(k), n['plain4'].get(k)))} |")
PY
[ -n "${OUT:-}" ] && tar -czf $OUT/tls_bench.tgz -C /tmp tls_bench
exit 0
