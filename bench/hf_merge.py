#!/usr/bin/env python3
"""Merge hyperfine --export-json files of the same commands (one per pass,
see bench/lib.sh `hf`) into one, recomputing median, mean, stddev, min and
max from all the times. Usage: hf_merge.py OUT.json PART.json... Stdlib only."""
import json
import statistics
import sys

out, *parts = sys.argv[1:]
merged = None
for p in parts:
    with open(p) as f:
        results = json.load(f)["results"]
    if merged is None:
        merged = results
        continue
    for m, r in zip(merged, results):
        assert m["command"] == r["command"], (m["command"], r["command"])
        m["times"] += r["times"]
        m.setdefault("exit_codes", []).extend(r.get("exit_codes", []))
for m in merged:
    t = m["times"]
    m["median"] = statistics.median(t)
    m["mean"] = statistics.fmean(t)
    m["stddev"] = statistics.stdev(t) if len(t) > 1 else 0.0
    m["min"], m["max"] = min(t), max(t)
    m["passes"] = len(parts)
with open(out, "w") as f:
    json.dump({"results": merged}, f)
