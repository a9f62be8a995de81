"""compare.py - what the Python GPU suites (torch/, jax/) share: running a
workload natively and through SCUDA (client in tests/gpu/hide.sh, so the
GPU is reachable only through SCUDA), and comparing the two results.
The `server` fixture is in conftest.py."""
import math
import os
import subprocess
import sys

import pytest

GPU_DIR = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(GPU_DIR, "..", ".."))
SCUDA = os.path.join(ROOT, "build", "bin", "scuda")
HIDE = os.path.join(GPU_DIR, "hide.sh")
TIMEOUT = int(os.environ.get("GPU_TEST_TIMEOUT", os.environ.get("TORCH_TEST_TIMEOUT", "240")))


def load_workloads(suite):
    """SUITE/workloads.py as its own module (both suites name theirs workloads)."""
    import importlib.util
    spec = importlib.util.spec_from_file_location(f"{suite}_workloads", os.path.join(GPU_DIR, suite, "workloads.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def through_scuda(server):
    return ["bash", HIDE, SCUDA, "run", "--server", server, "--"]


def run(cmd, suite, name, env=None):
    """Runs workload NAME of SUITE under cmd; returns (result dict, stderr)."""
    import json
    try:
        p = subprocess.run(cmd + [sys.executable, os.path.join(GPU_DIR, "run_workload.py"), suite, name],
                           cwd=GPU_DIR, capture_output=True, text=True, timeout=TIMEOUT,
                           env=dict(os.environ, **(env or {})))
    except subprocess.TimeoutExpired:
        pytest.fail(f"{name}: no result within {TIMEOUT} s (a hang is a failure)")
    lines = [line for line in p.stdout.splitlines() if line.startswith("RESULT ")]
    if p.returncode != 0 or not lines:
        pytest.fail(f"{name} failed (rc={p.returncode}):\n{p.stderr[-3000:]}")
    return json.loads(lines[-1][len("RESULT "):]), p.stderr


def close(a, b, rtol):
    """Equal within rtol, recursively; a digest compares its values, not its hash."""
    if isinstance(a, dict) and isinstance(b, dict):
        if "sha" in a and "sha" in b:
            return a["shape"] == b["shape"] and close(a["sum"], b["sum"], rtol) and close(a["head"], b["head"], rtol)
        return a.keys() == b.keys() and all(close(a[k], b[k], rtol) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(close(x, y, rtol) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=rtol, abs_tol=rtol) or (math.isnan(a) and math.isnan(b))
    return a == b


def scuda_lines(stderr):
    """What SCUDA itself wrote on a program's stderr."""
    return [line for line in stderr.splitlines() if line.startswith("scuda[")]
