"""What the account check of a tokenless `glovebox serve` costs a new
connection (issue 43): the same request on a fresh connection each time,
to two servers side by side — one on loopback without a token (each
connection's owner looked up in the kernel, NETLINK_SOCK_DIAG), one with
a token (no lookup) — in alternating rounds, so both see the same machine.
Prints the median and p90 per request and their ratio. Hand-run:

    python3 bench/peer_lookup.py [--glovebox target/release/glovebox] [--requests 2000]
"""

import argparse
import http.client
import os
import statistics
import subprocess
import sys
import tempfile
import time


def start(gb, root, env):
    p = subprocess.Popen(
        [gb, "--root", root, "serve", "--listen", "127.0.0.1:0"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
        text=True,
    )
    for line in p.stderr:
        if line.startswith("glovebox: serving the HTTP API at http://"):
            host, port = line.split("http://")[1].split("/")[0].rsplit(":", 1)
            return p, host, int(port)
    raise SystemExit("glovebox serve did not start")


def one(host, port, headers):
    t = time.perf_counter()
    c = http.client.HTTPConnection(host, port, timeout=30)
    c.request("GET", "/api/v1/tools/no_such_tool", headers=headers)
    r = c.getresponse()
    r.read()
    c.close()
    assert r.status == 404, r.status
    return time.perf_counter() - t


def main():
    a = argparse.ArgumentParser()
    a.add_argument("--glovebox", default="target/release/glovebox")
    a.add_argument("--requests", type=int, default=2000)
    args = a.parse_args()
    with tempfile.TemporaryDirectory() as d:
        root = os.path.join(d, "p")
        os.makedirs(os.path.join(root, ".glee", "tools"))
        base = dict(os.environ, GLOVEBOX_STATE_DIR=os.path.join(d, "state"))
        base.pop("GLOVEBOX_API_TOKEN", None)
        checked, h1, p1 = start(args.glovebox, root, base)
        tokened, h2, p2 = start(args.glovebox, root, dict(base, GLOVEBOX_API_TOKEN="t"))
        try:
            lookup, token = [], []
            for _ in range(50):  # warm-up
                one(h1, p1, {})
                one(h2, p2, {"Authorization": "Bearer t"})
            for i in range(args.requests):
                if i % 2:
                    lookup.append(one(h1, p1, {}))
                    token.append(one(h2, p2, {"Authorization": "Bearer t"}))
                else:
                    token.append(one(h2, p2, {"Authorization": "Bearer t"}))
                    lookup.append(one(h1, p1, {}))
        finally:
            checked.kill()
            tokened.kill()
    def q(xs, f):
        xs = sorted(xs)
        return xs[int(f * (len(xs) - 1))] * 1e6
    for name, xs in (("account check (no token)", lookup), ("token (no lookup)", token)):
        print(f"{name:26} p50 {q(xs, 0.5):7.0f} us   p90 {q(xs, 0.9):7.0f} us")
    print(f"ratio p50 {q(lookup, 0.5) / q(token, 0.5):.3f}   p90 {q(lookup, 0.9) / q(token, 0.9):.3f}   (load {open('/proc/loadavg').read().split()[0]})")


if __name__ == "__main__":
    sys.exit(main())
