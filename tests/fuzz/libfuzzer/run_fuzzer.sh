#!/usr/bin/env bash
# run_fuzzer.sh BINARY SEED_DIR WORK_DIR - one bounded libFuzzer run, as a
# test: fuzz for FUZZ_SECONDS (default 60) starting from the seed corpus;
# fail on a crash, leak, timeout, out-of-memory or sanitizer report, and
# print the reproducer. New inputs it finds stay in WORK_DIR/corpus (not in
# the repository); a run that found nothing wrong leaves no artifact.
set -uo pipefail
bin=$1 seeds=$2 work=$3
secs=${FUZZ_SECONDS:-60}
rm -rf "$work"
mkdir -p "$work/corpus" "$work/artifacts"
dict=()
[ -f "$seeds.dict" ] && dict=(-dict="$seeds.dict")
# Each input must finish within -timeout seconds (a hang is a failure),
# and memory stays under -rss_limit_mb (growth is a failure).
"$bin" "$work/corpus" "$seeds" "${dict[@]}" \
  -max_total_time="$secs" -timeout=20 -rss_limit_mb=3072 -max_len=65536 \
  -artifact_prefix="$work/artifacts/" -print_final_stats=1 >"$work/log" 2>&1
rc=$?
tail -n 40 "$work/log"
found=$(ls "$work/artifacts" 2>/dev/null)
if [ "$rc" -ne 0 ] || [ -n "$found" ]; then
  echo "FAIL $(basename "$bin"): exit $rc; full log $work/log"
  for f in $found; do
    echo "reproduce: $bin $work/artifacts/$f"
  done
  exit 1
fi
echo "PASS $(basename "$bin"): ${secs}s, no crash, leak, timeout or sanitizer report"
