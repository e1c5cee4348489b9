#!/usr/bin/env python3
"""Prints BENCHMARKS.md's current table from the load-test harness's result.json files.

    scripts/bench-table.py [RUN_DIR] [--side new|old] [--write BENCHMARKS.md]

RUN_DIR is a folder written by `loadtest/compare.sh run` (one sub-folder per run, named
`<side>-<run>`, each with its result.json; default: the newest folder under loadtest/results/
that has one). Only the runs of one side are read (default `new`: the build measured). The
commit and the time of the run come from RUN_DIR/run.json (`compare.sh run` writes it); every
other figure, the machine and the Postgres settings come from the result.json files themselves.
With --write FILE the table replaces what stands between FILE's `<!-- bench-table:begin -->` and
`<!-- bench-table:end -->` lines instead of being printed.

The goals beside each figure are the project's standing ones: the design's acceptance figure
(a healthy tenant's p95 under 1 s beside a dead channel's backlog), the isolation goals (p95 under
100 ms and within 1.5x of the same run's baseline), fairness (B under 250 ms), the dead
endpoint's and the dead host's request budgets (computed by the harness, in result.json), and
issue 30's efficiency goals (3 000/s for the 50 000 burst; at 250/s p50 <= 5 ms, p99 <= 50 ms).
Standard library only.
"""
import argparse
import json
import os
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def newest_run_dir():
    """The most recently named folder under loadtest/results/ holding `*/result.json`."""
    best = None
    base = os.path.join(ROOT, "loadtest", "results")
    for dirpath, dirnames, filenames in os.walk(base):
        if any(os.path.isfile(os.path.join(dirpath, d, "result.json")) for d in dirnames):
            # issue-30/session-5 sorts after issue-30/session-4 and issue-14/…: the numbers
            # in the path, compared as numbers.
            key = [int(p) if p.isdigit() else p for p in _split_digits(os.path.relpath(dirpath, base))]
            if best is None or key > best[0]:
                best = (key, dirpath)
    return best[1] if best else None


def _split_digits(s):
    out, cur = [], ""
    for ch in s:
        if cur and (ch.isdigit() != cur[-1].isdigit()):
            out.append(cur)
            cur = ""
        cur += ch
    if cur:
        out.append(cur)
    return out


def command(r):
    """The harness command line that produced result `r`, rebuilt from its own fields."""
    sc = r.get("scenario")
    if sc == "isolation":
        c = f"isolation --backlog {r['backlog']} --duration {int(r['duration_s'])} --dead-mode {r['dead_mode']}"
        if r.get("dead_ordering") not in (None, "none"):
            c += f" --dead-ordering {r['dead_ordering']}"
        if (r.get("dead_channels") or 1) > 1:
            c += f" --dead-channels {r['dead_channels']} --dead-tenants {r.get('dead_tenants', 1)}"
        return c
    if sc == "throughput":
        c = "throughput"
        if r.get("open_loop"):
            c += f" --rate {r['rate_per_s']:g}"
        c += f" --count {r['count']}"
        if (r.get("nodes") or 1) > 1:
            c += f" --nodes {r['nodes']}"
        return c
    if sc == "fairness":
        c = f"fairness --count {r['count']} --channels {r['channels']}"
        if (r.get("rounds") or 1) > 1:
            c += f" --rounds {r['rounds']}"
        return c
    return sc or "?"


def ms(v):
    return "—" if v is None else f"{v:.2f}"


def num(v):
    """A count with a thin space between thousands, as the rest of the docs write them."""
    return f"{v:,.0f}".replace(",", " ")


def yes(ok):
    return "—" if ok is None else ("yes" if ok else "**no**")


def load(run_dir, side):
    runs = {}
    for name in sorted(os.listdir(run_dir)):
        path = os.path.join(run_dir, name, "result.json")
        if name.startswith(side + "-") and os.path.isfile(path):
            with open(path) as f:
                runs[name[len(side) + 1:]] = json.load(f)
    return runs


def header(run_dir, side, runs):
    meta = {}
    meta_path = os.path.join(run_dir, "run.json")
    if os.path.isfile(meta_path):
        with open(meta_path) as f:
            meta = json.load(f)
    any_r = next(iter(runs.values()))
    m, pg = any_r.get("machine", {}), any_r.get("postgres", {})
    loads = [x["machine"]["load_avg_start"][0] for x in runs.values() if x.get("machine", {}).get("load_avg_start")]
    rel = os.path.relpath(run_dir, ROOT)
    commit = meta.get(side) or m.get("git_commit") or "unknown"
    lines = [
        f"- **Measured**: commit `{commit}`, {meta.get('date', 'date not recorded')}"
        + (f"; {meta['note']}" if meta.get("note") else "") + ".",
        f"- **Machine**: {m.get('cores', '?')} cores ({m.get('cpu', '?')}), {m.get('mem_gib', '?')} GiB, "
        f"{m.get('build', '?')} build; load average at each run's start {min(loads):.1f}–{max(loads):.1f}."
        if loads else "- **Machine**: not recorded.",
        f"- **Postgres** {pg.get('server_version', '?')}: **autovacuum = {pg.get('autovacuum', '?')}**, "
        f"fsync = {pg.get('fsync', '?')}, synchronous_commit = {pg.get('synchronous_commit', '?')}, "
        f"shared_buffers = {pg.get('shared_buffers', '?')}; one database per run, dropped after it.",
        f"- **Results**: [`{rel}/`]({rel}/) (`{side}-*/result.json`); this table: "
        f"`scripts/bench-table.py {rel}`.",
    ]
    return "\n".join(lines)


def tables(runs):
    out = []
    rows = []
    for name, r in runs.items():
        if r.get("scenario") != "throughput":
            continue
        cpu = r.get("cpu", {}).get("phases", {}).get("run", {})
        cpu_s = f"{cpu.get('postgres_cpu_s_per_1000_deliveries', float('nan')):.3f} / {cpu.get('service_cpu_s_per_1000_deliveries', float('nan')):.3f}"
        loss = f"{r.get('lost')} / {r.get('duplicates')}"
        if r.get("open_loop"):
            lat = r["open_loop"]["latency"]
            ok = lat["p50_ms"] <= 5 and lat["p99_ms"] <= 50
            pg_ok = cpu.get("postgres_cpu_s_per_1000_deliveries", float("inf")) <= 2.26
            met = yes(ok) if pg_ok or not ok else "latency yes; Postgres CPU **no**"
            rows.append((command(r), f"p50 / p95 / p99 **{ms(lat['p50_ms'])} / {ms(lat['p95_ms'])} / {ms(lat['p99_ms'])} ms**",
                         "p50 ≤ 5 ms, p99 ≤ 50 ms; Postgres ≤ 2.26 CPU-s per 1 000", met, cpu_s, loss))
        else:
            ok = r["throughput_per_s"] >= 3000
            rows.append((command(r), f"**{num(r['throughput_per_s'])}/s** (steady {num(r['steady_per_s'])}/s)",
                         "≥ 3 000/s", yes(ok), cpu_s, loss))
    for name, r in runs.items():
        if r.get("scenario") == "fairness":
            b = max(r["b_latency_ms"])
            rows.append((command(r), f"B's delivery **{b:.1f} ms** behind A's {r['count']}",
                         "B < 250 ms", yes(b < 250), "—", f"{r.get('lost')} / {r.get('duplicates')}"))
    for name, r in runs.items():
        dh = r.get("dead_host")
        if r.get("scenario") == "isolation" and dh:
            b = dh["budget"]
            rows.append((command(r),
                         f"healthy p95 {ms(r['healthy']['p95_ms'])} ms = **{r['healthy_p95_over_baseline_p95']:.2f}×** baseline; "
                         f"dead host got {dh['requests_total']} requests (budget {b['budget']})",
                         "within budget; p95 < 100 ms", yes(b.get("within") and r["healthy"]["p95_ms"] < 100),
                         "—", f"{r.get('lost')} / {r.get('duplicates')}"))
    out.append("| run | figure | goal | met | Postgres / service CPU-s per 1 000 | lost / duplicates |")
    out.append("|---|---|---|---|---|---|")
    for row in rows:
        out.append(f"| `{row[0]}` | " + " | ".join(row[1:]) + " |")
    out.append("")
    out.append("Isolation: a healthy tenant's stream (50/s for 30 s) beside another tenant's dead channel "
               "and its backlog. Goals: healthy p95 < 100 ms and ≤ 1.5× the same run's baseline p95 "
               "(required: < 1 s); the dead endpoint within its request budget; for `slow` (200 after 2 s) "
               "the slow endpoint itself drains at ≥ 15/s with ≥ 32 in flight.")
    out.append("")
    out.append("| dead mode | backlog | healthy / baseline p95 ms | ratio | dead endpoint requests (budget) | slow endpoint: drained/s, mean in flight | goals met | lost / duplicates |")
    out.append("|---|---|---|---|---|---|---|---|")
    order = {"timeout": 0, "refuse": 1, "503": 2, "slow": 3}
    iso = [r for r in runs.values() if r.get("scenario") == "isolation" and not r.get("dead_host")]
    iso.sort(key=lambda r: (r.get("dead_ordering") != "none", r["backlog"], order.get(r["dead_mode"], 9)))
    for r in iso:
        g = r.get("goals", {})
        met = all(v for v in (g.get("goal_p95_under_100ms"), g.get("goal_p95_within_1_5x_baseline"),
                              g.get("required_p95_under_1s"), g.get("lost_zero")))
        b = r.get("dead_endpoint_budget") or {}
        if b.get("within") is False:
            met = False
        dead = f"{r.get('dead_endpoint_requests')} ({b.get('budget')})" if b.get("within") is not None else f"{r.get('dead_endpoint_requests')} (—)"
        slow = "—"
        sd = r.get("slow_drain")
        if sd:
            slow = f"{sd['received_per_s']:.1f}/s, {sd['in_flight']['mean']:.1f}"
            met = met and sd["received_per_s"] >= 15 and sd["in_flight"]["mean"] >= 32
        mode = r["dead_mode"] + (f" ({r['dead_ordering']} channel)" if r.get("dead_ordering") not in (None, "none") else "")
        out.append(f"| {mode} | {num(r['backlog'])} | {ms(r['healthy']['p95_ms'])} / {ms(r['baseline']['p95_ms'])} | "
                   f"**{r['healthy_p95_over_baseline_p95']:.2f}** | {dead} | {slow} | {yes(met)} | "
                   f"{r.get('lost')} / {r.get('duplicates')} |")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("run_dir", nargs="?", help="a compare.sh run folder (default: the newest)")
    ap.add_argument("--side", default="new", help="which build's runs: new (default) or old")
    ap.add_argument("--write", metavar="FILE", help="replace the table between FILE's markers")
    a = ap.parse_args()
    run_dir = a.run_dir or newest_run_dir()
    if not run_dir or not os.path.isdir(run_dir):
        sys.exit(f"bench-table: no run folder ({run_dir!r})")
    runs = load(run_dir, a.side)
    if not runs:
        sys.exit(f"bench-table: no {a.side}-*/result.json in {run_dir}")
    text = header(os.path.abspath(run_dir), a.side, runs) + "\n\n" + tables(runs) + "\n"
    if not a.write:
        print(text, end="")
        return
    with open(a.write) as f:
        doc = f.read()
    begin, end = "<!-- bench-table:begin -->\n", "<!-- bench-table:end -->"
    if begin not in doc or end not in doc:
        sys.exit(f"bench-table: {a.write} has no {begin.strip()} … {end} lines")
    head, rest = doc.split(begin, 1)
    tail = rest.split(end, 1)[1]
    with open(a.write, "w") as f:
        f.write(head + begin + text + end + tail)


if __name__ == "__main__":
    main()
