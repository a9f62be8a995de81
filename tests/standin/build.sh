#!/bin/sh
# Builds the CPU stand-in driver (and its direct test) with gcc.
#   tests/standin/build.sh            -> build-standin/libcuda-standin.so, test_standin
#   SAN=1 tests/standin/build.sh      -> the same under ASan+UBSan, in build-standin-san/
#   CC=clang tests/standin/build.sh   -> with clang
set -eu
cd "$(dirname "$0")/../.."
CC=${CC:-gcc}
CUDA_INC=${CUDA_INC:-/usr/local/cuda/include}
OUT=build-standin
FLAGS="-std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -I$CUDA_INC"
if [ "${SAN:-0}" = 1 ]; then
    OUT=build-standin-san
    FLAGS="$FLAGS -g -O1 -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined"
else
    FLAGS="$FLAGS -O2"
fi
mkdir -p "$OUT"
# shellcheck disable=SC2086
$CC $FLAGS -fPIC -shared tests/standin/*.c -o "$OUT/libcuda-standin.so" -lpthread -lm
# shellcheck disable=SC2086
$CC $FLAGS -DSTANDIN_TEST_MAIN tests/standin/test_standin.c -o "$OUT/test_standin" \
    "$OUT/libcuda-standin.so" -Wl,-rpath,"$PWD/$OUT" -lpthread -ldl
echo "built $OUT/libcuda-standin.so and $OUT/test_standin"
