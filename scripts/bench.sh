#!/usr/bin/env bash
# `make bench`: performance figures (not pass/fail). Runs every benchmark
# executable that the build produced from bench/bench_*.c.
set -euo pipefail
build=${1:-build}
cd "$(dirname "$0")/.."
found=0
for b in "$build"/bench_*; do
  [ -x "$b" ] || continue
  found=1
  echo "== $(basename "$b") =="
  "$b"
done
[ $found -eq 1 ] || echo "bench: no benchmarks built yet"
