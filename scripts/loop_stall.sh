#!/usr/bin/env bash
# Does a large request body stall the server's event loop? (issue 19)
# Starts `tps serve` (stories260K, 127.0.0.1), then 4 clients each send
# ROUNDS 7 MB prompts (to /tokenize and /v1/completions, alternating) while
# one client measures up to SAMPLES x GET /health and a small greedy
# completion, one after another, for as long as the load lasts. Prints p50 / p99 / max of each in ms, with
# the same figures measured with no load first. Bounded: every curl has a
# timeout, the load has a fixed count, the whole run at most ~5 minutes.
#   scripts/loop_stall.sh [TPS_BINARY] [SAMPLES] [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-build/tps}
samples=${2:-100}
rounds=${3:-4}
model=../shared/models/stories260K.gguf
port=$((20000 + RANDOM % 20000))
work=$(mktemp -d)
trap 'kill $srv 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"' EXIT

"$bin" serve -m "$model" --port "$port" --threads 1 >"$work/serve.log" 2>&1 &
srv=$!
for _ in $(seq 100); do
  curl -sf -m 1 "http://127.0.0.1:$port/health" >/dev/null 2>&1 && break
  sleep 0.1
done

# a 7 MB prompt: story text repeated
python3 - "$work" <<'EOF'
import json, sys
text = ("Once upon a time, there was a little girl named Lily. She liked to play "
        "in the park with her big red ball. ") * 70000
text = text[:7 * 1000 * 1000]
open(sys.argv[1] + "/tok.json", "w").write(json.dumps({"content": text}))
open(sys.argv[1] + "/cmpl.json", "w").write(json.dumps({"prompt": text, "max_tokens": 1}))
EOF
small='{"prompt":"Once upon a time","max_tokens":4,"temperature":0}'

loading() { # true while any loader runs (always true with no loaders)
  [ ${#loaders[@]} -eq 0 ] && return 0
  for p in "${loaders[@]}"; do kill -0 "$p" 2>/dev/null && return 0; done
  return 1
}

measure() { # $1: label; prints p50 p99 max (ms) for /health and the small completion
  local h="$work/$1.health" c="$work/$1.cmpl"
  : >"$h"
  : >"$c"
  for _ in $(seq "$samples"); do
    loading || break
    curl -s -o /dev/null -m 10 -w '%{time_total}\n' "http://127.0.0.1:$port/health" >>"$h" || echo 10 >>"$h"
    curl -s -o /dev/null -m 10 -w '%{time_total}\n' -H 'Content-Type: application/json' \
      -d "$small" "http://127.0.0.1:$port/v1/completions" >>"$c" || echo 10 >>"$c"
  done
  for f in "$h" "$c"; do
    sort -g "$f" | awk -v name="$1 $(basename "$f" | sed 's/.*\.//')" '
      { v[NR] = $1 * 1000 }
      END { p50 = v[int(NR * 0.5 + 0.5)]; p99 = v[int(NR * 0.99 + 0.5)];
            printf "%-14s n=%d  p50 %7.1f ms  p99 %7.1f ms  max %7.1f ms\n", name, NR, p50, p99, v[NR] }'
  done
}

loaders=()
measure idle
for i in 1 2 3 4; do
  (for r in $(seq "$rounds"); do
     if [ $(((i + r) % 2)) -eq 0 ]; then ep=tokenize; f=tok; else ep=v1/completions; f=cmpl; fi
     curl -s -o /dev/null -m 60 -H 'Content-Type: application/json' \
       --data-binary "@$work/$f.json" "http://127.0.0.1:$port/$ep" || true
   done) &
  loaders[$i]=$!
done
sleep 0.5
measure loaded
for i in 1 2 3 4; do kill "${loaders[$i]}" 2>/dev/null || true; done
