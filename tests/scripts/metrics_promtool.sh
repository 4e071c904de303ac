#!/usr/bin/env bash
# Prometheus' own linter accepts our /metrics (names, types, units, _total
# only on counters), and our recording rules and scrape config. promtool
# comes with Debian's `prometheus` package, which scripts/install-deps.sh does
# not install (a 100 MB server with a system service, for one linter):
# without it this test is skipped, saying so.
source "$(dirname "$0")/lib.sh"
command -v promtool >/dev/null ||
  skip "promtool is not installed (apt-get install prometheus): /metrics names not linted"
serve_one
# one finished request, so every histogram has samples
curl -s -o /dev/null "$serve_url/v1/completions" -H 'Content-Type: application/json' \
  -d '{"prompt": "one two three", "max_tokens": 4}' || fail "completion request"
curl -s "$serve_url/metrics" >"$tmp/metrics.txt" || fail "GET /metrics"
grep -q '^tps_steps_total ' "$tmp/metrics.txt" || fail "/metrics has no tps_steps_total"
promtool check metrics <"$tmp/metrics.txt" || fail "promtool check metrics flags the names above"
promtool check rules "$root/deploy/prometheus/tps-rules.yml" || fail "promtool check rules"
promtool check config "$root/deploy/prometheus/prometheus.yml" || fail "promtool check config"
echo "ok: promtool accepts /metrics, deploy/prometheus/tps-rules.yml and prometheus.yml"
