#!/usr/bin/env bash
# make_corpus.sh RELEASE_BUILD FUZZ_BUILD - (re)writes the seed corpus in
# tests/fuzz/corpus/ from what the shim really sends:
#   session  a workload's frames, recorded through a proxy (fuzz_frames
#            --write-corpus), as windows of the stream after its context
#            is made;
#   decode   every recorded frame's payload under every decoder selector,
#            plus a client_hello and a welcome, kept where they add
#            coverage (libFuzzer -merge);
#   image    the unit tests' sample PTX, cubin and fatbin, and nvcc's zstd cubin and LZ4 PTX fatbins.
# Regression inputs (tests/fuzz/corpus/*/regress-*) are kept as they are.
# Needs a release build (fuzz_frames, fuzz_image) and a -DSCUDA_FUZZ=ON
# build (fuzz_decode) of the same tree.
set -euo pipefail
rel=$1 fz=$2
root=$(cd "$(dirname "$0")/../../.." && pwd)
corpus=$root/tests/fuzz/corpus
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$rel/bin/fuzz_image" --write-seeds "$corpus/image"

"$rel/bin/fuzz_frames" --write-corpus "$tmp" >/dev/null
rm -f "$corpus/session"/recorded-*
cp "$tmp/session"/* "$corpus/session/"

mkdir -p "$tmp/decode"
python3 - "$tmp/frames" "$tmp/decode" <<'PY'
import os, struct, sys
src, out = sys.argv[1], sys.argv[2]
n = 0
for name in sorted(os.listdir(src)):
    payload = open(os.path.join(src, name), "rb").read()[16:]
    for sel in range(128):  # every decoder and special target (fuzz_decode.c)
        open(os.path.join(out, "%s-%d" % (name, sel)), "wb").write(bytes([sel, 0]) + payload)
        n += 1
# A client_hello (magic "SCU1", version 3) and a join request after it.
hello = struct.pack("<IHHIQ", 0x31554353, 3, 0, 1, 1) + bytes(32) + struct.pack("<II", 1234, 0) + bytes(32)
for sel in range(128):
    open(os.path.join(out, "hello-%d" % sel), "wb").write(bytes([sel, 0]) + hello)
    msg = b"\x01" + struct.pack("<Q", 3) + b"ok\x00"
    info = struct.pack("<iII", 13000, 42, 1) + b"\x01" + struct.pack("<Q", 5) + b"name\x00" + bytes(16) \
        + struct.pack("<Q", 1 << 30) + b"\x01" + struct.pack("<Q", 2) + b"0\x00" + struct.pack("<I", 2) + bytes(16)
    body = msg + info
    open(os.path.join(out, "welcome-%d" % sel), "wb").write(bytes([sel, 0]) + struct.pack("<II", 0, len(body)) + body)
print("decode: %d candidates" % n)
PY
mkdir -p "$tmp/kept"
"$fz/bin/fuzz_decode" -merge=1 "$tmp/kept" "$tmp/decode" >"$tmp/merge.log" 2>&1 || { tail "$tmp/merge.log"; exit 1; }
find "$corpus/decode" -type f ! -name 'regress-*' -delete
cp "$tmp/kept"/* "$corpus/decode/"
echo "corpus: $(ls "$corpus/session" | wc -l) session, $(ls "$corpus/decode" | wc -l) decode, $(ls "$corpus/image" | wc -l) image inputs"
