#!/usr/bin/env python3
"""Egress overhead: a networked curl to a local server, bare vs glovebox.

Three ways to run the same `curl` against an HTTP server on 127.0.0.1:

  bare        curl on the host
  direct      glovebox sandbox --net=direct (the jail, host network)
  proxied     glovebox sandbox --net --allow-private (own network
              namespace + the supervisor's egress proxy)

Per call: the wall time of fetching a 100-byte file (median of RUNS,
modes interleaved so load changes hit them alike) and the CPU time it
took (user + system of glovebox and curl: less swayed by a loaded
machine than wall time); "added" is proxied - direct, the cost of the
namespace and the proxy path alone.
Throughput on a 1 MiB file, from curl's own timings so process start-up
does not count: 1 MiB / time_total (connect, the proxy's decision and its
own connect, the server's answer, the body), and the time to the first
byte, medians. The cost of the namespace + proxy path is proxied vs direct
(both jailed); bare is shown for reference.

A 32 MiB file shows the relay's own rate, where set-up no longer counts.
With `--before OLD_GLOVEBOX`, the same direct and proxied runs of an older
build are interleaved with this one's (side by side in one run).
With `--floor`, bench/egress_floor.c (a minimal C proxy: one thread,
blocking calls, splice, no policy) is compiled with `cc` and a bare curl
through it is interleaved too: "floor" vs "bare" is what any user-space
proxy costs on this machine, the part of the proxied - direct gap that no
proxy design avoids.

    python3 bench/egress.py [GLOVEBOX] [--before OLD] [--floor] [--runs N] [--write bench/RESULTS.md]
"""

import argparse
import os
import re
import shutil
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time


def answer(root, conn):
    """One HTTP/1.0 request: the file of `root` named by the path's last
    segment, sent with sendfile(2) (the server costs little, so the client
    and the proxy are what is measured)."""
    with conn:
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = conn.recv(65536)
            if not chunk:
                return
            head += chunk
        name = head.split(b" ")[1].decode().rsplit("/", 1)[-1]
        with open(os.path.join(root, name), "rb") as f:
            size = os.fstat(f.fileno()).st_size
            conn.sendall(f"HTTP/1.0 200 OK\r\nContent-Length: {size}\r\n\r\n".encode())
            conn.sendfile(f)


def serve_files(root, listener):
    """Serves the files of `root` on `listener` (a bound socket) from a
    daemon thread, a thread per connection; returns the port."""
    listener.listen(128)

    def serve():
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return  # the listener was shut down
            threading.Thread(target=answer, args=(root, conn), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    return listener.getsockname()[1]


def make_files(sizes):
    """A temporary directory holding one file of random bytes per
    `name: size` of `sizes`."""
    root = tempfile.mkdtemp(prefix="gbx-bench-egress-")
    for name, size in sizes.items():
        with open(os.path.join(root, name), "wb") as f:
            f.write(b"x" * size if size < 4096 else os.urandom(size))
    return root


def run(cmd, cpu_ms=None):
    """Runs `cmd` (checked): its wall time in seconds and its stdout; the
    CPU time of it and its children is appended to `cpu_ms` if given."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=True)
    dt = time.perf_counter() - t
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if cpu_ms is not None:
        cpu_ms.append((r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime) * 1000)
    return dt, out.stdout.decode()


def sandbox_modes(glovebox, before=None):
    """The command prefixes of the jailed modes: direct (host network) and
    proxied (own namespace + the egress proxy, private addresses allowed),
    and the same of an older build when `before` is given."""
    modes = {
        "direct": [glovebox, "sandbox", "--net=direct", "--"],
        "proxied": [glovebox, "sandbox", "--net", "--allow-private", "--"],
    }
    if before:
        modes["direct (before)"] = [before, "sandbox", "--net=direct", "--"]
        modes["proxied (before)"] = [before, "sandbox", "--net", "--allow-private", "--"]
    return modes


def start_floor(root):
    """Compiles bench/egress_floor.c into `root` with `cc` and starts it on
    a free loopback port: its process and the command prefix that sends a
    bare curl through it."""
    floor_bin = os.path.join(root, "egress_floor")
    subprocess.run(
        ["cc", "-O2", "-o", floor_bin, os.path.join(os.path.dirname(os.path.abspath(__file__)), "egress_floor.c")],
        check=True,
    )
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    floor_port = probe.getsockname()[1]
    probe.close()
    proc = subprocess.Popen([floor_bin, str(floor_port)])
    time.sleep(0.2)
    return proc, ["env", f"http_proxy=http://127.0.0.1:{floor_port}"]


def write_section(path, title, text):
    """Replaces the section `title` (up to the next `## `) of the markdown
    file `path` with `text`, or appends it."""
    with open(path) as f:
        old = f.read()
    start = old.find(title)
    if start >= 0:
        end = old.find("\n## ", start + 3)
        old = old[:start] + (old[end + 1:] if end >= 0 else "")
    with open(path, "w") as f:
        f.write(old.rstrip("\n") + "\n\n" + text)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("glovebox", nargs="?", default="target/release/glovebox")
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--before", default=None, help="an older glovebox to run side by side")
    ap.add_argument("--floor", action="store_true", help="also a bare curl through bench/egress_floor.c")
    ap.add_argument("--write", default=None)
    args = ap.parse_args()

    root = make_files({"small": 100, "big": 1 << 20, "huge": 32 << 20})
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    port = serve_files(root, listener)

    MODES = {"bare": [], **sandbox_modes(args.glovebox)}
    if args.floor:
        floor_proc, MODES["floor"] = start_floor(root)
    if args.before:
        MODES.update((m, p) for m, p in sandbox_modes(args.glovebox, args.before).items() if "before" in m)

    def curl(path, fmt):
        return ["curl", "-sS", "-o", "/dev/null", "-w", fmt, f"http://127.0.0.1:{port}/{path}"]

    load_before = open("/proc/loadavg").read().split()[0]
    for m in MODES:  # warm-up
        for _ in range(5):
            run(MODES[m] + curl("small", "%{http_code}"))

    wall = {m: [] for m in MODES}
    speed = {m: [] for m in MODES}
    first = {m: [] for m in MODES}
    bulk = {m: [] for m in MODES}
    cpu = {m: [] for m in MODES}
    for i in range(args.runs):
        for m in MODES:
            dt, out = run(MODES[m] + curl("small", "%{http_code}"), cpu[m])
            assert out.strip() == "200", (m, out)
            wall[m].append(dt * 1000)
        if i % 4 == 0:
            for m in MODES:
                _, out = run(MODES[m] + curl("big", "%{time_starttransfer} %{time_total}"))
                ttfb, total = (float(x) for x in out.split())
                speed[m].append((1 << 20) / max(total, 1e-6))
                first[m].append(ttfb * 1000)
        if i % 12 == 0:
            for m in MODES:
                _, out = run(MODES[m] + curl("huge", "%{time_starttransfer} %{time_total}"))
                ttfb, total = (float(x) for x in out.split())
                bulk[m].append((32 << 20) / max(total - ttfb, 1e-6))

    med = {m: statistics.median(v) for m, v in wall.items()}
    spd = {m: statistics.median(v) / (1 << 20) for m, v in speed.items()}
    ttfb = {m: statistics.median(v) for m, v in first.items()}
    blk = {m: statistics.median(v) / (1 << 20) for m, v in bulk.items()}
    cpum = {m: statistics.median(v) for m, v in cpu.items()}
    lines = [
        "## Egress (network: true through the proxy)",
        "",
        f"`python3 bench/egress.py` — {args.runs} runs per mode, interleaved; a 100-byte, a 1 MiB and a 32 MiB "
        f"file from an HTTP server on 127.0.0.1 (sendfile); CPU = user + system of glovebox and curl; "
        f"load before: {load_before}, after: {open('/proc/loadavg').read().split()[0]}.",
        "",
        "| mode | wall per call (100 B) | CPU per call (100 B) | 1 MiB: first byte | 1 MiB: rate (size / curl time_total) | 32 MiB: body rate |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for m in MODES:
        lines.append(
            f"| {m} | {med[m]:.2f} ms | {cpum[m]:.2f} ms | {ttfb[m]:.2f} ms | {spd[m]:.0f} MiB/s | {blk[m]:.0f} MiB/s |"
        )
    lines.append("")
    for tag in ["", " (before)"] if args.before else [""]:
        d, p = "direct" + tag, "proxied" + tag
        added = med[p] - med[d]
        loss = (1 - spd[p] / spd[d]) * 100
        lines += [
            f"Namespace + proxy path{tag} (proxied - direct): **{added:+.2f} ms per call** (target < 2 ms), "
            f"CPU {cpum[p] - cpum[d]:+.2f} ms; "
            f"1 MiB rate (size / time_total) **{loss:.1f} % below direct** (target < 10 %); "
            f"first byte {ttfb[p] - ttfb[d]:+.2f} ms vs direct; 32 MiB body rate {(blk[p] / blk[d] - 1) * 100:+.1f} % vs direct.",
            "",
        ]
    if args.floor:
        lines += [
            f"Floor (bare curl through bench/egress_floor.c vs bare): 1 MiB rate **{(1 - spd['floor'] / spd['bare']) * 100:.1f} % below bare**; "
            f"first byte {ttfb['floor'] - ttfb['bare']:+.2f} ms; 32 MiB body rate {(blk['floor'] / blk['bare'] - 1) * 100:+.1f} % vs bare.",
            "",
        ]
    text = "\n".join(lines)
    print(text)
    if args.write:
        write_section(args.write, "## Egress (network: true through the proxy)", text)
    if args.floor:
        floor_proc.kill()
        floor_proc.wait()
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
