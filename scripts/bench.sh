#!/usr/bin/env bash
# `make bench`: performance figures (not pass/fail). Runs bench_machine first
# (memory bandwidth, peak rates: the physical limits), then every other
# benchmark executable the build produced from microbench/bench_*.c, with the
# measured read bandwidth in TPS_MACHINE_READ_GBS so figures print as a
# fraction of it.
#
# usage: scripts/bench.sh [BUILD_DIR]
# env:   LLAMA_CPP_DIR=/path/to/llama.cpp/build  also runs llama-bench and
#        llama-batched-bench (from $LLAMA_CPP_DIR/bin) on the same GGUF files
#        bench_engine used, 2 threads, and prints them after ours; and
#        llama-server in the served prefix-cache comparison.
#        Then scripts/bench-served.sh: tps serve (ITL target on and off) and
#        llama-server at concurrency 16 and 4, 128/128, alternating.
#        Then scripts/bench-prefix-served.sh: tps serve with and without its
#        prefix cache (and llama-server) under tps bench's shared-prefix and
#        multi-turn workloads.
#        Last, scripts/bench-plan.sh: tps plan's predictions against tps bench
#        on the 15M, 110M and 1B presets, written into docs/plan.md
#        (TPS_PLAN_MODELS="none" skips it; scripts/bench-plan.sh says the rest).
#        TPS_BENCH_DIR (default /tmp/tps-bench): where the 110M models live.
#        TPS_BENCH_ARCHS (default "llama3 qwen2 qwen3 gemma2 gemma3 phi3 mistral3";
#        "none" skips): per-architecture pp512 / tg128 lines, bench_engine on
#        q8_0 files of the 15M and 110M presets made with `tps model make
#        --arch`, and llama-bench on the same files when LLAMA_CPP_DIR is set.
#        TPS_BENCH_QUANT_PRESET (default 110M; "none" skips): pp512 / tg128 of
#        the file types of issue 34 (q5_k_m q3_k_m iq4_xs q4_1) against
#        llama-bench when LLAMA_CPP_DIR is set (scripts/bench-quant.sh,
#        native tier; the 1B table of docs/performance.md is
#        `scripts/bench-quant.sh` alone, both tiers).
#        BENCH_THREADS (default 2).
set -euo pipefail
build=${1:-build}
cd "$(dirname "$0")/.."
threads=${BENCH_THREADS:-2}
export TPS_BENCH_DIR=${TPS_BENCH_DIR:-/tmp/tps-bench}
found=0
if [ -x "$build/bench_machine" ]; then
  found=1
  echo "== bench_machine =="
  out=$("$build/bench_machine" "$threads" 512)
  echo "$out"
  bw=$(echo "$out" | awk '/^machine: read_gbs/ {print $3}')
  [ -n "$bw" ] && export TPS_MACHINE_READ_GBS=$bw
fi
for b in "$build"/bench_*; do
  [ -x "$b" ] || continue
  case "$(basename "$b")" in bench_machine) continue ;; esac
  found=1
  echo "== $(basename "$b") =="
  "$b"
done
[ $found -eq 1 ] || echo "bench: no benchmarks built yet"

if [ -n "${LLAMA_CPP_DIR:-}" ]; then
  bin=$LLAMA_CPP_DIR/bin
  [ -x "$bin/llama-bench" ] || bin=$LLAMA_CPP_DIR
  echo "== llama.cpp ($bin), $threads threads, the same GGUF files =="
  for m in "$TPS_BENCH_DIR"/110M-q8_0.gguf "$TPS_BENCH_DIR"/110M-q4_0.gguf; do
    [ -f "$m" ] || continue
    "$bin/llama-bench" -m "$m" -t "$threads" -p 512 -n 128 -r 3 2>/dev/null | grep -E '^\|'
  done
  m=$TPS_BENCH_DIR/110M-q8_0.gguf
  if [ -f "$m" ] && [ -x "$bin/llama-batched-bench" ]; then
    "$bin/llama-batched-bench" -m "$m" -t "$threads" -c 40000 -b 2048 -ub 512 -npp 128 -ntg 128 \
      -npl 1,2,4,8,16,32,64 2>/dev/null | grep -E '^\|'
  fi
fi

archs=${TPS_BENCH_ARCHS:-llama3 qwen2 qwen3 gemma2 gemma3 phi3 mistral3}
if [ "$archs" != none ] && [ -x "$build/bench_engine" ]; then
  mkdir -p "$TPS_BENCH_DIR"
  for a in $archs; do
    files=()
    for p in 15M 110M; do
      f=$TPS_BENCH_DIR/arch-$a-$p-q8_0.gguf
      [ -f "$f" ] || "$build/tps" model make --arch "$a" --preset "$p" --type q8_0 -o "$f" 2>/dev/null
      files+=("$f")
    done
    echo "== architecture $a: bench_engine pp512 / tg128 (15M, 110M q8_0) =="
    TPS_BENCH_MODELS=$(IFS=,; echo "${files[*]}") "$build/bench_engine" "$threads" 1 |
      awk '/^engine: .*pp512/ {p = 1} /^$/ {p = 0} p'
    if [ -n "${LLAMA_CPP_DIR:-}" ]; then
      bin=$LLAMA_CPP_DIR/bin
      [ -x "$bin/llama-bench" ] || bin=$LLAMA_CPP_DIR
      for f in "${files[@]}"; do
        "$bin/llama-bench" -m "$f" -t "$threads" -p 512 -n 128 -r 3 2>/dev/null | grep -E '^\| [^-m]' || true
      done
    fi
  done
fi

qp=${TPS_BENCH_QUANT_PRESET:-110M}
if [ "$qp" != none ] && [ -n "${LLAMA_CPP_DIR:-}" ]; then
  echo "== file types of issue 34, $qp, against llama-bench (scripts/bench-quant.sh) =="
  QUANT_PRESET=$qp QUANT_TIERS=native LLAMA_CPP=$(dirname "$LLAMA_CPP_DIR") VS_ROUNDS=1 \
    scripts/bench-quant.sh
fi

echo "== served speed and latency vs llama-server (scripts/bench-served.sh) =="
scripts/bench-served.sh "$build"

echo "== served prefix cache (scripts/bench-prefix-served.sh) =="
scripts/bench-prefix-served.sh "$build"

if [ "${TPS_PLAN_MODELS:-15M 110M 1B}" != none ]; then
  echo "== tps plan's predictions against tps bench (scripts/bench-plan.sh, docs/plan.md) =="
  scripts/bench-plan.sh "$build"
fi
