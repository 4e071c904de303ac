// Reference ids for tests/test_tokenizer_hf.c from Hugging Face's own
// JavaScript port of its tokenizers (npm @huggingface/tokenizers), one line
// of space-separated ids per case of a .inp file (cases end with
// "\n__ggml_vocab_test__\n", as llama.cpp's vocab tests write them),
// add_special_tokens off. Run once by hand (tests/data/hf/README.md); the
// tests need only its output. Does not fetch anything itself.
//
// usage: node hf_tokenize_ref.mjs DIR_WITH_TOKENIZER_JSON FILE.inp > FILE.out
import { Tokenizer } from "@huggingface/tokenizers";
import { readFileSync } from "fs";

const [dir, inp] = process.argv.slice(2);
const tj = JSON.parse(readFileSync(`${dir}/tokenizer.json`, "utf8"));
const tc = JSON.parse(readFileSync(`${dir}/tokenizer_config.json`, "utf8"));
const tok = new Tokenizer(tj, tc);
const sep = "\n__ggml_vocab_test__\n";
const cases = readFileSync(inp, "utf8").split(sep);
cases.pop(); // the text after the last separator
for (const c of cases) {
  console.log(tok.encode(c, { add_special_tokens: false }).ids.join(" "));
}
