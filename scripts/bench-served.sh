#!/usr/bin/env bash
# Served speed and latency (issue 15): `tps serve` at its defaults (the ITL
# target measured at start), the same with --itl-target-ms 0 (prompt chunks
# cut by the token budget only), and llama.cpp's llama-server -np 16 (when
# LLAMA_CPP_DIR is set), on the same GGUF file, driven by the same
# `tps bench`: 128 prompt tokens, 128 out with ignore_eos, completions, at
# concurrency 16 and 4. Rounds alternate the servers (A B C A B C) and the
# table prints each figure's median over the rounds: output tok/s over the
# run window, ITL p50 and p99, TTFT p50, and the server's peak RSS (VmHWM).
# Servers run one at a time, 2 kernel threads each. Numbers, not pass/fail.
#
# usage: scripts/bench-served.sh [BUILD_DIR] [MODEL.gguf]
#        (default model: $TPS_BENCH_DIR/110M-q8_0.gguf, made by bench_prefix)
# env:   LLAMA_CPP_DIR (its build/ or build/bin), BENCH_THREADS (default 2),
#        SERVED_ROUNDS (default 2), SERVED_CONC (default "16 4"),
#        SERVED_REQUESTS (requests per run, default 4 x the concurrency),
#        SERVER_START_S (how long a server may take to load, default 90)
# --idle-timeout 600: llama-server sends no byte before a request's first
# token, and on a large model its queued prompts wait longer than 60 s.
set -uo pipefail
build=${1:-build}
cd "$(dirname "$0")/.."
tps=$build/tps
threads=${BENCH_THREADS:-2}
dir=${TPS_BENCH_DIR:-/tmp/tps-bench}
model=${2:-$dir/110M-q8_0.gguf}
rounds=${SERVED_ROUNDS:-2}
concs=${SERVED_CONC:-16 4}
[ -f "$model" ] || { echo "bench-served: $model not found (bench_prefix makes it)"; exit 0; }
llama=
if [ -n "${LLAMA_CPP_DIR:-}" ]; then
  llama=$LLAMA_CPP_DIR/bin/llama-server
  [ -x "$llama" ] || llama=$LLAMA_CPP_DIR/llama-server
  [ -x "$llama" ] || { echo "bench-served: no llama-server in $LLAMA_CPP_DIR"; exit 2; }
fi
work=$(mktemp -d /tmp/tps-served.XXXXXX)
port=18441
spid=

. scripts/served-lib.sh # stop_server, wait_ready, await_server, col
trap 'stop_server; rm -rf "$work"' EXIT

start_server() { # start_server KIND
  case $1 in
    tps) "$tps" serve -m "$model" --port $port --threads "$threads" 2>"$work/serve.log" & ;;
    tps0) "$tps" serve -m "$model" --port $port --threads "$threads" --itl-target-ms 0 \
      2>"$work/serve.log" & ;;
    llama) "$llama" -m "$model" --port $port -t "$threads" -tb "$threads" -np 16 -c 8192 \
      >"$work/serve.log" 2>&1 & ;;
  esac
  await_server bench-served "$1"
}


median() { sort -g | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }

kinds=(tps tps0)
[ -n "$llama" ] && kinds+=(llama)
echo "served: $(basename "$model"), $threads threads, 128 in / 128 out (ignore_eos), $rounds rounds"
for c in $concs; do
  n=${SERVED_REQUESTS:-$((4 * c))}
  for r in $(seq 1 "$rounds"); do
    for k in "${kinds[@]}"; do
      start_server "$k" || continue
      "$tps" bench --url "http://127.0.0.1:$port" --tokenizer "$model" --input-len 128 \
        --output-len 128 --ignore-eos --concurrency "$c" --requests "$n" --quiet --no-progress \
        --timeout 600 --idle-timeout 600 --seed "$r" --max-error-rate 1 --csv "$work/$k-$c-$r.csv" \
        >"$work/bench.out" 2>&1 || { echo "bench-served: $k bench failed:"; tail -3 "$work/bench.out"; }
      awk '/VmHWM/ { print $2 / 1024 }' "/proc/$spid/status" >"$work/$k-$c-$r.rss"
      stop_server
    done
  done
  printf '%-26s %5s %10s %10s %10s %10s %9s %7s\n' server conc "out t/s" "ITL p50" "ITL p99" \
    "TTFT p50" "peak RSS" failed
  for k in "${kinds[@]}"; do
    case $k in tps) name="tps serve" ;; tps0) name="tps serve --itl-target-ms 0" ;;
      llama) name="llama-server -np 16" ;; esac
    med() { for r in $(seq 1 "$rounds"); do f=$work/$k-$c-$r.csv; [ -f "$f" ] && col "$f" "$1"; done | median; }
    rss=$(cat "$work"/$k-$c-*.rss 2>/dev/null | median)
    printf '%-26s %5s %10.1f %8.1fms %8.1fms %8.1fms %7.0fMB %7s\n' "$name" "$c" \
      "$(med run_output_tps)" "$(med itl_p50_ms)" "$(med itl_p99_ms)" "$(med ttft_p50_ms)" \
      "${rss:-0}" "$(med failed)"
  done
  echo
done
