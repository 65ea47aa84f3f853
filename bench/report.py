#!/usr/bin/env python3
"""Turn the hyperfine JSON of bench/jail.sh into the Markdown section
between <!-- jail:begin --> and <!-- jail:end --> of bench/RESULTS.md, and
record the medians in bench/metrics.json for bench/headline.py.

Usage: report.py --glovebox BIN --bwrap 'ARGS' --firejail 'ARGS'
                 --firejail-status ok|WHY --results FILE JSON...
Each JSON holds runs named bare, glovebox, bwrap (and firejail when it
works). Ratios are of medians. Stdlib only.
"""
import argparse
import json
import os
import subprocess

import section

BEGIN, END = "<!-- jail:begin -->", "<!-- jail:end -->"
TARGET_BARE, TARGET_BWRAP = 2.0, 0.5  # glovebox sandbox -- /bin/true, by median


def ms(s):
    return f"{s * 1e3:.3f}"


def table(path):
    with open(path) as f:
        runs = {r["command"]: r for r in json.load(f)["results"]}
    med = {name: r["median"] for name, r in runs.items()}
    first = next(iter(runs.values()))
    peers = [p for p in ("bwrap", "firejail", "floor") if p in med]
    lines = [f"| command ({len(first['times'])} runs, {first.get('passes', 1)} passes) | median ms "
             "| mean ± σ ms | min ms | max ms | ×bare | " + " | ".join(f"×{p}" for p in peers) + " |",
             "|---|--:|--:|--:|--:|--:|" + "--:|" * len(peers)]
    for name, r in runs.items():
        x_bare = f"{r['median'] / med['bare']:.2f}" if name != "bare" else ""
        jailed = name.startswith("glovebox") and name != "glovebox --version"
        xs = [f"{r['median'] / med[p]:.2f}" if jailed else "" for p in peers]
        lines.append(f"| {name} | {ms(r['median'])} | {ms(r['mean'])} ± {ms(r['stddev'])} "
                     f"| {ms(r['min'])} | {ms(r['max'])} | {x_bare} | " + " | ".join(xs) + " |")
    return lines, med


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--glovebox", required=True)
    ap.add_argument("--bwrap", required=True)
    ap.add_argument("--firejail", required=True)
    ap.add_argument("--firejail-status", default="ok")
    ap.add_argument("--results", required=True)
    ap.add_argument("--load", default="?")
    ap.add_argument("--note", default="")
    ap.add_argument("json", nargs="+")
    a = ap.parse_args()

    out = ["## Jail overhead (`bench/jail.sh`)", "", section.stamp(a.load), ""]
    if a.note:
        out += [a.note, ""]
    out += [f"- bwrap: `{a.bwrap} CMD` (as root: no user namespace; `--unshare-all` includes a network "
            "namespace, so `glovebox --netns` is its closest match).",
            f"- firejail: `{a.firejail} CMD`.",
            f"- {section.cmd_out('hyperfine', '--version')}, {section.cmd_out('bwrap', '--version')}, "
            f"{section.cmd_out('firejail', '--version').splitlines()[0]}"]
    if a.firejail_status != "ok":
        out += ["", f"> **FIREJAIL NOT MEASURED: {a.firejail_status}**"]
    out += ["", "Ratios are of medians. hyperfine `-N` (no shell); the runs of a table are split in passes "
            "that alternate the commands, so load changes on this shared machine hit every row alike."]
    for path in a.json:
        lines, med = table(path)
        key = "true" if "true" in os.path.basename(path) else "python"
        title = "/bin/true" if key == "true" else "python3 -c pass"
        out += ["", f"### {title}", ""] + lines
        for name, v in med.items():
            subprocess.run(["python3", os.path.join(os.path.dirname(__file__), "metric.py"),
                            f"jail.{key}.{name.replace(' ', '')}.median_ms", f"{v * 1e3:.3f}"], check=True)
        if key == "true":
            rb, rw = med["glovebox"] / med["bare"], med["glovebox"] / med["bwrap"]
            ok = lambda v, t: "met" if v <= t else "**missed**"
            out += ["", f"Targets for `glovebox sandbox -- /bin/true`: ≤ {TARGET_BARE}× bare "
                    f"(now {rb:.2f}×, {ok(rb, TARGET_BARE)}); ≤ {TARGET_BWRAP}× bwrap "
                    f"(now {rw:.2f}×, {ok(rw, TARGET_BWRAP)})."]
            if "floor" in med and "glovebox --version" in med:
                start = med["glovebox --version"] - med["bare"]
                own = med["glovebox"] - med["floor"] - start
                out += ["", f"The kernel's floor for a one-shot jail of this shape (`floor`) is "
                        f"{med['floor'] / med['bare']:.2f}× bare and {med['floor'] / med['bwrap']:.2f}× bwrap "
                        f"before any other work; starting and ending the glovebox binary costs "
                        f"{ms(start)} ms more than `/bin/true`; what `sandbox` adds to both (its own work: "
                        f"the command line, the state directory, the plan, the ruleset, the cgroups, the "
                        f"child's extra steps) is {ms(own)} ms."]
                subprocess.run(["python3", os.path.join(os.path.dirname(__file__), "metric.py"),
                                "jail.true.own_work_ms", f"{own * 1e3:.3f}"], check=True)
    subprocess.run(["python3", os.path.join(os.path.dirname(__file__), "metric.py"),
                    "jail.firejail_status", a.firejail_status], check=True)
    section.write(a.results, "jail", "\n".join(out))
    print("\n".join(out))


if __name__ == "__main__":
    main()
