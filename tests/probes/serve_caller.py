"""Calls a running `glovebox serve` every way a local client can: the REST
invoke, the tool list, the usage log, tool creation over REST, and MCP
(initialize, tools/call, glee_tool_create), then races requests whose
connection closes at once. Run by tests/serve_access.rs as another
account (`nobody`, a setuid child) and as the server's own; the system
python and its standard library only (another account cannot reach a
user's venv).

    python3 serve_caller.py HOST PORT TOOL CANARY RACES

Prints one JSON object: `"ran": true` (the probe ran), whether CANARY
could be read directly, and each attempt's status and body.
"""

import http.client
import json
import socket
import struct
import sys

host, port, tool, canary, races = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], int(sys.argv[5])
out = {"ran": True}

try:
    with open(canary) as f:
        out["direct_read"] = f.read()
except OSError as e:
    out["direct_read"] = None
    out["direct_read_error"] = str(e)


def req(method, path, body=None, headers=None):
    try:
        c = http.client.HTTPConnection(host, port, timeout=60)
        h = dict(headers or {})
        data = None
        if body is not None:
            data = json.dumps(body)
            h.setdefault("Content-Type", "application/json")
        c.request(method, path, body=data, headers=h)
        r = c.getresponse()
        text = r.read().decode(errors="replace")
        return {"status": r.status, "body": text, "session": r.getheader("mcp-session-id")}
    except Exception as e:  # a refused or reset connection is an answer too
        return {"status": None, "body": "", "error": repr(e)}


DEFINITION = {
    "description": "planted by another account",
    "kind": "command",
    "version": 1,
    "inputs": {"schema": {"type": "object", "properties": {}}},
    "outputs": {"format": "text"},
    "exec": {"command": {"entrypoint": "true", "args": []}},
    "permissions": {"network": False, "fs": {"read": [], "write": []}, "secrets": {}},
}

out["rest_invoke"] = req("POST", f"/api/v1/tools/{tool}/invoke", {})
out["rest_list"] = req("GET", "/api/v1/tools")
out["usage"] = req("GET", "/api/v1/tools/usage")
out["create"] = req("POST", "/api/v1/tools", {"name": "planted_rest", "definition": DEFINITION})

accept = {"Accept": "application/json, text/event-stream"}
init = req(
    "POST",
    "/mcp",
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "other-account", "version": "0"},
        },
    },
    accept,
)
out["mcp_initialize"] = init
session = dict(accept)
if init.get("session"):
    session["Mcp-Session-Id"] = init["session"]
    session["Mcp-Protocol-Version"] = "2025-11-25"
req("POST", "/mcp", {"jsonrpc": "2.0", "method": "notifications/initialized"}, session)
out["mcp_call"] = req(
    "POST",
    "/mcp",
    {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": tool, "arguments": {}}},
    session,
)
out["mcp_create"] = req(
    "POST",
    "/mcp",
    {
        "jsonrpc": "2.0",
        "id": 3,
        "method": "tools/call",
        "params": {"name": "glee_tool_create", "arguments": {"name": "planted_mcp", "definition": DEFINITION}},
    },
    session,
)

# The race: the request sent and the connection closed at once (half of
# them reset), before the server can look its owner up.
raw = (
    f"POST /api/v1/tools/{tool}/invoke HTTP/1.1\r\nHost: {host}:{port}\r\n"
    "Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
).encode()
sent = 0
for i in range(races):
    try:
        s = socket.create_connection((host, port), timeout=10)
        if i % 2:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.sendall(raw)
        s.close()
        sent += 1
    except OSError:
        pass
out["raced"] = sent
print(json.dumps(out))
