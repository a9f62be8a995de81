# migrate_torch.sh [DIR]: native run of train_gpt.py, then through SCUDA (GPU hidden) with a
# `scuda migrate` from server A to server B after step 100; losses compared.
cd "$(dirname "$0")/../../.."
R=${1:-/tmp/mig}; mkdir -p $R; S=$R/sig; rm -rf $S; mkdir -p $S
timeout 120 python3 tests/gpu/failover/train_gpt.py $R/native.txt > $R/native.out 2>&1; echo "native rc=$?"
build/bin/scuda server --listen 127.0.0.1:15901 --control $R/a.sock > $R/srvA.log 2>&1 & A=$!
build/bin/scuda server --listen 127.0.0.1:15902 --control $R/b.sock > $R/srvB.log 2>&1 & B=$!
sleep 1
timeout 180 bash tests/gpu/hide.sh build/bin/scuda run --server 127.0.0.1:15901 -- python3 tests/gpu/failover/train_gpt.py $R/scuda.txt $S > $R/client.out 2> $R/client.err & CL=$!
for i in $(seq 1200); do [ -e $S/step100 ] && break; sleep 0.05; done
SESS=$(pgrep -P $A | head -1); echo "session $SESS on A"
timeout 60 build/bin/scuda migrate --session $SESS --to 127.0.0.1:15902 --control $R/a.sock > $R/migrate.out 2>&1; echo "migrate rc=$?"; cat $R/migrate.out
touch $S/go
wait $CL; echo "client rc=$?"
grep -i "moved\|migrat\|refus\|cannot" $R/client.err $R/srvA.log $R/srvB.log | head -12
if cmp -s $R/native.txt $R/scuda.txt; then echo "LOSSES IDENTICAL ($(wc -l < $R/scuda.txt) steps)"; else echo "LOSSES DIFFER"; diff $R/native.txt $R/scuda.txt | head -6; fi
kill $A $B; wait $A $B 2>/dev/null
