#!/usr/bin/env python3
"""docs/plan.md's accuracy table from scripts/bench-plan.sh's results.

Reads DIR/points.txt (one line per point: model, name, measured.json,
calibrated.json, roofline.json and, optionally, served.json: predicted
from the server's own --save-calibration, and fresh.json: predicted from a
calibration taken just before the point was measured) and DIR/capacity.txt (model, measured
capacity.json, predicted capacity.json), DIR/repeat.txt when present (model,
point, first.json, again.json: one point measured twice, first and last;
the point "capacity": the capacity search twice),
every file a tps bench result or capacity search, and writes the markdown between the markers
<!-- plan-table:begin --> and <!-- plan-table:end --> of DOC: one row per
point with the measured figure, the calibrated prediction and its error
(output tok/s [steady], TTFT p50/p99, ITL p50/p99), the uncalibrated
(roofline) output tok/s and its error, then each model's share of points
within the issue's bounds (10% for tok/s and the p50s, 20% for the p99s),
the same counts for the fresh calibrations where there are some, the
repeated points' two measurements (the machine's own drift; with every
point repeated, their count within the bounds, the second judged against
the first), and the
capacity under the SLO measured and predicted. Where the results say it
(host.steal of a run, config.plan.calibration_steal of a plan), each row
shows the hypervisor's steal during the point and during the calibration,
and each model's summary the correlation of the output tok/s error with
their difference, and the points measured at the calibration's steal;
DIR/steal.txt (model, point, measured.json, predicted.json: the plan told
the steal the run met, --steal) adds a column and a count line for those,
and DIR/series.txt (the same, told the steal second by second,
--steal-series) another.

usage: scripts/plan_table.py DIR DOC
"""
import json
import os
import sys

BOUNDS = {"tps": 0.10, "ttft50": 0.10, "itl50": 0.10, "ttft99": 0.20, "itl99": 0.20}


LABEL = {
    "tps": "out tok/s",
    "ttft50": "TTFT p50",
    "ttft99": "TTFT p99",
    "itl50": "ITL p50",
    "itl99": "ITL p99",
}


def pct(result, name, q):
    h = result["histograms"][name]
    return h[q] / 1e6 if h["count"] else float("nan")


def figures(path):
    """output tok/s [steady], TTFT p50/p99, ITL p50/p99 (ms) of a result."""
    with open(path) as f:
        r = json.load(f)
    w = r["windows"]["steady"] if r["windows"]["steady"].get("valid") else r["windows"]["run"]
    return {
        "tps": w["output_tps"],
        "ttft50": pct(r, "ttft", "p50"),
        "ttft99": pct(r, "ttft", "p99"),
        "itl50": pct(r, "itl", "p50"),
        "itl99": pct(r, "itl", "p99"),
    }


def steals(meas_path, plan_path):
    """The hypervisor's steal during the run and during the plan's calibration (None: unknown)."""
    with open(meas_path) as f:
        h = json.load(f).get("host") or {}
    with open(plan_path) as f:
        c = json.load(f)["config"].get("plan", {}).get("calibration_steal")
    return h.get("steal"), c


def corr(xs, ys):
    n = len(xs)
    if n < 3:
        return float("nan")
    mx, my = sum(xs) / n, sum(ys) / n
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
    sxx = sum((x - mx) ** 2 for x in xs)
    syy = sum((y - my) ** 2 for y in ys)
    return sxy / (sxx * syy) ** 0.5 if sxx > 0 and syy > 0 else float("nan")


# points measured within this much steal of their calibration's are "at its steal"
SAME_STEAL = 0.03


def err(pred, meas):
    if not meas or meas != meas or pred != pred:
        return float("nan")
    return pred / meas - 1


def cell(pred, meas):
    e = err(pred, meas)
    return f"{pred:.1f} ({e:+.0%})" if e == e else f"{pred:.1f} (-)"


def capacity(path):
    with open(path) as f:
        return json.load(f).get("max_rate", 0.0)


def misses(pred, meas):
    """The figures of pred outside the bounds, as "TTFT p99 +34%"."""
    return [
        f"{LABEL[k]} {err(pred[k], meas[k]):+.0%}"
        for k, b in BOUNDS.items()
        if not abs(err(pred[k], meas[k])) <= b
    ]


def fresh_cell(pred, meas):
    if not pred:
        return "-"
    miss = misses(pred, meas)
    return "yes" if not miss else "no: " + ", ".join(miss)


def tally(counts, model, pred, meas):
    """Adds a point to counts[model]: [within every bound, points, {bound: within it}]."""
    t = counts.setdefault(model, [0, 0, dict.fromkeys(BOUNDS, 0)])
    t[0] += not misses(pred, meas)
    t[1] += 1
    for k, b in BOUNDS.items():
        t[2][k] += abs(err(pred[k], meas[k])) <= b


def predictions(d, listing):
    """{(model, point): figures} of DIR/listing's lines (model, point, measured.json, predicted.json)."""
    got, path = {}, os.path.join(d, listing)
    if os.path.exists(path):
        with open(path) as f:
            for ln in f:
                model, name, _, pred = ln.split()
                if os.path.exists(pred):
                    got[(model, name)] = figures(pred)
    return got


def table(d):
    rows, score, per_bound, fresh, by_steal = [], {}, {}, {}, {}
    with open(os.path.join(d, "points.txt")) as f:
        points = [ln.split() for ln in f if ln.strip()]
    with_fresh = any(len(p) > 6 for p in points)
    at_steal, at_series = predictions(d, "steal.txt"), predictions(d, "series.txt")
    steal_stats, series_stats = {}, {}
    for model, name, meas, cal, roof, *rest in points:
        if not all(os.path.exists(p) for p in (meas, cal)):
            continue
        m, c = figures(meas), figures(cal)
        r = figures(roof) if os.path.exists(roof) else None
        sv = figures(rest[0]) if rest and os.path.exists(rest[0]) else None
        fr = figures(rest[1]) if len(rest) > 1 and os.path.exists(rest[1]) else None
        ps, pss = at_steal.get((model, name)), at_series.get((model, name))
        if ps:
            tally(steal_stats, model, ps, m)
        if pss:
            tally(series_stats, model, pss, m)
        if fr:
            tally(fresh, model, fr, m)
        st_run, st_cal = steals(meas, cal)
        if st_run is not None and st_cal is not None:
            bs = by_steal.setdefault(model, [[], [], 0, 0])
            bs[0].append(st_run - st_cal)
            bs[1].append(err(c["tps"], m["tps"]))
            if abs(st_run - st_cal) <= SAME_STEAL:
                bs[3] += 1
                bs[2] += all(abs(err(c[k], m[k])) <= b for k, b in BOUNDS.items())
        steal_cell = (
            f"{st_run:.0%} / {st_cal:.0%}" if st_run is not None and st_cal is not None else "-"
        )
        s = score.setdefault(model, [0, 0, 0, 0])
        per = per_bound.setdefault(model, dict.fromkeys(BOUNDS, 0))
        for k, b in BOUNDS.items():
            per[k] += abs(err(c[k], m[k])) <= b
        ok = all(abs(err(c[k], m[k])) <= b for k, b in BOUNDS.items())
        s[0] += ok
        s[1] += 1
        if r:
            s[2] += abs(err(r["tps"], m["tps"])) <= 0.30
            s[3] += 1
        rows.append(
            f"| {model} | {name} | {m['tps']:.1f} | {cell(c['tps'], m['tps'])} "
            f"| {m['ttft50']:.1f} / {cell(c['ttft50'], m['ttft50'])} "
            f"| {m['ttft99']:.1f} / {cell(c['ttft99'], m['ttft99'])} "
            f"| {m['itl50']:.2f} / {cell(c['itl50'], m['itl50'])} "
            f"| {m['itl99']:.2f} / {cell(c['itl99'], m['itl99'])} "
            f"| {cell(r['tps'], m['tps']) if r else '-'} "
            f"| {cell(sv['tps'], m['tps']) + ', ' + cell(sv['ttft50'], m['ttft50']) if sv else '-'} "
            f"| {steal_cell} | {'yes' if ok else 'no'} |"
            + (f" {fresh_cell(ps, m)} |" if at_steal else "")
            + (f" {fresh_cell(pss, m)} |" if at_series else "")
            + (f" {fresh_cell(fr, m)} |" if with_fresh else "")
        )
    out = [
        "| model | point | measured out tok/s | predicted (error) | TTFT p50 ms measured / "
        "predicted | TTFT p99 | ITL p50 | ITL p99 | roofline out tok/s | server's fit: out tok/s, "
        "TTFT p50 | steal: run / calibration | within bounds |"
        + (" at the run's steal (--steal): within bounds |" if at_steal else "")
        + (" at its steal second by second (--steal-series): within bounds |" if at_series else "")
        + (" fresh calibration: within bounds |" if with_fresh else ""),
        "|---|---|---|---|---|---|---|---|---|---|---|---|"
        + ("---|" if at_steal else "")
        + ("---|" if at_series else "")
        + ("---|" if with_fresh else ""),
    ] + rows
    out.append("")
    for model, (ok, n, rok, rn) in score.items():
        out.append(
            f"- {model}: {ok} of {n} points within the bounds ({ok / n:.0%}); roofline "
            f"within 30% of the measured output tok/s at {rok} of {rn}; by figure: "
            + ", ".join(f"{LABEL[k]} {v} of {n}" for k, v in per_bound[model].items())
        )
    for model, (dx, de, ok, n) in by_steal.items():
        out.append(
            f"- {model}: the hypervisor's steal during each point less during the calibration, "
            f"{min(dx):+.0%} to {max(dx):+.0%}; its correlation with the output tok/s error "
            f"{corr(dx, de):+.2f}; points measured within {SAME_STEAL:.0%} of the calibration's "
            f"steal: {n} of {len(dx)}, {ok} of them within the bounds"
        )
    for model, (ok, n, per) in steal_stats.items():
        out.append(
            f"- {model}, each point predicted from the calibration told the hypervisor's steal "
            f"during it (--steal): {ok} of {n} points within the bounds ({ok / n:.0%}); by "
            "figure: " + ", ".join(f"{LABEL[k]} {v} of {n}" for k, v in per.items())
        )
    for model, (ok, n, per) in series_stats.items():
        out.append(
            f"- {model}, each point predicted from the calibration told the hypervisor's steal "
            f"second by second as the bench read it (--steal-series): {ok} of {n} points within "
            f"the bounds ({ok / n:.0%}); by figure: "
            + ", ".join(f"{LABEL[k]} {v} of {n}" for k, v in per.items())
        )
    for model, (ok, n, per) in fresh.items():
        out.append(
            f"- {model}, each point predicted from a calibration taken just before it was "
            f"measured: {ok} of {n} points within the bounds ({ok / n:.0%}); by figure: "
            + ", ".join(f"{LABEL[k]} {v} of {n}" for k, v in per.items())
        )
    rep = os.path.join(d, "repeat.txt")
    again = {}
    if os.path.exists(rep):
        with open(rep) as f:
            repeats = [ln.split() for ln in f if ln.strip()]
        for model, name, first, second in repeats:
            if not (os.path.exists(first) and os.path.exists(second)):
                continue
            if name == "capacity":
                a, b = capacity(first), capacity(second)
                e = f"{err(b, a):+.0%}" if a else "-"
                out.append(
                    f"- {model}: capacity under the SLO measured again after the rest: "
                    f"{a:.3g} then {b:.3g} requests/s ({e})"
                )
                continue
            a, b = figures(first), figures(second)
            tally(again, model, b, a)
            if len(repeats) <= 4:
                out.append(
                    f"- {model}: {name} measured again after the rest (same seed): "
                    + ", ".join(
                        f"{LABEL[k]} {a[k]:.1f} then {b[k]:.1f} ({err(b[k], a[k]):+.0%})"
                        for k in BOUNDS
                    )
                    + ": the machine's own repeatability over the grid"
                )
    for model, (ok, n, per) in again.items():
        if n > 2:
            out.append(
                f"- {model}, every point measured a second time after the rest (same seed), "
                f"judged against its first measurement as a prediction is: {ok} of {n} points "
                f"within the bounds ({ok / n:.0%}); by figure: "
                + ", ".join(f"{LABEL[k]} {v} of {n}" for k, v in per.items())
                + ": how often this machine agrees with itself"
            )
    cap = os.path.join(d, "capacity.txt")
    if os.path.exists(cap):
        with open(cap) as f:
            for ln in f:
                model, meas, pred = ln.split()
                if os.path.exists(meas) and os.path.exists(pred):
                    a, b = capacity(meas), capacity(pred)
                    e = f"{err(b, a):+.0%}" if a else "-"
                    out.append(
                        f"- {model}: capacity under the SLO {a:.3g} requests/s measured "
                        f"(tps bench --find-max-rate), {b:.3g} predicted ({e})"
                    )
    return "\n".join(out) + "\n"


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    d, doc = sys.argv[1], sys.argv[2]
    text = open(doc).read()
    a, b = "<!-- plan-table:begin -->\n", "<!-- plan-table:end -->"
    i, j = text.find(a), text.find(b)
    if i < 0 or j < i:
        sys.exit(f"{doc}: no {a.strip()} ... {b} markers")
    with open(doc, "w") as f:
        f.write(text[: i + len(a)] + table(d) + text[j:])
    print(f"plan_table: wrote the table into {doc}")


if __name__ == "__main__":
    main()
