#!/usr/bin/env python3
"""A call's first proxied connection vs its later ones (issue 16).

Each run is one `glovebox sandbox` whose tool fetches a 1 MiB file three
times with curl from an HTTP server on 127.0.0.1 (sendfile): the first
fetch is what bench/egress.py measures (one curl per call); the later ones
show what the same path costs once the process has run it. With
`--floor`, a bare curl through bench/egress_floor.c too (see
bench/egress.py): proxied - direct next to floor - bare. Modes
interleaved; medians of curl's own timings (time to first byte, total).

    python3 bench/egress_first.py GLOVEBOX [--before OLD] [--floor] [--runs N]
    chrt -r 10 python3 bench/egress_first.py ...   (the view without run-queue waits)
"""

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from egress import make_files, sandbox_modes, serve_files, start_floor  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("glovebox", nargs="?", default="target/release/glovebox")
ap.add_argument("--before", default=None)
ap.add_argument("--runs", type=int, default=100)
ap.add_argument("--floor", action="store_true", help="also a bare curl through bench/egress_floor.c")
args = ap.parse_args()

root = make_files({"big": 1 << 20})
listener = socket.socket()
listener.bind(("127.0.0.1", 0))
port = serve_files(root, listener)

modes = {"bare": [], **sandbox_modes(args.glovebox, args.before)}
if args.floor:
    floor_proc, modes["floor"] = start_floor(root)
fmt = "%{time_starttransfer} %{time_total}\\n"
script = f"for i in 1 2 3; do curl -sS -o /dev/null -w '{fmt}' http://127.0.0.1:{port}/big; done"
first = {m: [] for m in modes}
later = {m: [] for m in modes}
for _ in range(args.runs):
    for m, prefix in modes.items():
        out = subprocess.run(
            prefix + ["sh", "-c", script], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, check=True
        ).stdout.decode().split("\n")
        first[m].append([float(x) * 1000 for x in out[0].split()])
        later[m] += [[float(x) * 1000 for x in line.split()] for line in out[1:] if line.strip()]


def med(v, k):
    return statistics.median(x[k] for x in v)


print(f"load {open('/proc/loadavg').read().split()[0]}, {args.runs} runs per mode")
print("| mode | first fetch: first byte | first fetch: total (1 MiB rate) | later fetches: first byte | later: total (rate) |")
print("| --- | ---: | ---: | ---: | ---: |")
for m in modes:
    f, l = first[m], later[m]
    print(
        f"| {m} | {med(f, 0):.3f} ms | {med(f, 1):.3f} ms ({1000 / med(f, 1):.0f} MiB/s) "
        f"| {med(l, 0):.3f} ms | {med(l, 1):.3f} ms ({1000 / med(l, 1):.0f} MiB/s) |"
    )
if args.floor:
    print(
        f"proxied - direct: first byte {med(first['proxied'], 0) - med(first['direct'], 0):+.3f} ms, "
        f"total {med(first['proxied'], 1) - med(first['direct'], 1):+.3f} ms (first fetch); "
        f"floor - bare: first byte {med(first['floor'], 0) - med(first['bare'], 0):+.3f} ms, "
        f"total {med(first['floor'], 1) - med(first['bare'], 1):+.3f} ms"
    )
    floor_proc.kill()
    floor_proc.wait()
shutil.rmtree(root, ignore_errors=True)
