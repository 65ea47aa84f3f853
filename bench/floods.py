#!/usr/bin/env python3
"""Session and connection floods against `glovebox serve` (issue 23): the
supervisor's RSS (from /proc, children excluded) at idle, after N MCP
sessions are opened (initialize + initialized, never closed), after M idle
TCP connections are held open, and once the idle ones were closed by the
header timeout. Loopback only; stdlib only.

    python3 bench/floods.py [GLOVEBOX_BINARY] [SESSIONS] [CONNECTIONS]

Prints a Markdown table (for bench/RESULTS.md, section "Floods")."""

import json
import os
import socket
import subprocess
import sys
import tempfile
import time

BIN = sys.argv[1] if len(sys.argv) > 1 else "target/release/glovebox"
SESSIONS = int(sys.argv[2]) if len(sys.argv) > 2 else 5000
CONNS = int(sys.argv[3]) if len(sys.argv) > 3 else 2000


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def fds(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def post(addr, body, session=None):
    host, port = addr
    data = json.dumps(body).encode()
    head = (
        f"POST /mcp HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: close\r\n"
        f"Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
        f"Content-Length: {len(data)}\r\n"
    )
    if session:
        head += f"Mcp-Session-Id: {session}\r\n"
    s = socket.create_connection(addr, timeout=30)
    s.sendall(head.encode() + b"\r\n" + data)
    raw = b""
    while b"\r\n\r\n" not in raw:
        chunk = s.recv(65536)
        if not chunk:
            break
        raw += chunk
    s.close()
    for line in raw.split(b"\r\n\r\n")[0].split(b"\r\n"):
        if line.lower().startswith(b"mcp-session-id:"):
            return line.split(b":", 1)[1].strip().decode()
    return None


def main():
    tmp = tempfile.mkdtemp()
    os.makedirs(f"{tmp}/project/.glee/tools")
    env = dict(os.environ, GLOVEBOX_STATE_DIR=f"{tmp}/state")
    server = subprocess.Popen(
        [BIN, "--root", f"{tmp}/project", "serve", "--listen", "127.0.0.1:0",
         "--header-timeout", "5", "--max-connections", str(CONNS + 64)],
        stderr=subprocess.PIPE, text=True, env=env)
    addr = None
    for line in server.stderr:
        if "serving the HTTP API at http://" in line:
            hp = line.split("http://")[1].split("/")[0]
            addr = (hp.split(":")[0], int(hp.split(":")[1]))
            break
    pid = server.pid
    rows = []
    time.sleep(0.5)
    rows.append(("idle", rss_mb(pid), fds(pid)))
    t = time.time()
    for i in range(SESSIONS):
        sid = post(addr, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "flood", "version": "0"}}})
        post(addr, {"jsonrpc": "2.0", "method": "notifications/initialized"}, sid)
    took = time.time() - t
    time.sleep(1)
    rows.append((f"after {SESSIONS} MCP sessions ({took:.0f} s; cap 256)", rss_mb(pid), fds(pid)))
    idle = []
    for _ in range(CONNS):
        idle.append(socket.create_connection(addr, timeout=30))
    time.sleep(1)
    rows.append((f"{CONNS} idle connections open", rss_mb(pid), fds(pid)))
    time.sleep(7)
    rows.append(("after the header timeout (5 s) closed them", rss_mb(pid), fds(pid)))
    for s in idle:
        s.close()
    server.terminate()
    server.wait(timeout=30)
    print("| moment | RSS MB | fds |")
    print("|---|--:|--:|")
    for name, rss, n in rows:
        print(f"| {name} | {rss:.1f} | {n} |")


if __name__ == "__main__":
    main()
