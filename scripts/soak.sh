#!/usr/bin/env bash
# Bounded soak of `tps serve` (issue 9): the ASan + UBSan build of the server
# under `tps bench` with mixed prompt and output lengths, a small KV pool (so
# sequences are preempted and recomputed, and the prefix cache evicts all the
# time) and a second client that cancels (n = 3 requests among them)
# at random points (curl giving up mid-stream or mid-prefill, sockets closed
# before or in the middle of their headers). Two phases:
#   A (60% of the time): bench + cancels;
#   B (40%): bench alone, so the server's token counter can be compared with
#      the bench's exactly.
# At the end the server gets SIGTERM and must exit 0 with no LeakSanitizer
# report. Checks, each printed with its numbers:
#   - zero unexpected errors: bench failed == 0 in both phases, every
#     cancelling client ended by its own timeout or a whole answer, no
#     sanitizer report in the server's log;
#   - zero leaks: exit status 0 under LSan;
#   - RSS flat after warm-up: the last third's peak within 10% (+8 MiB) of
#     the post-warm-up median of the first third (VmRSS, sampled each second);
#   - phase B: delta tps_generation_tokens_total == bench output tokens;
#     phase A: delta >= bench output tokens, and cancels happened;
#   - the KV pool is empty at the end (tps_kv_cache_usage_ratio == 0);
#   - the prefix cache served some prompt tokens (tps_prefix_cache_hits_total),
#     or, for a hybrid model (SOAK_ARCH=qwen35 or qwen35moe: linear-attention layers, whose
#     state no prefix hit restores), every recurrent-state slot was given back
#     (tps_state_slots_used == 0).
#   make test soaks llama tiny, qwen35moe tiny (hybrid, experts) and
#   deepseek2 tiny (latent attention, experts with a shared one).
#   scripts/soak.sh [SECONDS] [BUILD_DIR]   (default 60 s, build-asan)
# SOAK_ARCH=A makes the model with tps model make --arch A (default llama).
# With SOAK_TSAN=1 the build is ThreadSanitizer's (make tsan): the server runs
# 2 kernel threads (so the pool's workers race for real), any ThreadSanitizer
# warning fails the soak, and RSS is not judged (TSan's shadow grows).
set -uo pipefail
seconds=${1:-60}
build=${2:-build-asan}
cd "$(dirname "$0")/.."
tps=$build/tps
[ -x "$tps" ] || { echo "soak: $tps not built"; exit 2; }
[ "$seconds" -ge 10 ] || seconds=10
work=$(mktemp -d /tmp/tps-soak.XXXXXX)
fail=0
# the model: one the project makes itself (stories260K's shape, random
# weights, a byte-level vocabulary), so a fresh clone soaks the same as here;
# TPS_SOAK_MODEL=FILE.gguf serves another
model=${TPS_SOAK_MODEL:-$work/tiny-q8_0.gguf}
# (on one OpenMP thread: under TSan, libgomp's own synchronisation is not
# instrumented, and its workers would be reported as racing)
arch=${SOAK_ARCH:-llama}
if [ -z "${TPS_SOAK_MODEL:-}" ] && ! OMP_NUM_THREADS=1 "$tps" model make --arch "$arch" \
  --preset tiny --type q8_0 -o "$model" >"$work/make.log" 2>&1; then
  echo "soak: tps model make --preset tiny failed:"; tail -5 "$work/make.log"; exit 1
fi
[ -f "$model" ] || { echo "soak: $model not found"; exit 2; }
check() { # check NAME CONDITION-RESULT(0 ok) DETAIL
  if [ "$2" -eq 0 ]; then echo "soak: ok   $1: $3"; else echo "soak: FAIL $1: $3"; fail=1; fi
}

# --- the server: ASan with leak checking; a small quarantine so RSS means
# something: it fills within the warm-up quarter even on a loaded machine
# (16 MiB did not always, in a 25 s soak, and read as growth). The KV pool
# is 416 positions (26 blocks of 16) whatever the model: --kv-tokens lets the
# server size it from the model's own KV bytes a token (the kv_bytes_per_token
# of tps model info --json: 640 B for llama tiny, 1 KiB for qwen35 and
# qwen35moe tiny, 960 B of latent for deepseek2 tiny), where a --kv-mem chosen
# per architecture here had to follow each one. Small, so sequences are
# preempted all the time; the longest request, 120 + 160 tokens (18 blocks),
# still fits (at 256K deepseek2's 17 blocks could not hold it and its requests
# were refused as never fitting). A hybrid model's recurrent-state slots
# (one per --max-seqs) are a pool of their own, outside this one.
kv_tokens=416
tsan=${SOAK_TSAN:-0}
threads=1
[ "$tsan" = 1 ] && threads=2
ASAN_OPTIONS=detect_leaks=1:quarantine_size_mb=4:abort_on_error=0 \
UBSAN_OPTIONS=print_stacktrace=1 TSAN_OPTIONS=halt_on_error=0:second_deadlock_stack=1 \
  "$tps" serve -m "$model" --port 0 --threads $threads --max-seqs 8 --kv-tokens $kv_tokens \
  --timeout 5 --drain-timeout 30 2>"$work/serve.log" &
spid=$!
. scripts/listen-lib.sh # listen_url
url=$(listen_url "$work/serve.log" $spid 300)
port=${url##*:}
if [ -z "$port" ]; then
  echo "soak: the server did not start:"; cat "$work/serve.log"; kill $spid 2>/dev/null; exit 1
fi
url=http://127.0.0.1:$port
echo "soak: server pid $spid on $url, ${seconds}s, model $arch tiny, logs in $work"

metric() { # metric NAME -> value (empty when absent)
  curl -s -m 5 "$url/metrics" | awk -v k="$1" '$1 == k { print $2 }'
}

# --- RSS sampler (bounded by the server's life and the soak's time)
( end=$((SECONDS + seconds + 120))
  while [ $SECONDS -lt $end ] && kill -0 $spid 2>/dev/null; do
    awk '/^VmRSS/ { print $2 }' /proc/$spid/status 2>/dev/null
    sleep 1
  done ) >"$work/rss.txt" &
rss_pid=$!

# --- the cancelling client: bounded in count and time
canceller() {
  local until=$1 i=0 rc
  local body='{"prompt":"Once upon a time there was a little girl","max_tokens":200,"ignore_eos":true,"stream":true}'
  local long
  long='{"prompt":"'$(printf 'Once upon a time %.0s' $(seq 1 40))'","max_tokens":100,"ignore_eos":true}'
  while [ $SECONDS -lt "$until" ] && [ $i -lt 5000 ]; do
    i=$((i + 1))
    case $((RANDOM % 6)) in
      0) # gives up mid-stream
        curl -s -N -o /dev/null -m "0.$((RANDOM % 9 + 1))" -H 'Content-Type: application/json' \
          -d "$body" "$url/v1/completions"; rc=$? ;;
      1) # gives up mid-prefill (a long prompt, not streamed)
        curl -s -o /dev/null -m "0.0$((RANDOM % 9 + 1))" -H 'Content-Type: application/json' \
          -d "$long" "$url/v1/completions"; rc=$? ;;
      2) # leaves before or in the middle of its headers
        if exec 3<>"/dev/tcp/127.0.0.1/$port"; then
          [ $((RANDOM % 2)) = 0 ] && printf 'POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Le' >&3
          exec 3>&-
          rc=28
        else rc=7; fi ;;
      3) # leaves in the middle of its body
        if exec 3<>"/dev/tcp/127.0.0.1/$port"; then
          printf 'POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 500\r\n\r\n{"prompt":"Once' >&3
          sleep 0.0$((RANDOM % 5 + 1))
          exec 3>&-
          rc=28
        else rc=7; fi ;;
      4) # n = 3 choices sharing the long prompt's cached blocks, gives up mid-stream
        curl -s -N -o /dev/null -m "0.$((RANDOM % 9 + 1))" -H 'Content-Type: application/json' \
          -d "${long%\}},\"n\":3,\"stream\":true,\"temperature\":1}" "$url/v1/completions"; rc=$? ;;
      5) # a body over 64 KiB: tokenized on the worker pool; waits or gives up
        curl -s -o /dev/null -m "0.$((RANDOM % 9 + 1))" -H 'Content-Type: application/json' \
          --data-binary "@$work/big.json" "$url/tokenize"; rc=$? ;;
    esac
    echo $rc
  done
}

# --- phase A: bench + cancels
printf '{"prompt":"%s"}' "$(printf 'Once upon a time %.0s' $(seq 1 6000))" >"$work/big.json"
ta=$((seconds * 6 / 10)); tb=$((seconds - ta))
bench_common=(--url "$url" --concurrency 8 --input-len uniform:8:120 --output-len uniform:4:160
  --tokenizer "$model" --quiet --no-progress --timeout 120 --idle-timeout 60)
# under TSan the bench runs two event loops, so its threads race for real too
[ "$tsan" = 1 ] && bench_common+=(--client-threads 2)
g0=$(metric tps_generation_tokens_total)
c0=$(metric 'tps_requests_total{finish_reason="cancelled"}')
canceller $((SECONDS + ta)) >"$work/cancel.txt" &
cpid=$!
"$tps" bench "${bench_common[@]}" --duration "$ta" --seed 1 --csv "$work/bench_a.csv" \
  >"$work/bench_a.out" 2>&1
brc_a=$?
wait $cpid
g1=$(metric tps_generation_tokens_total)
c1=$(metric 'tps_requests_total{finish_reason="cancelled"}')

# --- phase B: bench alone
"$tps" bench "${bench_common[@]}" --duration "$tb" --seed 2 --csv "$work/bench_b.csv" \
  >"$work/bench_b.out" 2>&1
brc_b=$?
g2=$(metric tps_generation_tokens_total)
ratio=$(metric tps_kv_cache_usage_ratio)
pre=$(metric tps_preemptions_total)
hits=$(metric tps_prefix_cache_hits_total); : "${hits:=0}"
queries=$(metric tps_prefix_cache_queries_total); : "${queries:=0}"
slots=$(metric tps_state_slots); : "${slots:=0}"
slots_used=$(metric tps_state_slots_used); : "${slots_used:=0}"

# --- shutdown: drain, exit, LeakSanitizer
kill -TERM $spid
for _ in $(seq 1 600); do kill -0 $spid 2>/dev/null || break; sleep 0.1; done
if kill -0 $spid 2>/dev/null; then kill -KILL $spid; fi
wait $spid
src=$?
kill $rss_pid 2>/dev/null; wait $rss_pid 2>/dev/null

csv() { awk -F, -v c="$2" 'NR == 2 { print $c }' "$1"; } # csv FILE COLUMN
done_a=$(csv "$work/bench_a.csv" 2); fail_a=$(csv "$work/bench_a.csv" 3)
out_a=$(csv "$work/bench_a.csv" 6)
done_b=$(csv "$work/bench_b.csv" 2); fail_b=$(csv "$work/bench_b.csv" 3)
out_b=$(csv "$work/bench_b.csv" 6)
: "${done_a:=0}" "${fail_a:=-1}" "${out_a:=0}" "${done_b:=0}" "${fail_b:=-1}" "${out_b:=0}"
n_cancel=$(wc -l <"$work/cancel.txt")
bad_cancel=$(grep -cvE '^(0|28)$' "$work/cancel.txt")

check "bench A (with cancels)" $((brc_a != 0 || fail_a != 0)) \
  "exit $brc_a, $done_a completed, $fail_a failed, $out_a tokens"
check "bench B (alone)" $((brc_b != 0 || fail_b != 0)) \
  "exit $brc_b, $done_b completed, $fail_b failed, $out_b tokens"
check "cancelling client" $((bad_cancel != 0 || n_cancel == 0)) \
  "$n_cancel clients, $bad_cancel ended other than by their own timeout or a whole answer; server cancelled $((${c1%.*} - ${c0%.*}))"
check "tokens, phase B" $(( ${g2%.*} - ${g1%.*} != out_b )) \
  "server generated $(( ${g2%.*} - ${g1%.*} )), bench received $out_b"
check "tokens, phase A" $(( ${g1%.*} - ${g0%.*} < out_a )) \
  "server generated $(( ${g1%.*} - ${g0%.*} )) >= bench $out_a (+ the cancelled requests')"
check "KV pool empty at the end" $([ "$ratio" = 0 ]; echo $?) "kv_cache_usage_ratio $ratio, preemptions $pre"
if [ "${slots%.*}" -gt 0 ]; then
  check "state slots given back" $(( ${slots_used%.*} != 0 )) \
    "${slots_used%.*} of ${slots%.*} recurrent-state slots held at the end, preemptions $pre"
else
  check "prefix cache used" $(( ${hits%.*} <= 0 )) \
    "${hits%.*} of ${queries%.*} prompt tokens were cache hits"
fi
check "server exit (drain, LeakSanitizer)" $((src != 0)) "exit status $src"
sanitizer=$(cat "$work/serve.log" "$work/bench_a.out" "$work/bench_b.out" |
  grep -cE 'ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:|WARNING: ThreadSanitizer')
check "sanitizer reports" $((sanitizer != 0)) "$sanitizer in the server's and the bench's logs"
# RSS: skip the first quarter (warm-up), then compare thirds
n=$(wc -l <"$work/rss.txt"); w=$((n / 4)); t=$(((n - w) / 3))
base=0; peak=0
if [ $t -ge 1 ]; then
  base=$(sed -n "$((w + 1)),$((w + t))p" "$work/rss.txt" | sort -n | sed -n "$(((t + 1) / 2))p")
  peak=$(tail -n $t "$work/rss.txt" | sort -n | tail -n 1)
fi
if [ "$tsan" = 1 ]; then
  echo "soak: RSS not judged under ThreadSanitizer ($n samples)"
else
  check "RSS flat after warm-up" $((peak > base + base / 10 + 8192)) \
    "$n samples, median ${base} KiB after warm-up, last-third peak ${peak} KiB"
fi
if [ $fail -ne 0 ]; then
  echo "soak: FAILED; server log tail:"; tail -n 30 "$work/serve.log"
  exit 1
fi
echo "soak: passed"
rm -rf "$work"
