#!/usr/bin/env bash
# Builds every fuzz/fuzz_*.c harness with clang (libFuzzer + ASan + UBSan) and
# runs each for SECONDS, seeded from fuzz/corpus/<name>/ and, where present,
# the real files in ../shared (models for fuzz_gguf, the tokenizer test
# texts for fuzz_tokenizer). New inputs go to build-fuzz/corpus/<name>/;
# crashes are left in build-fuzz/ and fail the run. Every harness first
# replays fuzz/regressions/<name>/ (inputs that once crashed) and fails if
# any still does. Prints the executions of each run (docs/reliability.md).
#   scripts/fuzz.sh [SECONDS] [HARNESS...]
set -euo pipefail
seconds=${1:-20}
cd "$(dirname "$0")/.."
# -O1: Debug alone is -O0, several times fewer executions per second.
CC=clang cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS_DEBUG="-g -O1" \
  -DTPS_FUZZ=ON -DTPS_NATIVE=ON >/dev/null
shift || true
targets=()
if [ $# -gt 0 ]; then
  targets=("$@")
else
  for src in fuzz/fuzz_*.c; do targets+=("$(basename "$src" .c)"); done
fi
cmake --build build-fuzz -j "$(nproc)" --target "${targets[@]}"
shared=../shared
shared_abs="$(cd "$shared" 2>/dev/null && pwd || true)"
# One harness: replays its regressions, then fuzzes for $seconds. Prints its
# lines and returns 1 on a crash, so several can run at once.
run_one() {
  local name=$1 work=build-fuzz/corpus/$1 max_len=65536 # whole GGUF models need more
  local seeds=("fuzz/corpus/$name") rc=0
  mkdir -p "$work" "fuzz/corpus/$name"
  case $name in
    fuzz_gguf)
      max_len=1048576
      [ -d "$shared/models" ] && seeds+=("$shared/models/vocab" "$shared/models") ;;
    fuzz_tokenizer)
      if [ ! -f "$shared/models/vocab/ggml-vocab-gpt-2.gguf" ]; then
        echo "== $name: skipped: it needs the vocabularies in $shared/models/vocab =="
        return 0
      fi
      mkdir -p build-fuzz/seeds/$name
      cp -f "$shared"/models/vocab/*.inp build-fuzz/seeds/$name/ 2>/dev/null || true
      seeds+=("build-fuzz/seeds/$name") ;;
  esac
  if [ -d "fuzz/regressions/$name" ] && [ -n "$(ls -A "fuzz/regressions/$name")" ]; then
    if ! (cd build-fuzz && TPS_SHARED_DIR="$shared_abs" \
          "./$name" -runs=0 "../fuzz/regressions/$name"/* >/dev/null 2>&1); then
      echo "fuzz: $name: a regression input crashes again (fuzz/regressions/$name)"
      rc=1
    fi
  fi
  echo "== $name: ${seconds}s =="
  if ! (cd build-fuzz && TPS_SHARED_DIR="$shared_abs" \
        "./$name" -max_total_time="$seconds" -max_len="$max_len" -rss_limit_mb=4096 \
        -artifact_prefix="./$name-" -print_final_stats=1 "../$work" "${seeds[@]/#/../}" \
        2>&1 | grep -E "^(stat::number_of_executed_units|Done|==[0-9]+==ERROR|SUMMARY)|DEADLY|crash-|leak-|timeout-" \
        | sed "s/^stat::number_of_executed_units: */execs: /"); then
    echo "fuzz: $name found a crash (see build-fuzz/$name-*)"
    rc=1
  fi
  return $rc
}
# One harness per core at a time (each is single-threaded); each one's lines
# are printed together, in the harnesses' order.
logs=build-fuzz/logs
rm -rf "$logs" && mkdir -p "$logs"
for name in "${targets[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$(nproc)" ]; do wait -n || true; done
  (
    rc=0
    run_one "$name" >"$logs/$name" 2>&1 || rc=1
    echo $rc >"$logs/$name.rc"
  ) &
done
wait
status=0
for name in "${targets[@]}"; do
  cat "$logs/$name"
  [ "$(cat "$logs/$name.rc" 2>/dev/null)" = 0 ] || status=1
done
exit $status
