#!/usr/bin/env bash
# all.sh DIR: the four failover checks in turn (sigstop, migrate_torch,
# migrate_cuda, drain_torch), each logging to DIR/NAME/ and its output to
# DIR/NAME.out; prints their SUMMARY lines. Exit 1 when any failed.
set -uo pipefail
D=${1:?usage: all.sh LOG_DIR}
mkdir -p "$D"
HERE=$(cd "$(dirname "$0")" && pwd)
failed=0
for t in sigstop migrate_torch migrate_cuda drain_torch; do
  echo "== $t"
  bash "$HERE/$t.sh" "$D/$t" 2>&1 | tee "$D/$t.out"
  rc=${PIPESTATUS[0]}
  ((rc == 0)) || failed=$((failed + 1))
done
echo "== summary"
grep -h '^SUMMARY ' "$D"/*.out
echo "$failed of 4 failed"
((failed == 0))
