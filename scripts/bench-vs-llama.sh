#!/usr/bin/env bash
# Batch-1 prefill (pp512, or VS_PP) and decode (tg128) of tps against
# llama.cpp on the same GGUF files, alternating A B A B so both sides see the
# same machine (noisy 2-core machines: only ratios taken within one run mean
# anything), and the median of each side over the rounds. One line per tier and file.
#
# usage: scripts/bench-vs-llama.sh TIER=BUILD_DIR:LLAMA_BIN_DIR [TIER=...]
#   e.g. native=build:../peers/llama.cpp/build/bin
#        avx2=build-avx2:../peers/llama.cpp/build-avx2/bin
#   (BUILD_DIR: a tps build with bench_engine, e.g. `cmake -DTPS_CPU=avx2`;
#   LLAMA_BIN_DIR: llama-bench and its libraries, run with LD_LIBRARY_PATH
#   set to it so an AVX2-only ggml there is the one loaded.)
# env: TPS_BENCH_DIR (default /tmp/tps-bench), VS_MODELS (default
#      "110M-q8_0.gguf 110M-q4_0-pure.gguf 110M-q4_k_m.gguf"), VS_ROUNDS (3),
#      BENCH_THREADS (2), VS_LLAMA_REPS (llama-bench -r, default 3), VS_PP (the
#      prefill's prompt length, llama-bench -p; default 512). A missing
#      model file PRESET-TYPE.gguf is made with `tps model make --preset PRESET
#      --type TYPE` (a mixture-of-experts preset with its architecture:
#      30B-A3B-q4_k_m.gguf, moe-2B-q4_k_m.gguf; PRESET-TYPE-pure.gguf with
#      --pure, every matrix in TYPE, as the q4_0 files of earlier sessions).
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 1 ] || { sed -n 2,20p "$0"; exit 2; }
dir=${TPS_BENCH_DIR:-/tmp/tps-bench}
models=${VS_MODELS:-110M-q8_0.gguf 110M-q4_0-pure.gguf 110M-q4_k_m.gguf}
reps=${VS_LLAMA_REPS:-3}
rounds=${VS_ROUNDS:-3}
threads=${BENCH_THREADS:-2}
pp=${VS_PP:-512}
mkdir -p "$dir"

median() { sort -g | awk '{v[NR] = $1} END {if (NR == 0) print "nan"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

printf '%-7s %-20s %10s %10s %7s %10s %10s %7s %8s\n' tier file "tps pp" "llama pp" ratio "tps tg" "llama tg" ratio "tps GB/s"
for spec in "$@"; do
  tier=${spec%%=*}
  rest=${spec#*=}
  build=${rest%%:*}
  lbin=${rest#*:}
  [ -x "$build/bench_engine" ] || { echo "bench-vs-llama: no $build/bench_engine (build it first)" >&2; exit 1; }
  [ -x "$lbin/llama-bench" ] || { echo "bench-vs-llama: no $lbin/llama-bench" >&2; exit 1; }
  for m in $models; do
    f=$dir/$m
    if [ ! -f "$f" ]; then
      stem=${m%.gguf} pure=
      case "$stem" in *-pure) stem=${stem%-pure} pure=--pure ;; esac
      "$build/tps" model make --preset "${stem%-*}" --type "${stem##*-}" $pure -o "$f.part" >/dev/null 2>&1
      mv "$f.part" "$f"
    fi
    tp=() tt=() lp=() lt=() gb=()
    for ((r = 0; r < rounds; r++)); do
      line=$(TPS_BENCH_MODELS=$f TPS_BENCH_PP=$pp "$build/bench_engine" "$threads" 0 |
        awk -v m="$m" '$1 == m') || { echo "bench-vs-llama: bench_engine failed on $m" >&2; exit 1; }
      tp+=("$(echo "$line" | awk '{print $2}')") tt+=("$(echo "$line" | awk '{print $3}')")
      gb+=("$(echo "$line" | awk '{print $5}')")
      out=$(LD_LIBRARY_PATH=$lbin "$lbin/llama-bench" -m "$f" -t "$threads" -p "$pp" -n 128 -r "$reps" 2>/dev/null)
      lp+=("$(echo "$out" | awk -F'|' -v t=" pp$pp " 'index($0, t) {split($(NF-1), a, " "); print a[1]}')")
      lt+=("$(echo "$out" | awk -F'|' '/ tg128 / {split($(NF-1), a, " "); print a[1]}')")
    done
    mtp=$(printf '%s\n' "${tp[@]}" | median) mtt=$(printf '%s\n' "${tt[@]}" | median)
    mlp=$(printf '%s\n' "${lp[@]}" | median) mlt=$(printf '%s\n' "${lt[@]}" | median)
    mgb=$(printf '%s\n' "${gb[@]}" | median)
    awk -v t="$tier" -v m="$m" -v tp="$mtp" -v lp="$mlp" -v tt="$mtt" -v lt="$mlt" -v g="$mgb" 'BEGIN {
      printf "%-7s %-20s %10.1f %10.1f %6.2fx %10.1f %10.1f %6.2fx %8.1f\n", t, m, tp, lp, tp / lp, tt, lt, tt / lt, g}'
    echo "        rounds: tps pp ${tp[*]}, llama pp ${lp[*]}; tps tg ${tt[*]}, llama tg ${lt[*]}"
  done
done
