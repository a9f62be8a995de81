"""conftest.py - the `server` fixture of the Python GPU suites: one
`scuda server` on loopback (the real GPU) for the whole pytest session."""
import os
import socket
import subprocess
import time

import pytest

from compare import SCUDA


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def server():
    if not os.path.exists(SCUDA):
        pytest.fail(f"{SCUDA} is missing: build the product first (tests/gpu/build_product.sh)")
    port = free_port()
    log = open(os.path.join(os.environ.get("OUT", "/tmp"), f"gpu-suite-server-{os.getpid()}.log"), "w")
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
