#!/usr/bin/env python3
"""The "machine" and "headline" sections of bench/RESULTS.md: the machine
the numbers come from, and the ratios of the issue's targets (met/missed),
from bench/metrics.json (written by the section scripts).

Usage: headline.py [--load 'BEFORE -> AFTER'] [--glovebox BIN]. Stdlib only.
"""
import argparse
import json
import os
import platform
import re

import section

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.environ.get("BENCH_RESULTS") or os.path.join(HERE, "RESULTS.md")
METRICS = os.environ.get("BENCH_METRICS") or os.path.join(HERE, "metrics.json")


def cgroup_mode():
    try:
        if os.path.exists("/sys/fs/cgroup/cgroup.controllers"):
            return "v2 (unified)"
        if os.path.isdir("/sys/fs/cgroup/unified"):
            return "hybrid (v1 controllers + v2 at /sys/fs/cgroup/unified)"
        return "v1"
    except OSError:
        return "?"


def machine(gb, load):
    cpu = "?"
    with open("/proc/cpuinfo") as f:
        m = re.search(r"^model name\s*:\s*(.*)$", f.read(), re.M)
        cpu = m.group(1) if m else cpu
    abi, used = "?", "?"
    try:
        doc = json.loads(section.cmd_out(gb, "doctor", "--json"))
        abi = doc["kernel"]["landlock_abi"]
        used = (f"glovebox uses memory {doc['cgroup_memory']}, pids {doc['cgroup_pids']}, "
                f"favordynmods {'yes' if doc['cgroup_fast_attach'] else 'no'}")
    except (ValueError, KeyError, TypeError):
        pass
    fj = section.cmd_out("firejail", "--version").splitlines()[0]
    return ["## Machine", "", section.stamp(), "",
            f"- cores: {os.cpu_count()} ({cpu}); kernel `{platform.release()}`; Landlock ABI {abi}; cgroup {cgroup_mode()} ({used})",
            f"- load average (1/5/15 min) before -> after the run: {load}",
            f"- {section.cmd_out('hyperfine', '--version')}; {section.cmd_out('bwrap', '--version')}; {fj}; "
            f"{section.cmd_out('python3', '--version')}"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--load", default="(not recorded: run bench/all.sh)")
    ap.add_argument("--glovebox", default=os.path.join(HERE, "..", "target", "release", "glovebox"))
    a = ap.parse_args()
    m = {}
    if os.path.exists(METRICS):
        with open(METRICS) as f:
            m = json.load(f)

    def get(k):
        return m[k]["value"] if k in m else None

    def when(*keys):
        got = [m[k] for k in keys if k in m]
        if not got:
            return "pending full run"
        quick = " (QUICK smoke)" if any(g["quick"] for g in got) else ""
        return min(g["date"] for g in got) + quick

    def ratio(a_key, b_key):
        a_, b_ = get(a_key), get(b_key)
        return a_ / b_ if isinstance(a_, float) and isinstance(b_, float) and b_ else None

    def mark(v, limit, below=True):
        if v is None:
            return "pending"
        return "met" if (v <= limit if below else v >= limit) else "**missed**"

    fmt = lambda v, unit="×": "—" if v is None else f"{v:.2f}{unit}"
    rows = []

    def row(what, value, target, status, keys):
        rows.append(f"| {what} | {value} | {target} | {status} | {when(*keys)} |")

    t = "jail.true.{}.median_ms"
    p = "jail.python.{}.median_ms"
    fj_status = get("jail.firejail_status")
    fj_note = "" if fj_status in (None, "ok") else f" (firejail not measured: {fj_status})"
    r = ratio(t.format("glovebox"), t.format("bare"))
    row("`sandbox -- /bin/true` / bare", fmt(r), "—", "", [t.format("glovebox")])
    r = ratio(t.format("glovebox"), t.format("bwrap"))
    row("`sandbox -- /bin/true` / bwrap", fmt(r), "—", "", [t.format("glovebox")])
    r = ratio(t.format("floor"), t.format("bare"))
    row("the kernel's floor: a C program making the same jail once / bare", fmt(r), "—", "",
        [t.format("floor")])
    r = ratio(t.format("floor"), t.format("bwrap"))
    row("the kernel's floor / bwrap", fmt(r), "—", "", [t.format("floor")])
    r = ratio(t.format("glovebox"), t.format("floor"))
    row("`sandbox -- /bin/true` / the kernel's floor", fmt(r), "≤ 1.3×", mark(r, 1.3), [t.format("glovebox")])
    v = get("jail.true.own_work_ms")
    row("`sandbox`'s own work (sandbox − floor − glovebox's start above bare)", fmt(v, " ms"), "—", "",
        ["jail.true.own_work_ms"])
    r = ratio(t.format("glovebox"), t.format("firejail"))
    row("`sandbox -- /bin/true` / firejail", fmt(r) + fj_note, "—", "", [t.format("glovebox")])
    for peer in ("bare", "bwrap", "firejail"):
        r = ratio(p.format("glovebox"), p.format(peer))
        row(f"`sandbox -- python3 -c pass` / {peer}", fmt(r), "—", "", [p.format("glovebox")])
    v = get("run.engine_cost_ms")
    row("engine cost per `run` (run − sandbox, median)", fmt(v, " ms"), "—", "", ["run.engine_cost_ms"])
    row("`run` command tool / bare argv", fmt(get("run.cmd_vs_bare")), "—", "", ["run.cmd_vs_bare"])
    v = get("run.py_vs_bare")
    row("`run` python tool (cold) / bare `python3 -c pass`", fmt(v), "≤ 2.0×", mark(v, 2.0), ["run.py_vs_bare"])
    row("`run` http tool / `curl` (whole processes)", fmt(get("http.run_vs_curl")), "—", "", ["http.run_vs_curl"])
    v = get("http.inproc_added_ms")
    row("http tool, in-process added latency", fmt(v, " ms"), "< 0.3 ms", mark(v, 0.3), ["http.inproc_added_ms"])
    v = get("serve.c8.calls_per_s")
    transport = get("serve.transport") or "?"
    row(f"server calls/s at 8 clients ({transport})", "—" if v is None else f"{v:.0f}/s", "—", "",
        ["serve.c8.calls_per_s"])
    v = get("serve.c1.p50_ms")
    row(f"served trivial call p50, 1 client ({transport})", fmt(v, " ms"), "—", "",
        ["serve.c1.p50_ms"])
    r = ratio("warm.warm.c1.p50_ms", "warm.bare_python_p50_ms")
    row("served python call p50, warm, 1 client / bare `python3 -c pass`", fmt(r), "≤ 0.3×",
        mark(r, 0.3), ["warm.warm.c1.p50_ms"])
    r = ratio("warm.cold.c1.p50_ms", "warm.bare_python_p50_ms")
    row("served python call p50, `warm: false`, 1 client / bare `python3 -c pass`", fmt(r), "—", "",
        ["warm.cold.c1.p50_ms"])
    v = get("warm.warm.c8.calls_per_s")
    row("served python calls/s at 8 clients, warm", "—" if v is None else f"{v:.0f}/s", "≥ 600/s",
        mark(v, 600, below=False), ["warm.warm.c8.calls_per_s"])
    v = get("serve.rss_idle_mb")
    row("supervisor RSS idle", fmt(v, " MB"), "< 30 MB", mark(v, 30), ["serve.rss_idle_mb"])
    v = get("serve.rss_peak32_mb")
    row("supervisor RSS peak, 32 clients", fmt(v, " MB"), "< 100 MB", mark(v, 100), ["serve.rss_peak32_mb"])
    for k, what in (("lint.list_ms", "`list` of 1,000 tools"), ("lint.lint_ms", "`lint` of 1,000 tools")):
        v = get(k)
        row(what, fmt(v, " ms"), "< 1,000 ms", mark(v, 1000), [k])

    head = ["## Headline", "",
            "Ratios of medians from the sections below, with issue 35's targets where this run measures them (its "
            "other targets, ratios to a bare server, to the kernel's per-call floor and inside-the-jail work, are "
            "hand-run: `bench/served.sh`, `bench/jail_floor.sh`, `bench/workloads.sh`; see \"Speed on real work\"). "
            "Earlier issues' targets that issue 35 replaced are not repeated. The \"measured\" column says "
            "when each number was taken; a QUICK smoke run or a loaded machine makes it noise, so read it with the "
            "load line of its section.", "",
            "| measure | now | target | status | measured |", "|---|--:|--:|---|---|"] + rows
    section.write(RESULTS, "machine", "\n".join(machine(a.glovebox, a.load)))
    section.write(RESULTS, "headline", "\n".join(head))
    print("\n".join(head))


if __name__ == "__main__":
    main()
