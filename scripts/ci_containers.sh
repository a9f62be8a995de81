#!/usr/bin/env bash
# The shipping checks, run last by scripts/test.sh (docs/deploy.md):
#   package      scripts/package.sh: the .deb and the .tar.gz
#   systemd      systemd-analyze verify of deploy/systemd/scuda-server.service
#   compose      deploy/docker/compose.yaml parses (docker-compose config)
#   deb          the .deb installed in a fresh Debian container: scuda on PATH,
#                the shims in /usr/lib/scuda and nowhere on the library path
#   images       both images of deploy/docker/ build
#   cuda         the client image runs a CUDA program against the server image
#                (the stand-in driver from the host, as --gpus would mount the
#                real one) over TLS with a token: the right answer
#   fresh        the README's test command (./scripts/test.sh) in a fresh
#                Debian container with only the CUDA headers copied in
# It runs its own Docker daemon (docker.io; no iptables, no bridge, host
# networking, its own data root and socket) and makes the base image with
# debootstrap and `docker import`: no registry is needed. Anything missing
# fails loudly; nothing is skipped. Each check is one test; the last line
# is "containers: N passed, N failed". Needs root.
#   $1  the release build with the tests (for the stand-in and the probe)
set -uo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
BUILD=${1:-build-ci}
WORK=$REPO/build-ci-docker
RUN=/tmp/scuda-ci-docker.$$ # short paths: unix sockets
mkdir -p "$WORK" "$RUN"
pass=0 fail=0
ok() { echo "ok   containers/$1"; pass=$((pass + 1)); }
bad() { echo "FAIL containers/$1: $2"; fail=$((fail + 1)); }
finish() {
  stop_daemon
  umount "$RUN/exec/netns/default" 2>/dev/null # the daemon's own network namespace
  rm -rf "$RUN"
  echo "containers: $pass passed, $fail failed"
  exit $((fail > 0))
}

[ "$(id -u)" -eq 0 ] || { bad setup "needs root (a Docker daemon of its own, debootstrap)"; finish; }
need=()
command -v dockerd >/dev/null || need+=(docker.io)
command -v debootstrap >/dev/null || need+=(debootstrap)
command -v docker-compose >/dev/null || need+=(docker-compose)
command -v systemd-analyze >/dev/null || need+=(systemd)
if ((${#need[@]})); then
  echo "containers: installing ${need[*]} with apt-get"
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}"; } >"$WORK/apt.log" 2>&1 ||
    { tail -n 20 "$WORK/apt.log"; bad setup "apt-get install ${need[*]} failed"; finish; }
fi

# ---- the daemon ----
export DOCKER_HOST=unix://$RUN/docker.sock
daemon_pid=""
start_daemon() { # storage driver
  dockerd --iptables=false --ip6tables=false --bridge=none --storage-driver "$1" \
    --data-root "$WORK/data-$1" --exec-root "$RUN/exec" --pidfile "$RUN/docker.pid" \
    -H "$DOCKER_HOST" >"$WORK/dockerd.log" 2>&1 &
  daemon_pid=$!
  for _ in $(seq 1 60); do
    docker version >/dev/null 2>&1 && return 0
    kill -0 "$daemon_pid" 2>/dev/null || break
    sleep 0.5
  done
  stop_daemon
  return 1
}
stop_daemon() {
  [ -n "$daemon_pid" ] || return 0
  kill "$daemon_pid" 2>/dev/null
  for _ in $(seq 1 40); do kill -0 "$daemon_pid" 2>/dev/null || break; sleep 0.5; done
  kill -9 "$daemon_pid" 2>/dev/null
  wait "$daemon_pid" 2>/dev/null
  daemon_pid=""
}
if ! start_daemon overlay2 && ! start_daemon vfs; then
  tail -n 30 "$WORK/dockerd.log"
  bad setup "dockerd did not start with overlay2 nor vfs storage (log above, $WORK/dockerd.log)"
  finish
fi

# ---- the base image: debootstrap of the mirror apt already uses ----
mirror() {
  local m
  m=$(grep -hs '^URIs:' /etc/apt/sources.list.d/*.sources | awk '{print $2}' | grep -v security | head -n 1)
  [ -n "$m" ] || m=$(grep -hs '^deb ' /etc/apt/sources.list | awk '{print $2}' | grep -v security | head -n 1)
  echo "${m:-http://deb.debian.org/debian}"
}
BASE=scuda-ci-base:bookworm
if ! docker image inspect "$BASE" >/dev/null 2>&1; then
  if [ ! -s "$WORK/bookworm.tar" ]; then
    rm -rf "$WORK/rootfs"
    if ! debootstrap --variant=minbase bookworm "$WORK/rootfs" "$(mirror)" >"$WORK/debootstrap.log" 2>&1; then
      tail -n 20 "$WORK/debootstrap.log"; bad setup "debootstrap failed (mirror $(mirror))"; finish
    fi
    tar -C "$WORK/rootfs" -cf "$WORK/bookworm.tar" . && rm -rf "$WORK/rootfs"
  fi
  docker import "$WORK/bookworm.tar" "$BASE" >/dev/null || { bad setup "docker import failed"; finish; }
fi

# ---- packages ----
PKG=$WORK/pkg
if bash scripts/package.sh "$WORK/build-pkg" >"$WORK/package.log" 2>&1; then
  rm -rf "$PKG" && mkdir -p "$PKG" && cp "$WORK"/build-pkg/scuda_*.deb "$WORK"/build-pkg/scuda-*.tar.gz "$PKG"/
  ok package
else
  tail -n 30 "$WORK/package.log"; bad package "scripts/package.sh failed"; finish
fi

# ---- the systemd unit ----
out=$(systemd-analyze verify deploy/systemd/scuda-server.service 2>&1)
if [ $? -eq 0 ] && [ -z "$out" ]; then ok systemd; else bad systemd "systemd-analyze verify: $out"; fi

# ---- the compose file ----
if out=$(SCUDA_TOKEN=x SCUDA_TLS_FINGERPRINT=sha256:0 docker-compose -f deploy/docker/compose.yaml config 2>&1); then
  ok compose
else
  bad compose "docker-compose config: $out"
fi

# ---- the .deb in a fresh container ----
deb_check='set -e
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends /pkg/scuda_*.deb >/dev/null
test "$(command -v scuda)" = /usr/bin/scuda
scuda --version
test -f /usr/lib/scuda/libcuda.so.1 && test -f /usr/lib/scuda/libnvidia-ml.so.1
! ldconfig -p | grep -q "libcuda.so.1 .*scuda"
test ! -e /usr/lib/x86_64-linux-gnu/libcuda.so.1
getent passwd scuda >/dev/null
scuda config | grep -q "Shims:      /usr/lib/scuda"
scuda run --no-check -- sh -c "echo \$LD_LIBRARY_PATH" | grep -q "^/usr/lib/scuda"'
if out=$(docker run --rm --network host -v "$PKG":/pkg:ro "$BASE" sh -c "$deb_check" 2>&1); then
  ok deb
else
  bad deb "installing the .deb in a fresh container: $out"
fi

# ---- the images ----
if docker build -q --network host --build-arg BASE="$BASE" -f deploy/docker/server.Dockerfile -t scuda-ci-server "$PKG" \
     >"$WORK/server-image.log" 2>&1 &&
   docker build -q --network host --build-arg BASE="$BASE" -f deploy/docker/client.Dockerfile -t scuda-ci-client "$PKG" \
     >"$WORK/client-image.log" 2>&1; then
  ok images
  docker image ls --format '{{.Repository}}:{{.Tag}} {{.Size}}' | grep -E '^scuda-ci-(server|client|base)' | sed 's/^/  image /'
else
  tail -n 20 "$WORK/server-image.log" "$WORK/client-image.log"; bad images "docker build failed"
fi

# ---- a CUDA program in the client image, against the server image ----
# The server listens beyond loopback (host networking, 0.0.0.0), so it
# wants a token and speaks TLS; the client pins the fingerprint it printed.
cuda_check() {
  local standin=$REPO/$BUILD/lib/standin/libcuda-standin.so probe=$REPO/$BUILD/bin/e2e_run_probe
  [ -f "$standin" ] && [ -x "$probe" ] || { echo "no $standin or $probe: the release suite did not build"; return 1; }
  local port
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  printf 'ci %s\n' "ci-token-$$" >"$RUN/tokens" && chmod 644 "$RUN/tokens"
  docker rm -f scuda-ci-srv >/dev/null 2>&1
  docker run -d --name scuda-ci-srv --network host -v "$RUN/tokens":/etc/scuda/tokens:ro \
    -v "$standin":/driver/libcuda.so.1:ro scuda-ci-server \
    --listen "0.0.0.0:$port" --token-file /etc/scuda/tokens --driver /driver/libcuda.so.1 >/dev/null || return 1
  local fp=""
  for _ in $(seq 1 50); do
    fp=$(docker logs scuda-ci-srv 2>&1 | grep -o 'sha256:[0-9a-f]\{64\}' | head -n 1)
    [ -n "$fp" ] && break
    sleep 0.2
  done
  [ -n "$fp" ] || { docker logs scuda-ci-srv; return 1; }
  local out
  out=$(docker run --rm --network host -e SCUDA_SERVER="127.0.0.1:$port" -e SCUDA_TOKEN="ci-token-$$" \
    -e SCUDA_TLS=1 -e SCUDA_TLS_FINGERPRINT="$fp" -v "$probe":/probe:ro scuda-ci-client /probe 2>&1)
  echo "$out"
  docker logs scuda-ci-srv 2>&1 | tail -n 5
  docker rm -f scuda-ci-srv >/dev/null 2>&1
  grep -q '^copy 0 0x5eed 0x5eed$' <<<"$out"
}
if out=$(cuda_check 2>&1); then ok cuda; else bad cuda "the client image against the server image: $out"; fi

# ---- the README's test command in a fresh Debian container ----
# The work tree as git sees it (tracked and new files, not the ignored
# builds), the CUDA headers copied in, nothing else. The e2e tests make
# network and mount namespaces (beyond_loopback) and LeakSanitizer stops
# threads with ptrace: those capabilities, not --privileged (which asks
# for every capability, more than a CI machine may hold). Its own
# container stage is off (no Docker inside). Its libFuzzer targets run
# 15 s each (FRESH_FUZZ_SECONDS): the host's own run fuzzes for the full
# time, and CI stays under 40 min.
fresh_check() {
  # shellcheck source=/dev/null
  . build-deps/env
  git ls-files -co --exclude-standard -z | tar --null -T - -cf "$RUN/src.tar" || return 1
  # The site's pip settings, as a new machine on this network would have
  # them: a package index, and the CA of a proxy that inspects TLS.
  local site=()
  if [ -n "${PIP_CERT:-}" ] && [ -f "$PIP_CERT" ]; then
    site+=(-v "$PIP_CERT":/etc/scuda-ci-pip-ca.crt:ro -e PIP_CERT=/etc/scuda-ci-pip-ca.crt)
  fi
  for v in PIP_INDEX_URL PIP_EXTRA_INDEX_URL PIP_DEFAULT_TIMEOUT; do
    [ -n "${!v:-}" ] && site+=(-e "$v=${!v}")
  done
  docker run --rm --network host --cap-add SYS_ADMIN --cap-add NET_ADMIN --cap-add SYS_PTRACE \
    --security-opt seccomp=unconfined --security-opt apparmor=unconfined --shm-size 1g \
    -v "$RUN/src.tar":/src.tar:ro \
    -v "$CUDA_INCLUDE_DIR":/usr/local/cuda/include:ro -e SCUDA_CI_CONTAINERS=0 "${site[@]}" \
    -e FUZZ_SECONDS="${FRESH_FUZZ_SECONDS:-15}" "$BASE" \
    sh -c 'mkdir /scuda && cd /scuda && tar xf /src.tar && ./scripts/test.sh' >"$WORK/fresh.log" 2>&1
  local rc=$?
  tail -n 1 "$WORK/fresh.log"
  return $rc
}
if out=$(fresh_check 2>&1); then
  ok "fresh ($out)"
else
  grep -E 'FAIL|Failed|\*\*\*|deps:' "$WORK/fresh.log" | head -n 30
  bad fresh "./scripts/test.sh in a fresh container: $out (log: $WORK/fresh.log)"
fi
finish
