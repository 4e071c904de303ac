#!/usr/bin/env bash
# `make fleet-demo`: replicas behind nginx (scripts/fleet.sh), proven with load.
#   1. affinity: 3 replicas, two `tps bench` processes at once drive the
#      multi-turn workload (each conversation's requests carry X-Session-Id);
#      their results are merged with `tps bench merge`; nginx's access log
#      shows every session's requests on one replica;
#   2. round robin: the same on a fresh fleet that ignores the session header:
#      the prefix cache serves less of each prompt;
#   3. failover: under load one replica gets SIGKILL: requests in flight on it
#      fail (counted, with their error), every request sent after the kill
#      succeeds on the others;
#   4. drain: under load another replica gets SIGTERM: no request fails.
# Writes fleet/summary.json (and every result under fleet/). A few minutes on
# 2 cores. Usage: scripts/fleet-demo.sh [TPS_BINARY] [--out DIR]
set -euo pipefail

tps=build/tps
out=fleet
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then
  tps=$1
  shift
fi
while [ $# -gt 0 ]; do
  case $1 in
  --out) out=$2 && shift ;;
  *)
    echo "usage: scripts/fleet-demo.sh [TPS_BINARY] [--out DIR]" >&2
    exit 2
    ;;
  esac
  shift
done
root=$(cd "$(dirname "$0")/.." && pwd)
case $tps in /*) ;; *) tps=$PWD/$tps ;; esac
case $out in /*) ;; *) out=$root/$out ;; esac
cd "$root"
[ -x "$tps" ] || {
  echo "fleet-demo: $tps is not built (make build)" >&2
  exit 1
}
command -v jq >/dev/null || {
  echo "fleet-demo: jq is needed to read the results (scripts/install-deps.sh installs it)" >&2
  exit 1
}
mkdir -p "$out"
rm -f "$out"/*.json
t_start=$(date +%s)

replicas=3
model=models/15M-q8_0.gguf
# one kernel thread per replica: three replicas share a small machine
serve=(--threads 1 --drain-timeout 30)
# a conversation: 4 turns of 48 new prompt tokens and 24 output tokens, each
# turn carrying the whole history (about 300 tokens by the last)
convo=(--tokenizer "$model" --turns 4 --conversations 6 --concurrency 3 --input-len 48
  --output-len 24 --timeout 120 --no-progress --quiet)
# single requests for failover and drain: long enough to be in flight
single=(--tokenizer "$model" --concurrency 6 --input-len 32 --output-len 96 --timeout 120
  --no-progress --quiet --per-request --max-error-rate 1)

if [ ! -f "$model" ]; then
  echo "== model: tps model make --preset 15M --type q8_0 -o $model"
  mkdir -p "$(dirname "$model")"
  "$tps" model make --preset 15M --type q8_0 -o "$model" >"$out/model-make.log" 2>&1 || {
    tail -5 "$out/model-make.log" >&2
    exit 1
  }
fi

fleet_dir=
stop_fleet() { [ -z "$fleet_dir" ] || scripts/fleet.sh down --dir "$fleet_dir" >/dev/null || true; }
trap stop_fleet EXIT
fleet_up() { # fleet_up NAME [--no-affinity]: sets url and fleet_dir
  fleet_dir=$out/$1
  rm -rf "$fleet_dir"
  shift
  scripts/fleet.sh up $replicas --model "$model" --port 0 --dir "$fleet_dir" --tps "$tps" "$@" \
    -- "${serve[@]}" >"$out/fleet-up.log" 2>&1 || {
    cat "$out/fleet-up.log" >&2
    exit 1
  }
  url=$(sed -n 's/^url: //p' "$out/fleet-up.log")
}
fleet_down() {
  scripts/fleet.sh down --dir "$fleet_dir" >/dev/null
  fleet_dir=
}
pid_of() { awk -v r="$1" '$1 == r { print $2 }' "$fleet_dir/processes"; }
url_of() { awk -v r="$1" '$1 == r { print $4 }' "$fleet_dir/processes"; }
server_cache() { # prefix-cache hits / queries summed over the fleet's replicas, as JSON
  local h=0 q=0 m
  for k in $(seq 1 $replicas); do
    m=$(curl -s -m 5 "$(url_of replica-$k)/metrics" || true)
    h=$(awk -v s="$h" '$1 == "tps_prefix_cache_hits_total" { s += $2 } END { print s }' <<<"$m")
    q=$(awk -v s="$q" '$1 == "tps_prefix_cache_queries_total" { s += $2 } END { print s }' <<<"$m")
  done
  awk -v h="$h" -v q="$q" 'BEGIN { if (q > 0) printf "%.4f", h / q; else print "null" }'
}
sessions_split() { # sessions whose requests reached more than one replica (nginx's log)
  sed -n 's/.*session="\([^"]\+\)" upstream="\([^",]*\)".*/\1 \2/p' "$fleet_dir/logs/access.log" |
    grep -v '^- ' | sort -u | awk '{ n[$1]++ } END { s = 0; for (k in n) if (n[k] > 1) s++; print s }'
}
# tps bench against the fleet for SECS s in the background (its pid in $b,
# its result in $out/NAME.json); after AFTER s, signal SIG to REPLICA (its
# pid in $signalled)
load_then_signal() { # NAME SECS AFTER SIG REPLICA
  "$tps" bench --url "$url" "${single[@]}" --duration "$2" --json "$out/$1.json" &
  b=$!
  sleep "$3"
  signalled=$(pid_of "$5")
  kill -"$4" "$signalled"
}
sessions_seen() {
  sed -n 's/.*session="\([^"]\+\)".*/\1/p' "$fleet_dir/logs/access.log" | grep -vx -- - | sort -u | wc -l
}

# ---- 1 and 2: affinity, then round robin ------------------------------------------------
declare -A frac server_frac split
for mode in affinity round_robin; do
  if [ $mode = affinity ]; then fleet_up run-affinity; else fleet_up run-round-robin --no-affinity; fi
  echo "== $mode: $replicas replicas at $url; two load generators, 6 conversations x 4 turns each"
  "$tps" bench --url "$url" "${convo[@]}" --seed 1 --json "$out/$mode-a.json" &
  a=$!
  "$tps" bench --url "$url" "${convo[@]}" --seed 2 --json "$out/$mode-b.json" &
  b=$!
  wait $a && wait $b || {
    echo "fleet-demo: a load generator failed ($mode)" >&2
    exit 1
  }
  "$tps" bench merge "$out/$mode-a.json" "$out/$mode-b.json" --json "$out/$mode.json" --quiet
  frac[$mode]=$(jq '.tokens.cached_input_fraction' "$out/$mode.json")
  server_frac[$mode]=$(server_cache)
  split[$mode]=$(sessions_split)
  printf '   prompt tokens served by the prefix cache: %.1f%% of %s (bench, merged); %.1f%% (replicas'"'"' /metrics)\n' \
    "$(awk -v f="${frac[$mode]}" 'BEGIN { print 100 * f }')" "$(jq '.tokens.input' "$out/$mode.json")" \
    "$(awk -v f="${server_frac[$mode]}" 'BEGIN { print 100 * f }')"
  printf '   %s of %s sessions reached more than one replica (nginx access log)\n' \
    "${split[$mode]}" "$(sessions_seen)"
  fleet_down
done
if [ "${split[affinity]}" != 0 ]; then
  echo "fleet-demo: with affinity, ${split[affinity]} sessions reached more than one replica" >&2
  exit 1
fi

# ---- 3 and 4: SIGKILL, then SIGTERM, under load -----------------------------------------
fleet_up run-failover
echo "== failover: $replicas replicas at $url, 6 requests in flight; SIGKILL to replica-1 after 6 s"
load_then_signal failover 20 6 KILL replica-1
killed=$signalled
# the kill's instant is the process's end (its sockets close then), not the
# signal: a request that reached it in between was in flight on it
while [ -r "/proc/$killed/stat" ] && [ "$(sed 's/^.*) //' "/proc/$killed/stat" | cut -d' ' -f1)" != Z ]; do
  sleep 0.01
done
kill_ns=$(date +%s%N)
wait $b || true
failover=$(jq --argjson k "$kill_ns" '
  [.t0_unix_ns as $t0 | .per_request[] | select(.status != "ok" and .status != "cancelled")
   | {after: ($t0 + .sent_ns >= $k), status, error}] as $f
  | {in_flight: [$f[] | select(.after | not)], after_kill: [$f[] | select(.after)],
     sent_after_kill: [.t0_unix_ns as $t0 | .per_request[] | select($t0 + .sent_ns >= $k)] | length}' \
  "$out/failover.json")
echo "$failover" | jq -r '"   failed in flight on the killed replica: \(.in_flight | length)" +
  ([.in_flight[] | "\n     \(.status): \(.error)"] | unique | join(""))
  + "\n   failed among the \(.sent_after_kill) sent after the kill: \(.after_kill | length)"'

echo "== drain: SIGTERM to replica-2 after 4 s of load"
load_then_signal drain 15 4 TERM replica-2
drained_pid=$signalled
wait $b || true
for _ in $(seq 1 400); do kill -0 "$drained_pid" 2>/dev/null || break; sleep 0.1; done
drain_failed=$(jq '.requests.failed' "$out/drain.json")
printf '   %s requests, %s failed; replica-2 %s\n' "$(jq '.requests.sent' "$out/drain.json")" \
  "$drain_failed" "$(kill -0 "$drained_pid" 2>/dev/null && echo "still draining" || echo "exited")"

# requests each replica answered in full over phases 3 and 4, from nginx's
# log (the last upstream of a retried request is the one that answered)
replicas_json=$(for k in $(seq 1 $replicas); do
  u=$(url_of replica-$k)
  n=$(sed -n 's/.*"POST .*upstream="\([^"]*\)" upstream_status="\([^"]*\)" completion="\([^"]*\)".*/\1|\2|\3/p' \
    "$fleet_dir/logs/access.log" | awk -F'|' -v hp="${u#http://}" '
      { n = split($1, ups, ", "); m = split($2, sts, ", ") }
      ups[n] == hp && sts[m] == "200" && $3 == "OK" { c++ } END { print c + 0 }')
  state=running
  [ $k = 1 ] && state=killed
  [ $k = 2 ] && state=drained
  jq -n --arg u "$u" --argjson n "$n" --arg s "$state" '{url: $u, requests_served: $n, state: $s}'
done | jq -s .)
fleet_down

jq -n --argjson replicas "$replicas_json" --argjson aff "${frac[affinity]}" \
  --argjson rr "${frac[round_robin]}" --argjson saff "${server_frac[affinity]}" \
  --argjson srr "${server_frac[round_robin]}" --argjson fo "$failover" \
  --argjson drain "$drain_failed" --slurpfile merged "$out/affinity.json" '{
    replicas: $replicas,
    affinity_cached_fraction: $aff, round_robin_cached_fraction: $rr,
    server_prefix_cache_hit_fraction: {affinity: $saff, round_robin: $srr},
    failover_failed_in_flight: ($fo.in_flight | length),
    failover_errors: ($fo.in_flight | map(.status) | group_by(.) | map({(.[0]): length}) | add // {}),
    failover_sent_after_kill: $fo.sent_after_kill,
    failover_failed_after_kill: ($fo.after_kill | length),
    drain_failed: $drain,
    merged_result: $merged[0]}' >"$out/summary.json"

t_end=$(date +%s)
echo
echo "== done in $((t_end - t_start)) s: $out/summary.json"
jq '{affinity_cached_fraction, round_robin_cached_fraction, failover_failed_in_flight,
     failover_failed_after_kill, drain_failed, replicas}' "$out/summary.json"
ok=1
[ "$(jq '.failover_failed_after_kill' "$out/summary.json")" = 0 ] || ok=0
[ "$drain_failed" = 0 ] || ok=0
awk -v a="${frac[affinity]}" -v r="${frac[round_robin]}" 'BEGIN { exit !(a > r) }' || ok=0
[ $ok = 1 ] || {
  echo "fleet-demo: FAILED: a request failed after the kill or during the drain, or affinity did not beat round robin" >&2
  exit 1
}
