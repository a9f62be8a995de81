# sigstop.sh [DIR]: a PyTorch training loop through SCUDA (GPU hidden); once it has
# trained 200 steps its session process is stopped with SIGSTOP; how long until the client fails?
cd "$(dirname "$0")/../../.."
R=${1:-/tmp/live}; mkdir -p $R
build/bin/scuda server --listen 127.0.0.1:15801 > $R/live_srv.log 2>&1 & SRV=$!
sleep 1
SCUDA_DEAD_AFTER=10 timeout 60 bash tests/gpu/hide.sh build/bin/scuda run --server 127.0.0.1:15801 -- python3 tests/gpu/failover/loop.py > $R/live_client.out 2> $R/live_client.err & CL=$!
for i in $(seq 600); do grep -q "^step" $R/live_client.out 2>/dev/null && break; sleep 0.1; done  # training, not start-up
SESS=$(pgrep -P $SRV | head -1)
echo "session pid $SESS; steps so far: $(tail -1 $R/live_client.out)"
T0=$(date +%s.%N); kill -STOP $SESS; echo "sigstop_at_epoch $T0"
wait $CL; RC=$?
T1=$(date +%s.%N)
echo "client exit $RC after SIGSTOP: $(python3 -c "print(round($T1-$T0,2))") s"
tail -3 $R/live_client.err
E=$(grep -o "error_at_epoch [0-9.]*" $R/live_client.out | cut -d" " -f2); [ -n "$E" ] && echo "the app got its CUDA error $(python3 -c "print(round($E-$T0,2))") s after SIGSTOP"
kill -CONT $SESS; kill $SESS 2>/dev/null; kill $SRV; wait $SRV 2>/dev/null
