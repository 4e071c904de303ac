#!/usr/bin/env bash
# The proxy's own cost: one replica, measured direct and through nginx
# (scripts/fleet.sh up 1) with the same workload, at concurrency 1 and 16;
# the two paths alternate, ROUNDS times each (default 5; which goes first
# alternates too), so drift in a busy machine's speed hits both alike. Prints TTFT p50 and output tok/s (run
# window) per run, the median of each path, and the median of the paired
# differences (nginx - direct within one round), with the range of the
# direct runs to show how much the machine itself varied. Numbers for
# docs/deploy.md.
# Usage: scripts/fleet-proxy-cost.sh [TPS_BINARY] [--rounds R] [--model M]
set -euo pipefail

tps=build/tps
rounds=5
model=models/15M-q8_0.gguf
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then
  tps=$1
  shift
fi
while [ $# -gt 0 ]; do
  case $1 in
  --rounds) rounds=$2 && shift ;;
  --model) model=$2 && shift ;;
  *)
    echo "usage: scripts/fleet-proxy-cost.sh [TPS_BINARY] [--rounds R] [--model M]" >&2
    exit 2
    ;;
  esac
  shift
done
root=$(cd "$(dirname "$0")/.." && pwd)
case $tps in /*) ;; *) tps=$PWD/$tps ;; esac
cd "$root"
[ -f "$model" ] || { mkdir -p "$(dirname "$model")" && "$tps" model make --preset 15M --type q8_0 -o "$model" >/dev/null; }
command -v jq >/dev/null || {
  echo "fleet-proxy-cost: needs jq" >&2
  exit 1
}

dir=$(mktemp -d)
trap 'scripts/fleet.sh down --dir "$dir/run" >/dev/null 2>&1 || true; rm -rf "$dir"' EXIT
scripts/fleet.sh up 1 --model "$model" --port 0 --dir "$dir/run" --tps "$tps" >"$dir/up.log"
proxy=$(sed -n 's/^url: //p' "$dir/up.log")
direct=$(sed -n 's/^replica-1: //p' "$dir/up.log")

run() { # run URL CONCURRENCY -> "ttft_p50_ms output_tps"
  local n=$(($2 == 1 ? 24 : 96))
  "$tps" bench --url "$1" --tokenizer "$model" --concurrency "$2" --requests $n \
    --input-len 32 --output-len 64 --timeout 120 --no-progress --quiet --json "$dir/r.json"
  jq -r '"\(.histograms.ttft.p50 / 1e6) \(.windows.run.output_tps)"' "$dir/r.json"
}
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# warm both paths (nginx's upstream keep-alive, the replica's first steps)
run "$direct" 4 >/dev/null
run "$proxy" 4 >/dev/null
printf '%-11s %5s %5s %14s %14s\n' path conc round "TTFT p50 ms" "output tok/s"
for c in 1 16; do
  : >"$dir/direct-$c" && : >"$dir/proxy-$c"
  for ((r = 1; r <= rounds; r++)); do
    order="direct proxy"
    [ $((r % 2)) = 0 ] && order="proxy direct" # neither path always goes first
    for path in $order; do
      u=$direct
      [ $path = proxy ] && u=$proxy
      read -r ttft tps_ < <(run "$u" $c)
      echo "$ttft $tps_" >>"$dir/$path-$c"
      printf '%-11s %5s %5s %14.2f %14.1f\n' $path $c $r "$ttft" "$tps_"
    done
  done
done
echo
printf '%-5s %-28s %-28s %-24s %s\n' conc "TTFT p50 ms: direct | nginx" "paired added ms (median)" \
  "tok/s: direct | nginx" "ratio (paired median); direct range"
for c in 1 16; do
  paste -d' ' "$dir/direct-$c" "$dir/proxy-$c" >"$dir/pair-$c" # ttft_d tps_d ttft_p tps_p
  td=$(awk '{ print $1 }' "$dir/pair-$c" | median)
  tp=$(awk '{ print $3 }' "$dir/pair-$c" | median)
  dt=$(awk '{ print $3 - $1 }' "$dir/pair-$c" | median)
  sd=$(awk '{ print $2 }' "$dir/pair-$c" | median)
  sp=$(awk '{ print $4 }' "$dir/pair-$c" | median)
  rs=$(awk '{ print $4 / $2 }' "$dir/pair-$c" | median)
  range=$(awk 'NR == 1 || $1 < lo { lo = $1 } NR == 1 || $1 > hi { hi = $1 }
               NR == 1 || $2 < slo { slo = $2 } NR == 1 || $2 > shi { shi = $2 }
               END { printf "TTFT %.2f-%.2f ms, %.0f-%.0f tok/s", lo, hi, slo, shi }' "$dir/pair-$c")
  printf '%-5s %12.2f | %-13.2f %+24.2f %10.1f | %-11.1f %6.1f%%; %s\n' $c "$td" "$tp" "$dt" "$sd" "$sp" \
    "$(awk -v r="$rs" 'BEGIN { print 100 * r }')" "$range"
done
