#!/usr/bin/env bash
# Builds SCUDA and runs every CI test: unit tests, the generator's diff
# check, and end-to-end tests of client and server over loopback against
# the CPU stand-in driver; then all of it again under AddressSanitizer and
# UBSan; then the unit and end-to-end tests under ThreadSanitizer; then the
# libFuzzer targets for a bounded time; and the tests once more for a
# coverage report. Before them, cppcheck against its baseline. Last, the
# shipping checks (scripts/ci_containers.sh: packages, the systemd unit,
# the Docker images running a CUDA program, this command in a fresh Debian
# container), which print their own summary line; SCUDA_CI_CONTAINERS=0
# leaves them out (the fresh container's own run does).
# No GPU needed. Ends with "N passed, N failed" over all of it.
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh || exit 1
# Where deps.sh found the headers: every build gets them.
# shellcheck source=/dev/null
. build-deps/env
export CUDA_INCLUDE_DIR NVML_INCLUDE_DIR
header_dirs=(-DCUDA_INCLUDE_DIR="$CUDA_INCLUDE_DIR" -DNVML_INCLUDE_DIR="$NVML_INCLUDE_DIR")

jobs=$(nproc 2>/dev/null || echo 2)
total_pass=0; total_fail=0

run_suite() { # name build-dir test-regex ("": all) extra-cmake-args...
  local name=$1 dir=$2 only=$3; shift 3
  echo "=== $name: build ($dir)"
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "${header_dirs[@]}" "$@" >"$dir.cmake.log" 2>&1 \
    || { cat "$dir.cmake.log"; total_fail=$((total_fail + 1)); return; }
  if ! cmake --build "$dir" -j "$jobs" >"$dir.build.log" 2>&1; then
    tail -n 60 "$dir.build.log"
    echo "=== $name: BUILD FAILED"; total_fail=$((total_fail + 1)); return
  fi
  echo "=== $name: tests"
  local log="$dir/ctest.log"
  ctest --test-dir "$dir" --output-on-failure --timeout 300 -j "$jobs" ${only:+-R "$only"} 2>&1 | tee "$log"
  count_ctest "$log"
}

count_fail=0
count_ctest() { # ctest-log: adds its results to the totals
  local p
  p=$(grep -cE '^ *[0-9]+/[0-9]+ Test +#[0-9]+: .* Passed' "$1" || true)
  count_fail=$(grep -cE '^ *[0-9]+/[0-9]+ Test +#[0-9]+: .*(\*\*\*|Failed|Timeout|Not Run)' "$1" || true)
  total_pass=$((total_pass + p)); total_fail=$((total_fail + count_fail))
}

# cppcheck against its baseline (scripts/cppcheck.sh): one test.
echo "=== cppcheck"
if bash scripts/cppcheck.sh; then total_pass=$((total_pass + 1)); else total_fail=$((total_fail + 1)); fi

run_suite "release" build-ci ""
# LeakSanitizer on: a leak in a test program, the shim in it, or a server
# parent fails its test (the e2e harness gives servers the same).
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  run_suite "asan+ubsan" build-ci-asan "" -DSCUDA_SANITIZE=ON
# The fuzzers and the generator's checks gain nothing from a third run.
# The tests' ThreadSanitizer options (any report fails): tests/CMakeLists.txt.
run_suite "tsan" build-ci-tsan '^(unit|standin|e2e)/' -DSCUDA_SANITIZE=thread

# libFuzzer (tests/fuzz/libfuzzer/): clang's coverage-guided fuzzing of the
# decoders, an in-process session against the stand-in and the image
# check, each for FUZZ_SECONDS (60) from tests/fuzz/corpus/; each target
# is one test. A failure prints the reproducer's path.
echo "=== libfuzzer: build (build-ci-fuzz)"
if CC=clang cmake -S . -B build-ci-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSCUDA_FUZZ=ON "${header_dirs[@]}" \
     >build-ci-fuzz.cmake.log 2>&1 &&
   cmake --build build-ci-fuzz -j "$jobs" --target fuzz_all >build-ci-fuzz.build.log 2>&1; then
  echo "=== libfuzzer: tests"
  ctest --test-dir build-ci-fuzz --output-on-failure --timeout 300 -j "$jobs" -R '^libfuzzer/' 2>&1 \
    | tee build-ci-fuzz/ctest.log
  count_ctest build-ci-fuzz/ctest.log
else
  tail -n 60 build-ci-fuzz.cmake.log build-ci-fuzz.build.log
  echo "=== libfuzzer: BUILD FAILED"; total_fail=$((total_fail + 1))
fi

# Coverage (scripts/coverage.sh): the tsan suite's tests in a gcov build,
# counted like any suite; the percentage is a report, never a failure.
echo "=== coverage: build, tests, report (build-ci-cov)"
rm -f build-ci-cov/ctest.log
cov_rc=0
bash scripts/coverage.sh || cov_rc=$?
count_fail=0
[ -f build-ci-cov/ctest.log ] && count_ctest build-ci-cov/ctest.log
# A failed build or report leaves no failed test to count.
if [ "$cov_rc" -ne 0 ] && [ "$count_fail" -eq 0 ]; then total_fail=$((total_fail + 1)); fi

# The shipping checks, last: each is one test; their own summary line
# comes first, the runner's total stays the last line.
if [ "${SCUDA_CI_CONTAINERS:-1}" != 0 ]; then
  echo "=== containers: packages, systemd unit, Docker images, a fresh machine (build-ci-docker)"
  bash scripts/ci_containers.sh build-ci 2>&1 | tee build-ci-docker.log
  p=$(grep -c '^ok   containers/' build-ci-docker.log || true)
  f=$(grep -c '^FAIL containers/' build-ci-docker.log || true)
  # A stage that died before its summary is a failure too.
  grep -q '^containers: [0-9]* passed' build-ci-docker.log || f=$((f + 1))
  total_pass=$((total_pass + p)); total_fail=$((total_fail + f))
fi

echo
echo "${total_pass} passed, ${total_fail} failed"
[ "$total_fail" -eq 0 ]
