# Shared by the scripts that start `tps serve --port 0` (sourced): the URL the
# server prints once it listens. Not here: starting or stopping the server,
# waiting for /health (each script knows its own).

listen_url() { # listen_url LOG PID TRIES: prints http://127.0.0.1:PORT from LOG
  # once there (TRIES x 0.1 s at most, fewer if PID ends); nothing if never
  local url= i
  for ((i = 0; i < $3; i++)); do
    url=$(sed -n 's/.*listening on \(http:\/\/127\.0\.0\.1:[0-9]*\).*/\1/p' "$1" 2>/dev/null |
      head -1) || true
    [ -n "$url" ] && break
    kill -0 "$2" 2>/dev/null || break
    sleep 0.1
  done
  echo "$url"
}
