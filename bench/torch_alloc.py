#!/usr/bin/env python3
"""torch_alloc.py - PyTorch's allocator, natively and through SCUDA.

Run on the GPU machine from the repository root, after building:

    python3 bench/torch_alloc.py [--server HOST:PORT] [--steps N] [--hide] [--server-arg OPT]

Four runs, each a fresh process: natively and through SCUDA (`scuda run`),
each with PyTorch's default allocator and with
PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (which reserves address
space with cuMemAddressReserve and maps into it: the session places that
reservation in its device window). Each run allocates and frees tensors of
mixed sizes (512 B to 64 MiB, a fixed random sequence) and reports:

    cold_us   torch.empty + del per tensor while the caching allocator
              still has to ask the driver (first pass, cache emptied first)
    warm_us   the same once the caching allocator has the memory
    empty_ms  torch.cuda.empty_cache(): the memory goes back to the driver

Without --server, a `scuda server` is started on a free loopback port.
Only the standard library is needed in the parent; the workers need torch.
"""
import argparse
import json
import os
import random
import socket
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCUDA = os.path.join(ROOT, "build", "bin", "scuda")
HIDE = os.path.join(ROOT, "tests", "gpu", "hide.sh")
SIZES = [512, 4096, 65536, 1 << 20, 3 << 20, 16 << 20, 64 << 20]


def worker(steps):
    import torch

    rng = random.Random(1)
    seq = [rng.choice(SIZES) for _ in range(steps)]
    torch.empty(1, device="cuda")  # the context
    torch.cuda.synchronize()

    def one_pass():
        live = []
        t0 = time.perf_counter()
        for i, n in enumerate(seq):
            live.append(torch.empty(n, dtype=torch.uint8, device="cuda"))
            if len(live) > 8 or i % 3 == 0:  # a mixed lifetime: some die at once, some later
                live.pop(0)
        live.clear()
        torch.cuda.synchronize()
        return (time.perf_counter() - t0) / len(seq) * 1e6

    torch.cuda.empty_cache()
    cold = one_pass()
    warm = min(one_pass() for _ in range(3))
    t0 = time.perf_counter()
    torch.cuda.empty_cache()
    empty_ms = (time.perf_counter() - t0) * 1e3
    x = torch.arange(1 << 20, device="cuda", dtype=torch.int32)  # the memory works
    assert int(x.sum().item()) == (1 << 20) * ((1 << 20) - 1) // 2
    print(json.dumps({"cold_us": cold, "warm_us": warm, "empty_ms": empty_ms}))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(remote, server, expandable, steps, hide):
    env = dict(os.environ)
    env.pop("PYTORCH_CUDA_ALLOC_CONF", None)
    if expandable:
        env["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", "--steps", str(steps)]
    if remote:
        cmd = [SCUDA, "run", "--server", server, "--"] + cmd
        if hide:  # the client must not see this machine's GPU
            cmd = ["bash", HIDE] + cmd
    try:
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    except subprocess.TimeoutExpired:
        return None, "timed out"
    if out.returncode != 0:
        return None, (out.stderr.strip().splitlines() or ["exit %d" % out.returncode])[-1]
    return json.loads(out.stdout.strip().splitlines()[-1]), ""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--server")
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--worker", action="store_true")
    ap.add_argument("--hide", action="store_true",
                    help="run SCUDA's clients under tests/gpu/hide.sh (root), so only the server sees the GPU")
    ap.add_argument("--server-arg", action="append", default=[],
                    help="an option for the server this script starts (repeat), e.g. --driver-placed-memory")
    a = ap.parse_args()
    if a.worker:
        worker(a.steps)
        return 0
    server, proc = a.server, None
    if not server:
        server = "127.0.0.1:%d" % free_port()
        proc = subprocess.Popen([SCUDA, "server", "--listen", server] + a.server_arg, stderr=subprocess.DEVNULL)
        time.sleep(1)
    failed = 0
    try:
        print("%-34s %10s %10s %10s" % ("run", "cold us", "warm us", "empty ms"))
        for expandable in (False, True):
            for remote in (False, True):
                name = "%s, %s" % ("SCUDA" if remote else "native",
                                   "expandable_segments" if expandable else "default allocator")
                res, err = run(remote, server, expandable, a.steps, a.hide)
                if res is None:
                    failed = 1
                    print("%-34s FAILED(%s)" % (name, err))
                else:
                    print("%-34s %10.2f %10.2f %10.2f" % (name, res["cold_us"], res["warm_us"], res["empty_ms"]))
    finally:
        if proc:
            proc.terminate()
            proc.wait()
    return failed


if __name__ == "__main__":
    sys.exit(main())
