"""test_jax.py - JAX through SCUDA, compared with native.

Each workload in workloads.py (jit, grad, a 100-step training loop, an
autotuned convolution) runs natively on the GPU machine and through
`scuda run` with the GPU hidden (tests/gpu/hide.sh). XLA's autotuner stays
on, so its redzone checker and timed candidate kernels run through SCUDA
too. Results must match native within a small tolerance: the autotuner
times candidates, and two runs may pick different (equally correct)
kernels. At the default log level SCUDA must add nothing to stderr.

Run on the GPU machine, as root, from the repository root, after
tests/gpu/build_product.sh (JAX asks NVML for its GPUs: the build needs
nvml.h, see that script):
    python3 -m pytest -v tests/gpu/jax
"""
import os
import sys

import pytest

from compare import close, load_workloads, run, scuda_lines, through_scuda

workloads = load_workloads("jax")

RTOL = 1e-4
# 100 steps compound the rounding of whichever kernels the autotuner timed
# fastest in that run: two native runs differ this much too.
RTOL_OF = {"train_mlp": 1e-3}


@pytest.mark.parametrize("name", sorted(workloads.ALL))
def test_matches_native(server, name):
    native, _ = run([], "jax", name)
    remote, err = run(through_scuda(server), "jax", name)
    rtol = RTOL_OF.get(name, RTOL)
    assert close(native, remote, rtol), f"{name}: native {native}\n   scuda {remote}"
    assert not scuda_lines(err), "\n".join(scuda_lines(err)[:20])
