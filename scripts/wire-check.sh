#!/usr/bin/env bash
# Checks tps bench against the wire: runs a bench against a server on
# 127.0.0.1 while tshark captures the loopback traffic, then compares, per
# request and per SSE event, the bench's record (--per-request) with the
# capture: token counts, TTFT, event-arrival lag (the bench's stamp minus
# the time of the packet that completed the event) p50/p99/max, and the
# run-window output TPS. docs/metrics.md has a run's figures.
#
#   scripts/wire-check.sh [--url http://127.0.0.1:PORT | --model M.gguf] [-- BENCH OPTIONS]
#
# Without --url it starts `tps serve` on a free port with --model (default
# ../shared/models/stories260K.gguf) and stops it afterwards. Bench options
# default to: --requests 64 --concurrency 4 --input-len 64 --output-len 64.
# Needs tshark and python3 (scripts/install-deps.sh) and the right to
# capture on lo (root, or a user in the wireshark group). Writes into
# $WIRE_DIR (default: a new temporary directory, printed) and leaves the
# capture and the result there.
set -euo pipefail
cd "$(dirname "$0")/.."
TPS=${TPS:-build/tps}
url=
model=../shared/models/stories260K.gguf
while [ $# -gt 0 ]; do
  case $1 in
    --url) url=$2; shift 2 ;;
    --model) model=$2; shift 2 ;;
    --) shift; break ;;
    *) echo "wire-check: unknown option $1 (bench options go after --)" >&2; exit 2 ;;
  esac
done
bench_opts=("$@")
[ ${#bench_opts[@]} -gt 0 ] || bench_opts=(--requests 64 --concurrency 4 --input-len 64 --output-len 64)
for tool in tshark python3 "$TPS"; do
  command -v "$tool" >/dev/null 2>&1 || [ -x "$tool" ] || {
    echo "wire-check: $tool not found (scripts/install-deps.sh; build tps first)" >&2; exit 1; }
done
dir=${WIRE_DIR:-$(mktemp -d -t tps-wire.XXXXXX)}
mkdir -p "$dir"
echo "wire-check: files in $dir"

pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

if [ -z "$url" ]; then
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  "$TPS" serve -m "$model" --host 127.0.0.1 --port "$port" >"$dir/serve.log" 2>&1 &
  pids+=($!)
  url=http://127.0.0.1:$port
  for _ in $(seq 300); do curl -sf "$url/health" >/dev/null 2>&1 && break; sleep 0.1; done
  curl -sf "$url/health" >/dev/null || { echo "wire-check: tps serve did not start" >&2; exit 1; }
fi
port=${url##*:}; port=${port%%/*}
case $url in http://127.0.0.1:*) ;; *) echo "wire-check: --url must be http://127.0.0.1:PORT" >&2; exit 2 ;; esac

tshark -q -i lo -f "tcp port $port" -w "$dir/capture.pcapng" >"$dir/tshark.log" 2>&1 &
tshark_pid=$!
pids+=("$tshark_pid")
for _ in $(seq 100); do grep -q "Capturing on" "$dir/tshark.log" 2>/dev/null && break; sleep 0.1; done
sleep 0.5 # the capture is open before the first request

"$TPS" bench --url "$url" --per-request --json "$dir/result.json" --no-progress --scrape off \
  "${bench_opts[@]}" >"$dir/bench.txt"
sleep 0.5 # the last packets are in the file
kill -INT "$tshark_pid"
wait "$tshark_pid" 2>/dev/null || true

# one line per TCP segment with payload: stream, direction, time, bytes (hex)
tshark -r "$dir/capture.pcapng" -o tcp.desegment_tcp_streams:FALSE -Y "tcp.len > 0" -T fields \
  -e tcp.stream -e tcp.srcport -e frame.time_epoch -e tcp.seq -e tcp.payload >"$dir/segments.tsv"
echo "bench: $(grep -E '^  (ok|FAIL|\?) +client ' "$dir/bench.txt" | sed 's/^ *//')"
python3 scripts/wire_check.py "$dir/segments.tsv" "$dir/result.json" "$port" | tee "$dir/report.txt"
