#!/usr/bin/env bash
# standby_torch.sh [DIR]: train_gpt.py natively, then through SCUDA (GPU
# hidden) on server A with server S as its standby (SCUDA_STANDBY,
# snapshots every SNAPSHOT_EVERY seconds, default 2); A and its sessions are
# killed (SIGKILL) once the training wrote step KILL_AT (default 150). The
# client must finish on S with every step's loss equal to the native run's.
# Prints the snapshot pauses (the client's lines), the journal replayed,
# and the time from the kill to the next step. One SUMMARY line; exit 1 on
# failure. Logs in DIR (default /tmp/standby).
set -uo pipefail
source "$(dirname "$0")/lib.sh"
R=${1:-/tmp/standby}
KILL_AT=${KILL_AT:-150}
mkdir -p "$R"
rm -f "$R/native.txt" "$R/scuda.txt"
export CUBLAS_WORKSPACE_CONFIG=:4096:8 # cuBLAS deterministic (docs/operate.md, Failover to a standby)
timeout 300 python3 "$FAILOVER/train_gpt.py" "$R/native.txt" >"$R/native.out" 2>&1
NRC=$?
echo "native rc=$NRC"

pick_gpus
start_server s "$GPU_B" "$R/srvS.log" || exit 1
S_ADDR=$SERVER_ADDR
start_server a "$GPU_A" "$R/srvA.log" || exit 1
A_PID=$SERVER_PID A_ADDR=$SERVER_ADDR
link_bandwidth "$S_ADDR" # before the client: the snapshots' memory copies go A -> S
echo "link: $LINK_GBPS GB/s ($LINK_FROM)"

SCUDA_LOG=info SCUDA_STANDBY=$S_ADDR SCUDA_SNAPSHOT_EVERY=${SNAPSHOT_EVERY:-2} \
  timeout 400 bash "$HIDE" "$SCUDA" run --server "$A_ADDR" -- python3 "$FAILOVER/train_gpt.py" "$R/scuda.txt" \
  >"$R/client.out" 2>"$R/client.err" &
CL=$!
STARTED+=("$CL")
CL_T0=$(now)

# steps_written: lines in the client's loss file.
steps_written() { [[ -e $R/scuda.txt ]] && wc -l <"$R/scuda.txt" || echo 0; }
reached_kill_step() { (($(steps_written) >= KILL_AT)); }
KILL_TO_STEP=none KILLED=0
if wait_for 300 reached_kill_step; then
  n=$(steps_written)
  t0=$(now)
  for k in $(pgrep -P "$A_PID"); do kill -KILL "$k" 2>/dev/null; done # A's sessions, by PID
  kill -KILL "$A_PID" 2>/dev/null
  KILLED=1
  echo "killed server A (pid $A_PID and its sessions) at step $n"
  # The first step written once the client failed over (a step whose
  # reply came before the kill can land just after it), polled every 5 ms.
  KILL_TO_STEP=$(python3 - "$R/scuda.txt" "$R/client.err" "$t0" <<'PY'
import sys, time
path, err, t0 = sys.argv[1], sys.argv[2], float(sys.argv[3])
lines = lambda: sum(1 for _ in open(path))
deadline = time.time() + 240
while time.time() < deadline and "failed over to standby" not in open(err, errors="replace").read():
    time.sleep(0.005)
over, n = time.time(), lines()
while time.time() < deadline:
    if lines() > n:
        print("%.0f (failed over after %.0f)" % ((time.time() - t0) * 1000, (over - t0) * 1000)); sys.exit(0)
    time.sleep(0.005)
print("none")
PY
  )
  echo "kill to the next step: $KILL_TO_STEP ms"
else
  echo "the training never reached step $KILL_AT (client.err: $(tail -n 2 "$R/client.err"))"
fi
wait "$CL"
CRC=$?
CL_SECS=$(secs_since "$CL_T0")
echo "client rc=$CRC"

grep -h -E "snapshot on standby|failed over|failover to standby|MISMATCH|cannot take|no snapshot" "$R/client.err" | head -n 12
PAUSES=$(grep -o 'the application paused [0-9]* ms' "$R/client.err" | awk '{print $4}' | sort -n | tr '\n' ' ')
SNAPS=$(grep -c 'snapshot on standby' "$R/client.err")
MAXP=$(tr ' ' '\n' <<<"$PAUSES" | grep . | tail -n 1)
JOURNAL=$(grep -o -m1 'replaying [0-9]* journaled frames ([0-9]* bytes)' "$R/client.err")
echo "snapshots: $SNAPS, pauses (ms, sorted): $PAUSES"
read -ra PAUSE_LIST <<<"$PAUSES"
PAUSE_SHARE=$(python3 -c 'import sys; t = sum(int(x) for x in sys.argv[2:]); print("%.0f ms in all, %.1f%% of the client'"'"'s %s s" % (t, 100 * t / 1000 / float(sys.argv[1]), sys.argv[1]))' "$CL_SECS" "${PAUSE_LIST[@]}")
echo "snapshot pauses: $PAUSE_SHARE"
echo "journal at the kill: ${JOURNAL:-none}"
# Each snapshot on A's log: how long A held the session (its calls' pause;
# a synchronous snapshot's client line says the same), the images loaded
# ahead, and the memory copy as the standby timed it against the link;
# the largest copy's ratio is the restore rate.
COPY=$(python3 - "$R/srvA.log" "${LINK_GBPS:-0}" "$CL_SECS" "${LINK_K_GBPS:-}" <<'PY'
import re, sys
link, secs = float(sys.argv[2] or 0), float(sys.argv[3] or 0)
k_link = sys.argv[4].split() if len(sys.argv) > 4 else []
rows = []
for line in open(sys.argv[1], errors="replace"):
    if "snapshot parked on" not in line: continue
    held = re.search(r"the session was held ([\d.]+) ms", line)
    parts = re.search(r"hold\+sync ([\d.]+) ms.*?replay ([\d.]+) ms", line)
    mem = re.search(r"([\d.]+) MiB memory in ([\d.]+) ms", line)
    ahead = re.search(r"\((\d+) images loaded ahead\)", line)
    if not (mem and ahead and (held or parts)): continue
    m, ms = float(mem.group(1)), float(mem.group(2))
    pause = float(held.group(1)) if held else float(parts.group(1)) + float(parts.group(2)) + ms
    rows.append((m, ms, int(ahead.group(1)), pause, bool(held)))
for m, ms, k, pause, streamed in rows:
    print("  snapshot: session held %.0f ms; %.1f MiB of memory in %.1f ms (%.2f GB/s)%s; %d images loaded ahead" %
          (pause, m, ms, m * 1048576 / max(ms, 0.001) / 1e6, ", streamed after the hold" if streamed else "", k))
if rows:
    total = sum(r[3] for r in rows)
    print("snapshot pauses (A held the session): %.0f ms in all, %.2f%% of the client's %.1f s" %
          (total, 100 * total / 1000 / secs if secs else 0, secs))
    m, ms, k, pause, _ = max(rows)
    g = m * 1048576 / max(ms, 0.001) / 1e6
    over_k = ""
    if len(k_link) == 2 and float(k_link[0]) > 0:
        over_k = " (%.2fx the same link over %s streams at once, %.2f GB/s)" % (g / float(k_link[0]), k_link[1],
                                                                             float(k_link[0]))
    print("largest snapshot %.0f MiB at %.2f GB/s, %.2fx the link's %.2f GB/s%s" % (m, g, g / link if link else 0,
                                                                                   link, over_k))
PY
)
echo "$COPY"

ok=1 why=()
((NRC == 0)) || { ok=0; why+=("native rc=$NRC"); }
((KILLED)) || { ok=0; why+=("A never killed"); }
((CRC == 0)) || { ok=0; why+=("client rc=$CRC"); }
grep -q "failed over to standby" "$R/client.err" || { ok=0; why+=("no failover in the client's log"); }
! grep -q MISMATCH "$R/client.err" || { ok=0; why+=("replayed calls returned other results"); }
why+=("$SNAPS snapshots" "$(grep '^snapshot pauses (A held' <<<"$COPY")" "${JOURNAL:-no journal}"
  "kill to next step $KILL_TO_STEP ms" "$(grep '^largest snapshot' <<<"$COPY")")
if cmp -s "$R/native.txt" "$R/scuda.txt"; then
  why+=("losses identical ($(wc -l <"$R/scuda.txt") steps)")
else
  ok=0 why+=("losses differ")
  diff "$R/native.txt" "$R/scuda.txt" | head -n 6
fi
summary standby_torch "$ok" "$(IFS=';'; echo "${why[*]}")"
