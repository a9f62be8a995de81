"""workloads.py - JAX workloads for the GPU suite (test_jax.py).

Each returns a JSON-able result that test_jax.py compares between a native
run and a run through SCUDA. XLA's autotuner is left on (its default level):
it launches XLA's redzone checker and times candidate kernels, which is what
a real JAX program does on its first jit of a matmul or convolution.
"""
import hashlib
import os

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # native and SCUDA runs share the GPU

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402


def digest(x):
    a = np.asarray(x)
    return {"shape": list(a.shape), "sha": hashlib.sha256(a.tobytes()).hexdigest()[:16],
            "sum": float(a.astype(np.float64).sum()), "head": [float(v) for v in a.ravel()[:4]]}


def params(key, sizes):
    ps = []
    for m, n in zip(sizes[:-1], sizes[1:]):
        key, k = jax.random.split(key)
        ps.append((jax.random.normal(k, (m, n), jnp.float32) / np.sqrt(m), jnp.zeros((n,), jnp.float32)))
    return ps


def mlp(ps, x):
    for w, b in ps[:-1]:
        x = jax.nn.relu(x @ w + b)
    w, b = ps[-1]
    return x @ w + b


def loss(ps, x, y):
    return jnp.mean((mlp(ps, x) - y) ** 2)


def data(n=256, d=64, k=10):
    key = jax.random.PRNGKey(1)
    kx, ky = jax.random.split(key)
    return jax.random.normal(kx, (n, d)), jax.random.normal(ky, (n, k))


def jit_mlp():
    ps = params(jax.random.PRNGKey(0), [64, 256, 256, 10])
    x, _ = data()
    out = jax.jit(mlp)(ps, x)
    return {"device": jax.devices()[0].platform, "out": digest(out)}


def grad_mlp():
    ps = params(jax.random.PRNGKey(0), [64, 256, 256, 10])
    x, y = data()
    g = jax.jit(jax.grad(loss))(ps, x, y)
    return {"grads": [digest(w) for w, _ in g] + [digest(b) for _, b in g]}


def train_mlp():
    ps = params(jax.random.PRNGKey(0), [64, 512, 512, 10])
    x, y = data()

    @jax.jit
    def step(ps, x, y):
        l, g = jax.value_and_grad(loss)(ps, x, y)
        return [(w - 0.05 * gw, b - 0.05 * gb) for (w, b), (gw, gb) in zip(ps, g)], l

    losses = []
    for _ in range(100):
        ps, l = step(ps, x, y)
        losses.append(float(l))
    return {"losses": losses[::10] + [losses[-1]], "w0": digest(ps[0][0])}


def conv_autotune():
    """A convolution: XLA autotunes it over cuDNN's algorithms."""
    key = jax.random.PRNGKey(2)
    kx, kw = jax.random.split(key)
    x = jax.random.normal(kx, (8, 32, 32, 16))
    w = jax.random.normal(kw, (3, 3, 16, 32))
    f = jax.jit(lambda x, w: jax.lax.conv_general_dilated(x, w, (1, 1), "SAME",
                                                          dimension_numbers=("NHWC", "HWIO", "NHWC")))
    return {"out": digest(f(x, w))}


ALL = {"jit_mlp": jit_mlp, "grad_mlp": grad_mlp, "train_mlp": train_mlp, "conv_autotune": conv_autotune}
