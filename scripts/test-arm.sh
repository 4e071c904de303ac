#!/usr/bin/env bash
# make test-arm: the aarch64 cross build of the kernel and model tests
# (tests/arm/CMakeLists.txt, cmake/aarch64-linux-gnu.cmake), run under
# qemu-aarch64 once per ARM kernel table the run-time dispatch can pick:
#   -cpu max          dotprod + i8mm: the i8mm table (smmla tiles)
#   -cpu neoverse-n1  dotprod only:   the dotprod table (sdot tiles)
#   -cpu cortex-a57   neither:        the scalar fallback
# Every test compares the best tier with the scalar one bit for bit, so a
# wrong NEON kernel fails here. Usage: scripts/test-arm.sh [build-dir]
set -euo pipefail
B=${1:-build-aarch64}
JOBS=${JOBS:-2}
for tool in aarch64-linux-gnu-gcc qemu-aarch64; do
  command -v "$tool" >/dev/null || { echo "test-arm: $tool missing; run scripts/install-deps.sh" >&2; exit 1; }
done
t0=$(date +%s)
cmake -S tests/arm -B "$B" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_TOOLCHAIN_FILE="$PWD/cmake/aarch64-linux-gnu.cmake" >/dev/null
cmake --build "$B" -j "$JOBS" >/dev/null
echo "test-arm: built in $(( $(date +%s) - t0 )) s"

run() { # cpu program [filter]
  local cpu=$1 prog=$2 out
  shift 2
  if ! out=$(qemu-aarch64 -cpu "$cpu" -L /usr/aarch64-linux-gnu "$B/$prog" "$@" 2>&1); then
    echo "$out" | grep -v '^\[PASS\]\|^  info:' >&2
    echo "test-arm: $prog failed under -cpu $cpu" >&2
    return 1
  fi
  echo "test-arm: -cpu $cpu: $(echo "$out" | tail -1)"
}

run max test_kernels
run max test_kernels_quant
run max test_quant_ref
run max test_moe_kernels
run max test_quant_model
run max test_kquant_model
run max test_tier_greedy
run neoverse-n1 test_kernels
run neoverse-n1 test_tier_greedy
run cortex-a57 test_kernels q8_0
echo "test-arm: passed in $(( $(date +%s) - t0 )) s"
