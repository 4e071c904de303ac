# Shared by the script tests (sourced): a temp folder removed on exit, a
# synthetic tiny model, one `tps serve` on a free loopback port.
# Every test takes the tps binary as $1 (ctest passes the build's).
set -euo pipefail
tps=${1:?usage: $0 TPS_BINARY}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
tmp=$(mktemp -d)
cleanups=()
cleanup() {
  local i
  for ((i = ${#cleanups[@]} - 1; i >= 0; i--)); do eval "${cleanups[$i]}" || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT
. "$root/scripts/listen-lib.sh" # listen_url
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
skip() { # ctest reports exit 77 as skipped (SKIP_RETURN_CODE)
  echo "SKIP: $*"
  exit 77
}

tiny_model() { # the `tiny` preset (stories260K's shape) into $tmp/tiny.gguf
  [ -f "$tmp/tiny.gguf" ] ||
    "$tps" model make --preset tiny --type q8_0 -o "$tmp/tiny.gguf" >"$tmp/model-make.log" 2>&1 ||
    fail "tps model make: $(tail -3 "$tmp/model-make.log")"
}

serve_one() { # starts one replica of the tiny model; sets serve_url
  tiny_model
  "$tps" serve -m "$tmp/tiny.gguf" --host 127.0.0.1 --port 0 --threads 1 >"$tmp/serve.log" 2>&1 &
  local pid=$!
  cleanups+=("kill -TERM $pid 2>/dev/null; wait $pid 2>/dev/null")
  serve_url=$(listen_url "$tmp/serve.log" $pid 600)
  [ -n "$serve_url" ] || fail "tps serve did not start: $(tail -3 "$tmp/serve.log")"
  for _ in $(seq 1 600); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' "$serve_url/health")" = 200 ] && return 0
    sleep 0.1
  done
  fail "$serve_url/health never answered 200"
}
