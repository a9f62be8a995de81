P=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
SCUDA_LOG=info build/bin/scuda server --listen 127.0.0.1:$P 2>$OUT/stats-server.log & SP=$!
sleep 1
cat > /tmp/item.py <<'PY'
import torch, time
x = torch.ones(1, device="cuda")
for _ in range(200): (x + 1).item()
ts = []
for _ in range(2000):
    t = time.perf_counter(); (x + 1).item(); ts.append(time.perf_counter() - t)
ts.sort(); print("item median us", ts[len(ts)//2] * 1e6)
PY
cat > /tmp/start.py <<'PY'
import time; t = time.perf_counter()
import torch; x = torch.ones(1, device="cuda"); torch.cuda.synchronize()
print("startup s", time.perf_counter() - t)
PY
cat > /tmp/tf.py <<'PY'
import sys
sys.path.insert(0, "bench")
import torch_bench as tb
print("small_tf", tb.w_small_tf(False, 0))
PY
for s in start start item tf; do
  echo "== native $s"; timeout 120 python3 /tmp/$s.py 2>&1 | tail -2
  echo "== scuda $s"; SCUDA_STATS=1 timeout 120 build/bin/scuda run --server 127.0.0.1:$P -- python3 /tmp/$s.py 2>&1 | grep -v "^  async" | head -30
done
kill $SP; sleep 0.5; grep "module cache" $OUT/stats-server.log | tail -5
