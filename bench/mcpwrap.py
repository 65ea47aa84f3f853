#!/usr/bin/env python3
"""What jailing an MCP server costs (issue 31, hand-run).

Drives one small stdio MCP server (an echo tool, plain JSON-RPC) two ways:
bare (this script is its client) and as a `kind: mcp` tool through
`glovebox mcp` (this script is glovebox's client; glovebox is the
server's, in its jail). Prints, for each: the start (spawn to the first
`tools/list` answer) and the latency of N sequential `tools/call`s
(p50/p90/p99), and the added latency per call.

    python3 bench/mcpwrap.py [--glovebox target/release/glovebox] [--calls 300]
"""

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time

SERVER = r'''
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    i = m.get("id")
    if i is None:
        continue
    meth = m.get("method")
    if meth == "initialize":
        r = {"protocolVersion": m["params"]["protocolVersion"], "capabilities": {"tools": {}},
             "serverInfo": {"name": "echo", "version": "1"}}
    elif meth == "tools/list":
        r = {"tools": [{"name": "echo", "description": "echo", "inputSchema": {
            "type": "object", "properties": {"msg": {"type": "string"}}, "required": ["msg"]}}]}
    elif meth == "tools/call":
        r = {"content": [{"type": "text", "text": m["params"]["arguments"]["msg"]}]}
    else:
        r = {}
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": i, "result": r}) + "\n")
    sys.stdout.flush()
'''


class Client:
    def __init__(self, argv, cwd, env=None):
        self.p = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.next = 1

    def request(self, method, params):
        i = self.next
        self.next += 1
        self.p.stdin.write(json.dumps({"jsonrpc": "2.0", "id": i, "method": method, "params": params}) + "\n")
        self.p.stdin.flush()
        while True:
            m = json.loads(self.p.stdout.readline())
            if m.get("id") == i:
                return m

    def notify(self, method):
        self.p.stdin.write(json.dumps({"jsonrpc": "2.0", "method": method}) + "\n")
        self.p.stdin.flush()

    def close(self):
        self.p.stdin.close()
        self.p.wait(timeout=30)


def rss_kib(pid):
    """VmRSS of `pid` and of every process below it, in KiB."""
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        try:
            with open("/proc/%d/status" % p) as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
            # Children of every thread (glovebox starts the jail from one).
            for t in os.listdir("/proc/%d/task" % p):
                with open("/proc/%d/task/%s/children" % (p, t)) as f:
                    todo.extend(int(c) for c in f.read().split())
        except OSError:
            pass
    return total


def session(argv, cwd, tool, calls, env=None):
    t0 = time.perf_counter()
    c = Client(argv, cwd, env)
    c.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                             "clientInfo": {"name": "bench", "version": "0"}})
    c.notify("notifications/initialized")
    tools = c.request("tools/list", {})
    start = time.perf_counter() - t0
    assert any(t["name"] == tool for t in tools["result"]["tools"]), tools
    c.request("tools/call", {"name": tool, "arguments": {"msg": "warm"}})
    lat = []
    for k in range(calls):
        t = time.perf_counter()
        r = c.request("tools/call", {"name": tool, "arguments": {"msg": "m%d" % k}})
        lat.append(time.perf_counter() - t)
        assert "result" in r and not r["result"].get("isError"), r
    rss = rss_kib(c.p.pid)
    c.close()
    return start, sorted(lat), rss


def pct(xs, q):
    return xs[min(len(xs) - 1, int(q * len(xs)))] * 1000


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--glovebox", default="target/release/glovebox")
    ap.add_argument("--calls", type=int, default=300)
    a = ap.parse_args()
    gb = os.path.abspath(a.glovebox)
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "server.py"), "w") as f:
            f.write(SERVER)
        tool_dir = os.path.join(d, ".glee", "tools", "echo")
        os.makedirs(tool_dir)
        with open(os.path.join(tool_dir, "tool.yml"), "w") as f:
            json.dump({"name": "echo", "description": "echo", "kind": "mcp", "version": 1,
                       "exec": {"mcp": {"entrypoint": "python3", "args": ["server.py"]}},
                       "permissions": {"fs": {"read": ["server.py"]}}}, f)
        env = dict(os.environ, GLOVEBOX_STATE_DIR=os.path.join(d, "state"))
        bare_start, bare, bare_rss = session(["python3", "server.py"], d, "echo", a.calls)
        gb_start, wrapped, gb_rss = session([gb, "--root", d, "mcp"], d, "echo__echo", a.calls, env)
    print("| | start (spawn → tools/list) | call p50 | p90 | p99 | RSS (its process tree) |")
    print("|---|---|---|---|---|---|")
    print("| bare server | %.1f ms | %.3f ms | %.3f ms | %.3f ms | %.1f MiB |" % (
        bare_start * 1000, pct(bare, .5), pct(bare, .9), pct(bare, .99), bare_rss / 1024))
    print("| through `glovebox mcp` (jailed) | %.1f ms | %.3f ms | %.3f ms | %.3f ms | %.1f MiB |" % (
        gb_start * 1000, pct(wrapped, .5), pct(wrapped, .9), pct(wrapped, .99), gb_rss / 1024))
    print("\nadded per call (p50): %.3f ms; of which the audit log's durable intent and result lines are part"
          % (pct(wrapped, .5) - pct(bare, .5)))
    print("calls: %d, mean bare %.3f ms, wrapped %.3f ms" % (
        a.calls, statistics.mean(bare) * 1000, statistics.mean(wrapped) * 1000))


if __name__ == "__main__":
    main()
