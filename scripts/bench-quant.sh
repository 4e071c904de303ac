#!/usr/bin/env bash
# The quantization table of docs/performance.md in one command: tps against
# llama.cpp on the 1B preset (TinyLlama shape) in the file types of issue 34,
# 2 threads, pp512 / tg128, the native tier and the AVX2 tier (-march=haswell
# builds of both engines), A B A B (scripts/bench-vs-llama.sh), and this
# machine's read bandwidth (`tps machine`) to read the decode GB/s against.
#
# usage: scripts/bench-quant.sh
# env:   LLAMA_CPP (default ../peers/llama.cpp: llama-bench in build/bin and,
#        for the AVX2 tier, build-avx2/bin), TPS_BENCH_DIR (default
#        /tmp/tps-bench-quant: the files, made once with `tps model make`),
#        QUANT_TYPES (default "q5_k_m q3_k_m iq4_xs q4_1"), QUANT_PRESET (1B),
#        VS_ROUNDS (default 3), VS_LLAMA_REPS (default 2), BENCH_THREADS (2),
#        QUANT_TIERS (default "native avx2").
set -euo pipefail
cd "$(dirname "$0")/.."
llama=${LLAMA_CPP:-../peers/llama.cpp}
export TPS_BENCH_DIR=${TPS_BENCH_DIR:-/tmp/tps-bench-quant}
export VS_ROUNDS=${VS_ROUNDS:-3} VS_LLAMA_REPS=${VS_LLAMA_REPS:-2}
preset=${QUANT_PRESET:-1B}
models=
for t in ${QUANT_TYPES:-q5_k_m q3_k_m iq4_xs q4_1}; do models="$models $preset-$t.gguf"; done
export VS_MODELS=$models
mkdir -p "$TPS_BENCH_DIR"

cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j2 --target tps bench_engine >/dev/null
specs=()
for tier in ${QUANT_TIERS:-native avx2}; do
  case $tier in
    native) specs+=("native=build:$llama/build/bin") ;;
    avx2)
      cmake -S . -B build-avx2 -DCMAKE_BUILD_TYPE=Release -DTPS_CPU=avx2 >/dev/null
      cmake --build build-avx2 -j2 --target tps bench_engine >/dev/null
      specs+=("avx2=build-avx2:$llama/build-avx2/bin") ;;
    *) echo "bench-quant: unknown tier $tier (native, avx2)" >&2; exit 2 ;;
  esac
done

grep -m1 'model name' /proc/cpuinfo || true
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
build/tps machine | grep -iE 'read|bandwidth' | head -3 || true
scripts/bench-vs-llama.sh "${specs[@]}"
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
