#!/usr/bin/env python3
"""torch_bench.py - PyTorch natively and through SCUDA, in one run, with ratios.

Run on the GPU machine from the repository root:

    python3 bench/torch_bench.py [--server HOST:PORT] [--quick] [--tls] [--json FILE]

Each workload runs in a subprocess of its own, once natively (this machine's
driver) and once through SCUDA (`scuda run --server ... -- python3 this-file
--worker NAME`), with a timeout, so a workload that fails or hangs through
SCUDA shows as FAILED(reason) in the table and the others still run. Without
--server, a `scuda server` is started on a free loopback port for the run.

Workloads (their targets: docs/architecture.md, 7 Performance):
    startup     import torch -> first CUDA tensor, s (run twice: cold, warm)
    launch      small-op launch: x.add_(1) on a small tensor, us per op
    item        (x+1).item() round trip, us
    h2d, d2h    256 MiB pageable copy, GB/s
    matmul      fp16 4096^3 matrix product, TFLOP/s
    conv2d      3x3 conv, 64->64 channels, batch 32, 56x56, fp32, ms
    small_tf    training step of a 2-layer d=128 transformer LM, ms
    gpt2        training step of a GPT-2-small-sized LM (12 layers, d=768,
                batch 8, context 512), ms
    generate    token-by-token generation: a GPT-2-small-sized Hugging Face
                `transformers` model (random weights, fp16, default
                attention), `model.generate` of 20 new tokens, ms per token
    resnet      a ResNet-18 fine-tune (bf16 autocast, SGD, batches of 64
                224x224 images from a 4-worker DataLoader with pinned
                memory), images/s
Compiles made at run time (NVRTC, for cuDNN's attention in `generate`) are
kept between runs by the driver natively (its JIT cache) and by SCUDA's
client (its compile cache, docs/operate.md). Each run gives both sides an
empty cache of their own under the log directory, so both start cold and
a run does not depend on the runs before it.

The raw link (TCP round trip and one-stream bandwidth, through the server's
raw echo and sink modes) is measured from this script too, for the targets
that are stated against it. Every workload checks its own result.

Only the standard library is needed in the parent; the workers need torch.
"""

import argparse
import hashlib
import hmac
import json
import os
import re
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
RESULT_TAG = "TORCH_BENCH_RESULT "

# name, label, unit, higher_is_better
WORKLOADS = [
    ("startup", "startup: import->CUDA tensor", "s", False),
    ("launch", "small-op launch, x.add_(1)", "us", False),
    ("item", "(x+1).item()", "us", False),
    ("h2d", "H2D 256 MiB pageable", "GB/s", True),
    ("d2h", "D2H 256 MiB pageable", "GB/s", True),
    ("matmul", "fp16 matmul 4096^3", "TFLOP/s", True),
    ("conv2d", "conv2d 32x64x56x56, 3x3", "ms", False),
    ("small_tf", "train step, 2 layers d=128", "ms", False),
    ("gpt2", "train step, GPT-2 small b8 ctx512", "ms", False),
    ("generate", "GPT-2 small generate, per token", "ms", False),
    ("resnet", "ResNet-18 fine-tune b64 bf16", "img/s", True),
]


# --------------------------------------------------------------------------
# Workers: run in their own process, natively or under `scuda run`.
# torch is imported inside each, so that `startup` can time the import.
# --------------------------------------------------------------------------

def _sync():
    import torch
    torch.cuda.synchronize()


def w_startup(quick, t_process):
    t0 = time.perf_counter()
    import torch
    x = torch.ones(4, device="cuda")
    torch.cuda.synchronize()
    t1 = time.perf_counter()
    if x.sum().item() != 4.0:
        raise RuntimeError("wrong result: ones(4).sum() != 4")
    return {"value": t1 - t0, "from_process_start_s": t1 - t_process}


def w_launch(quick, _):
    import torch
    n = 3000 if quick else 20000
    x = torch.zeros(256, device="cuda")
    for _ in range(200):
        x.add_(1)
    _sync()
    t0 = time.perf_counter()
    for _ in range(n):
        x.add_(1)
    _sync()
    dt = time.perf_counter() - t0
    got = x[0].item()
    if got != 200 + n:
        raise RuntimeError("wrong result: %r after %d adds" % (got, 200 + n))
    return {"value": dt / n * 1e6, "ops": n}


def w_item(quick, _):
    import torch
    n = 300 if quick else 2000
    x = torch.zeros(1, device="cuda")
    for _ in range(20):
        (x + 1).item()
    v = []
    y = None
    for _ in range(n):
        t0 = time.perf_counter()
        y = (x + 1).item()
        v.append((time.perf_counter() - t0) * 1e6)
    if y != 1.0:
        raise RuntimeError("wrong result: (0+1).item() = %r" % y)
    v.sort()
    return {"value": statistics.median(v), "p99": v[min(len(v) - 1, int(len(v) * 0.99))], "n": n}


def _copy(quick, h2d):
    import torch
    nbytes = 256 << 20
    reps = 3 if quick else 5
    host = torch.full((nbytes,), 7 if h2d else 0, dtype=torch.uint8)  # pageable
    dev = torch.full((nbytes,), 0 if h2d else 9, dtype=torch.uint8, device="cuda")
    src, dst = (host, dev) if h2d else (dev, host)
    dst.copy_(src)
    _sync()
    v = []
    for _ in range(reps):
        t0 = time.perf_counter()
        dst.copy_(src)
        _sync()
        v.append(time.perf_counter() - t0)
    want = 7 if h2d else 9
    if dst[0].item() != want or dst[-1].item() != want:
        raise RuntimeError("wrong bytes after the copy")
    return {"value": nbytes / statistics.median(v) / 1e9, "bytes": nbytes, "reps": reps}


def w_h2d(quick, _):
    return _copy(quick, True)


def w_d2h(quick, _):
    return _copy(quick, False)


def w_matmul(quick, _):
    import torch
    n = 4096
    iters = 50 if quick else 200  # at least ~10 ms of GPU work, so one sync does not dominate
    g = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(n, n, device="cuda", dtype=torch.float16, generator=g)
    b = torch.randn(n, n, device="cuda", dtype=torch.float16, generator=g)
    c = a @ b
    _sync()
    t0 = time.perf_counter()
    for _ in range(iters):
        c = a @ b
    _sync()
    dt = time.perf_counter() - t0
    # Check one row against the CPU in fp32.
    ref = a[0].float().cpu() @ b[:, :256].float().cpu()
    got = c[0, :256].float().cpu()
    err = ((got - ref).abs().max() / ref.abs().max()).item()
    if not err < 1e-2:
        raise RuntimeError("wrong result: relative error %.3g" % err)
    return {"value": 2 * n ** 3 * iters / dt / 1e12, "iters": iters}


def w_conv2d(quick, _):
    import torch
    import torch.nn.functional as F
    iters = 100 if quick else 400  # at least ~10 ms of GPU work
    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(32, 64, 56, 56, device="cuda", generator=g)
    w = torch.randn(64, 64, 3, 3, device="cuda", generator=g)
    for _ in range(3):
        y = F.conv2d(x, w, padding=1)
    _sync()
    t0 = time.perf_counter()
    for _ in range(iters):
        y = F.conv2d(x, w, padding=1)
    _sync()
    dt = time.perf_counter() - t0
    ref = F.conv2d(x[:1].cpu(), w.cpu(), padding=1)
    err = ((y[:1].cpu() - ref).abs().max() / ref.abs().max()).item()
    if not err < 1e-2:
        raise RuntimeError("wrong result: relative error %.3g" % err)
    return {"value": dt / iters * 1e3, "iters": iters}


def _scuda_waits():
    """Through SCUDA: how many calls have waited for a reply so far (the
    shim's scuda_client_waits); None on the real driver."""
    try:
        import ctypes
        f = ctypes.CDLL("libcuda.so.1").scuda_client_waits
    except (OSError, AttributeError):
        return None
    f.restype = ctypes.c_uint64
    return int(f())


def _lm(vocab, d, layers, heads, ctx):
    import torch
    import torch.nn as nn

    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(vocab, d)
            self.pos = nn.Embedding(ctx, d)
            layer = nn.TransformerEncoderLayer(d, heads, 4 * d, dropout=0.0, activation="gelu",
                                               batch_first=True, norm_first=True)
            self.blocks = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
            self.norm = nn.LayerNorm(d)
            self.head = nn.Linear(d, vocab, bias=False)
            self.head.weight = self.tok.weight  # tied, as in GPT-2
            self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(ctx), persistent=False)

        def forward(self, idx):
            t = idx.shape[1]
            h = self.tok(idx) + self.pos(torch.arange(t, device=idx.device))
            h = self.blocks(h, mask=self.mask[:t, :t], is_causal=True)
            return self.head(self.norm(h))

    return LM()


def _train(vocab, d, layers, heads, ctx, batch, warm, iters):
    import torch
    import torch.nn.functional as F
    torch.manual_seed(0)
    model = _lm(vocab, d, layers, heads, ctx).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randint(0, vocab, (batch, ctx), device="cuda")
    y = torch.roll(x, -1, dims=1)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x).view(-1, vocab), y.view(-1))
        loss.backward()
        opt.step()
        return loss

    waits0 = _scuda_waits()
    print_scuda_stats("before the first step")
    t_first = time.perf_counter()
    first = step().item()  # the first step: every first-time query, kernel choice and load
    first_s = time.perf_counter() - t_first
    first_waits = None if waits0 is None else _scuda_waits() - waits0
    print_scuda_stats("after the first step")
    for _ in range(warm - 1):
        step()
    _sync()
    t0 = time.perf_counter()
    for _ in range(iters):
        loss = step()
    _sync()
    dt = time.perf_counter() - t0
    last = loss.item()
    # Same batch every step: the loss must fall.
    if not (last == last and last < first):
        raise RuntimeError("training did not learn: loss %.4f -> %.4f" % (first, last))
    return {"value": dt / iters * 1e3, "iters": iters, "loss_first": first, "loss_last": last, "first_s": first_s,
            "first_waits": first_waits}


def w_small_tf(quick, _):
    return _train(vocab=1000, d=128, layers=2, heads=4, ctx=128, batch=32, warm=3, iters=5 if quick else 30)


def w_gpt2(quick, _):
    return _train(vocab=50257, d=768, layers=12, heads=12, ctx=512, batch=8, warm=2, iters=3 if quick else 10)


def w_generate(quick, _):
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config()).to("cuda", torch.float16).eval()  # GPT-2 small, random weights
    prompt = torch.randint(0, 50257, (1, 16), device="cuda")
    new = 5 if quick else 20

    def gen(n):
        with torch.no_grad():
            return model.generate(prompt, max_new_tokens=n, min_new_tokens=n, do_sample=False,
                                  pad_token_id=0, attention_mask=torch.ones_like(prompt))

    # Warm-up of one token: the handles and the prompt's length. The timed
    # run meets every later sequence length for the first time, as a
    # real generation does (cuDNN and cuBLAS pick and load kernels for
    # each new shape).
    gen(1)
    _sync()
    t0 = time.perf_counter()
    out = gen(new)
    _sync()
    dt = time.perf_counter() - t0
    if out.shape[1] != prompt.shape[1] + new:
        raise RuntimeError("generated %d tokens, not %d" % (out.shape[1] - prompt.shape[1], new))
    return {"value": dt / new * 1e3, "tokens": new, "checksum": int(out.sum().item())}


def _resnet18(classes):
    """ResNet-18 (He et al.), as torchvision builds it, without needing torchvision."""
    import torch.nn as nn

    class Block(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.c1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.b1 = nn.BatchNorm2d(cout)
            self.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.b2 = nn.BatchNorm2d(cout)
            self.down = None
            if stride != 1 or cin != cout:
                self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

        def forward(self, x):
            y = self.b2(self.c2(self.b1(self.c1(x)).relu()))
            return (y + (self.down(x) if self.down is not None else x)).relu()

    layers, cin = [], 64
    for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
        layers += [Block(cin, cout, stride), Block(cout, cout, 1)]
        cin = cout
    return nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(),
                         nn.MaxPool2d(3, 2, 1), *layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                         nn.Linear(512, classes))


class _Images:
    """A map-style dataset of random images and labels (no download): a
    pool made once, so the workers only collate, as from a page cache,
    and the loader keeps ahead of the GPU."""

    def __init__(self, n, classes, pool=256):
        import torch
        g = torch.Generator().manual_seed(0)
        self.n = n
        self.images = torch.randn(pool, 3, 224, 224, generator=g)
        self.labels = torch.randint(0, classes, (pool,), generator=g)

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return self.images[i % len(self.images)], int(self.labels[i % len(self.labels)])


def w_resnet(quick, _):
    import torch
    import torch.nn.functional as F
    torch.manual_seed(0)
    batches, batch, classes = (20 if quick else 100), 64, 10
    model = _resnet18(classes).cuda().to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loader = torch.utils.data.DataLoader(_Images(batches * batch, classes), batch_size=batch, num_workers=4,
                                         pin_memory=True, persistent_workers=False)
    losses, t0, seen = [], None, 0
    for i, (x, y) in enumerate(loader):
        if i == 5:  # after cuDNN's first plans
            _sync()
            t0, seen = time.perf_counter(), 0
        x = x.cuda(non_blocking=True).to(memory_format=torch.channels_last)
        y = y.cuda(non_blocking=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = F.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        seen += batch
        if i % 10 == 0:
            losses.append(loss.item())
    _sync()
    dt = time.perf_counter() - t0
    if not all(v == v for v in losses):
        raise RuntimeError("loss is NaN")
    return {"value": seen / dt, "batches": batches, "losses": losses}


WORKERS = {
    "startup": w_startup, "launch": w_launch, "item": w_item, "h2d": w_h2d, "d2h": w_d2h,
    "matmul": w_matmul, "conv2d": w_conv2d, "small_tf": w_small_tf, "gpt2": w_gpt2,
    "generate": w_generate, "resnet": w_resnet,
}


def mapped_drivers():
    """Paths of every libcuda / libnvidia-ml mapped into this process."""
    found = set()
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.split()[-1] if len(line.split()) >= 6 else ""
                base = os.path.basename(path)
                if base.startswith("libcuda.so") or base.startswith("libnvidia-ml.so"):
                    found.add(os.path.realpath(path))
    except OSError:
        pass
    return sorted(found)


def worker_main(name, quick, t_process):
    out = {"workload": name}
    try:
        out.update(WORKERS[name](quick, t_process))
        out["ok"] = True
    except BaseException as e:  # report anything, including CUDA errors, as the reason
        msg = str(e).strip().splitlines()
        out["ok"] = False
        out["error"] = "%s: %s" % (type(e).__name__, msg[0] if msg else "")
    out["drivers"] = mapped_drivers()
    sys.stdout.write("\n" + RESULT_TAG + json.dumps(out) + "\n")
    sys.stdout.flush()
    print_scuda_stats()
    # Skip interpreter teardown: it can hang in a broken CUDA state.
    os._exit(0 if out["ok"] else 1)


# --------------------------------------------------------------------------
# The raw link, from Python: handshake with a HELLO_RAW_* flag (protocol.h).
# --------------------------------------------------------------------------

SCUDA_MAGIC = 0x31554353
HELLO_RAW_ECHO, HELLO_RAW_SINK = 1, 2


def _recv_exact(s, n):
    buf = bytearray()
    while len(buf) < n:
        b = s.recv(n - len(buf))
        if not b:
            raise ConnectionError("connection closed by the server")
        buf += b
    return bytes(buf)


PREFACE_MAGIC = 0x31504353  # "SCP1"


def _protocol_version():
    """SCUDA_PROTOCOL_VERSION, read from the one place it is defined."""
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src", "common", "protocol.h")
    with open(path) as f:
        return int(re.search(r"#define SCUDA_PROTOCOL_VERSION (\d+)", f.read()).group(1))


PROTOCOL_VERSION = _protocol_version()
PREFACE_STATUS = {1: "this server requires TLS: set SCUDA_TLS=1",
                  2: "this server does not offer TLS: unset SCUDA_TLS", 3: "the server did not understand the preface",
                  4: "the server speaks another protocol version"}


def _wants_tls(host):
    """As the client library decides (docs/operate.md): TLS beyond loopback,
    or with SCUDA_TLS=1; plain on loopback, or with SCUDA_INSECURE=1."""
    if os.environ.get("SCUDA_TLS") == "1":
        return True
    if os.environ.get("SCUDA_INSECURE") == "1":
        return False
    return not (host.startswith("127.") or host in ("::1", "localhost"))


def raw_open(addr, flags):
    host, _, port = addr.rpartition(":")
    host = host.strip("[]")
    s = socket.create_connection((host, int(port)), timeout=30)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if _wants_tls(host):
        # After the TLS handshake SCUDA's records are sealed with keys from
        # the TLS exporter, which Python's ssl module cannot derive.
        s.close()
        raise RuntimeError("a TLS raw link needs SCUDA's record layer, which Python's ssl cannot speak; "
                           "measure it with `scuda bench --json FILE` and pass --link-json FILE")
    s.sendall(struct.pack("<IBBBB", PREFACE_MAGIC, 0, 0, PROTOCOL_VERSION, 0))
    magic, status = struct.unpack("<IB3x", _recv_exact(s, 8))
    if magic != PREFACE_MAGIC or status != 0:
        raise RuntimeError("refused: %s" % PREFACE_STATUS.get(status, "not a SCUDA v%d server" % PROTOCOL_VERSION))
    # server_hello: magic, version, flags, nonce (16), then the server's
    # build (u32) and op set (HELLO_OPSET_LEN = 20: op counts and digests).
    hello = _recv_exact(s, 24 + 4 + 20)
    magic, version = struct.unpack("<IH", hello[:6])
    if magic != SCUDA_MAGIC:
        raise RuntimeError("not a SCUDA server")
    build, opset = struct.unpack("<I", hello[24:28])[0], hello[28:48]
    token = os.environ.get("SCUDA_TOKEN", "")
    proof = hmac.new(token.encode(), hello[8:24], hashlib.sha256).digest() if token else bytes(32)
    # A raw link runs no calls: it presents the server's own build and op
    # set, which the server accepts as its own.
    s.sendall(struct.pack("<IHHIQ", SCUDA_MAGIC, version, flags, build, 0) + proof + opset)
    status, length = struct.unpack("<II", _recv_exact(s, 8))
    body = _recv_exact(s, length)
    if status != 0:
        raise RuntimeError("refused: %s" % body[9:].split(b"\0")[0].decode(errors="replace"))
    if b"raw " not in body:
        raise RuntimeError("the server has no raw link mode")
    return s


def raw_link(addr, quick):
    res = {}
    try:
        s = raw_open(addr, HELLO_RAW_ECHO)
        msg = b"torch_bench rtt!"
        v = []
        for i in range(100 + (500 if quick else 3000)):
            t0 = time.perf_counter()
            s.sendall(msg)
            _recv_exact(s, len(msg))
            if i >= 100:
                v.append((time.perf_counter() - t0) * 1e6)
        s.close()
        res["rtt_us"] = statistics.median(v)
    except Exception as e:
        res["rtt_error"] = str(e)
    try:
        s = raw_open(addr, HELLO_RAW_SINK)
        n = 256 << 20
        data = bytes([0x5a]) * n
        v = []
        for _ in range(3):
            t0 = time.perf_counter()
            s.sendall(struct.pack("<Q", n))
            s.sendall(data)
            ack = struct.unpack("<Q", _recv_exact(s, 8))[0]
            v.append(time.perf_counter() - t0)
            if ack != n:
                raise RuntimeError("sink acknowledged %d of %d bytes" % (ack, n))
        s.sendall(struct.pack("<Q", 0))
        s.close()
        res["bw_gbps"] = n / statistics.median(v) / 1e9
    except Exception as e:
        res["bw_error"] = str(e)
    return res


def link_from_bench(path):
    """The raw link figures of a `scuda bench --json` run: C client, so
    no Python overhead in the round trip."""
    with open(path) as f:
        raw = json.load(f)["raw_link"]
    res = {"source": "scuda bench"}
    if raw.get("rtt_us") and raw["rtt_us"].get("ok"):
        res["rtt_us"] = raw["rtt_us"]["median"]
    else:
        res["rtt_error"] = "not in %s" % path
    if raw.get("one_stream", {}).get("ok"):
        res["bw_gbps"] = raw["one_stream"]["gbps"]
    else:
        res["bw_error"] = "not in %s" % path
    return res


# --------------------------------------------------------------------------
# The parent: start workers, collect, print.
# --------------------------------------------------------------------------

def print_scuda_stats(mark=None):
    """With SCUDA_STATS=1 through SCUDA: the client's call counts so far on
    stderr (its atexit handler does not run: the worker leaves with
    os._exit), after a line "=== scuda stats MARK" when mark is given;
    bench/stats_diff.py subtracts two such blocks."""
    if not os.environ.get("SCUDA_STATS"):
        return
    try:
        import ctypes
        f = ctypes.CDLL("libcuda.so.1").scuda_client_stats_print
    except (OSError, AttributeError):
        return  # the real driver: nothing to print
    if mark:
        print("=== scuda stats %s" % mark, file=sys.stderr, flush=True)
    sys.stderr.flush()
    f()


def run_worker(cmd, timeout, env=None):
    """Returns (result dict or None, reason when it failed)."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, errors="replace",
                         start_new_session=True, env=env)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)  # the worker's own process group
        out, err = p.communicate()
        return None, "timeout %.0f s" % timeout, err
    wall = time.perf_counter() - t0
    res = None
    for line in out.splitlines():
        if line.startswith(RESULT_TAG):
            res = json.loads(line[len(RESULT_TAG):])
    if res is not None:
        res["wall_s"] = wall
        if res.get("ok"):
            return res, None, err
        return res, res.get("error") or "failed", err
    if p.returncode < 0:
        reason = "signal %d" % -p.returncode
    else:
        reason = "exit %d" % p.returncode
    tail = [l for l in err.strip().splitlines() if l.strip()]
    if tail:
        reason += ": " + tail[-1].strip()
    return None, reason, err


def short(reason, n=48):
    reason = " ".join(reason.split())
    return reason if len(reason) <= n else reason[: n - 3] + "..."


def cell_reason(reason):
    """The part of a failure worth a table cell: the message without the
    exception's type, and from "CUDA error:" on when there is one."""
    if ": " in reason and reason.split(": ", 1)[0].endswith(("Error", "Exception")):
        reason = reason.split(": ", 1)[1] or reason
    i = reason.find("CUDA error:")
    if i >= 0:
        reason = reason[i + len("CUDA error:"):].strip()
    return short(reason, 30)


def fmt(v, unit):
    if v is None:
        return "-"
    if unit in ("us", "ms"):
        return "%.1f" % v if v >= 10 else "%.2f" % v
    if unit == "s":
        return "%.2f" % v
    return "%.2f" % v


class Deadline:
    def __init__(self, seconds):
        self.end = time.monotonic() + seconds if seconds else None

    def left(self):
        return None if self.end is None else self.end - time.monotonic()


def start_server(scuda, log_path, tls):
    """A loopback server for the run; with tls, over TLS with a certificate
    made in a fresh state directory, which this process and its children
    then trust by fingerprint (SCUDA_TLS_FINGERPRINT)."""
    r, w = os.pipe()
    log = open(log_path, "w")
    extra = ["--tls", "--state-dir", tempfile.mkdtemp(prefix="torch_bench-tls.")] if tls else []
    p = subprocess.Popen([scuda, "server", "--listen", "127.0.0.1:0", "--port-fd", str(w)] + extra,
                         pass_fds=(w,), stdout=log, stderr=log, start_new_session=True)
    os.close(w)
    line = b""
    with os.fdopen(r, "rb") as f:
        line = f.readline()
    if not line.strip().isdigit():
        p.kill()
        raise SystemExit("torch_bench: scuda server did not start; see %s" % log_path)
    if tls:
        trust_fingerprint(p, log_path)
    return p, "127.0.0.1:%d" % int(line)


def trust_fingerprint(p, log_path):
    for _ in range(100):
        m = re.search(r"sha256:[0-9a-f]{64}", open(log_path).read())
        if m:
            os.environ.update(SCUDA_TLS="1", SCUDA_TLS_FINGERPRINT=m.group(0))
            return
        time.sleep(0.1)
    p.kill()
    raise SystemExit("torch_bench: the server printed no certificate fingerprint; see %s" % log_path)


def stop_server(p):
    if p is None:
        return
    p.send_signal(signal.SIGTERM)
    try:
        p.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()


def check_driver(res, side, shim_dir):
    """A SCUDA run must have the shim's libcuda and no other; a native run
    must not have the shim."""
    if res is None:
        return None
    libcuda = [d for d in res.get("drivers", []) if os.path.basename(d).startswith("libcuda.so")]
    mine = [d for d in libcuda if os.path.dirname(d) == shim_dir]
    if side == "scuda":
        if libcuda and not mine:
            return "did not load SCUDA's libcuda"
        if len(libcuda) > len(mine):
            return "the real libcuda was loaded too"
    elif mine:
        return "the native run loaded SCUDA's shim"
    return None


def targets(name, nat, sc, link):
    """(target text, met?) for the figures with a target in docs/architecture.md, 7 Performance."""
    if nat is None or sc is None:
        return "", None
    rtt = link.get("rtt_us")
    bw = link.get("bw_gbps")
    if name == "launch":
        return "<= 1.10x native", sc <= 1.10 * nat
    if name == "item":
        if rtt is None:
            return "<= native + 1.5 RTT", None
        return "<= %.1f (native+1.5 RTT)" % (nat + 1.5 * rtt), sc <= nat + 1.5 * rtt
    if name in ("h2d", "d2h"):
        if bw is None:
            return ">= 0.9x raw link", None
        return ">= %.2f (0.9x raw)" % (0.9 * bw), sc >= 0.9 * bw
    if name == "gpt2":
        return "<= 1.03x native", sc <= 1.03 * nat
    if name == "generate":
        return "<= 1.10x native", sc <= 1.10 * nat
    if name == "resnet":
        return ">= 0.97x native", sc >= 0.97 * nat
    if name == "small_tf":
        return "<= 1.30x native", sc <= 1.30 * nat
    if name == "startup#2":
        return "<= 1.50x native", sc <= 1.50 * nat
    return "", None


def first_step_row(name, row):
    """The first training step (its own table row) of a training workload:
    target 2x native + 1 s (docs/architecture.md, 7 Performance)."""
    nat = (row.get("native_detail") or {}).get("first_s")
    sc = (row.get("scuda_detail") or {}).get("first_s")
    if name not in ("small_tf", "gpt2") or nat is None or sc is None:
        return None
    label = dict((w[0], w[1]) for w in WORKLOADS)[name] + ", first step"
    met = sc <= 2 * nat + 1
    waits = (row.get("scuda_detail") or {}).get("first_waits")
    row["first_step"] = {"native_s": nat, "scuda_s": sc, "target_met": met, "scuda_waits": waits}
    return (label, "s", "%.2f" % nat, "%.2f" % sc, "%.2fx" % (sc / nat),
            "<= %.2f (2x native + 1 s)  %s%s" % (2 * nat + 1, "met" if met else "NOT MET",
                                                 "" if waits is None else "; %d round trips" % waits))


def main():
    ap = argparse.ArgumentParser(description="PyTorch natively and through SCUDA, with ratios.")
    ap.add_argument("--server", help="SCUDA server HOST:PORT (default: start one on loopback)")
    ap.add_argument("--scuda", default=os.path.join(REPO, "build", "bin", "scuda"), help="the scuda command")
    ap.add_argument("--quick", action="store_true", help="fewer iterations")
    ap.add_argument("--tls", action="store_true", help="the server this run starts requires TLS")
    ap.add_argument("--only", help="comma-separated workloads (default: all)")
    ap.add_argument("--timeout", type=float, help="seconds per workload run (default 120, 60 with --quick)")
    ap.add_argument("--deadline", type=float, help="seconds for the whole run; workloads left are SKIPPED")
    ap.add_argument("--hide", action="store_true",
                    help="run the SCUDA side under tests/gpu/hide.sh (root): its processes cannot see this "
                         "machine's GPU, only the server's")
    ap.add_argument("--json", help="write every figure to this file")
    ap.add_argument("--log-dir", help="keep each worker's stderr here")
    ap.add_argument("--link-json", help="take the raw link figures from this `scuda bench --json` file "
                    "instead of measuring them from Python")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args()

    if args.worker:
        worker_main(args.worker, args.quick, T_PROCESS)
        return 0

    names = [w[0] for w in WORKLOADS]
    if args.only:
        names = [n.strip() for n in args.only.split(",") if n.strip()]
        bad = [n for n in names if n not in WORKERS]
        if bad:
            ap.error("unknown workload(s) %s; known: %s" % (", ".join(bad), ", ".join(WORKERS)))
    timeout = args.timeout or (60.0 if args.quick else 120.0)
    deadline = Deadline(args.deadline)
    scuda = os.path.abspath(args.scuda)
    if not os.access(scuda, os.X_OK):
        raise SystemExit("torch_bench: %s is not there; build SCUDA first, or pass --scuda" % scuda)
    lib_dir = os.environ.get("SCUDA_LIB_DIR") or os.path.join(os.path.dirname(scuda), "..", "lib")
    # Where the shim really lies: an unpacked package's lib/scuda when
    # build/lib only links to it (tests/gpu/from_package.sh).
    shim_dir = os.path.dirname(os.path.realpath(os.path.join(lib_dir, "libcuda.so.1")))
    log_dir = args.log_dir or tempfile.mkdtemp(prefix="torch_bench.")
    os.makedirs(log_dir, exist_ok=True)

    server_proc = None
    addr = args.server
    if addr is None:
        server_proc, addr = start_server(scuda, os.path.join(log_dir, "server.log"), args.tls)
    print("torch_bench: server %s%s, logs in %s" % (addr, " (started here)" if server_proc else "", log_dir),
          file=sys.stderr)

    me = os.path.abspath(__file__)
    py = sys.executable
    # Both sides' compile caches start empty (see above), and so does the
    # SCUDA client's attribute cache: a run does not depend on earlier ones.
    side_env = {side: dict(os.environ) for side in ("native", "scuda")}
    for side, var, name in (("native", "CUDA_CACHE_PATH", "compile-cache"),
                            ("scuda", "SCUDA_COMPILE_CACHE", "compile-cache"),
                            ("scuda", "SCUDA_ATTR_CACHE", "attr-cache")):
        cache = os.path.join(log_dir, name + "-" + side)
        shutil.rmtree(cache, ignore_errors=True)
        side_env[side][var] = cache
    results = {}
    try:
        link = link_from_bench(args.link_json) if args.link_json else raw_link(addr, args.quick)
        print("torch_bench: raw link %s" % json.dumps(link), file=sys.stderr)
        runs = []
        for n in names:
            runs += [n + "#1", n + "#2"] if n == "startup" else [n]
        for key in runs:
            name = key.split("#")[0]
            row = results[key] = {"native": None, "scuda": None}
            for side in ("native", "scuda"):
                left = deadline.left()
                if left is not None and left < 5:
                    row[side + "_error"] = "SKIPPED(deadline)"
                    row[side + "_reason"] = "the --deadline had passed"
                    continue
                t = timeout if left is None else min(timeout, left - 2)
                cmd = [py, me, "--worker", name] + (["--quick"] if args.quick else [])
                if side == "scuda":
                    cmd = [scuda, "run", "--server", addr, "--"] + cmd
                    if args.hide:
                        cmd = ["bash", os.path.join(REPO, "tests", "gpu", "hide.sh")] + cmd
                print("torch_bench: %-10s %-6s ..." % (key, side), file=sys.stderr, end="", flush=True)
                res, reason, err = run_worker(cmd, t, side_env[side])
                with open(os.path.join(log_dir, "%s.%s.log" % (key.replace("#", "-"), side)), "w") as f:
                    f.write(err or "")
                bad = check_driver(res, side, shim_dir)
                if reason is None and bad:
                    reason = bad
                row[side + "_detail"] = res
                if reason is None:
                    row[side] = res["value"]
                    print(" %s" % fmt(res["value"], "x"), file=sys.stderr)
                else:
                    row[side + "_error"] = "FAILED(%s)" % cell_reason(reason)
                    row[side + "_reason"] = reason
                    print(" FAILED: %s" % reason, file=sys.stderr)
    finally:
        stop_server(server_proc)

    # ---- the table ----
    units = {w[0]: w for w in WORKLOADS}
    print()
    print("torch_bench%s: server %s, python %s" % (" --quick" if args.quick else "", addr, py))
    rtt = link.get("rtt_us")
    bw = link.get("bw_gbps")
    print("raw link (%s): round trip %s, one stream %s" % (link.get("source", "Python client"),
        "%.1f us" % rtt if rtt else "FAILED(%s)" % short(link.get("rtt_error", "?")),
        "%.2f GB/s" % bw if bw else "FAILED(%s)" % short(link.get("bw_error", "?"))))
    print()
    rows = []
    summary = []
    for key, row in results.items():
        name = key.split("#")[0]
        _, label, unit, _ = units[name]
        if name == "startup":
            label += " (1st)" if key.endswith("#1") else " (2nd)"
        nat, sc = row["native"], row["scuda"]
        nat_s = fmt(nat, unit) if nat is not None else row.get("native_error", "-")
        sc_s = fmt(sc, unit) if sc is not None else row.get("scuda_error", "-")
        ratio = "%.2fx" % (sc / nat) if nat and sc is not None else "-"
        tgt, met = targets(key if name == "startup" else name, nat, sc, link)
        tgt_s = tgt + ("" if met is None else ("  met" if met else "  NOT MET")) if tgt else ""
        rows.append((label, unit, nat_s, sc_s, ratio, tgt_s))
        for side, v in (("native", nat_s), ("scuda", sc_s)):
            if v.startswith("FAILED") or v.startswith("SKIPPED"):
                summary.append("  %s, %s: %s" % (key, side, short(row.get(side + "_reason", ""), 200)))
        row["ratio"] = sc / nat if nat and sc is not None else None
        row["target"] = tgt or None
        row["target_met"] = met
        first = first_step_row(name, row)
        if first:
            rows.append(first)
    title = ("workload", "unit", "native", "SCUDA", "SCUDA/nat", "target")
    w = [max(len(r[i]) for r in rows + [title]) for i in range(5)]
    line = "%%-%ds  %%-%ds  %%%ds  %%%ds  %%%ds  %%s" % tuple(w)
    head = line % title
    print(head)
    print("-" * len(head))
    for r in rows:
        print(line % r)
    print()
    print("SCUDA/nat is SCUDA's figure divided by the native one (times: above 1 is slower;")
    print("rates: below 1 is slower). Per-workload stderr: %s" % log_dir)
    if summary:
        print("Not measured:")
        print("\n".join(summary))
    nvml = sorted({d for r in results.values() for d in ((r.get("scuda_detail") or {}).get("drivers") or [])
                   if os.path.basename(d).startswith("libnvidia-ml") and os.path.dirname(d) != shim_dir})
    if nvml:
        print("Note: the SCUDA runs loaded this machine's NVML (%s), not a SCUDA NVML shim." % ", ".join(nvml))

    if args.json:
        with open(args.json, "w") as f:
            json.dump({"server": addr, "quick": args.quick, "raw_link": link, "workloads": results}, f, indent=2)
    return 0


T_PROCESS = time.perf_counter()  # as early as a worker can take it: before torch

if __name__ == "__main__":
    sys.exit(main())
