#!/usr/bin/env bash
# Static analysis of src/ with cppcheck, against a baseline of accepted
# findings (tests/cppcheck-baseline.txt). Fails on any finding that is not in
# the baseline; baseline entries that no longer occur are only noted.
#
# Baseline entries are file:id:message, without the line number, so edits
# elsewhere in a file do not break them. One entry covers every finding of
# that file, id and message, wherever it is in the file.
set -euo pipefail
export LC_ALL=C # sort and comm must agree on one order
cd "$(dirname "$0")/.."

baseline=tests/cppcheck-baseline.txt
jobs=$(nproc 2>/dev/null || echo 2)
cuda_inc=${CUDA_INCLUDE_DIR:-/usr/local/cuda/include}

command -v cppcheck >/dev/null 2>&1 || { echo "cppcheck: not installed; run scripts/deps.sh" >&2; exit 1; }
[ -f "$cuda_inc/cuda.h" ] || { echo "cppcheck: no cuda.h in $cuda_inc; set CUDA_INCLUDE_DIR" >&2; exit 1; }
# nvml.h as the build finds it (src/client/nvml/nvml.cmake). Without it the
# NVML sources would be checked with unknown types, and findings would differ.
nvml_inc=${NVML_INCLUDE_DIR:-$(python3 -c "import glob, os, nvidia; print(next(os.path.dirname(h) for p in nvidia.__path__ for h in sorted(glob.glob(os.path.join(p, '*', 'include', 'nvml.h')))))" 2>/dev/null || true)}
[ -n "$nvml_inc" ] && [ -f "$nvml_inc/nvml.h" ] || { echo "cppcheck: nvml.h not found; run scripts/deps.sh or set NVML_INCLUDE_DIR" >&2; exit 1; }

# Each accepted finding says why: a comment line right above it.
unexplained=$(awk '/^[[:space:]]*$/ { prev = ""; next }
                   !/^[[:space:]]*#/ && prev !~ /^[[:space:]]*#/ { print FILENAME ":" FNR ": " $0 }
                   { prev = $0 }' "$baseline")
if [ -n "$unexplained" ]; then
  echo "cppcheck: FAILED: baseline entries without a comment line above them (say why each stays):"
  echo "$unexplained"; exit 1
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# One configuration, the build's: with -D, cppcheck checks only the macros
# given (and those the files define), so results do not depend on the host.
# The generated *.gen.c files are checked too: a finding there is fixed in
# the generator (codegen/), or accepted in the baseline like any other.
rc=0
cppcheck --quiet --std=c11 --language=c \
  --enable=warning,performance,portability --inline-suppr \
  -j "$jobs" --error-exitcode=3 \
  -I src -I "$cuda_inc" -I "$nvml_inc" \
  -D__CUDA_API_VERSION_INTERNAL=1 -DNVML_NO_UNVERSIONED_FUNC_DEFS=1 -D__x86_64__ \
  --suppress="*:$cuda_inc/*" --suppress="*:$nvml_inc/*" \
  --template='{file}:{line}:{id}:{message}' \
  --output-file="$work/raw" src || rc=$?
# 3: findings (sorted out below); anything else non-zero: cppcheck failed.
if [ "$rc" -ne 0 ] && [ "$rc" -ne 3 ]; then
  cat "$work/raw" 2>/dev/null || true
  echo "cppcheck: FAILED to run (exit $rc)"; exit 1
fi

# file:line:id:message -> file:id:message (the baseline's form).
sed -E 's/^([^:]+):[0-9]+:/\1:/' "$work/raw" | sort -u >"$work/found"
sed -E '/^[[:space:]]*(#|$)/d' "$baseline" | sort -u >"$work/accepted"
comm -23 "$work/found" "$work/accepted" >"$work/new"
comm -13 "$work/found" "$work/accepted" >"$work/gone"

total=$(grep -c . "$work/raw" || true)
echo "cppcheck: $total finding(s) in src/ ($(grep -c . "$work/found" || true) distinct); $baseline accepts $(grep -c . "$work/accepted" || true)"

if [ -s "$work/gone" ]; then
  echo "cppcheck: note: these baseline entries no longer occur; delete them from $baseline:"
  sed 's/^/  /' "$work/gone"
fi

if [ -s "$work/new" ]; then
  echo "cppcheck: FAILED: finding(s) not in the baseline:"
  # Every place of each new finding, with its line.
  awk 'NR == FNR { new[$0] = 1; next }
       { k = $0; sub(/:[0-9]+:/, ":", k); if (k in new) print "  " $0 }' "$work/new" "$work/raw"
  cat <<EOF

Fix the code (the message says what cppcheck found). If the finding is a
false positive or is to stay, accept it: add its line, as below, to
$baseline, with a comment line above it that says why:
EOF
  sed 's/^/  /' "$work/new"
  echo "or accept only that place: a comment /* cppcheck-suppress ID */ on the line above it."
  exit 1
fi
echo "cppcheck: passed"
