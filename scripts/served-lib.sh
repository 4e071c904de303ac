# Shared by scripts/bench-served.sh, bench-prefix-served.sh and bench-plan.sh (sourced):
# one server process at a time in $spid, its readiness, and a CSV reader.

stop_server() { # SIGTERM, then SIGKILL after 30 s
  [ -n "$spid" ] || return 0
  kill -TERM "$spid" 2>/dev/null
  for _ in $(seq 1 300); do kill -0 "$spid" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$spid" 2>/dev/null
  wait "$spid" 2>/dev/null
  spid=
}

wait_ready() { # wait_ready URL: until /health answers 200 (SERVER_START_S, 90 s by
  # default; an 18 GB file takes longer to load)
  for _ in $(seq 1 $((${SERVER_START_S:-90} * 10))); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' -m 2 "$1/health")" = 200 ] && return 0
    kill -0 "$spid" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}

await_server() { # await_server SCRIPT KIND: right after starting a server in
  # the background ($! is its pid, kept in $spid), until it answers on $port;
  # on failure the log's tail and 1
  spid=$!
  wait_ready "http://127.0.0.1:$port" && return 0
  echo "$1: $2 did not start"
  tail -5 "$work/serve.log"
  stop_server
  return 1
}

col() { # col CSV NAME: the value of column NAME in the CSV's data row
  awk -F, -v k="$2" 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == k) c = i }
                     NR == 2 && c { print $c }' "$1"
}
