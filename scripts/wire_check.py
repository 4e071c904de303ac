#!/usr/bin/env python3
"""The analysis half of scripts/wire-check.sh: a tshark segment dump and a
`tps bench --per-request --json` result in, the comparison out.

  wire_check.py SEGMENTS.tsv RESULT.json SERVER_PORT

Each SSE event on the wire is timed by the packet that carries the end of
its blank line (the byte that completes it for any parser); its tokens are
len(token_ids) when the server sends them, else 1 for a non-empty text or
delta. Wire responses are paired with the bench's requests by send time,
then event by event. Standard library only."""
import bisect
import json
import sys


def ns(epoch):
    sec, _, frac = epoch.partition(".")
    return int(sec) * 10**9 + int((frac + "000000000")[:9])


def streams(path, port):
    """{(stream, 'srv'|'cli'): (bytes, [(end offset, t_ns)])}, in sequence order."""
    segs = {}
    with open(path) as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if len(parts) < 5 or not parts[4]:
                continue
            st, src, t, seq, hexp = parts[:5]
            key = (st, "srv" if src == str(port) else "cli")
            segs.setdefault(key, {})
            segs[key].setdefault(int(seq), (ns(t), bytes.fromhex(hexp.replace(":", ""))))
    out = {}
    for key, by_seq in segs.items():
        data, ends, pos = bytearray(), [], None
        for seq in sorted(by_seq):
            t, p = by_seq[seq]
            if pos is not None and seq < pos:  # overlap (retransmission)
                p = p[pos - seq:]
            data += p
            pos = seq + len(p) if pos is None or seq >= pos else pos + len(p)
            ends.append((len(data), t))
        out[key] = (bytes(data), ends)
    return out


def time_at(ends, offset):
    """Time of the packet holding byte `offset`."""
    i = bisect.bisect_right([e for e, _ in ends], offset)
    return ends[min(i, len(ends) - 1)][1]


def messages(data):
    """(start, header bytes, [(decoded start, raw start, size)], body) per HTTP message."""
    pos, out = 0, []
    while pos < len(data):
        he = data.find(b"\r\n\r\n", pos)
        if he < 0:
            break
        head = data[pos:he].lower()
        b, spans, body = he + 4, [], bytearray()
        if b"transfer-encoding: chunked" in head:
            while True:
                le = data.find(b"\r\n", b)
                if le < 0:
                    break
                size = int(data[b:le].split(b";")[0], 16)
                if size == 0:
                    b = le + 4
                    break
                spans.append((len(body), le + 2, size))
                body += data[le + 2:le + 2 + size]
                b = le + 2 + size + 2
        else:
            n = 0
            for h in head.split(b"\r\n"):
                if h.startswith(b"content-length:"):
                    n = int(h.split(b":")[1])
            spans.append((0, b, n))
            body += data[b:b + n]
            b += n
        out.append((pos, head, spans, bytes(body)))
        pos = b
    return out


def raw_offset(spans, i):
    k = bisect.bisect_right([s[0] for s in spans], i) - 1
    d, r, _ = spans[k]
    return r + (i - d)


def wire_responses(segs):
    out = []
    for (st, side), (data, ends) in segs.items():
        if side != "srv":
            continue
        cdata, cends = segs.get((st, "cli"), (b"", []))
        reqs = [time_at(cends, m[0]) for m in messages(cdata)]
        for k, (_, head, spans, body) in enumerate(messages(data)):
            evs, usage, end = [], None, time_at(ends, raw_offset(spans, len(body) - 1) if body else 0)
            pos = 0
            while True:
                j = body.find(b"\n\n", pos)
                if j < 0:
                    break
                chunk = body[pos:j].decode("utf-8", "replace")
                t = time_at(ends, raw_offset(spans, j + 1))
                pos = j + 2
                data_lines = [l[5:].lstrip() for l in chunk.split("\n") if l.startswith("data:")]
                if not data_lines or data_lines[0] == "[DONE]":
                    continue
                try:
                    o = json.loads("\n".join(data_lines))
                except ValueError:
                    continue
                if o.get("usage"):
                    usage = o["usage"].get("completion_tokens")
                for c in o.get("choices") or []:
                    ids = c.get("token_ids") or c.get("tokens")
                    text = c.get("text") or (c.get("delta") or {}).get("content")
                    n = len(ids) if isinstance(ids, list) else (1 if text else 0)
                    if n:
                        evs.append((t, n))
            if k < len(reqs):
                out.append({"sent": reqs[k], "events": evs, "end": end, "usage": usage})
    return out


def pct(v, p):
    if not v:
        return float("nan")
    v = sorted(v)
    r = max(1, -(-len(v) * p // 100))
    return v[int(r) - 1]


def main():
    seg_path, res_path, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
    res = json.load(open(res_path))
    t0 = res["t0_unix_ns"]
    bench = [r for r in res.get("per_request", []) if r["status"] == "ok" and r["events"]]
    wire = [w for w in wire_responses(streams(seg_path, port)) if w["events"]]
    # pair each wire response with the unpaired bench request of the same event shape
    # whose stamps lie nearest its packets (median |bench - wire| over its events): sends
    # are no guide, a new connection's handshake lies between the bench's send and the wire
    def cost(w, b):
        if len(w["events"]) != len(b["events"]):
            return None
        return pct([abs(t0 + y[0] - x[0]) for x, y in zip(w["events"], b["events"])], 50)

    free = list(range(len(bench)))
    pairs = []
    for w in sorted(wire, key=lambda w: w["events"][0][0]):
        best = None
        for i in free:
            c = cost(w, bench[i])
            if c is not None and (best is None or c < best[0]):
                best = (c, i)
        if best:
            free.remove(best[1])
            pairs.append((w, bench[best[1]]))
    lags, ttft_d, ev_total, ev_ok, tok_ok, req_ev_ok = [], [], 0, 0, 0, 0
    for w, b in pairs:
        we, be = w["events"], b["events"]
        ev_total += len(we)
        wt, bt = sum(n for _, n in we), b["output_tokens"]
        tok_ok += wt == bt and (w["usage"] is None or w["usage"] == bt)
        if len(we) == len(be) and all(x[1] == y[1] for x, y in zip(we, be)):
            req_ev_ok += 1
            ev_ok += len(we)
            lags += [(t0 + y[0] - x[0]) / 1e6 for x, y in zip(we, be)]
        ttft_d.append(((be[0][0] - b["sent_ns"]) - (we[0][0] - w["sent"])) / 1e6)
    wire_tokens = sum(sum(n for _, n in w["events"]) for w in wire)
    span = (max(w["end"] for w in wire) - min(w["sent"] for w in wire)) / 1e9 if wire else 0
    run = res["windows"]["run"]
    wire_tps = wire_tokens / span if span > 0 else float("nan")
    print(f"wire check: {len(bench)} completed requests in the result, {len(wire)} responses on "
          f"the wire, {len(pairs)} paired")
    print(f"  tokens     {tok_ok} of {len(pairs)} requests equal (wire events, usage, bench)")
    print(f"  events     {ev_ok} of {ev_total} events matched one to one "
          f"({req_ev_ok} of {len(pairs)} requests)")
    print(f"  event lag  bench stamp - wire packet, ms: p50 {pct(lags, 50):.3f}  "
          f"p99 {pct(lags, 99):.3f}  max {max(lags) if lags else float('nan'):.3f}  "
          f"min {min(lags) if lags else float('nan'):.3f}  (n {len(lags)})")
    print(f"  TTFT       bench - wire, ms: p50 {pct(ttft_d, 50):.3f}  p99 {pct(ttft_d, 99):.3f} "
          f"(bench from its send, wire from the request's first packet)")
    print(f"  run TPS    bench {run['output_tps']:.1f} over {run['seconds']:.3f} s, wire "
          f"{wire_tps:.1f} over {span:.3f} s ({100 * (run['output_tps'] / wire_tps - 1):+.2f}%; "
          f"the bench's window opens at its first send, the wire's at the first request packet)")
    ok = len(pairs) == len(bench) == len(wire) and tok_ok == len(pairs) and ev_ok == ev_total
    print("  verdict    " + ("every request and event matched" if ok else "MISMATCH (see above)"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
