# link_lib.sh - what the link benchmarks share (links.sh, compress_link.sh):
# one server on a free loopback port, and linkem relays in front of it that
# make a slower link. Sourced after OUTDIR, SCUDA and LINKEM are set; every
# process it starts is stopped at exit, by PID.
# shellcheck shell=bash
# shellcheck disable=SC2034  # PORT and RELAY_PORT are for the scripts that source this
PIDS=()
link_cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; }
trap link_cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() { for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.1; done; return 1; }

# start_link_server WHO: the server, on PORT, logging to OUTDIR/server.log;
# SERVER_ARGS adds options (e.g. --driver PATH). 1 when it did not listen.
start_link_server() {
  PORT=$(free_port)
  # shellcheck disable=SC2086  # extra server options, split on purpose
  SCUDA_LOG=info "$SCUDA" server --listen "127.0.0.1:$PORT" ${SERVER_ARGS:-} >"$OUTDIR/server.log" 2>&1 &
  PIDS+=($!)
  wait_port "$PORT" || { echo "$1: the server did not start (see $OUTDIR/server.log)" >&2; return 1; }
}

# relay WHO DELAY_MS RATE_MBIT: linkem in front of the server; its port
# goes to RELAY_PORT. (Not called as $(relay ...): a subshell would lose
# the PID, and the relay would outlive the script.)
relay() {
  RELAY_PORT=$(free_port)
  "$LINKEM" --listen "127.0.0.1:$RELAY_PORT" --connect "127.0.0.1:$PORT" --delay-ms "$2" --rate-mbit "$3" \
    >"$OUTDIR/linkem-$RELAY_PORT.log" 2>&1 &
  PIDS+=($!)
  wait_port "$RELAY_PORT" || { echo "$1: linkem did not start" >&2; return 1; }
}
