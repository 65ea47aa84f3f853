#!/usr/bin/env python3
"""Record one measurement in bench/metrics.json (the input of
bench/headline.py). Usage: metric.py KEY VALUE — VALUE is stored as a
number when it parses as one. Each key also gets the date it was taken."""
import datetime
import json
import os
import sys

PATH = os.environ.get("BENCH_METRICS") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "metrics.json")
key, value = sys.argv[1], sys.argv[2]
try:
    value = float(value)
except ValueError:
    pass
data = {}
if os.path.exists(PATH):
    with open(PATH) as f:
        data = json.load(f)
data[key] = {"value": value, "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
             "quick": bool(os.environ.get("QUICK"))}
with open(PATH, "w") as f:
    json.dump(data, f, indent=1, sort_keys=True)
    f.write("\n")
