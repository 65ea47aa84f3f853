#!/usr/bin/env python3
"""Transparent egress vs the proxy path: the same bytes, the same jail.

One jailed python (`glovebox sandbox --net --allow-private --allow-host
localhost:PORT`) moves 1 MiB and 32 MiB from (download) and to (upload)
a server on 127.0.0.1, two ways, interleaved in the same call so that
load changes hit both alike:

  proxied      CONNECT localhost:PORT through the call's proxy
               (127.0.0.1:3128), then the bytes (splice relay)
  transparent  a plain connect to `localhost.` (glovebox's DNS gives a
               fake address; the TUN device and the supervisor's
               user-space TCP stack carry it)

Timed inside the jail, from the connect to the last byte (the jail's
set-up does not count); medians of RUNS. The per-call cost of the TUN
(made in every networked call where /dev/net/tun is usable) is a
networked `true`, this build vs `--before OLD_GLOVEBOX` (a build without
transparent egress), interleaved.

    python3 bench/transparent.py [GLOVEBOX] [--before OLD] [--runs N]
"""

import argparse
import json
import socket
import statistics
import subprocess
import sys
import threading
import time

SIZES = [100, 1 << 20, 32 << 20]

CLIENT = r"""
import json, socket, sys, time
port, runs = int(sys.argv[1]), int(sys.argv[2])
sizes = [int(s) for s in sys.argv[3].split(',')]
buf = bytearray(1 << 20)
out = bytes(1 << 20)

def proxied():
    s = socket.create_connection(('127.0.0.1', 3128))
    s.sendall(b'CONNECT localhost:%d HTTP/1.1\r\nHost: localhost\r\n\r\n' % port)
    head = b''
    while b'\r\n\r\n' not in head:
        head += s.recv(4096)
    assert head.startswith(b'HTTP/1.1 200'), head
    return s

def transparent():
    return socket.create_connection(('localhost.', port))

def download(open_, n):
    t = time.perf_counter()
    s = open_()
    s.sendall(b'D %d\n' % n)
    got = 0
    while got < n:
        k = s.recv_into(buf)
        if not k:
            raise SystemExit('short download')
        got += k
    dt = time.perf_counter() - t
    s.close()
    return dt

def upload(open_, n):
    t = time.perf_counter()
    s = open_()
    s.sendall(b'U %d\n' % n)
    left = n
    while left:
        k = s.send(out[:min(left, len(out))])
        left -= k
    s.shutdown(socket.SHUT_WR)
    ack = s.recv(64)
    dt = time.perf_counter() - t
    assert ack.strip() == str(n).encode(), ack
    s.close()
    return dt

res = {}
for _ in range(runs):
    for n in sizes:
        for mode, open_ in (('proxied', proxied), ('transparent', transparent)):
            res.setdefault('%s download %d' % (mode, n), []).append(download(open_, n))
            res.setdefault('%s upload %d' % (mode, n), []).append(upload(open_, n))
print(json.dumps(res))
"""


def serve(conn):
    """`D n`: sends n bytes; `U n`: reads n bytes, answers n."""
    with conn:
        line = b""
        while not line.endswith(b"\n"):
            c = conn.recv(1)
            if not c:
                return
            line += c
        op, n = line.split()
        n = int(n)
        if op == b"D":
            block = bytes(1 << 20)
            left = n
            while left:
                left -= conn.send(block[: min(left, len(block))])
        else:
            buf = bytearray(1 << 20)
            got = 0
            while got < n:
                k = conn.recv_into(buf)
                if not k:
                    break
                got += k
            conn.sendall(b"%d\n" % got)


def server():
    l = socket.socket()
    l.bind(("127.0.0.1", 0))
    l.listen(64)

    def loop():
        while True:
            c, _ = l.accept()
            threading.Thread(target=serve, args=(c,), daemon=True).start()

    threading.Thread(target=loop, daemon=True).start()
    return l.getsockname()[1]


def per_call(glovebox, runs):
    """Wall time of a networked `true` (median, ms)."""
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run([glovebox, "sandbox", "--net", "--", "true"], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times.append((time.perf_counter() - t) * 1000)
    return times


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("glovebox", nargs="?", default="target/release/glovebox")
    ap.add_argument("--before")
    ap.add_argument("--runs", type=int, default=10)
    a = ap.parse_args()
    port = server()
    cmd = [a.glovebox, "sandbox", "--json", "--net", "--allow-private", "--allow-host",
           f"localhost:{port}", "--timeout", "600", "--",
           "python3", "-c", CLIENT, str(port), str(a.runs), ",".join(map(str, SIZES))]
    r = subprocess.run(cmd, capture_output=True, text=True)
    j = json.loads(r.stdout)
    if not j.get("enforcement", {}).get("transparent_egress"):
        sys.exit(f"no transparent egress here: {j.get('enforcement')}")
    if r.returncode != 0 or not j["stdout"].strip():
        sys.exit(f"the jailed client failed: {j.get('stderr')} {j.get('egress')}")
    res = json.loads(j["stdout"])
    print(f"{a.runs} runs each, medians, timed inside one jailed call (connect to last byte)\n")
    print("| transfer | proxied | transparent | transparent vs proxied |")
    print("| --- | ---: | ---: | ---: |")
    for n in SIZES:
        for way in ("download", "upload"):
            p = statistics.median(res[f"proxied {way} {n}"])
            t = statistics.median(res[f"transparent {way} {n}"])
            mib = n / (1 << 20)
            label = f"{n} B" if n < 1 << 20 else f"{n >> 20} MiB"
            print(f"| {label} {way} | {p * 1000:.1f} ms ({mib / p:.0f} MiB/s) "
                  f"| {t * 1000:.1f} ms ({mib / t:.0f} MiB/s) | {(t / p - 1) * 100:+.1f} % time |")
    if a.before:
        now, before = [], []
        for _ in range(a.runs * 3):
            now += per_call(a.glovebox, 1)
            before += per_call(a.before, 1)
        m, b = statistics.median(now), statistics.median(before)
        print(f"\nNetworked `true`, wall per call (median of {len(now)}): "
              f"with the TUN {m:.2f} ms, before {b:.2f} ms: {m - b:+.2f} ms")


if __name__ == "__main__":
    main()
