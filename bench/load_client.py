#!/usr/bin/env python3
"""Server-mode load client for bench/serve.sh: CLIENTS threads, each with
its own keep-alive connection, call one tool in a loop for SECONDS and
print one JSON line (transport, clients, calls, errors, calls_per_s,
p50_ms, p99_ms, rss_max_kb).

Usage: load_client.py BASE_URL TOOL CLIENTS SECONDS [--pid PID]

Transport: the HTTP API (`POST /api/v1/tools/{name}/invoke`, body = the
params, answer = the Outcome) when `GET /api/v1/tools` answers 200, else
MCP Streamable HTTP at `/mcp` (initialize, notifications/initialized, then
`tools/call`; JSON or SSE answers). --pid samples that process's VmRSS
from /proc every 20 ms while the clients run. Stdlib only, so the client's
own cost stays small and the same for both transports.

The client acknowledges every response segment at once (TCP_QUICKACK).
Before `glovebox serve` set TCP_NODELAY, its second write of a streamed
(SSE) answer waited for the client's delayed ACK, adding ~40 ms to every
MCP call; BENCH_NO_QUICKACK=1 shows what a client with ordinary delayed
ACKs sees (the same, now).
"""
import argparse
import http.client
import json
import os
import socket
import statistics
import sys
import threading
import time
import urllib.parse

ACCEPT = "application/json, text/event-stream"
QUICKACK = not os.environ.get("BENCH_NO_QUICKACK")


def response(conn):
    """The response of the request just sent on CONN, ACKed at once."""
    r = conn.getresponse()
    if QUICKACK and conn.sock is not None:
        conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_QUICKACK, 1)
    return r


def api_available(host, port):
    c = http.client.HTTPConnection(host, port, timeout=10)
    try:
        c.request("GET", "/api/v1/tools")
        r = c.getresponse()
        r.read()
        return r.status == 200
    except OSError:
        return False
    finally:
        c.close()


class Api:
    name = "HTTP API (POST /api/v1/tools/{name}/invoke)"

    def __init__(self, host, port, tool):
        self.c = http.client.HTTPConnection(host, port, timeout=60)
        self.path = f"/api/v1/tools/{urllib.parse.quote(tool, safe='')}/invoke"

    def call(self):
        self.c.request("POST", self.path, body=b"{}", headers={"Content-Type": "application/json"})
        r = response(self.c)
        body = r.read()
        if r.status != 200 or json.loads(body).get("ok") is not True:
            raise RuntimeError(f"invoke: HTTP {r.status}: {body[:300]!r}")


class Mcp:
    name = "MCP Streamable HTTP (POST /mcp tools/call)"

    def __init__(self, host, port, tool):
        self.c = http.client.HTTPConnection(host, port, timeout=60)
        self.tool = tool
        self.session = None
        self.id = 0
        self.rpc("initialize", {"protocolVersion": "2025-03-26", "capabilities": {},
                                "clientInfo": {"name": "glovebox-bench", "version": "1"}})
        self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def post(self, msg):
        headers = {"Content-Type": "application/json", "Accept": ACCEPT}
        if self.session:
            headers["Mcp-Session-Id"] = self.session
        self.c.request("POST", "/mcp", body=json.dumps(msg).encode(), headers=headers)
        r = response(self.c)
        self.session = r.getheader("Mcp-Session-Id") or self.session
        if "id" not in msg:
            r.read()
            if r.status not in (200, 202):
                raise RuntimeError(f"{msg['method']}: HTTP {r.status}")
            return None
        if r.status != 200:
            raise RuntimeError(f"{msg['method']}: HTTP {r.status}: {r.read()[:300]!r}")
        if (r.getheader("Content-Type") or "").startswith("text/event-stream"):
            reply = None
            for line in r.read().decode().splitlines():  # the stream ends after the reply
                if line.startswith("data:") and line[5:].strip():
                    m = json.loads(line[5:])
                    if m.get("id") == msg["id"]:
                        reply = m
            return reply
        return json.loads(r.read())

    def rpc(self, method, params):
        self.id += 1
        reply = self.post({"jsonrpc": "2.0", "id": self.id, "method": method, "params": params})
        if not reply or "error" in reply:
            raise RuntimeError(f"{method}: {reply}")
        return reply["result"]

    def call(self):
        res = self.rpc("tools/call", {"name": self.tool, "arguments": {}})
        if res.get("isError"):
            raise RuntimeError(f"tools/call: {res}")


def rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("tool")
    ap.add_argument("clients", type=int)
    ap.add_argument("seconds", type=float)
    ap.add_argument("--pid", type=int)
    a = ap.parse_args()
    u = urllib.parse.urlsplit(a.url)
    kind = Api if api_available(u.hostname, u.port) else Mcp

    latencies, errors = [], []
    start_gate = threading.Barrier(a.clients + 1)
    stop = threading.Event()

    def worker():
        try:
            client = kind(u.hostname, u.port, a.tool)
            client.call()  # warm-up, not counted
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(repr(e))
            start_gate.abort()
            return
        mine = []
        try:
            start_gate.wait()
        except threading.BrokenBarrierError:
            return
        while not stop.is_set():
            t0 = time.perf_counter()
            try:
                client.call()
            except Exception as e:  # noqa: BLE001
                errors.append(repr(e))
                continue
            mine.append(time.perf_counter() - t0)
        latencies.extend(mine)

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(a.clients)]
    for t in threads:
        t.start()
    try:
        start_gate.wait()
    except threading.BrokenBarrierError:
        sys.exit(f"load_client: a client failed to start: {errors[:3]}")
    began = time.monotonic()
    rss_max = 0
    while time.monotonic() - began < a.seconds:
        if a.pid:
            rss_max = max(rss_max, rss_kb(a.pid))
        time.sleep(0.02)
    stop.set()
    for t in threads:
        t.join()
    took = time.monotonic() - began
    lat = sorted(latencies)
    if not lat:
        sys.exit(f"load_client: no call succeeded: {errors[:3]}")
    print(json.dumps({
        "transport": kind.name + ("" if QUICKACK else ", delayed ACKs"),
        "clients": a.clients,
        "calls": len(lat),
        "errors": len(errors),
        "first_errors": errors[:3],
        "seconds": round(took, 3),
        "calls_per_s": round(len(lat) / took, 1),
        "p50_ms": round(statistics.median(lat) * 1e3, 2),
        "p99_ms": round(lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1e3, 2),
        "rss_max_kb": rss_max,
    }))


if __name__ == "__main__":
    main()
