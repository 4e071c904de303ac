#!/usr/bin/env bash
# The deployment files say what they mean:
# - nginx -t accepts the configuration scripts/fleet.sh generates from
#   deploy/nginx/tps.conf.template (affinity and round robin);
# - every tps_* metric the Grafana dashboard, the recording rules and the
#   autoscaler's adapter rule query exists in a live /metrics;
# - the dashboard is JSON and every YAML manifest parses (python3's yaml
#   module; without it the YAML check is skipped, saying so).
source "$(dirname "$0")/lib.sh"

nginx=$(command -v nginx || echo /usr/sbin/nginx)
[ -x "$nginx" ] || fail "nginx is not installed (scripts/install-deps.sh installs nginx-light)"
for mode in "" --no-affinity; do
  "$root/scripts/fleet.sh" config --dir "$tmp/nginx$mode" --port 8080 $mode \
    127.0.0.1:8101 127.0.0.1:8102 127.0.0.1:8103 >/dev/null || fail "fleet.sh config $mode"
  "$nginx" -t -q -p "$tmp/nginx$mode/" -c "$tmp/nginx$mode/nginx.conf" || fail "nginx -t ($mode)"
  [ "$(grep -c 'server 127.0.0.1:810[123] ' "$tmp/nginx$mode/tps.conf")" = 9 ] ||
    fail "the three replicas are not in each of the three upstream blocks"
done
grep -q 'default tps_session;' "$tmp/nginx/tps.conf" || fail "affinity is not the default"
grep -q 'default tps_round_robin;' "$tmp/nginx--no-affinity/tps.conf" || fail "--no-affinity"

jq empty "$root/deploy/grafana/tps.json" || fail "deploy/grafana/tps.json is not JSON"

serve_one
curl -s "$serve_url/metrics" >"$tmp/metrics.txt" || fail "GET /metrics"
awk '!/^#/ { sub(/[{ ].*/, "", $1); print $1 }' "$tmp/metrics.txt" | sort -u >"$tmp/have"
{
  jq -r '.. | objects | (.expr?, .query?) // empty' "$root/deploy/grafana/tps.json"
  grep -h 'expr\|seriesQuery' "$root/deploy/prometheus/tps-rules.yml" \
    "$root/deploy/kubernetes/prometheus-adapter-rules.yaml"
  grep -h -A1 'metric:' "$root/deploy/kubernetes/hpa.yaml"
} | grep -o 'tps[_:][a-z0-9_]*' | sort -u >"$tmp/used"
[ -s "$tmp/used" ] || fail "found no metric names in the deployment files"
missing=$(comm -23 "$tmp/used" "$tmp/have")
[ -z "$missing" ] || fail "used by the deployment files but not in /metrics: $missing"
echo "ok: $(wc -l <"$tmp/used") metric names used, all in /metrics"

if python3 -c 'import yaml' 2>/dev/null; then
  for f in "$root"/deploy/kubernetes/*.yaml "$root"/deploy/prometheus/*.yml; do
    python3 -c 'import sys, yaml; list(yaml.safe_load_all(open(sys.argv[1])))' "$f" ||
      fail "$f is not YAML"
  done
  echo "ok: deploy/kubernetes and deploy/prometheus parse as YAML"
else
  echo "SKIPPED: python3's yaml module is missing: the manifests' YAML syntax was not checked"
fi
