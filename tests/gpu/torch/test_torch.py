"""test_torch.py - PyTorch through SCUDA, compared with native (issue 3).

Every workload in workloads.py runs twice: natively on the GPU machine, and
through `scuda run` in a mount namespace where the GPU is hidden
(tests/gpu/hide.sh), against a `scuda server` started for the session.
The two results must match: bit for bit where the computation is
deterministic, within a tolerance where the library may pick different
algorithms (cuDNN benchmark mode).

Run on the GPU machine, as root, from the repository root:
    python3 -m pytest -v tests/gpu/torch
"""
import json
import math
import os
import socket
import subprocess
import sys
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
SCUDA = os.path.join(ROOT, "build", "bin", "scuda")
HIDE = os.path.join(ROOT, "tests", "gpu", "hide.sh")
TIMEOUT = int(os.environ.get("TORCH_TEST_TIMEOUT", "240"))

# Workloads whose results may legitimately differ in the last bits.
APPROX = {"conv": 1e-4, "train_transformer": 1e-5, "resnet18_step": 1e-4, "expandable_segments": 1e-5}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def server():
    if not os.path.exists(SCUDA):
        pytest.fail(f"{SCUDA} is missing: build the project first (tests/gpu/run.sh does)")
    port = free_port()
    log = open(os.path.join(os.environ.get("OUT", "/tmp"), "torch-server.log"), "w")
    proc = subprocess.Popen([SCUDA, "server", "--listen", f"127.0.0.1:{port}"], stderr=log,
                            env=dict(os.environ, SCUDA_LOG=os.environ.get("SCUDA_SERVER_LOG", "info")))
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            time.sleep(0.1)
    yield f"127.0.0.1:{port}"
    proc.terminate()  # only the server we started, by its handle
    proc.wait(timeout=10)


def run(cmd, name):
    """Runs run_one.py NAME under cmd; returns (result dict, stderr)."""
    try:
        p = subprocess.run(cmd + [sys.executable, os.path.join(HERE, "run_one.py"), name], cwd=HERE,
                           capture_output=True, text=True, timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{name}: no result within {TIMEOUT} s (a hang is a failure)")
    lines = [line for line in p.stdout.splitlines() if line.startswith("RESULT ")]
    if p.returncode != 0 or not lines:
        pytest.fail(f"{name} failed (rc={p.returncode}):\n{p.stderr[-3000:]}")
    return json.loads(lines[-1][len("RESULT "):]), p.stderr


def through_scuda(server):
    return ["bash", HIDE, SCUDA, "run", "--server", server, "--"]


def close(a, b, rtol):
    if isinstance(a, dict) and isinstance(b, dict):
        if "sha" in a and "sha" in b:  # a digest: compare the values, not the bytes
            return a["shape"] == b["shape"] and close(a["sum"], b["sum"], rtol) and close(a["head"], b["head"], rtol)
        return a.keys() == b.keys() and all(close(a[k], b[k], rtol) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(close(x, y, rtol) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=rtol, abs_tol=rtol) or (math.isnan(a) and math.isnan(b))
    return a == b


sys.path.insert(0, HERE)
import workloads  # noqa: E402


@pytest.mark.parametrize("name", sorted(workloads.ALL))
def test_matches_native(server, name):
    native, _ = run([], name)
    remote, err = run(through_scuda(server), name)
    if name in APPROX:
        assert close(native, remote, APPROX[name]), f"{name}: native {native}\n   scuda {remote}"
    else:
        assert native == remote, f"{name}: native {native}\n   scuda {remote}"
    assert "died" not in err


def test_startup_logs_nothing_unsupported(server):
    """Importing torch and the first CUDA tensor use only implemented calls."""
    p = subprocess.run(through_scuda(server) + [sys.executable, "-c",
                       "import torch; x = torch.ones(4, device='cuda'); print(float(x.sum()))"],
                       capture_output=True, text=True, timeout=TIMEOUT)
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.strip().endswith("4.0")
    bad = [line for line in p.stderr.splitlines() if "not supported" in line or "not implemented" in line]
    assert not bad, "\n".join(bad)


def test_no_server_fails_fast():
    """A workload with no server reachable fails within seconds, never hangs."""
    t = time.time()
    p = subprocess.run(through_scuda("127.0.0.1:1") + [sys.executable, "-c",
                       "import torch; print(torch.cuda.is_available())"],
                       capture_output=True, text=True, timeout=60)
    assert time.time() - t < 30
    assert "False" in p.stdout or p.returncode != 0
    assert "127.0.0.1:1" in p.stderr
