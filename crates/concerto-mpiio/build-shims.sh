#!/usr/bin/env bash
# Links the Rust static library (cargo build -p concerto-mpiio) with the MPI
# side, once per MPI library installed (their mpi.h differ):
#   build-shims.sh TARGET_DIR OUT_DIR  ->  OUT_DIR/libconcerto-mpiio-{openmpi,mpich}.so
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
target="$1" out="$2"
mkdir -p "$out"
built=0
for flavour in openmpi mpich; do
  cc="mpicc.$flavour"
  command -v "$cc" >/dev/null || continue
  "$cc" -O2 -fPIC -shared -Wall -Werror -Wno-stringop-overflow -o "$out/libconcerto-mpiio-$flavour.so" \
    "$here"/c/*.c "$target/libconcerto_mpiio.a" \
    -Wl,--version-script="$here/c/exports.map" -Wl,--exclude-libs,ALL -Wl,--gc-sections -s \
    -lgcc_s -lutil -lrt -lpthread -lm -ldl
  built=$((built + 1))
done
if [ "$built" = 0 ]; then
  echo "build-shims.sh: neither mpicc.openmpi nor mpicc.mpich is installed" >&2
  exit 1
fi
