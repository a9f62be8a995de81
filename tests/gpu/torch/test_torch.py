"""test_torch.py - PyTorch through SCUDA, compared with native.

Every workload in workloads.py runs twice: natively on the GPU machine, and
through `scuda run` in a mount namespace where the GPU is hidden
(tests/gpu/hide.sh), against a `scuda server` started for the session.
The two results must match: bit for bit where the computation is
deterministic, within a tolerance where the library may pick different
algorithms (cuDNN benchmark mode).

Run on the GPU machine, as root, from the repository root:
    python3 -m pytest -v tests/gpu/torch
"""
import os
import subprocess
import sys
import time

import pytest

from compare import close, load_workloads, run, scuda_lines, through_scuda

HERE = os.path.dirname(os.path.abspath(__file__))
TIMEOUT = 240

# Workloads whose results may legitimately differ in the last bits.
APPROX = {"conv": 1e-4, "train_transformer": 1e-5, "resnet18_step": 1e-4, "expandable_segments": 1e-5}


workloads = load_workloads("torch")


@pytest.mark.parametrize("name", sorted(workloads.ALL))
def test_matches_native(server, name):
    native, _ = run([], "torch", name)
    remote, err = run(through_scuda(server), "torch", name)
    if name in APPROX:
        assert close(native, remote, APPROX[name]), f"{name}: native {native}\n   scuda {remote}"
    else:
        assert native == remote, f"{name}: native {native}\n   scuda {remote}"
    assert "died" not in err
    # At the default log level SCUDA adds nothing to a program's stderr.
    assert not scuda_lines(err), "\n".join(scuda_lines(err)[:20])


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
