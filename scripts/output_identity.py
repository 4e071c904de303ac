#!/usr/bin/env python3
"""Are two tps binaries' outputs the same? For refactors that must change no
output (issue 37: `tps bench`, `sweep` and `report` byte-identical before and
after). Standard library only.

  output_identity.py OLD_TPS NEW_TPS [--keep DIR]

What it runs, each with both binaries, and what it compares:
  1. Against a capture server on 127.0.0.1 (below) that answers every
     completion with the same stream: `tps bench` (synthetic, shared
     prefixes, chat, multi-turn, a JSONL and a ShareGPT dataset), `tps sweep`
     and `tps bench --find-max-rate`, all with --seed 7. Compared: every
     request the server received (method, path, headers, body) byte for byte,
     the --json files with their time-dependent fields taken out (TIMED
     below), and stdout with every number masked (its words, line for line).
  2. Against a `tps serve` of a tiny model made here (a fresh server for each
     binary, so both meet an empty prefix cache): `tps bench --seed 7
     --temperature 0` at concurrency 1, its --json compared the same way (token counts, cached
     input and usage from a real server).
  3. `tps report` over every --json the OLD binary wrote (each alone, the
     sweeps together, a factor report, --csv, --html, --svg), `tps bench
     merge` and `tps bench compare`: every output byte for byte, but for the
     HTML's "rendered <time>" label.
Exit 0 when everything matched; 1 with the differences listed."""
import difflib
import http.server
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

# Fields whose values depend on when and how fast things ran, not on the
# code: wall-clock labels, measured latencies, rates over windows, the
# client's CPU, a server's scraped series, the verdicts made from those, and
# the ports of URLs.
TIMED = {
    "started_at", "t0_unix_ns", "windows", "series", "client", "verdict", "server_metrics",
    "wall_s", "ttft_p99_ms", "itl_p99_ms", "e2e_p99_ms", "send_lag_p99_ms", "good",
    "good_fraction", "pass", "why", "client_limited", "achieved_rate", "url", "runq_wait_s",
    "per_request",
}
# histograms of counts, not of times
COUNT_HISTS = {"output_tokens", "input_tokens"}


def is_time_hist(k, v):
    return isinstance(v, dict) and "hist_version" in v and k not in COUNT_HISTS


def normalize(o, key=None):
    if isinstance(o, dict):
        out = {}
        for k, v in o.items():
            if k in TIMED or is_time_hist(k, v):
                continue
            out[k] = normalize(v, k)
        return out
    if isinstance(o, list):
        return [normalize(v, key) for v in o]
    return o


class Capture(http.server.BaseHTTPRequestHandler):
    """Answers /health, and every completion with four tokens and usage;
    404 elsewhere (no /metrics, no /tokenize). Records each request."""

    protocol_version = "HTTP/1.1"
    log = None
    lock = threading.Lock()
    delay_s = 0.0

    def log_message(self, *a):
        pass

    def _record(self, body):
        # the port, and the run's random conversation tag, vary by run
        hdrs = sorted((k.lower(), re.sub(r"^tps-[0-9a-f]+-", "tps-TAG-", re.sub(r":\d+$", ":PORT", v)))
                      for k, v in self.headers.items())
        with Capture.lock:
            Capture.log.append({"method": self.command, "path": self.path, "headers": hdrs,
                                "body": body.decode("utf-8", "replace")})

    def _send(self, code, ctype, data):
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        self._record(b"")
        if self.path == "/health":
            self._send(200, "application/json", b'{"status":"ok"}')
        else:
            self._send(404, "application/json", b'{"error":"no"}')

    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(n)
        self._record(body)
        if not self.path.endswith("completions"):
            self._send(404, "application/json", b'{"error":"no"}')
            return
        req = json.loads(body)
        chat = self.path.endswith("chat/completions")
        time.sleep(Capture.delay_s)
        out = []
        for i in range(4):
            delta = {"content": "w%d " % i} if chat else None
            ch = {"index": 0, "delta": delta} if chat else {"index": 0, "text": "w%d " % i}
            out.append({"id": "x", "object": "chunk", "choices": [ch]})
        usage = {"prompt_tokens": 10, "completion_tokens": 4, "total_tokens": 14,
                 "prompt_tokens_details": {"cached_tokens": 0}}
        out.append({"id": "x", "object": "chunk", "choices": [], "usage": usage})
        data = b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in out)
        data += b"data: [DONE]\n\n"
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        del req


def capture_server(delay_s):
    Capture.log = []
    Capture.delay_s = delay_s
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Capture)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, "http://127.0.0.1:%d" % srv.server_address[1]


def run(tps, args, cwd, timeout=300):
    p = subprocess.run([tps] + args, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       timeout=timeout)
    return p.returncode, p.stdout.decode("utf-8", "replace")


# stdout lines whose presence depends on timing: the verdict (client CPU,
# steadiness), the note on tokens that arrived together, percentiles past the
# histograms' range, bars of output tok/s, a capacity probe limited by the client
TIMED_LINES = re.compile(r"^(verdict |  ok   |  FAIL |note: .* token arrivals |  +\(.* below, .* above"
                         r"|  .{22} \|"  # a bar of output tok/s
                         r"|note: the failing probe above the answer was client-limited)")


def masked(text):
    """Every number (and the spaces that align it) as one mark, timed lines
    out: the words stay."""
    lines = [ln for ln in text.splitlines(True) if not TIMED_LINES.match(ln)]
    text = re.sub(r"\b(FAIL|pass): .*", r"\1", "".join(lines))  # a probe's verdict: its latencies
    return re.sub(r" *[-+]?\d[\d.]*(?:e[-+]?\d+)?", " #", text)


class Diffs:
    def __init__(self):
        self.bad = []
        self.same = 0

    def text(self, what, a, b):
        if a == b:
            self.same += 1
            return
        d = "".join(list(difflib.unified_diff(a.splitlines(True), b.splitlines(True), "old",
                                              "new"))[:40])
        self.bad.append("%s differs:\n%s" % (what, d))

    def files(self, what, a, b):
        with open(a, "rb") as fa, open(b, "rb") as fb:
            da, db = fa.read(), fb.read()
        if a.endswith(".html"):  # the page's "rendered <time>" label
            da = re.sub(rb"rendered [^.<]*", b"rendered T", da)
            db = re.sub(rb"rendered [^.<]*", b"rendered T", db)
        if da == db:
            self.same += 1
        else:
            self.text(what, da.decode("utf-8", "replace"), db.decode("utf-8", "replace"))


def json_norm(path):
    with open(path) as f:
        return json.dumps(normalize(json.load(f)), indent=1, sort_keys=True)


CAPTURED = [  # name, args (the URL, --json and --seed are added), server delay
    ("bench", ["bench", "--requests", "12", "--concurrency", "2", "--input-len",
               "uniform:8:32", "--output-len", "4"], 0),
    ("prefix", ["bench", "--requests", "8", "--concurrency", "2", "--prefix-len", "24",
                "--prefixes", "3", "--prefix-dist", "zipf:1.1", "--input-len", "16",
                "--output-len", "4"], 0),
    ("chat", ["bench", "--endpoint", "chat", "--model", "m", "--requests", "6", "--input-len",
              "20", "--output-len", "4", "--prefix-len", "16"], 0),
    ("turns", ["bench", "--turns", "3", "--conversations", "2", "--concurrency", "2",
               "--input-len", "12", "--output-len", "4"], 0),
    ("jsonl", ["bench", "--dataset", "DATA/d.jsonl", "--requests", "4"], 0),
    ("sharegpt", ["bench", "--dataset", "DATA/s.json", "--requests", "3"], 0),
    ("trace", ["bench", "--dataset", "DATA/t.jsonl", "--trace-speed", "20"], 0),
    ("sweep", ["sweep", "--concurrency", "1,2", "--input-len", "16,32", "--requests", "4",
               "--output-len", "4"], 0),
    # sends a constant 1/rate apart, the last one a gap before the probe's
    # end: how many each probe sends does not hang on the client's timing
    ("capacity", ["bench", "--find-max-rate", "--slo", "e2e=1", "--arrival", "constant", "--rate",
                  "8", "--duration", "1", "--timeout", "10", "--input-len", "16", "--output-len",
                  "4"], 0.005),
]


def datasets(d):
    with open(os.path.join(d, "d.jsonl"), "w") as f:
        for i in range(4):
            f.write(json.dumps({"prompt": "a prompt number %d about cats" % i,
                                "max_tokens": 3 + i}) + "\n")
    with open(os.path.join(d, "s.json"), "w") as f:
        json.dump([{"conversations": [{"from": "human", "value": "hello %d" % i},
                                      {"from": "gpt", "value": "a reply of some words %d" % i}]}
                   for i in range(3)], f)
    with open(os.path.join(d, "t.jsonl"), "w") as f:
        for i in range(4):
            f.write(json.dumps({"timestamp": i * 100, "input_length": 40 + 8 * i,
                                "output_length": 4, "hash_ids": [0, 1, i + 2]}) + "\n")


def captured(tps, tag, work, model, diffs_out):
    outs = {}
    for name, args, delay in CAPTURED:
        srv, url = capture_server(delay)
        a = [x.replace("DATA", work) for x in args]
        js = os.path.join(work, "out.json")  # one name for both: stdout says it
        rc, out = run(tps, a + ["--url", url, "--tokenizer", model, "--seed", "7", "--json", js,
                                "--no-progress"] if a[0] == "bench" else
                      a + ["--url", url, "--tokenizer", model, "--seed", "7", "--json", js],
                      work)
        srv.shutdown()
        srv.server_close()
        log = sorted(json.dumps(r, sort_keys=True) for r in Capture.log)
        kept = os.path.join(work, "%s-%s.json" % (tag, name))
        if os.path.exists(js):
            os.rename(js, kept)
        outs[name] = (rc, masked(out), "\n".join(log), kept)
    diffs_out[tag] = outs


def served(tps, tag, work, model):
    port = free_port()
    log = open(os.path.join(work, "serve-%s.log" % tag), "w")
    p = subprocess.Popen([tps, "serve", "-m", model, "--port", str(port), "--threads", "1"],
                         stdout=log, stderr=subprocess.STDOUT)
    try:
        url = "http://127.0.0.1:%d" % port
        for _ in range(300):
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        js = os.path.join(work, "%s-served.json" % tag)
        # greedy: a server draws a fresh sampling seed for a request without one
        rc, out = run(tps, ["bench", "--url", url, "--tokenizer", model, "--seed", "7",
                            "--requests", "8", "--concurrency", "1", "--input-len", "40",
                            "--output-len", "6", "--temperature", "0", "--json", js,
                            "--no-progress"], work)
        return rc, masked(out), js
    finally:
        p.send_signal(signal.SIGTERM)
        p.wait(60)
        log.close()


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def reports(old, new, work, files, d):
    """Every report over OLD's files, by both binaries: outputs byte for byte."""
    cases = [("report-" + os.path.basename(f), ["report", f]) for f in files]
    sweeps = [f for f in files if "sweep" in f or "capacity" in f]
    cases.append(("report-sweeps", ["report"] + sweeps + ["--html", "OUT/r.html", "--svg",
                                                           "OUT/svg", "--csv", "OUT/r.csv"]))
    factors = []
    parts = {"batch": "sweep", "mix:a": "bench", "mix:b": "prefix", "prefix:off": "bench",
             "prefix:on": "prefix", "model:s": "served", "model:b": "bench"}
    for part, src in parts.items():
        f = [x for x in files if x.endswith("-%s.json" % src)]
        if f:
            factors += ["--factor", "%s=%s" % (part, f[0])]
    cases.append(("report-factor", ["report"] + factors + ["--html", "OUT/f.html", "--svg",
                                                           "OUT/fsvg"]))
    benches = [f for f in files if f.endswith(("-bench.json", "-prefix.json"))]
    cases.append(("merge", ["bench", "merge"] + benches + ["--json", "OUT/m.json"]))
    cases.append(("compare", ["bench", "compare"] + benches[:2]))
    for name, args in cases:
        res = {}
        for tag, tps in (("old", old), ("new", new)):
            # one output path for both (plot scripts name it), moved aside after
            out_dir, kept = os.path.join(work, "rep-out"), os.path.join(work, "rep-%s-%s" %
                                                                        (tag, name))
            shutil.rmtree(kept, ignore_errors=True)
            os.makedirs(out_dir, exist_ok=True)
            rc, out = run(tps, [a.replace("OUT", out_dir) for a in args], work)
            os.rename(out_dir, kept)
            res[tag] = (rc, out, kept)
        d.text(name + " exit status", str(res["old"][0]), str(res["new"][0]))
        d.text(name + " stdout", res["old"][1], res["new"][1])
        for root, _, names in os.walk(res["old"][2]):
            for n in sorted(names):
                a = os.path.join(root, n)
                b = os.path.join(res["new"][2], os.path.relpath(a, res["old"][2]))
                if not os.path.exists(b):
                    d.bad.append("%s: %s missing from the new binary's output" % (name, n))
                else:
                    d.files("%s %s" % (name, os.path.relpath(a, res["old"][2])), a, b)


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    old, new = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    keep = sys.argv[4] if len(sys.argv) > 4 and sys.argv[3] == "--keep" else None
    work = keep or tempfile.mkdtemp(prefix="tps-identity-")
    os.makedirs(work, exist_ok=True)
    env_cache = os.path.join(work, "cache")
    os.environ["XDG_CACHE_HOME"] = env_cache  # the servers' machine limits: measured once
    model = os.path.join(work, "tiny.gguf")
    rc, out = run(old, ["model", "make", "--preset", "tiny", "--type", "q8_0", "-o", model], work)
    if rc:
        print(out)
        return 1
    run(old, ["machine", "--cache-busy", "--threads", "1"], work)
    datasets(work)
    d, outs = Diffs(), {}
    for tag, tps in (("old", old), ("new", new)):
        captured(tps, tag, work, model, outs)
    for name, _, _ in CAPTURED:
        o, n = outs["old"][name], outs["new"][name]
        d.text(name + " exit status", str(o[0]), str(n[0]))
        d.text(name + " requests the server received", o[2], n[2])
        d.text(name + " stdout (numbers masked)", o[1], n[1])
        if os.path.exists(o[3]) or os.path.exists(n[3]):
            d.text(name + " --json (timed fields out)", json_norm(o[3]), json_norm(n[3]))
    so, sn = served(old, "old", work, model), served(new, "new", work, model)
    d.text("served exit status", str(so[0]), str(sn[0]))
    d.text("served stdout (digits masked)", so[1], sn[1])
    d.text("served --json (timed fields out)", json_norm(so[2]), json_norm(sn[2]))
    files = sorted(os.path.join(work, f) for f in os.listdir(work)
                   if f.startswith("old-") and f.endswith(".json"))
    reports(old, new, work, files, d)
    print("output identity: %d outputs the same, %d different" % (d.same, len(d.bad)))
    for b in d.bad:
        print(b)
    if not keep:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if d.bad else 0


if __name__ == "__main__":
    sys.exit(main())
