#!/usr/bin/env python3
"""c_bytes.py - write files' bytes as C arrays in a header, for the tests'
generator scripts (tests/unit/make_*.sh, tests/e2e/make_*.sh).

    c_bytes.py [--aligned] OUT GUARD COMMENT NAME=FILE...

COMMENT becomes the header's opening comment (its lines as given); each
NAME=FILE pair a `static const unsigned char NAME[N]`, 8-byte aligned with
--aligned (for images a reader walks in place)."""
import sys


def main(argv):
    aligned = argv[:1] == ["--aligned"]
    if aligned:
        argv = argv[1:]
    if len(argv) < 4:
        sys.exit(__doc__)
    out, guard, comment, pairs = argv[0], argv[1], argv[2], argv[3:]
    lines = comment.splitlines()
    with open(out, "w") as f:
        f.write("/* " + "\n * ".join(lines) + " Do not edit. */\n")
        f.write(f"#ifndef {guard}\n#define {guard}\n\n")
        for pair in pairs:
            name, path = pair.split("=", 1)
            data = open(path, "rb").read()
            attr = " __attribute__((aligned(8)))" if aligned else ""
            f.write(f"static const unsigned char {name}[{len(data)}]{attr} = {{\n")
            for i in range(0, len(data), 16):
                f.write("    " + ", ".join(f"0x{b:02x}" for b in data[i:i + 16]) + ",\n")
            f.write("};\n\n")
        f.write("#endif\n")


if __name__ == "__main__":
    main(sys.argv[1:])
