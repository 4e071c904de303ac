#!/usr/bin/env bash
# A two-replica fleet (scripts/fleet.sh) behind nginx:
# - affinity: every request of one session (X-Session-Id, sent by the bench's
#   multi-turn workload) reaches one replica, by nginx's own access log;
# - failover: after SIGKILL to one replica, every request (with and without
#   a session, including sessions that lived on the dead one) succeeds on the
#   other;
# - `fleet.sh down` stops every process `up` started, and nothing else.
source "$(dirname "$0")/lib.sh"
command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] ||
  fail "nginx is not installed (scripts/install-deps.sh installs nginx-light)"
tiny_model
fleet=$root/scripts/fleet.sh
run=$tmp/run
"$fleet" up 2 --model "$tmp/tiny.gguf" --port 0 --dir "$run" --tps "$tps" -- --threads 1 \
  >"$tmp/up.log" 2>&1 || fail "fleet.sh up: $(cat "$tmp/up.log")"
cleanups+=("'$fleet' down --dir '$run' >/dev/null 2>&1")
url=$(sed -n 's/^url: //p' "$tmp/up.log")
[ -n "$url" ] || fail "fleet.sh up printed no url: $(cat "$tmp/up.log")"
"$fleet" status --dir "$run" >"$tmp/status.log" || fail "fleet.sh status: $(cat "$tmp/status.log")"
[ "$(grep -c 'health 200' "$tmp/status.log")" = 2 ] || fail "status: $(cat "$tmp/status.log")"

pid_of() { awk -v r="$1" '$1 == r { print $2 }' "$run/processes"; }
hostport_of() { awk -v r="$1" '$1 == r { sub(/^http:\/\//, "", $4); print $4 }' "$run/processes"; }
log=$run/logs/access.log
posts() { # the POST lines of nginx's log from line $1 on: "session upstream completion"
  tail -n +"$1" "$log" | grep '"POST ' |
    sed -n 's/.*session="\([^"]*\)" upstream="\([^"]*\)" upstream_status="[^"]*" completion="\([^"]*\)".*/\1 \2 \3/p' |
    sed 's/, /,/g'
}
bench() { # bench ARGS...: through nginx, no request may fail
  "$tps" bench --url "$url" --tokenizer "$tmp/tiny.gguf" --input-len 24 --output-len 8 \
    --timeout 60 --no-progress --quiet "$@" >>"$tmp/bench.log" 2>&1 ||
    fail "tps bench $*: $(tail -20 "$tmp/bench.log")"
}

# ---- affinity --------------------------------------------------------------------------
# 11 conversations, an odd count: nginx's round robin over two replicas then
# moves a conversation between them from turn to turn (with an even count it
# would keep each on one by coincidence), so this fails without affinity
bench --turns 3 --conversations 11 --concurrency 4
posts 1 >"$tmp/affinity"
[ "$(awk '$1 != "-"' "$tmp/affinity" | wc -l)" = 33 ] ||
  fail "expected 33 requests with a session in nginx's log: $(cat "$tmp/affinity")"
[ "$(awk '{ print $1 }' "$tmp/affinity" | sort -u | wc -l)" = 11 ] || fail "expected 11 sessions"
split=$(awk '{ print $1, $2 }' "$tmp/affinity" | sort -u | awk '{ n[$1]++ } END { for (s in n) if (n[s] > 1) print s }')
[ -z "$split" ] || fail "sessions that reached more than one replica: $split"
echo "ok: 11 sessions x 3 turns, each session on one replica"

# ---- failover --------------------------------------------------------------------------
dead=$(hostport_of replica-1)
alive=$(hostport_of replica-2)
start=$(($(wc -l <"$log") + 1))
killed=$(pid_of replica-1)
kill -KILL "$killed"
for _ in $(seq 1 500); do # until it is gone (or a zombie): its sockets are closed then
  [ -r "/proc/$killed/stat" ] && [ "$(sed 's/^.*) //' "/proc/$killed/stat" | cut -d' ' -f1)" != Z ] || break
  sleep 0.01
done
bench --requests 8 --concurrency 2
bench --turns 2 --conversations 12 --concurrency 4
posts "$start" >"$tmp/after"
[ "$(wc -l <"$tmp/after")" = 32 ] || fail "expected 32 requests after the kill: $(cat "$tmp/after")"
bad=$(awk -v a="$alive" '{ n = split($2, u, ","); if (u[n] != a || $3 != "OK") print }' "$tmp/after")
[ -z "$bad" ] || fail "after the kill, requests not answered in full by $alive: $bad"
retried=$(grep -c "$dead," "$tmp/after" || true)
echo "ok: after SIGKILL to $dead, 32 of 32 requests answered by $alive ($retried retried by nginx)"
"$fleet" status --dir "$run" >"$tmp/status.log" && fail "status should report the dead replica"
grep -q 'replica-1 .* stopped' "$tmp/status.log" || fail "status: $(cat "$tmp/status.log")"

# ---- down ------------------------------------------------------------------------------
pids=$(awk '{ print $2 }' "$run/processes")
"$fleet" down --dir "$run" >"$tmp/down.log" || fail "fleet.sh down: $(cat "$tmp/down.log")"
for p in $pids; do
  if kill -0 "$p" 2>/dev/null && grep -q "$run\|tps" "/proc/$p/cmdline" 2>/dev/null; then
    fail "pid $p outlived fleet.sh down"
  fi
done
nport=${url##*:}
curl -s -m 2 -o /dev/null "http://127.0.0.1:$nport/health" && fail "nginx still answers on $nport"
echo "ok: fleet.sh down stopped nginx and both replicas"
