P=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
build/bin/scuda server --listen 127.0.0.1:$P 2>/dev/null & SP=$!
sleep 1
cat > /tmp/item.py <<'PY'
import torch, time
x = torch.ones(256, device="cuda")
for _ in range(200): (x + 1).item()
t = time.perf_counter()
for _ in range(1000): (x + 1).item()
print("item us", (time.perf_counter() - t) * 1e3)
PY
cat > /tmp/tf.py <<'PY'
import sys, time
sys.argv = ["x"]
sys.path.insert(0, "bench")
import torch_bench as tb
r = tb.w_small_tf(True, 0)
print("small_tf", r)
PY
SCUDA_STATS=1 timeout 60 build/bin/scuda run --server 127.0.0.1:$P -- python3 /tmp/item.py 2>&1 | tail -30
SCUDA_STATS=1 timeout 90 build/bin/scuda run --server 127.0.0.1:$P -- python3 /tmp/tf.py 2>&1 | tail -40
kill $SP
