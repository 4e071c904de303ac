#!/usr/bin/env python3
"""Checks that calls between source files go one way (issue 20, point 2).

Reads the symbols each object file of a build defines and the ones it
needs (nm), and fails when
  - files call each other in a cycle (a strongly connected group of more
    than one file: a <-> b, or a -> b -> c -> a), or
  - a module calls one it must not: base < metrics < kernels < model <
    constrain < engine < server < plan < cli (constrain, constrained
    decoding, uses model's tokenizer and base only); bench sits beside
    server and may use base, metrics, model (the tokenizer, to count a dataset's tokens) and
    jinja, never the engine; jinja (the chat template engine) uses base
    only and serves the server and bench (a chat prompt sized after the
    model's template); plan (the simulated server) sits above engine, server and
    bench and may use them all, or
  - a file includes a header of a module it may not call (a type or a
    macro from above leaves no symbol for nm to see: `#include "engine/..."`
    in src/constrain/ fails here), or
  - a room of a module calls one above it: a module with rooms (folders
    under src/<module>/, ROOMS below) keeps every file in one of them, and a
    room calls only itself and the rooms before it in the list, or
  - a file includes a header of a room above its own (`#include
    "server/serve/serve.h"` in src/server/http/ fails here, as does
    `#include "engine/core/engine.h"` in src/engine/schedule/).
Static functions are invisible to nm: calls inside a file are its own.

usage: scripts/layers.py [BUILD_DIR]      (default build)
"""
import collections
import glob
import os
import re
import subprocess
import sys

ALLOWED = {
    "base": set(),
    "jinja": {"base"},
    "metrics": {"base"},
    "kernels": {"base", "metrics"},
    "model": {"base", "metrics", "kernels"},
    "constrain": {"base", "model"},
    "engine": {"base", "metrics", "kernels", "model", "constrain"},
    "server": {"base", "metrics", "kernels", "model", "constrain", "engine", "jinja"},
    "bench": {"base", "metrics", "model", "jinja"},
    "plan": {"base", "metrics", "kernels", "model", "constrain", "engine", "server", "bench",
             "jinja"},
    "cli": {"base", "metrics", "kernels", "model", "constrain", "engine", "server", "bench",
            "jinja", "plan"},
}

# Rooms within a module, lowest first: src/bench/io/ (one-shot HTTP requests,
# temporary folders)
# < workload/ (what is sent) < client/ (the load client) < result/ (what a
# run measured) < experiment/ (runs as calls: one run, sweeps, capacity
# searches) < report/ (tables, plots, pages).
#
# src/server/tools/ (the model's answer read back: tool-call syntaxes and
# their parser, harmony's channels, arguments against their schema) < chat/
# (the prompt: chat templates, messages and tools as template values) < api/
# (request bodies: OpenAI chat and completions, Responses, Messages) < write/
# (answers: SSE chunks, Responses and Messages events, Prometheus text, the
# Responses store) < http/ (the server struct, HTTP framing, connections,
# admission, whole replies) < serve/ (the lifecycle, routes, workers,
# requests in flight and their streams, /metrics).
#
# src/engine/kv/ (the paged KV pool, its block tables, the prefix cache's
# index, a hybrid model's state slots) < sample/ (a sequence's tokens from
# logits and its text: sampler, logprobs, stop strings, thinking blocks) <
# cost/ (pure numbers: the admission rule, the model's shape, the step-time
# model, its fit and noise) < attn/ (attention over the cache: paged GQA,
# MLA, Gated DeltaNet) < forward/ (the batched pass: layers, MoE, PLE, the
# final logits) < schedule/ (a request and its sequence, their output
# rules, the planner) < core/ (the engine object: lifecycle, thread and
# step, request API, parameters and pool, trace).
ROOMS = {
    "bench": ["io", "workload", "client", "result", "experiment", "report"],
    "engine": ["kv", "sample", "cost", "attn", "forward", "schedule", "core"],
    "server": ["tools", "chat", "api", "write", "http", "serve"],
}


def room_of(path):
    """(module, room index) of src/<module>/<room>/file; room -1 for a module
    without rooms, None for a file outside every room of a module with them."""
    parts = path.split("/")
    rooms = ROOMS.get(parts[1])
    if rooms is None:
        return parts[1], -1
    return parts[1], rooms.index(parts[2]) if len(parts) > 3 and parts[2] in rooms else None


def room_checks(graph, why):
    bad = []
    for f in sorted(graph):
        mod, r = room_of(f)
        if r is None:
            bad.append(f"{f} is in no room of {mod} (scripts/layers.py ROOMS)")
            continue
        for t in sorted(graph[f]):
            tmod, tr = room_of(t)
            if tmod == mod and r >= 0 and tr is not None and tr > r:
                bad.append(f"room {ROOMS[mod][r]} calls room {ROOMS[mod][tr]} above it: "
                           f"{f} -> {t} ({why[(f, t)]})")
    return bad


def include_checks():
    """Includes of another module's headers that the module order forbids."""
    bad = []
    for f in sorted(glob.glob(os.path.join("src", "**", "*.[ch]"), recursive=True)):
        a = f.split(os.sep)[1]
        with open(f, errors="replace") as fh:
            for n, line in enumerate(fh, 1):
                m = re.match(r'\s*#\s*include\s+"([a-z_]+)/', line)
                if m and m.group(1) != a and m.group(1) not in ALLOWED.get(a, set()):
                    bad.append(f"{a} includes {m.group(1)} upward or sideways: {f}:{n}")
    return bad


def room_include_checks():
    """Includes of a header in a room above the including file's own."""
    bad = []
    for mod, rooms in sorted(ROOMS.items()):
        for f in sorted(glob.glob(os.path.join("src", mod, "**", "*.[ch]"), recursive=True)):
            _, r = room_of(f.replace(os.sep, "/"))
            if r is None:
                if f.endswith(".h"):  # a .c file's is said by room_checks
                    bad.append(f"{f} is in no room of {mod} (scripts/layers.py ROOMS)")
                continue
            with open(f, errors="replace") as fh:
                for n, line in enumerate(fh, 1):
                    m = re.match(r'\s*#\s*include\s+"' + mod + r'/([a-z_]+)/', line)
                    if m and m.group(1) in rooms and rooms.index(m.group(1)) > r:
                        bad.append(f"room {rooms[r]} includes room {m.group(1)} above it: "
                                   f"{f}:{n}")
    return bad


def symbols(build):
    """file -> (defined symbols, needed symbols), for every src/ object."""
    out = {}
    for obj in glob.glob(os.path.join(build, "CMakeFiles", "*.dir", "src", "**", "*.o"),
                         recursive=True):
        src = "src/" + obj.split(os.sep + "src" + os.sep, 1)[1][: -len(".o")]
        if not os.path.exists(src):
            continue  # left in the build by a file since deleted
        text = subprocess.run(["nm", obj], capture_output=True, text=True, check=True).stdout
        defs, needs = out.setdefault(src, (set(), set()))
        for line in text.splitlines():
            f = line.split()
            if len(f) == 3 and f[1] in "TDBRV":
                defs.add(f[2])
            elif len(f) == 2 and f[0] == "U":
                needs.add(f[1])
    return out


def strongly_connected(graph):
    """Tarjan's groups of more than one node, iteratively."""
    index, low, on, stack, groups, n = {}, {}, set(), [], [], 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = n
        n += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = n
                    n += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                group = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    group.append(w)
                    if w == v:
                        break
                if len(group) > 1:
                    groups.append(sorted(group))
    return groups


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build"
    syms = symbols(build)
    if not syms:
        print(f"layers: no object files under {build}/CMakeFiles (build first)")
        return 2
    owner = {s: f for f, (defs, _) in syms.items() for s in defs}
    graph = collections.defaultdict(set)
    why = {}
    for f, (_, needs) in syms.items():
        graph[f]
        for s in needs:
            t = owner.get(s)
            if t and t != f:
                graph[f].add(t)
                why.setdefault((f, t), s)
    bad = []
    for group in strongly_connected(graph):
        bad.append("files that call each other: " + " <-> ".join(group))
    for f, targets in sorted(graph.items()):
        a = f.split("/")[1]
        for t in sorted(targets):
            b = t.split("/")[1]
            if a != b and b not in ALLOWED.get(a, set()):
                bad.append(f"{a} calls {b} upward or sideways: {f} -> {t} ({why[(f, t)]})")
    bad += room_checks(graph, why)
    bad += include_checks()
    bad += room_include_checks()
    if bad:
        print("layers: calls that do not go one way (docs/architecture.md):")
        for b in bad:
            print("  " + b)
        return 1
    print(f"layers: clean ({len(syms)} files, calls and includes one way, between modules "
          "and rooms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
