#!/usr/bin/env bash
# Installs the Debian packages tps needs, and only those that are missing.
# Idempotent: a second run installs nothing. Runs apt-get as root, or via sudo.
set -euo pipefail

# package|why tps needs it
deps=(
  "build-essential|C compiler and make"
  "cmake|the build system (CMakeLists.txt)"
  "pkg-config|locates the libraries below at configure time"
  "libevent-dev|tps serve: HTTP server (evhttp) and its event loop"
  "libcurl4-openssl-dev|tps bench: HTTP/HTTPS client (curl multi) for streaming requests"
  "libjansson-dev|JSON parsing with line/column errors (API, results, reports)"
  "libpcre2-dev|BPE pre-tokenizer regexes with Unicode classes"
  "libicu-dev|Unicode NFC for tokenizer.json files that ask for it (Qwen3): tps bench --tokenizer"
  "libcriterion-dev|unit tests (run by ctest)"
  "clang|libFuzzer harnesses (make fuzz)"
  "clang-format|make format-check (run by make test): no formatting drift"
  "universal-ctags|make func-lengths (run by make test): function lengths"
  "cppcheck|make lint (run by make test): static checks of src/, microbench/, fuzz/"
  "libclang-rt-14-dev|sanitizer and libFuzzer runtimes for clang"
  "gnuplot-nox|tps report: SVG plots"
  "nginx-light|scripts/fleet.sh and make fleet-demo: the load balancer in front of replicas"
  "curl|scripts/fleet.sh: replica health checks and /metrics"
  "jq|make fleet-demo: reads bench results into fleet/summary.json"
  "chromium|tests: headless screenshot of the tps report HTML page (checks it renders)"
  "python3-jsonschema|tests: an independent validator of structured (json_schema) output"
  "tshark|scripts/wire-check.sh: loopback capture the bench's stamps are checked against"
  "python3|scripts/wire-check.sh: compares the capture with the bench's per-request records"
  "gcc-aarch64-linux-gnu|make test-arm (run by make test): cross-compiles the ARM (NEON) tier"
  "libc6-dev-arm64-cross|make test-arm: the aarch64 C library and headers the cross build links"
  "qemu-user|make test-arm: runs the aarch64 tests (qemu-aarch64 -cpu max, neoverse-n1, cortex-a57)"
)

missing=()
for entry in "${deps[@]}"; do
  pkg=${entry%%|*}
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$pkg")
    echo "install-deps: will install $pkg (${entry#*|})"
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#deps[@]} packages present"
  exit 0
fi

if [ "$(id -u)" -eq 0 ]; then
  SUDO=
elif command -v sudo >/dev/null 2>&1; then
  SUDO=sudo
else
  echo "install-deps: need root or sudo to install: ${missing[*]}" >&2
  exit 1
fi

export DEBIAN_FRONTEND=noninteractive
# tshark's package asks whether non-root users may capture; answer no (wire-check runs as root)
echo "wireshark-common wireshark-common/install-setuid boolean false" | $SUDO debconf-set-selections
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "install-deps: installed ${missing[*]}"
