#!/usr/bin/env bash
# `make demo`: what moves tokens per second, measured on this machine in about
# four minutes on 2 cores: one report section per factor the seed names.
#   1. make the models (tps model make --preset 15M and 110M --type q8_0) unless
#      models/15M-q8_0.gguf and models/110M-q8_0.gguf exist;
#   2. for each server setting, start `tps serve` on a free 127.0.0.1 port, wait
#      for /health, run its points with `tps sweep --url` (each point keeps the
#      server's /metrics deltas: steps, tokens, bytes read), stop it:
#        batch size      concurrency 1, 4, 16 on short prompts;
#        prefill/decode  32/256, 256/64, 1024/16 prompt/output tokens; streams'
#                        ITL while long prompts arrive (a second `tps bench`
#                        sends them), prefill in one step / chunked / chunked
#                        under the ITL target;
#        KV cache        shared-prefix prompts, prefix cache off then on; a long
#                        context with F16 then Q8_0 KV (on the 110M model:
#                        Q8_0 KV needs a head size that is a multiple of 32);
#        model size      15M then 110M on one workload (GB/s, % of bandwidth);
#        active size     the mini preset (dense) and mini-moe (16 experts, 2 a token: the
#                        same active size) on one workload; mini-moe at concurrency 1, 4,
#                        16 (the experts a step runs grow with the streams);
#        context depth   no server: `tps generate --depth` on qwen3 (full attention) and
#                        qwen35 (the hybrid: 3 of 4 layers linear attention) of one shape,
#                        decode tok/s (median of 3 passes) and bytes read per token at
#                        three depths (the 0.8B shape at depths 512, 2k, 4k here, and
#                        the files made once into models/; docs/performance.md has it
#                        at 1k and 8k, and 32k by bytes: its prefill takes many
#                        minutes on 2 cores);
#   3. `tps report --factor ...` writes demo/report.html (a section per factor:
#      table, plot, a reading made from the table's numbers) and prints the
#      tables; the last lines are the readings, one per factor. When a point of
#      a model too big for the caches read faster than the servers' cached read
#      bandwidth (a figure cached while the machine was busy), `tps machine`
#      measures again first and the shares are read against its figure; the
#      tables say which measurement they used.
# Usage: scripts/demo.sh [TPS_BINARY] [--quick] [--out DIR]
#   --quick (or DEMO_QUICK=1): the same pieces at a reduced size (the tiny and
#   mini presets, one-second points, depths 64 to 448), for CI. Needs nothing
#   from the network.
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
. "$root/scripts/listen-lib.sh" # listen_url
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
  small=$out/tiny-q8_0.gguf big=$out/mini-q8_0.gguf
  small_args=(--preset tiny --type q8_0) big_args=(--preset mini --type q8_0)
  point=(--duration 1 --timeout 30)
  out_len=16 short_in=16 long_in=384
  mixes=(16/64 96/16 256/4)
  stream_out=48 burst=(--rate 4 --input-len 448)
  depth_preset=tiny depth_type=q8_0 depths=64,256,448 depth_n=16 depth_rounds=3
else
  small=models/15M-q8_0.gguf big=models/110M-q8_0.gguf
  small_args=(--preset 15M --type q8_0) big_args=(--preset 110M --type q8_0)
  point=(--duration 5 --timeout 120)
  out_len=64 short_in=32 long_in=1024
  mixes=(32/256 256/64 1024/16)
  stream_out=128 burst=(--rate 0.5 --input-len 1024)
  depth_preset=0.8B depth_type=q4_k_m depths=512,2048,4096 depth_n=32 depth_rounds=3
fi
big_ctx=$((2 * long_in + 64)) # room for the one-step prefill server's batch

# ---- 1. the models ---------------------------------------------------------------------
make_model() { # make_model PATH ARGS...
  local path=$1
  shift
  if [ -f "$path" ]; then
    echo "== model: $path (exists)"
    return 0
  fi
  echo "== model: tps model make $* -o $path"
  mkdir -p "$(dirname "$path")"
  if ! "$tps" model make "$@" -o "$path.part" >"$out/model-make.log" 2>&1; then
    tail -5 "$out/model-make.log" >&2
    return 1
  fi
  mv "$path.part" "$path"
}
make_model "$small" "${small_args[@]}"
make_model "$big" "${big_args[@]}"
# active model size: small presets either way (a few seconds of the demo)
if [ "$quick" = 1 ]; then
  dense=$big moe=$out/mini-moe-q8_0.gguf # $big is the mini preset here
else
  dense=models/mini-q8_0.gguf moe=models/mini-moe-q8_0.gguf
fi
make_model "$dense" --preset mini --type q8_0
make_model "$moe" --preset mini-moe --type q8_0
# context depth: one shape, full attention and the hybrid
depth_dir=models
[ "$quick" = 1 ] && depth_dir=$out
attn=$depth_dir/qwen3-$depth_preset-$depth_type.gguf hybrid=$depth_dir/qwen35-$depth_preset-$depth_type.gguf
make_model "$attn" --arch qwen3 --preset "$depth_preset" --type "$depth_type"
make_model "$hybrid" --arch qwen35 --preset "$depth_preset" --type "$depth_type"

# ---- 2. servers and points -------------------------------------------------------------
server=
stop_server() {
  if [ -n "$server" ] && kill -0 "$server" 2>/dev/null; then
    kill -TERM "$server" 2>/dev/null || true
    wait "$server" 2>/dev/null || true
  fi
  server=
}
trap stop_server EXIT

url= model= serve_opts= calib=
serve() { # serve NAME MODEL [tps serve options]: start it, wait for /health, set $url
  local name=$1 log=$out/serve-$1.log
  model=$2
  shift 2
  serve_opts="$*"
  calib=$out/calibration-$name.txt # written at exit: tps plan's cost model of this server
  : >"$log" # exists before the server's shell opens it: the sed below reads it at once
  "$tps" serve -m "$model" --host 127.0.0.1 --port 0 --save-calibration "$calib" "$@" >"$log" 2>&1 &
  server=$!
  url=$(listen_url "$log" "$server" 600) # up to 60 s
  if [ -z "$url" ]; then
    echo "demo: tps serve did not start; its log ($log):" >&2
    tail -5 "$log" >&2
    exit 1
  fi
  local port=${url##*:} healthy=0
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
  echo "== tps serve -m $model $* ($name, $url)"
}

failed=0
to_predict=()
run_point() { # run_point FILE [tps sweep options]: one sweep against $url into FILE
  local file=$1
  shift
  "$tps" sweep --url "$url" --tokenizer "$model" "$@" "${point[@]}" --json "$out/$file" \
    --quiet >>"$out/points.log" 2>&1 || {
    echo "demo: the point $file failed (its log: $out/points.log)" >&2
    failed=1
  }
  to_predict+=("$file $*")
}
# After a server stopped (its calibration written): tps plan predicts each
# of its points on the same load, from that calibration (seconds).
predict_points() {
  local entry file
  for entry in "${to_predict[@]}"; do
    file=${entry%% *}
    read -r -a args <<<"${entry#* }"
    "$tps" sweep --plan "$model" --plan-args "--calibration $calib $serve_opts" "${args[@]}" \
      "${point[@]}" --json "$out/plan-$file" --quiet >>"$out/points.log" 2>&1 ||
      echo "demo: the prediction of $file failed (its log: $out/points.log)" >&2
  done
  to_predict=()
}
: >"$out/points.log"
shared=$((long_in - short_in))

serve default "$small" --max-seqs 16
echo "   batch size: concurrency 1, 4, 16; prompts of $short_in tokens"
run_point batch.json --concurrency 1,4,16 --input-len "$short_in" --output-len "$out_len"
echo "   prefill/decode mix at concurrency 4: ${mixes[*]} prompt/output tokens"
for m in "${mixes[@]}"; do
  run_point "mix-${m%/*}.json" --concurrency 4 --input-len "${m%/*}" --output-len "${m#*/}"
done
itl_point() { # streams at concurrency 4 while a second bench sends long prompts
  "$tps" bench --url "$url" --tokenizer "$model" "${burst[@]}" --output-len 1 \
    --duration "${point[1]}" --timeout 120 --no-progress --quiet >>"$out/points.log" 2>&1 &
  local burster=$!
  run_point "$1" --concurrency 4 --input-len "$short_in" --output-len "$stream_out"
  unset 'to_predict[${#to_predict[@]}-1]' # two loads at once: tps plan takes one
  wait "$burster" || true
}
echo "   streams' ITL while long prompts arrive: chunked prefill under the ITL target"
itl_point itl-target.json
echo "   KV cache: prompts sharing a $shared-token prefix, prefix cache on"
run_point prefix-on.json --concurrency 4 --prefix-len "$shared" --input-len "$short_in" \
  --output-len "$out_len"
echo "   model size: $(basename "$small")"
run_point model-small.json --concurrency 4 --input-len "$short_in" --output-len "$out_len"
stop_server
predict_points

serve no-prefix-cache "$small" --max-seqs 16 --no-prefix-cache
run_point prefix-off.json --concurrency 4 --prefix-len "$shared" --input-len "$short_in" \
  --output-len "$out_len"
stop_server
predict_points
serve chunked-no-target "$small" --max-seqs 16 --itl-target-ms 0
itl_point itl-chunked.json
stop_server
predict_points
serve one-step-prefill "$small" --max-seqs 16 --itl-target-ms 0 --max-batch-tokens "$big_ctx" \
  --prefill-chunk "$big_ctx"
itl_point itl-one-step.json
stop_server
predict_points
# the KV type on the bigger model: Q8_0 KV needs a head size that is a multiple of 32
kv_point() { # a $long_in-token context, most of it a cached shared prefix: decode dominates
  run_point "$1" --concurrency 4 --prefix-len "$shared" --input-len "$short_in" \
    --output-len "$out_len"
}
serve model-big "$big" --max-seqs 16
echo "   model size: $(basename "$big"); KV cache: a $long_in-token context, F16 KV"
run_point model-big.json --concurrency 4 --input-len "$short_in" --output-len "$out_len"
kv_point kv-f16.json
stop_server
predict_points
serve kv-q8_0 "$big" --max-seqs 16 --kv-type q8_0
echo "   KV cache: a $long_in-token context, Q8_0 KV"
kv_point kv-q8_0.json
stop_server
predict_points
serve active-dense "$dense" --max-seqs 16
echo "   active size: $(basename "$dense") (dense) at concurrency 4"
run_point active-dense.json --concurrency 4 --input-len "$short_in" --output-len "$out_len"
stop_server
predict_points
serve active-moe "$moe" --max-seqs 16
echo "   active size: $(basename "$moe") (16 experts, 2 a token) at concurrency 4, then 1, 4, 16"
run_point active-moe.json --concurrency 4 --input-len "$short_in" --output-len "$out_len"
run_point experts.json --concurrency 1,4,16 --input-len "$short_in" --output-len "$out_len"
stop_server
predict_points
trap - EXIT

# context depth: no server, one stream (tps generate --depth: each depth's
# prompt extends the one before, so its prefill starts from the prefix cache)
echo "== context depth: tps generate --depth $depths -n $depth_n --rounds $depth_rounds on the" \
  "$depth_preset shape, $depth_type (smaller depths than docs/performance.md's 1k, 8k and 32k:" \
  "a 32k prefill takes many minutes on 2 cores)"
depth_point() { # depth_point NAME MODEL
  echo "   $1: $(basename "$2")"
  "$tps" generate -m "$2" --depth "$depths" -n "$depth_n" --rounds "$depth_rounds" --json \
    >"$out/depth-$1.json" 2>>"$out/points.log" || {
    echo "demo: the depth sweep of $2 failed (its log: $out/points.log)" >&2
    failed=1
  }
}
depth_point attention "$attn"
depth_point hybrid "$hybrid"

# ---- 3. the report ---------------------------------------------------------------------
factors=(--factor batch="$out/batch.json")
for m in "${mixes[@]}"; do factors+=(--factor "mix:$m=$out/mix-${m%/*}.json"); done
factors+=(--factor "itl:prefill in one step=$out/itl-one-step.json"
  --factor "itl:chunked prefill=$out/itl-chunked.json"
  --factor "itl:chunked + ITL target=$out/itl-target.json"
  --factor "prefix:prefix cache off=$out/prefix-off.json"
  --factor "prefix:prefix cache on=$out/prefix-on.json"
  --factor "kv-type:F16 KV at $long_in tokens=$out/kv-f16.json"
  --factor "kv-type:Q8_0 KV at $long_in tokens=$out/kv-q8_0.json"
  --factor "model:$(basename "$small" .gguf)=$out/model-small.json"
  --factor "model:$(basename "$big" .gguf)=$out/model-big.json"
  --factor "active:$(basename "$dense" .gguf) (dense)=$out/active-dense.json"
  --factor "active:$(basename "$moe" .gguf) (16 experts, 2 a token)=$out/active-moe.json"
  --factor "experts=$out/experts.json"
  --factor "depth:qwen3 $depth_preset=$out/depth-attention.json"
  --factor "depth:qwen35 $depth_preset=$out/depth-hybrid.json")
report() { # report [tps report options]: the page, the SVGs and summary.txt
  "$tps" report "${factors[@]}" --html "$out/report.html" --svg "$out/svg" "$@" \
    >"$out/summary.txt"
}
report || failed=1
# A point of a model too big for the caches that read faster than the servers'
# cached read bandwidth shows that figure was no limit (a busy moment's): the
# report notes it (the words are RSET_LIMIT_RAISED, src/bench/report/report_set.h).
# Then measure again, the servers stopped, and read every share against the best
# of the cache and this measurement; the report still raises it to what a point
# read if that was more. Its tables say which figure they used.
if grep -q "was below it, so it was no limit" "$out/summary.txt"; then
  echo "== a point read faster than the cached read bandwidth: tps machine measures again"
  if mjson=$("$tps" machine --json 2>>"$out/points.log"); then
    gbs=$(grep -o '"read_gbs":[0-9.e+-]*' <<<"$mjson" | head -1 | cut -d: -f2)
    from=$(grep -o '"read_from":"[^"]*"' <<<"$mjson" | head -1 | cut -d'"' -f4)
    printf '   tps machine: %.1f GB/s (%s)\n' "$gbs" "$from"
    report --read-gbs "$gbs" --read-from "tps machine, measured again by make demo; $from" ||
      failed=1
  else
    echo "demo: tps machine failed (its log: $out/points.log); shares stay as noted" >&2
  fi
fi
sed '/^What moves tokens per second/,$d' "$out/summary.txt"

t_end=$(date +%s)
cat <<MSG

== done in $((t_end - t_start)) s
Report: $out/report.html (one self-contained page: a section per factor with its
table, plot and reading; the SVG plots and their gnuplot scripts are in $out/svg/).
Results: $out/*.json, one tps sweep file per point (tps report FILE... renders any).

Point the instrument at another endpoint (llama.cpp's server, vLLM, a hosted API):
  $tps bench --url http://HOST:PORT --concurrency 4 --requests 50 --json run.json
  $tps sweep --url http://HOST:PORT --concurrency 1,4,16 --duration 20 --json sweep.json
  (add --endpoint chat --model NAME --api-key KEY for a hosted API; tps bench --help)

MSG
sed -n '/^What moves tokens per second/,$p' "$out/summary.txt"

# one prediction per factor beside its measurement: the factor's last point
pred_line() { # pred_line FACTOR MEASURED.json PREDICTED.json
  [ -f "$out/$3" ] || {
    printf '  %-8s not predicted\n' "$1"
    return
  }
  "$tps" report "$out/$2" "$out/$3" 2>/dev/null | awk -v f="$1" '
    /^predicted \(tps plan\)/ { p = 1; next }
    p && /^point/ { h = 1; next }
    h && NF >= 16 { n = NF; last = $0; lab = $1; for (i = 2; i <= n - 15; i++) lab = lab " " $i
      line = sprintf("  %-8s %s: output %s tok/s predicted, %s measured (%s); TTFT p50 %s vs %s ms (%s); ITL p50 %s vs %s ms (%s)",
        f, lab, $(n-14), $(n-13), $(n-12), $(n-11), $(n-10), $(n-9), $(n-8), $(n-7), $(n-6)) }
    h && !NF { h = 0 }
    END { print (line != "" ? line : sprintf("  %-8s no prediction to compare", f)) }'
}
echo
echo "Predicted (tps plan, from each server's own --save-calibration) beside measured:"
pred_line batch batch.json plan-batch.json
last_mix=${mixes[${#mixes[@]} - 1]}
pred_line mix "mix-${last_mix%/*}.json" "plan-mix-${last_mix%/*}.json"
printf '  %-8s not predicted: two loads at once (streams and long prompts); tps plan takes one\n' itl
pred_line prefix prefix-on.json plan-prefix-on.json
pred_line kv-type kv-q8_0.json plan-kv-q8_0.json
pred_line model model-big.json plan-model-big.json
pred_line active active-moe.json plan-active-moe.json
pred_line experts experts.json plan-experts.json
printf '  %-8s not predicted: one stream offline (tps generate), no server to calibrate\n' depth
exit $failed
