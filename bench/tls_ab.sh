# tls_ab.sh: one tree, two loopback servers (plain, --tls), `scuda bench
# --quick` alternating plain/TLS (server cores 0-7, client 8-15), then
# torch_bench gpt2+small_tf plain and --tls.
set -o pipefail
cd "$(dirname "$0")/.."
R=/tmp/tls_bench; rm -rf $R; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt
[ -x build/bin/scuda ] || bash tests/gpu/build_product.sh $R/build.log || { echo build failed; exit 1; }
taskset -c 0-7 build/bin/scuda server --listen 127.0.0.1:15701 > $R/srv_plain.log 2>&1 & P1=$!
taskset -c 0-7 build/bin/scuda server --listen 127.0.0.1:15702 --tls --state-dir $R/state > $R/srv_tls.log 2>&1 & P2=$!
sleep 1
FP=$(grep -o 'sha256:[0-9a-f]\{64\}' $R/srv_tls.log | head -1); echo "fingerprint $FP"
bench() { # tag port [env...]
  local tag=$1 port=$2; shift 2
  env "$@" taskset -c 8-15 timeout 90 build/bin/scuda bench --quick --server 127.0.0.1:$port --json $R/bench_$tag.json > $R/bench_$tag.txt 2>&1
  echo "$tag rc=$?"; }
start=$(date +%s); i=0
T="SCUDA_TLS=1 SCUDA_TLS_FINGERPRINT=$FP"
while [ $(( $(date +%s) - start )) -lt ${BENCH_S:-220} ]; do
  i=$((i+1))
  bench plain4_$i 15701 SCUDA_BULK_STREAMS=4
  bench tls4_$i 15702 $T SCUDA_BULK_STREAMS=4
  bench plain8_$i 15701 SCUDA_BULK_STREAMS=8
  bench tls8_$i 15702 $T SCUDA_BULK_STREAMS=8
done > $R/bench_rc.txt
echo "pairs: $i"; grep -v "rc=0" $R/bench_rc.txt | head
kill $P1 $P2; wait $P1 $P2 2>/dev/null
timeout 110 python3 bench/torch_bench.py --quick --only gpt2,small_tf --deadline 100 --json $R/torch_plain.json > $R/torch_plain.txt 2>$R/torch_plain.err; echo "torch plain rc=$?"
timeout 110 python3 bench/torch_bench.py --quick --tls --link-json $R/bench_tls8_1.json --only gpt2,small_tf --deadline 100 --json $R/torch_tls.json > $R/torch_tls.txt 2>$R/torch_tls.err; echo "torch tls rc=$?"
grep -hE 'GPT-2|2 layers|raw link' $R/torch_plain.txt $R/torch_tls.txt
tail -3 $R/torch_tls.err
[ -n "${OUT:-}" ] && tar -czf $OUT/tls_bench.tgz -C /tmp tls_bench
