#!/usr/bin/env bash
# Makes tests/data/quantfile/<preset>-<arch>-<type>/ for
# tests/test_quant_reference.c: per case, tps writes the f32 model, llama.cpp's
# llama-quantize quantizes it to the file type, `tps model make` writes the
# same file type itself and the two files' tensors (name, type, bytes) must
# be identical, then dump_ref records llama.cpp's greedy ids and logits on
# llama-quantize's file. llama-quantize's file itself is kept as its head
# (llama-quantize.head: everything before the tensor data) with its size
# and hash, so the test rebuilds it byte for byte from tps's tensors and
# loads it. Nothing here runs in the tests; see README.md.
#
# usage: tests/data/tools/make_quant_refs.sh LLAMA_CPP_DIR TPS_BINARY
#   LLAMA_CPP_DIR: a llama.cpp checkout built in build/ (CPU, Release)
set -euo pipefail
llama=$(cd "$1" && pwd)
tps=$(cd "$(dirname "$2")" && pwd)/$(basename "$2")
here=$(cd "$(dirname "$0")" && pwd)
data=$(cd "$here/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
bin=$llama/build/bin
# an unpacked tarball has no .git: name the commit in LLAMA_CPP_COMMIT
commit=${LLAMA_CPP_COMMIT:-$(git -C "$llama" rev-parse HEAD 2>/dev/null || echo unknown)}

gcc -O2 -o "$work/dump_ref" "$here/dump_ref.c" -I"$llama/include" -I"$llama/ggml/include" \
  -L"$bin" -lllama -lggml -lggml-base -Wl,-rpath,"$bin" -lm
gcc -O2 -o "$work/gguf_tensors" "$here/gguf_tensors.c" -I"$llama/ggml/include" \
  -L"$bin" -lggml-base -Wl,-rpath,"$bin"

# preset arch type
cases="q256 llama q5_k_m
q256 llama q3_k_m
q256 llama iq4_xs
q256 llama q4_1
q256 llama q5_0
q256 llama q2_k
q896 qwen2 q4_k_m
q896 qwen2 q5_k_m
q896 qwen2 iq4_xs"

while read -r preset arch type; do
  name=$preset-$arch-$type
  echo "== $name"
  f32=$work/$preset-$arch-f32.gguf
  [ -f "$f32" ] || "$tps" model make --arch "$arch" --preset "$preset" --type f32 --seed 7 -o "$f32" 2>/dev/null
  "$bin/llama-quantize" "$f32" "$work/lq.gguf" "${type^^}" 2 >"$work/quantize.log" 2>&1
  "$tps" model make --arch "$arch" --preset "$preset" --type "$type" --seed 7 -o "$work/tps.gguf" 2>/dev/null
  "$work/gguf_tensors" "$work/lq.gguf" >"$work/lq.txt"
  "$work/gguf_tensors" "$work/tps.gguf" >"$work/tps.txt"
  if ! cmp -s "$work/lq.txt" "$work/tps.txt"; then
    echo "$name: tps's tensors differ from llama-quantize's" >&2
    diff "$work/lq.txt" "$work/tps.txt" >&2 || true
    exit 1
  fi
  mkdir -p "$data/quantfile/$name"
  head -c "$("$work/gguf_tensors" --data-offset "$work/lq.gguf")" "$work/lq.gguf" \
    >"$data/quantfile/$name/llama-quantize.head"
  "$work/dump_ref" "$work/lq.gguf" "$work/ref" 5 >/dev/null 2>&1
  mv "$work/ref.logits.f32" "$data/quantfile/$name/reference.logits.f32"
  python3 - "$work/ref.json" "$work/lq.txt" "$data/quantfile/$name/reference.json" \
    "$preset" "$arch" "$type" "$commit" "$work/lq.gguf" <<'EOF'
import json, sys
ref, tensors, out, preset, arch, ftype, commit, lq = sys.argv[1:9]
r = json.load(open(ref))
h = 1469598103934665603  # FNV-1a 64 of llama-quantize's whole file
for b in open(lq, "rb").read():
    h = ((h ^ b) * 1099511628211) & 0xffffffffffffffff
rows = [line.split() for line in open(tensors)]
j = {"file": f"{preset}-{arch}-{ftype}",
     "model_make_f32": f"tps model make --arch {arch} --preset {preset} --type f32 --seed 7",
     "llama_quantize": f"llama-quantize F32.gguf OUT.gguf {ftype.upper()} 2",
     "model_make": f"tps model make --arch {arch} --preset {preset} --type {ftype} --seed 7",
     "llama_cpp_commit": commit,
     "producer": "tests/data/tools/make_quant_refs.sh: dump_ref on llama-quantize's file "
                 "(llama.cpp CPU, F32 KV cache, flash attention off, greedy)",
     "llama_quantize_file": {"bytes": len(open(lq, "rb").read()), "fnv1a64": f"{h:016x}"},
     "tensors": [{"name": n, "type": t, "bytes": int(b), "fnv1a64": x} for n, t, b, x in rows]}
j.update(r)
json.dump(j, open(out, "w"), indent=1)
open(out, "a").write("\n")
EOF
done <<<"$cases"
