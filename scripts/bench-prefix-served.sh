#!/usr/bin/env bash
# The prefix cache, served (issue 13): `tps serve` with its prefix cache,
# the same with --no-prefix-cache, and llama.cpp's llama-server (when
# LLAMA_CPP_DIR is set: its slots keep their last prompt and --cache-ram
# restores saved prompts, its defaults), on the same GGUF file, driven by
# the same `tps bench` workloads on the completions endpoint:
#   shared: one 1024-token prefix shared by every request + 32 tokens of
#           its own, 64 out, concurrency 8, 32 requests;
#   turns:  32 conversations of 6 turns at concurrency 8, each turn
#           resending the history (prompts and actual replies) + 64 new
#           tokens, 64 out.
# Prints TTFT p50 (turns: turn 1 and turns 2..6), output t/s over the run
# window, and the cached fraction of input the server reported. Servers run
# one at a time, 2 kernel threads each. Numbers, not pass/fail.
#
# usage: scripts/bench-prefix-served.sh [BUILD_DIR] [MODEL.gguf ...]
#        (default models: $TPS_BENCH_DIR/15M-q8_0.gguf and 110M-q8_0.gguf,
#        made by bench_prefix)
# env:   LLAMA_CPP_DIR (its build/ or build/bin), BENCH_THREADS (default 2),
#        PREFIX_WORKLOADS (default "shared turns")
set -uo pipefail
build=${1:-build}
shift || true
cd "$(dirname "$0")/.."
tps=$build/tps
threads=${BENCH_THREADS:-2}
dir=${TPS_BENCH_DIR:-/tmp/tps-bench}
models=("$@")
[ ${#models[@]} -gt 0 ] || models=("$dir/15M-q8_0.gguf" "$dir/110M-q8_0.gguf")
workloads=${PREFIX_WORKLOADS:-shared turns}
llama=
if [ -n "${LLAMA_CPP_DIR:-}" ]; then
  llama=$LLAMA_CPP_DIR/bin/llama-server
  [ -x "$llama" ] || llama=$LLAMA_CPP_DIR/llama-server
  [ -x "$llama" ] || { echo "bench-prefix-served: no llama-server in $LLAMA_CPP_DIR"; exit 2; }
fi
work=$(mktemp -d /tmp/tps-prefix-served.XXXXXX)
port=18431
spid=

. scripts/served-lib.sh # stop_server, wait_ready, await_server, col
trap stop_server EXIT

start_server() { # start_server KIND MODEL
  case $1 in
    on) "$tps" serve -m "$2" --port $port --threads "$threads" 2>"$work/serve.log" & ;;
    off) "$tps" serve -m "$2" --port $port --threads "$threads" --no-prefix-cache \
      2>"$work/serve.log" & ;;
    llama) "$llama" -m "$2" --port $port -t "$threads" -tb "$threads" -np 8 -c 16384 \
      >"$work/serve.log" 2>&1 & ;;
  esac
  await_server bench-prefix-served "$1"
}


run_bench() { # run_bench WORKLOAD MODEL CSV
  # llama-server fails the odd request on random-weight text ("does not
  # match the expected Content-only format"): failures are counted and
  # shown, not fatal
  local common=(--url "http://127.0.0.1:$port" --tokenizer "$2" --output-len 64
    --concurrency 8 --quiet --no-progress --timeout 600 --seed 1 --csv "$3"
    --max-error-rate 1)
  case $1 in
    shared) "$tps" bench "${common[@]}" --prefix-len 1024 --input-len 32 --requests 32 ;;
    turns) "$tps" bench "${common[@]}" --turns 6 --conversations 32 --input-len 64 ;;
  esac >"$work/bench.out" 2>&1 || { echo "bench-prefix-served: bench failed:"; \
    tail -5 "$work/bench.out"; return 1; }
}

kinds=(on off)
[ -n "$llama" ] && kinds+=(llama)
for m in "${models[@]}"; do
  [ -f "$m" ] || { echo "bench-prefix-served: $m not found (bench_prefix makes it)"; continue; }
  echo "prefix cache, served: $(basename "$m"), $threads threads, tps bench on completions"
  printf '%-7s %-22s %9s %12s %12s %10s %8s %7s\n' workload server "TTFT p50" "TTFT t1 p50" \
    "TTFT 2+ p50" "out t/s" cached failed
  for w in $workloads; do
    for k in "${kinds[@]}"; do
      start_server "$k" "$m" || continue
      csv=$work/$w-$k.csv
      run_bench "$w" "$m" "$csv"
      stop_server
      [ -f "$csv" ] || continue
      case $k in on) name="tps serve" ;; off) name="tps --no-prefix-cache" ;;
        llama) name="llama-server -np 8" ;; esac
      frac=$(col "$csv" cached_input_fraction)
      t1=$(col "$csv" ttft_turn1_p50_ms)
      t2=$(col "$csv" ttft_later_turns_p50_ms)
      printf '%-7s %-22s %9.1f %12s %12s %10.1f %7s%% %7s\n' "$w" "$name" \
        "$(col "$csv" ttft_p50_ms)" "${t1:+$(printf '%.1f' "$t1")}" \
        "${t2:+$(printf '%.1f' "$t2")}" "$(col "$csv" run_output_tps)" \
        "$([ -n "$frac" ] && awk -v f="$frac" 'BEGIN { printf "%.0f", 100 * f }')" \
        "$(col "$csv" failed)"
    done
  done
  echo
done
rm -rf "$work"
