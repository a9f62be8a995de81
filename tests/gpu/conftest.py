"""conftest.py - the `server` fixture of the Python GPU suites: one
`scuda server` on loopback (the real GPU) for the whole pytest session."""
import os
import re
import socket
import subprocess
import tempfile
import time

import pytest

from compare import SCUDA


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def trust_server_certificate(log_path):
    """Clients (started later, they inherit os.environ) trust exactly the
    certificate whose fingerprint the server printed at start."""
    for _ in range(100):
        m = re.search(r"sha256:[0-9a-f]{64}", open(log_path).read())
        if m:
            os.environ.update(SCUDA_TLS="1", SCUDA_TLS_FINGERPRINT=m.group(0))
            return
        time.sleep(0.1)
    pytest.fail(f"the server printed no certificate fingerprint in {log_path}")


@pytest.fixture(scope="session")
def server():
    if not os.path.exists(SCUDA):
        pytest.fail(f"{SCUDA} is missing: build the product first (tests/gpu/build_product.sh)")
    port = free_port()
    log_path = os.path.join(os.environ.get("OUT", "/tmp"), f"gpu-suite-server-{os.getpid()}.log")
    log = open(log_path, "w")
    tls = os.environ.get("SCUDA_GPU_TLS") == "1"  # the suite over TLS, as tests/gpu/tls.sh
    tls_args = ["--tls", "--state-dir", tempfile.mkdtemp(prefix="scuda-gpu-tls.")] if tls else []
    proc = subprocess.Popen([SCUDA, "server", "--listen", f"127.0.0.1:{port}"] + tls_args, stderr=log,
                            env=dict(os.environ, SCUDA_LOG=os.environ.get("SCUDA_SERVER_LOG", "info")))
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            time.sleep(0.1)
    if tls:
        trust_server_certificate(log_path)
    yield f"127.0.0.1:{port}"
    proc.terminate()  # only the server we started, by its handle
    proc.wait(timeout=10)
