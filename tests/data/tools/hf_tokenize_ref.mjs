// Reference ids for tests/test_tokenizer_hf.c from Hugging Face's own
// JavaScript port of its tokenizers (npm @huggingface/tokenizers), one line
// of space-separated ids per case of a .inp file (cases end with
// "\n__ggml_vocab_test__\n", as llama.cpp's vocab tests write them),
// add_special_tokens off. Run once by hand (tests/data/hf/README.md); the
// tests need only its output. Does not fetch anything itself.
//
// VARIANT (optional) rewrites the file's pipeline first, the way the test
// does (tests/test_tokenizer_hf.c, variant_file): "metaspace-first"
// (Mistral v0.3's style: no normalizer, a Metaspace pre-tokenizer and
// decoder with prepend_scheme first and no split). Not split: true, which
// this port ignores (tokenizers.js's Metaspace never splits; Rust's splits
// before each ▁), so it cannot be a reference for it.
//
// usage: node hf_tokenize_ref.mjs DIR_WITH_TOKENIZER_JSON FILE.inp [VARIANT] > FILE.out
import { Tokenizer } from "@huggingface/tokenizers";
import { readFileSync } from "fs";

const [dir, inp, variant] = process.argv.slice(2);
const tj = JSON.parse(readFileSync(`${dir}/tokenizer.json`, "utf8"));
if (variant) {
  if (variant !== "metaspace-first") throw new Error(`unknown variant ${variant}`);
  const ms = { type: "Metaspace", replacement: "\u2581", prepend_scheme: "first", split: false };
  tj.normalizer = null;
  tj.pre_tokenizer = ms;
  tj.decoder = ms;
}
const tc = JSON.parse(readFileSync(`${dir}/tokenizer_config.json`, "utf8"));
const tok = new Tokenizer(tj, tc);
const sep = "\n__ggml_vocab_test__\n";
const cases = readFileSync(inp, "utf8").split(sep);
cases.pop(); // the text after the last separator
for (const c of cases) {
  console.log(tok.encode(c, { add_special_tokens: false }).ids.join(" "));
}
