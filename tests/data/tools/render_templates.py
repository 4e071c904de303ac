#!/usr/bin/env python3
"""Renders each real chat template in tests/data/templates/ with jinja2 (the
engine transformers uses) for the conversation the chat-template tests use
(system "S", user "Hi", assistant "Yo", user "Q"; add_generation_prompt),
and writes tests/data/templates/rendered.json: {file: {text, system}}; a
template that refuses a system message (Gemma 2's) is rendered without it
(system false). The family's
BOS text is given as bos_token and removed from the front of the output when
present there (tps's tokenizer adds BOS itself). strftime_now is fixed so
the output does not depend on the day.

  python3 tests/data/tools/render_templates.py   (from the repository root)
"""
import json
import os

import jinja2

DIR = "tests/data/templates"
BOS_EOS = {
    "google-": ("<bos>", "<eos>"),
    "microsoft-Phi": ("<s>", "<|endoftext|>"),
    "Mistral": ("<s>", "</s>"),
    "mistralai-": ("<s>", "</s>"),
    "meta-llama": ("<|begin_of_text|>", "<|eot_id|>"),
    "Qwen": ("", "<|im_end|>"),
}
CONV = [{"role": "system", "content": "S"}, {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Yo"}, {"role": "user", "content": "Q"}]


def raise_exception(msg):
    raise jinja2.exceptions.TemplateError(msg)


out = {}
for name in sorted(os.listdir(DIR)):
    if not name.endswith(".jinja"):
        continue
    bos, eos = next(v for k, v in BOS_EOS.items() if name.startswith(k))
    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True,
                             loader=jinja2.FileSystemLoader(DIR))
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: "26 Jul 2024"
    system = True
    try:
        text = env.get_template(name).render(messages=CONV, add_generation_prompt=True,
                                             bos_token=bos, eos_token=eos)
    except jinja2.exceptions.TemplateError:
        system = False
        text = env.get_template(name).render(messages=CONV[1:], add_generation_prompt=True,
                                             bos_token=bos, eos_token=eos)
    if bos and text.startswith(bos):
        text = text[len(bos):]
    out[name] = {"text": text, "system": system}
with open(f"{DIR}/rendered.json", "w", encoding="utf-8") as f:
    json.dump(out, f, indent=1, ensure_ascii=False)
    f.write("\n")
