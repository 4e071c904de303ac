#!/usr/bin/env bash
# Builds every fuzz/fuzz_*.c harness with clang (libFuzzer + ASan + UBSan) and
# runs each for SECONDS, seeded from fuzz/corpus/<name>/ and, where present,
# the real files in ../shared. New inputs go to build-fuzz/corpus/<name>/;
# crashes are left in build-fuzz/ and fail the run.
set -euo pipefail
seconds=${1:-20}
cd "$(dirname "$0")/.."
CC=clang cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=Debug -DTPS_FUZZ=ON -DTPS_NATIVE=ON >/dev/null
targets=()
for src in fuzz/fuzz_*.c; do targets+=("$(basename "$src" .c)"); done
cmake --build build-fuzz -j "$(nproc)" --target "${targets[@]}"
shared=../shared
status=0
for src in fuzz/fuzz_*.c; do
  name=$(basename "$src" .c)
  work=build-fuzz/corpus/$name
  mkdir -p "$work" "fuzz/corpus/$name"
  seeds=("fuzz/corpus/$name")
  case $name in
    fuzz_gguf) [ -d "$shared/models" ] && seeds+=("$shared/models/vocab" "$shared/models") ;;
  esac
  echo "== $name: ${seconds}s =="
  if ! (cd build-fuzz && TPS_SHARED_DIR="$(cd .. && cd "$shared" 2>/dev/null && pwd || true)" \
        "./$name" -max_total_time="$seconds" -max_len=1048576 -rss_limit_mb=4096 \
        -artifact_prefix="./$name-" "../$work" "${seeds[@]/#/../}" 2>&1 | tail -n 3); then
    echo "fuzz: $name found a crash (see build-fuzz/$name-*)"
    status=1
  fi
done
exit $status
