#!/usr/bin/env bash
# `make demo`: the main job on the default model. Today it inspects a model
# with `tps model info`; it grows into make model -> serve -> sweep -> report
# as those subcommands land (see README "Status").
set -euo pipefail
tps=${1:-build/tps}
cd "$(dirname "$0")/.."
model=../shared/models/stories260K.gguf
if [ ! -f "$model" ]; then
  echo "demo: $model not found; pass a GGUF file: build/tps model info FILE.gguf" >&2
  exit 1
fi
echo "== tps model info $model =="
"$tps" model info "$model"
cat <<'MSG'

What this demo will become: make the default model (tps model make --preset 15M
--type q8_0), start `tps serve` on 127.0.0.1, sweep concurrency 1, 4, 16 with
`tps bench`, print the table and write demo/report.html.
MSG
