#!/usr/bin/env python3
"""k8s_check.py SCUDA KUBERNETES_VALIDATE: deploy/k8s/ is valid and starts.

No cluster runs in CI, so the manifests are checked offline:
1. kubernetes-validate --strict accepts every manifest (the API schema of
   the Kubernetes version it ships, unknown fields refused);
2. the pieces agree: the Service and probes name ports the container
   declares, the server's --token-file is where the Secret's key is
   mounted, the Secret holds that key, every port in the arguments is a
   declared container port;
3. the container's command line (the server image's entrypoint, from
   deploy/docker/server.Dockerfile, then the DaemonSet's args) starts a
   real server here: the same flags, with the addresses moved to free
   loopback ports, the paths to a scratch directory and the stand-in
   driver; its agent and metrics ports answer.
Prints one `ok` line per check; exits 1 at the first failure, saying why.
"""
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time

import yaml  # kubernetes-validate's own dependency: run with its venv's python

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
K8S = os.path.join(ROOT, "deploy", "k8s")
# The server's options that take no value (scuda server --help).
SWITCHES = {"--tls", "--insecure", "--syslog", "--driver-placed-memory"}


def fail(why):
    print(f"FAIL k8s: {why}")
    sys.exit(1)


def ok(what):
    print(f"ok {what}")


def manifests():
    docs = {}
    for name in sorted(os.listdir(K8S)):
        if name.endswith(".yaml"):
            with open(os.path.join(K8S, name)) as f:
                for d in yaml.safe_load_all(f):
                    if d:
                        docs[d["kind"]] = d
    return docs


def validate(tool):
    files = sorted(os.path.join(K8S, n) for n in os.listdir(K8S) if n.endswith(".yaml"))
    if not files:
        fail("deploy/k8s holds no manifest")
    r = subprocess.run([tool, "--strict", *files], capture_output=True, text=True)
    if r.returncode != 0:
        fail(f"kubernetes-validate --strict refused the manifests:\n{r.stdout}{r.stderr}")
    ok(f"kubernetes-validate --strict accepts {len(files)} manifests")


def entrypoint():
    with open(os.path.join(ROOT, "deploy", "docker", "server.Dockerfile")) as f:
        m = re.search(r"^ENTRYPOINT\s+(\[.*\])\s*$", f.read(), re.M)
    if not m:
        fail("server.Dockerfile has no ENTRYPOINT in exec form")
    return json.loads(m.group(1))


def option(args, name):
    if name not in args or args.index(name) + 1 >= len(args):
        fail(f"the server's arguments lack {name}")
    return args[args.index(name) + 1]


def agree(docs):
    for kind in ("DaemonSet", "Service", "Secret", "Namespace"):
        if kind not in docs:
            fail(f"no {kind} in deploy/k8s")
    pod = docs["DaemonSet"]["spec"]["template"]["spec"]
    c = pod["containers"][0]
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    for p in docs["Service"]["spec"]["ports"]:
        if p["targetPort"] not in ports:
            fail(f"the Service's port {p['name']} targets {p['targetPort']}, which the container does not declare")
    for probe in ("readinessProbe", "livenessProbe"):
        if c[probe]["tcpSocket"]["port"] not in ports:
            fail(f"the {probe} names a port the container does not declare")
    args = c["args"]
    for flag in ("--listen", "--agent", "--metrics"):
        port = int(option(args, flag).rsplit(":", 1)[1])
        if port not in ports.values():
            fail(f"{flag} listens on {port}, which the container does not declare")
    token_file = option(args, "--token-file")
    mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
    secret_vol = next((v for v in pod["volumes"] if "secret" in v), None)
    if not secret_vol or secret_vol["secret"]["secretName"] != docs["Secret"]["metadata"]["name"]:
        fail("no volume mounts the tokens Secret")
    key = secret_vol["secret"]["items"][0]
    if os.path.join(mounts[secret_vol["name"]], key["path"]) != token_file:
        fail(f"--token-file {token_file} is not where the Secret's key is mounted")
    if key["key"] not in docs["Secret"].get("stringData", {}):
        fail(f"the Secret holds no key {key['key']}")
    namespaces = {d["metadata"].get("namespace") for k, d in docs.items() if k != "Namespace"}
    if namespaces != {docs["Namespace"]["metadata"]["name"]}:
        fail(f"the manifests name namespaces {namespaces}, not the one deploy/k8s creates")
    ok("the Service, probes, ports, Secret and --token-file agree")
    return args


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def answers(port, deadline, server):
    while time.time() < deadline and server.poll() is None:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return True
        except OSError:
            time.sleep(0.1)
    return False


def starts(scuda, standin, args):
    ep = entrypoint()
    if ep[:2] != ["scuda", "server"]:
        fail(f"the server image's entrypoint is {ep}, not scuda server")
    with tempfile.TemporaryDirectory() as tmp:
        tokens = os.path.join(tmp, "tokens")
        with open(tokens, "w") as f:
            f.write("admin " + "a" * 64 + "\n")
        os.chmod(tokens, 0o600)
        moved, ports = [], {}
        full = ep[2:] + args
        i = 0
        while i < len(full):
            flag = full[i]
            if flag in SWITCHES:
                moved.append(flag)
                i += 1
                continue
            if i + 1 >= len(full):
                fail(f"{flag} has no value in the container's command line")
            value = full[i + 1]
            if flag in ("--listen", "--agent", "--metrics"):
                ports[flag] = free_port()
                value = f"127.0.0.1:{ports[flag]}"
            elif flag in ("--state-dir", "--module-cache"):
                value = os.path.join(tmp, flag.strip("-"))
            elif flag == "--token-file":
                value = tokens
            moved += [flag, value]
            i += 2
        cmd = [scuda, "server", "--driver", standin] + moved
        log = open(os.path.join(tmp, "server.log"), "w+")
        p = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.time() + 20
            for flag, port in ports.items():
                if not answers(port, deadline, p):
                    log.seek(0)
                    fail(f"the server started with the DaemonSet's command line does not answer on {flag}:\n"
                         f"{' '.join(cmd)}\n{log.read()[-3000:]}")
            if p.poll() is not None:
                log.seek(0)
                fail(f"the server exited ({p.returncode}):\n{log.read()[-3000:]}")
        finally:
            p.terminate()
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
    ok("the container's command line starts a server whose " + ", ".join(ports) + " ports answer")


def main():
    if len(sys.argv) != 4:
        fail("usage: k8s_check.py SCUDA STANDIN_DRIVER KUBERNETES_VALIDATE")
    scuda, standin, tool = sys.argv[1:]
    if not os.access(tool, os.X_OK):
        fail(f"{tool} is missing: scripts/deps.sh installs kubernetes-validate into build-deps/venv")
    validate(tool)
    starts(scuda, standin, agree(manifests()))
    print("k8s: 3 passed, 0 failed")


main()
