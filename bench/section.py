#!/usr/bin/env python3
"""Write a table of hyperfine results into one section of bench/RESULTS.md.

Usage: section.py NAME TITLE RESULTS.md NOTE JSON...
Replaces the text between <!-- NAME:begin --> and <!-- NAME:end --> (appends
the section when absent). Each row: median, mean ± stddev, min, and the ratio
of the median to the first command of the same JSON file. Stdlib only.
"""
import json, os, platform, statistics, sys, datetime, subprocess


def main():
    name, title, results, note, *files = sys.argv[1:]
    commit = subprocess.run(["git", "describe", "--always", "--dirty"], capture_output=True, text=True).stdout.strip()
    load = open("/proc/loadavg").read().split()[0]
    lines = [f"## {title}", "",
             f"- date: {datetime.date.today()}, commit `{commit}`, {os.cpu_count()} cores, kernel `{platform.release()}`, load {load}",
             "", note, ""]
    for f in files:
        runs = json.load(open(f))["results"]
        base = statistics.median(runs[0]["times"])
        lines += ["| command | median ms | mean ± σ ms | min ms | × first |", "|---|--:|--:|--:|--:|"]
        for r in runs:
            med = statistics.median(r["times"])
            lines.append(f"| `{r['command']}` | {med*1e3:.3f} | {r['mean']*1e3:.3f} ± {r['stddev']*1e3:.3f} | {r['min']*1e3:.3f} | {med/base:.2f} |")
        if len(runs) >= 2:
            lines.append("")
            lines.append(f"Median difference, second − first: {(statistics.median(runs[1]['times']) - base)*1e3:.3f} ms")
        lines.append("")
    body = "\n".join(lines)
    begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
    text = open(results).read() if os.path.exists(results) else "# Benchmarks\n"
    block = f"{begin}\n{body}\n{end}"
    if begin in text and end in text:
        text = text[: text.index(begin)] + block + text[text.index(end) + len(end):]
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    open(results, "w").write(text)


if __name__ == "__main__":
    main()
