#!/usr/bin/env bash
# Line coverage of src/ by the unit, stand-in and end-to-end tests: builds
# with -DSCUDA_COVERAGE=ON into build-ci-cov, runs those tests (the same set
# as the ThreadSanitizer suite in scripts/test.sh) and writes a gcovr report:
#   build-ci-cov/coverage/summary.txt   per file, text
#   build-ci-cov/coverage/index.html    per file and line, HTML
# The total is a report, never a gate. Exit status: 0 all well, 1 a test
# failed (build-ci-cov/ctest.log), 2 the build or the report failed.
set -euo pipefail
cd "$(dirname "$0")/.."

dir=build-ci-cov
only='^(unit|standin|e2e)/'
jobs=$(nproc 2>/dev/null || echo 2)

command -v gcovr >/dev/null 2>&1 || { echo "coverage: gcovr not found; run scripts/deps.sh" >&2; exit 2; }

mkdir -p "$dir"
# Debug (-O0): optimised code folds and moves lines, which blurs the counts.
if ! cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DSCUDA_COVERAGE=ON \
     ${CUDA_INCLUDE_DIR:+"-DCUDA_INCLUDE_DIR=$CUDA_INCLUDE_DIR"} ${NVML_INCLUDE_DIR:+"-DNVML_INCLUDE_DIR=$NVML_INCLUDE_DIR"} \
     >"$dir.cmake.log" 2>&1; then
  cat "$dir.cmake.log"; echo "coverage: CONFIGURE FAILED"; exit 2
fi
if ! cmake --build "$dir" -j "$jobs" >"$dir.build.log" 2>&1; then
  tail -n 60 "$dir.build.log"; echo "coverage: BUILD FAILED"; exit 2
fi

# Counters add up across runs: start each run from zero.
find "$dir" -name '*.gcda' -delete

tests_rc=0
ctest --test-dir "$dir" --output-on-failure --timeout 300 -j "$jobs" -R "$only" 2>&1 | tee "$dir/ctest.log" \
  || tests_rc=1

out="$dir/coverage"
rm -rf "$out"; mkdir -p "$out"
# Only src/: the tests and the stand-in driver are instrumented too, but
# their coverage says nothing about SCUDA's. Many processes (sessions,
# forked children) merge their counts into one .gcda at exit, and gcov
# then now and then prints a branch "taken -1": gcovr skips such a line
# rather than failing the report. One thread: gcovr 5.2 with -j hung once
# after such an error. The timeout bounds the report all the same.
if ! timeout 600 gcovr --root . --filter 'src/' --gcov-ignore-parse-errors \
      --txt "$out/summary.txt" --html-details "$out/index.html" \
      --print-summary "$dir" >"$out/gcovr.log" 2>&1; then
  cat "$out/gcovr.log"; echo "coverage: GCOVR FAILED"; exit 2
fi
total=$(grep -E '^lines:' "$out/gcovr.log" || true)
echo "coverage of src/: ${total:-(no total from gcovr; see $out/gcovr.log)}"
echo "coverage: per file in $out/summary.txt, per line in $out/index.html"
exit "$tests_rc"
