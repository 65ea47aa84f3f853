#!/usr/bin/env python3
"""A call's first proxied connection vs its later ones (issue 16).

Each run is one `glovebox sandbox` whose tool fetches a 1 MiB file three
times with curl from an HTTP server on 127.0.0.1 (sendfile): the first
fetch is what bench/egress.py measures (one curl per call); the later ones
show what the same path costs once the process has run it. Modes
interleaved; medians of curl's own timings (time to first byte, total).

    python3 bench/egress_first.py GLOVEBOX [--before OLD] [--runs N]
    chrt -r 10 python3 bench/egress_first.py ...   (the view without run-queue waits)
"""

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import tempfile
import threading

ap = argparse.ArgumentParser()
ap.add_argument("glovebox", nargs="?", default="target/release/glovebox")
ap.add_argument("--before", default=None)
ap.add_argument("--runs", type=int, default=100)
args = ap.parse_args()

root = tempfile.mkdtemp(prefix="gbx-bench-first-")
with open(os.path.join(root, "big"), "wb") as f:
    f.write(os.urandom(1 << 20))


def answer(conn):
    with conn:
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = conn.recv(65536)
            if not chunk:
                return
            head += chunk
        with open(os.path.join(root, "big"), "rb") as f:
            size = os.fstat(f.fileno()).st_size
            conn.sendall(f"HTTP/1.0 200 OK\r\nContent-Length: {size}\r\n\r\n".encode())
            conn.sendfile(f)


def serve(listener):
    while True:
        conn, _ = listener.accept()
        threading.Thread(target=answer, args=(conn,), daemon=True).start()


listener = socket.socket()
listener.bind(("127.0.0.1", 0))
listener.listen(128)
port = listener.getsockname()[1]
threading.Thread(target=serve, args=(listener,), daemon=True).start()

PROXIED = ["sandbox", "--net", "--allow-private", "--"]
DIRECT = ["sandbox", "--net=direct", "--"]
modes = {"bare": [], "direct": [args.glovebox] + DIRECT, "proxied": [args.glovebox] + PROXIED}
if args.before:
    modes["direct (before)"] = [args.before] + DIRECT
    modes["proxied (before)"] = [args.before] + PROXIED
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
shutil.rmtree(root, ignore_errors=True)
