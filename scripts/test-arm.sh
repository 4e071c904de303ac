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

# Each qemu run is one emulated thread's work: $JOBS of them at a time (they
# ran one after another, a core idle on make test's 2; ~190 CPU seconds in
# all, test_attention's row runs the longest at ~66), the longest first,
# each one's lines printed together in this order.
logs=$(mktemp -d /tmp/tps-arm.XXXXXX)
n=0
start() { # cpu program [filter]: run, in the background
  while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do wait -n || true; done
  (
    rc=0
    run "$@" >"$logs/$n" 2>&1 || rc=1
    echo $rc >"$logs/$n.rc"
  ) &
  n=$((n + 1))
}
start max test_attention row_runs # ~66 CPU s under qemu: the portable attention's row runs
start max test_kernels_quant # ~46
start max test_kernels        # ~20
start neoverse-n1 test_kernels
start max test_kquant_model # ~13
start max test_moe_kernels  # ~8
start max test_tier_greedy  # ~7
start neoverse-n1 test_tier_greedy
start cortex-a57 test_kernels q8_0
start max test_quant_model # ~1.5
start max test_quant_ref
wait
status=0
for i in $(seq 0 $((n - 1))); do
  cat "$logs/$i"
  [ "$(cat "$logs/$i.rc" 2>/dev/null)" = 0 ] || status=1
done
rm -rf "$logs"
[ $status = 0 ] || { echo "test-arm: FAILED" >&2; exit 1; }
echo "test-arm: passed in $(( $(date +%s) - t0 )) s"
