#!/usr/bin/env bash
# `make demo`: the main job on the default model, in a few minutes on 2 cores.
#   1. make the default model (tps model make --preset 15M --type q8_0) unless
#      models/15M-q8_0.gguf exists;
#   2. start `tps serve` on a free 127.0.0.1 port and wait for /health;
#   3. sweep concurrency 1, 4, 16 (short prompts), then one long-prompt point
#      at concurrency 4 (the prompt-length contrast), with `tps sweep --url`;
#      then the prefix cache: the same long prompts sharing all but their
#      last short_in tokens, against unique ones (`tps bench --prefix-len`);
#   4. print the table, write demo/report.html (plots inlined), stop the server.
# Usage: scripts/demo.sh [TPS_BINARY] [--quick] [--out DIR]
#   --quick (or DEMO_QUICK=1): the same pieces at a reduced size (the `tiny`
#   preset, one-second points), for CI. Needs nothing from the network.
set -euo pipefail

tps=build/tps
quick=${DEMO_QUICK:-0}
out=demo
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then
  tps=$1
  shift
fi
while [ $# -gt 0 ]; do
  case $1 in
  --quick) quick=1 ;;
  --out)
    out=$2
    shift
    ;;
  *)
    echo "usage: scripts/demo.sh [TPS_BINARY] [--quick] [--out DIR]" >&2
    exit 2
    ;;
  esac
  shift
done
[ "$quick" = 0 ] || [ "$quick" = 1 ] || quick=1

root=$(cd "$(dirname "$0")/.." && pwd)
case $tps in /*) ;; *) tps=$PWD/$tps ;; esac
case $out in /*) ;; *) out=$root/$out ;; esac
cd "$root"
if [ ! -x "$tps" ]; then
  echo "demo: $tps is not built (make build)" >&2
  exit 1
fi
command -v gnuplot >/dev/null ||
  echo "demo: gnuplot is missing: the report will have no plots (scripts/install-deps.sh installs gnuplot-nox)" >&2
mkdir -p "$out"
t_start=$(date +%s)

# ---- sizes -----------------------------------------------------------------------------
if [ "$quick" = 1 ]; then
  model=$out/tiny-q8_0.gguf
  make_args=(--preset tiny --type q8_0)
  point=(--duration 1 --output-len 16 --timeout 30)
  short_in=16 long_in=192
else
  model=models/15M-q8_0.gguf
  make_args=(--preset 15M --type q8_0)
  point=(--duration 12 --output-len 64 --timeout 120)
  short_in=32 long_in=384
fi

# ---- 1. the model ----------------------------------------------------------------------
if [ -f "$model" ]; then
  echo "== model: $model (exists)"
else
  echo "== model: tps model make ${make_args[*]} -o $model"
  mkdir -p "$(dirname "$model")"
  if ! "$tps" model make "${make_args[@]}" -o "$model" >"$out/model-make.log" 2>&1; then
    tail -5 "$out/model-make.log" >&2
    exit 1
  fi
fi

# ---- 2. the server ---------------------------------------------------------------------
serve_log=$out/serve.log
"$tps" serve -m "$model" --host 127.0.0.1 --port 0 >"$serve_log" 2>&1 &
server=$!
stop_server() {
  if kill -0 "$server" 2>/dev/null; then
    kill -TERM "$server" 2>/dev/null || true
    wait "$server" 2>/dev/null || true
  fi
}
trap stop_server EXIT

url=
for _ in $(seq 1 600); do # up to 60 s
  url=$(sed -n 's/.*listening on \(http:\/\/127\.0\.0\.1:[0-9]*\).*/\1/p' "$serve_log" | head -1)
  [ -n "$url" ] && break
  kill -0 "$server" 2>/dev/null || break
  sleep 0.1
done
if [ -z "$url" ]; then
  echo "demo: tps serve did not start; its log ($serve_log):" >&2
  tail -5 "$serve_log" >&2
  exit 1
fi
port=${url##*:}
healthy=0
for _ in $(seq 1 600); do # /health through bash's /dev/tcp: no client needed
  if { exec 3<>"/dev/tcp/127.0.0.1/$port"; } 2>/dev/null; then
    printf 'GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&3
    status=$(head -1 <&3 || true)
    exec 3<&- 3>&-
    case $status in *" 200"*) healthy=1 && break ;; esac
  fi
  sleep 0.1
done
if [ "$healthy" != 1 ]; then
  echo "demo: $url/health did not answer 200" >&2
  exit 1
fi
echo "== tps serve -m $model at $url (/health ok)"

# ---- 3. the sweeps ---------------------------------------------------------------------
failed=0
echo "== tps sweep: concurrency 1, 4, 16; prompts of $short_in tokens"
"$tps" sweep --url "$url" --tokenizer "$model" --concurrency 1,4,16 --input-len "$short_in" \
  "${point[@]}" --json "$out/sweep-concurrency.json" --quiet || failed=1
echo "== tps sweep: prompt-length contrast: $long_in-token prompts at concurrency 4"
"$tps" sweep --url "$url" --tokenizer "$model" --concurrency 4 --input-len "$long_in" \
  "${point[@]}" --json "$out/sweep-prompt.json" --quiet || failed=1

col() { # col CSV NAME: the value of column NAME in the CSV's data row
  awk -F, -v k="$2" 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == k) c = i }
                     NR == 2 && c { print $c }' "$1"
}
shared=$((long_in - short_in))
echo "== tps bench: the prefix cache: $long_in-token prompts at concurrency 4, sharing a" \
  "$shared-token prefix, then unique"
for kind in shared unique; do
  if [ $kind = shared ]; then shape=(--prefix-len "$shared" --input-len "$short_in")
  else shape=(--input-len "$long_in"); fi
  "$tps" bench --url "$url" --tokenizer "$model" --concurrency 4 "${shape[@]}" "${point[@]}" \
    --no-progress --quiet --json "$out/bench-prefix-$kind.json" --csv "$out/bench-prefix-$kind.csv" ||
    failed=1
done
if [ -f "$out/bench-prefix-shared.csv" ] && [ -f "$out/bench-prefix-unique.csv" ]; then
  for kind in shared unique; do
    c=$out/bench-prefix-$kind.csv
    printf '   %-7s prompts: TTFT p50 %7.1f ms, %7.1f output tok/s, %5.1f%% of input from the cache\n' \
      $kind "$(col "$c" ttft_p50_ms)" "$(col "$c" run_output_tps)" \
      "$(awk -v f="$(col "$c" cached_input_fraction)" 'BEGIN { printf "%.1f", 100 * f }')"
  done
fi

stop_server
trap - EXIT

# ---- 4. the report ---------------------------------------------------------------------
echo
"$tps" report "$out/sweep-concurrency.json" "$out/sweep-prompt.json" \
  --html "$out/report.html" --svg "$out/svg" || failed=1

t_end=$(date +%s)
cat <<MSG

== done in $((t_end - t_start)) s
Report: $out/report.html (one self-contained page; the SVG plots and the gnuplot
scripts that drew them are in $out/svg/). Results: $out/sweep-*.json and
$out/bench-prefix-*.json (tps report FILE... renders any of them again).

Point the instrument at another endpoint (llama.cpp's server, vLLM, a hosted API):
  $tps bench --url http://HOST:PORT --concurrency 4 --requests 50 --json run.json
  $tps sweep --url http://HOST:PORT --concurrency 1,4,16 --duration 20 --json sweep.json
  (add --endpoint chat --model NAME --api-key KEY for a hosted API; tps bench --help)
MSG
exit $failed
