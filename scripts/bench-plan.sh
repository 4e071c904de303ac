#!/usr/bin/env bash
# tps plan's accuracy against tps bench (docs/plan.md; run by make bench).
# For each model preset: calibrate (tps plan calibrate), serve it (with
# --save-calibration) and measure every point of the grid with tps bench:
# closed loop at concurrency 1/4/16/64 with 128/128 and 512/64
# prompt/output tokens, the capacity under an SLO (--find-max-rate), then
# Poisson rates at 25/50/75/100% of the measured capacity, then the
# c4-128-128 and rate75 points again with their first seeds (the machine's
# repeatability: how much the same point moves in the minutes a grid takes;
# a closed loop's and a Poisson load's TTFT move differently). Then predict
# every point with tps plan: from tps plan calibrate's fit, from the
# server's own fit, from the roofline alone, and from the calibration at
# the hypervisor's steal the bench read during the point (--steal, and
# second by second, --steal-series). Last,
# scripts/plan_table.py writes the table of every point into docs/plan.md.
# The server runs with --no-prefix-cache (and the plans with it), so that
# no point's TTFT depends on what the points before it left in the one
# server's cache: a plan starts from an empty one.
#
# usage: scripts/bench-plan.sh [BUILD_DIR]
# env:   TPS_PLAN_MODELS   presets (default "15M 110M 1B"), made as q8_0 in
#                          TPS_BENCH_DIR (default /tmp/tps-bench) when absent
#        TPS_PLAN_POINT_S  seconds each point sends for (default 20)
#        TPS_PLAN_SLO      the capacity search's SLO (default ttft=3000,tpot=300)
#        TPS_PLAN_DOC      the page the table goes into (default docs/plan.md;
#                          "none": print it only)
#        BENCH_THREADS     kernel threads (default 2)
#        TPS_PLAN_FRESH    1: also calibrate just before each point (its own
#                          file, beside the point's JSON) and predict the point
#                          from it too: what the prediction errs by when the
#                          machine had no minutes to drift between the two
#        TPS_PLAN_FRESH_ARGS those calibrations' options (default "--kv-type f16
#                          --served-s 10": the server's KV type, and a served
#                          phase long enough to see the machine's tails)
#        TPS_PLAN_REPEAT   "all": measure every point of the grid, and the
#                          capacity search, a second time after the rest (same
#                          seeds), not only c4-128-128 and rate75: how often
#                          the machine agrees with itself within the issue's
#                          bounds, the ceiling on any prediction's count
#        TPS_PLAN_REPREDICT "calibrate": no measuring; calibrate again and
#                          predict the points an earlier run measured (in
#                          TPS_BENCH_DIR/plan); "keep": predict them with the
#                          calibrations that run left
set -euo pipefail
build=${1:-build}
cd "$(dirname "$0")/.."
tps=$PWD/$build/tps
dir=${TPS_BENCH_DIR:-/tmp/tps-bench}
out=$dir/plan
models=${TPS_PLAN_MODELS:-15M 110M 1B}
point_s=${TPS_PLAN_POINT_S:-20}
slo=${TPS_PLAN_SLO:-ttft=3000,tpot=300}
doc=${TPS_PLAN_DOC:-docs/plan.md}
threads=${BENCH_THREADS:-2}
repredict=${TPS_PLAN_REPREDICT:-}
fresh=${TPS_PLAN_FRESH:-}
repeat_all=${TPS_PLAN_REPEAT:-}
case $repeat_all in "" | all) ;; *)
  echo "bench-plan: TPS_PLAN_REPEAT is \"all\" or unset, not \"$repeat_all\"" >&2
  exit 2
  ;;
esac
# every request waits for its reply, however long the queue ahead of it (a
# 1B preset's 64 streams of 512-token prompts queue for minutes; the
# default --idle-timeout of 60 s would fail them, and the figures would be
# those of the requests that did not wait)
limits=(--timeout 600 --idle-timeout 600)
read -r -a fresh_args <<<"${TPS_PLAN_FRESH_ARGS:---kv-type f16 --served-s 10}"
mkdir -p "$out"
# the roofline's machine limits measured here, for these threads (not a cache
# another run left behind)
export XDG_CACHE_HOME=$out/cache
: >"$out/points.txt"
: >"$out/steal.txt"
: >"$out/series.txt"
: >"$out/capacity.txt"
[ -n "$repredict" ] || : >"$out/repeat.txt"

spid=
. scripts/served-lib.sh # stop_server: the server in $spid (it writes its fit at exit)
trap "stop_server || true" EXIT # (set -e: its kill of a server already gone fails)

serve() { # serve MODEL LOG CALIBRATION: start tps serve on a free port, set $url
  "$tps" serve -m "$1" --host 127.0.0.1 --port 0 --threads "$threads" --no-prefix-cache \
    --save-calibration "$3" >"$2" 2>&1 &
  spid=$!
  url=
  for _ in $(seq 1 1200); do
    url=$(sed -n 's/.*listening on \(http:\/\/127\.0\.0\.1:[0-9]*\).*/\1/p' "$2" | head -1)
    [ -n "$url" ] && return 0
    kill -0 "$spid" 2>/dev/null || break
    sleep 0.1
  done
  echo "bench-plan: tps serve did not start ($2)" >&2
  exit 1
}

# measure MODEL FILE NAME LOAD...: the point measured; its prediction comes later
measure() {
  local m=$1 f=$2 name=$3 base=$out/$1-$3
  shift 3
  echo "== $m $name: $*"
  if [ -n "$fresh" ]; then
    "$tps" plan calibrate -m "$f" --threads "$threads" "${fresh_args[@]}" -o "$base.cal.txt" \
      >"$base.cal.log" 2>&1 ||
      echo "bench-plan: $m $name: calibrate failed ($base.cal.log)" >&2
  else
    rm -f "$base.cal.txt" # an earlier run's, taken before another measurement
  fi
  "$tps" bench --url "$url" --tokenizer "$f" "$@" --duration "$point_s" "${limits[@]}" \
    --no-progress --quiet --json "$base.json" || echo "bench-plan: $m $name: bench failed" >&2
  echo "$m $name $*" >>"$out/todo-$m.txt"
}

seed_of() { # the seed a bench result (or a capacity search's first probe) ran with
  python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); r=r["probes"][0]["result"] if "probes" in r else r
print(r["config"]["seed"])' "$1"
}

# predict MODEL FILE: every point measured, predicted three ways, each with
# the measured run's seed
predict() {
  local m=$1 f=$2 name load base
  while read -r _ name load; do
    base=$out/$m-$name
    read -r -a args <<<"$load"
    # the measured run's seed: the plan sends the same prompts on the same
    # schedule (a Poisson point's request count is itself a draw)
    args+=(--seed "$(seed_of "$base.json")")
    "$tps" plan -m "$f" --threads "$threads" --no-prefix-cache --calibration "$out/cal-$m.txt" "${args[@]}" \
      --duration "$point_s" "${limits[@]}" --quiet --json "$base.plan.json"
    "$tps" plan -m "$f" --threads "$threads" --no-prefix-cache --calibration "$out/serve-cal-$m.txt" "${args[@]}" \
      --duration "$point_s" "${limits[@]}" --quiet --json "$base.served.json" || true
    "$tps" plan -m "$f" --threads "$threads" --no-prefix-cache "${args[@]}" --duration "$point_s" "${limits[@]}" \
      --quiet --json "$base.roof.json"
    # the same calibration at the hypervisor's steal during the run (the
    # bench's host.steal): what the plan errs by once told how much of the
    # machine the run had
    local steal
    steal=$(python3 -c 'import json,sys; print((json.load(open(sys.argv[1])).get("host") or {}).get("steal", ""))' "$base.json")
    if [ -n "$steal" ] && grep -q '^steal ' "$out/cal-$m.txt"; then
      "$tps" plan -m "$f" --threads "$threads" --no-prefix-cache --calibration "$out/cal-$m.txt" "${args[@]}" \
        --steal "$steal" --duration "$point_s" "${limits[@]}" --quiet --json "$base.steal.json" || true
      echo "$m $name $base.json $base.steal.json" >>"$out/steal.txt"
      # ... and at the steal as it went during the run, second by second
      # (its series.steal): what a mean cannot show of the bursts
      "$tps" plan -m "$f" --threads "$threads" --no-prefix-cache --calibration "$out/cal-$m.txt" "${args[@]}" \
        --steal-series "$base.json" --duration "$point_s" "${limits[@]}" --quiet \
        --json "$base.series.json" &&
        echo "$m $name $base.json $base.series.json" >>"$out/series.txt"
    fi
    local fresh_json=
    if [ -f "$base.cal.txt" ]; then
      fresh_json=$base.fresh.json
      "$tps" plan -m "$f" --threads "$threads" --no-prefix-cache --calibration "$base.cal.txt" "${args[@]}" \
        --duration "$point_s" "${limits[@]}" --quiet --json "$fresh_json" || true
    fi
    echo "$m $name $base.json $base.plan.json $base.roof.json $base.served.json $fresh_json" \
      >>"$out/points.txt"
  done <"$out/todo-$m.txt"
}

# repeat MODEL FILE NAME: the point NAME measured again, last, with its
# seed (same prompts, same schedule): how far this machine moves between
# the first point and the last, the floor under any prediction's error
repeat() {
  local m=$1 f=$2 first=$out/$1-$3.json args
  [ -f "$first" ] || return 0
  read -r -a args <<<"$(sed -n "s/^$m $3 //p" "$out/todo-$m.txt")"
  args+=(--seed "$(seed_of "$first")")
  echo "== $m $3 again: ${args[*]}"
  "$tps" bench --url "$url" --tokenizer "$f" "${args[@]}" --duration "$point_s" "${limits[@]}" \
    --no-progress --quiet --json "$out/$m-$3.again.json" || return 0
  echo "$m $3 $first $out/$m-$3.again.json" >>"$out/repeat.txt"
}

max_rate() { # the answer of a capacity search's JSON
  python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("max_rate", 0))' "$1"
}

# measure_all MODEL FILE: serve it and measure every point of the grid
measure_all() {
  local m=$1 f=$2 shape c top pc r
  : >"$out/todo-$m.txt"
  serve "$f" "$out/serve-$m.log" "$out/serve-cal-$m.txt"
  for shape in 128/128 512/64; do
    for c in 1 4 16 64; do
      measure "$m" "$f" "c$c-${shape/\//-}" --concurrency "$c" --input-len "${shape%/*}" \
        --output-len "${shape#*/}"
    done
  done
  echo "== $m: capacity under $slo (measured, then predicted)"
  "$tps" bench --url "$url" --tokenizer "$f" "${cap[@]}" --no-progress --quiet \
    --json "$out/$m-capacity.json" || true
  top=$(max_rate "$out/$m-capacity.json" 2>/dev/null || echo 0)
  if python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) > 0 else 1)" "$top"; then
    for pc in 25 50 75 100; do
      r=$(python3 -c "import sys; print(float(sys.argv[1]) * int(sys.argv[2]) / 100)" "$top" "$pc")
      measure "$m" "$f" "rate$pc" --rate "$r" --input-len 128 --output-len 128
    done
  else
    echo "bench-plan: $m: no measured capacity under $slo: no rate points" >&2
  fi
  if [ -n "$repeat_all" ]; then
    local name
    while read -r _ name _; do repeat "$m" "$f" "$name"; done <"$out/todo-$m.txt"
    echo "== $m: capacity under $slo again"
    "$tps" bench --url "$url" --tokenizer "$f" "${cap[@]}" --seed "$(seed_of "$out/$m-capacity.json")" \
      --no-progress --quiet --json "$out/$m-capacity.again.json" &&
      echo "$m capacity $out/$m-capacity.json $out/$m-capacity.again.json" >>"$out/repeat.txt"
  else
    repeat "$m" "$f" c4-128-128
    repeat "$m" "$f" rate75
  fi
  stop_server || true
}

for m in $models; do
  f=$dir/$m-q8_0.gguf
  [ -f "$f" ] || "$tps" model make --preset "$m" --type q8_0 -o "$f"
  cap=(--find-max-rate --slo "$slo" --duration "$point_s" --input-len 128 --output-len 128)
  if [ "$repredict" != keep ]; then
    echo "== $m: tps plan calibrate"
    "$tps" plan calibrate -m "$f" --threads "$threads" -o "$out/cal-$m.txt"
  fi
  [ -n "$repredict" ] || measure_all "$m" "$f"
  echo "== $m: predictions (tps plan calibrate's fit, the server's, the roofline)"
  predict "$m" "$f"
  "$tps" plan -m "$f" --threads "$threads" --no-prefix-cache --calibration "$out/cal-$m.txt" "${cap[@]}" --quiet \
    --json "$out/$m-capacity.plan.json" || true
  echo "$m $out/$m-capacity.json $out/$m-capacity.plan.json" >>"$out/capacity.txt"
done

if [ "$doc" = none ]; then
  cp docs/plan.md "$out/plan.md"
  python3 scripts/plan_table.py "$out" "$out/plan.md"
  sed -n '/plan-table:begin/,/plan-table:end/p' "$out/plan.md"
else
  python3 scripts/plan_table.py "$out" "$doc"
fi
