"""Drives `glovebox mcp` (stdio) or `glovebox serve` (Streamable HTTP) with
the official MCP Python client (PyPI `mcp`), one scenario per run.

Each scenario asserts what a real client sees and prints `SCENARIO-OK
<name>` last; any failure raises (non-zero exit, traceback on stderr).
Run by tests/mcp.rs:

    python client.py --transport stdio --bin glovebox --root DIR SCENARIO [ARG]
    python client.py --transport http --url http://127.0.0.1:PORT/mcp SCENARIO [ARG]
"""

import argparse
import asyncio
import json
import os
import sys
import time
from contextlib import asynccontextmanager

from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamablehttp_client
from mcp.shared.exceptions import McpError


def log(*a):
    print(*a, file=sys.stderr, flush=True)


@asynccontextmanager
async def connect(args, message_handler=None):
    if args.transport == "stdio":
        params = StdioServerParameters(
            command=args.bin, args=["--root", args.root, "mcp"], env=dict(os.environ)
        )
        async with stdio_client(params) as (r, w):
            async with ClientSession(r, w, message_handler=message_handler) as s:
                init = await s.initialize()
                yield s, init
    else:
        headers = {"Authorization": f"Bearer {args.token}"} if args.token else None
        async with streamablehttp_client(args.url, headers=headers) as (r, w, _):
            async with ClientSession(r, w, message_handler=message_handler) as s:
                init = await s.initialize()
                yield s, init


async def all_tools(s):
    tools, cursor, pages = [], None, 0
    while True:
        page = await s.list_tools(cursor=cursor) if cursor else await s.list_tools()
        pages += 1
        assert len(page.tools) <= 50, len(page.tools)
        tools.extend(page.tools)
        cursor = page.nextCursor
        if not cursor:
            return tools, pages


def error_of(result):
    assert result.isError, result
    return json.loads(result.content[0].text)


async def scenario_list(args):
    async with connect(args) as (s, init):
        assert init.protocolVersion == "2025-11-25", init.protocolVersion
        assert init.serverInfo.name == "glovebox", init.serverInfo
        assert init.capabilities.tools.listChanged is True, init.capabilities
        tools, pages = await all_tools(s)
        names = [t.name for t in tools]
        want = int(args.arg)
        assert len(names) == want, (len(names), want)
        assert len(set(names)) == len(names), "a tool was listed twice"
        assert pages >= 2, pages
        for n in ("glee_tool", "glee_tools_list", "glee_tool_create", "echo_json", "greet"):
            assert n in names, n
        by = {t.name: t for t in tools}
        e = by["echo_json"]
        assert e.inputSchema["properties"]["msg"]["type"] == "string", e.inputSchema
        assert e.outputSchema and e.outputSchema["type"] == "object", e.outputSchema
        assert e.annotations.readOnlyHint is True, e.annotations
        assert e.annotations.openWorldHint is False, e.annotations
        w = by["writer"]
        assert w.annotations.readOnlyHint is False and w.annotations.destructiveHint is True, w
        assert by["shout"].outputSchema is None
        # The glee_* schemas are closed (OpenAI's strict mode needs it).
        for n in ("glee_tool", "glee_tools_list", "glee_tool_create"):
            assert by[n].inputSchema.get("additionalProperties") is False, by[n].inputSchema
        assert by["glee_tools_list"].outputSchema["additionalProperties"] is False
        # A cursor the server did not hand out is a protocol error.
        try:
            await s.list_tools(cursor="not-a-cursor")
            raise AssertionError("bogus cursor accepted")
        except McpError as err:
            assert err.error.code == -32602, err.error


async def scenario_call(args):
    async with connect(args) as (s, _):
        await all_tools(s)
        r = await s.call_tool("echo_json", {"msg": "hi there"})
        assert not r.isError, r
        assert r.structuredContent == {"msg": "hi there", "n": 8}, r
        assert json.loads(r.content[0].text) == r.structuredContent, r

        r = await s.call_tool("greet", {"name": "ada"})
        assert not r.isError, r
        assert r.structuredContent == {"greeting": "hello ada"}, r

        r = await s.call_tool("shout", {"word": "hey"})
        assert not r.isError, r
        assert r.content[0].text == "hey!\n", r
        assert r.structuredContent is None, r

        # Bad input: an isError result the model can read and correct.
        r = await s.call_tool("echo_json", {"msg": 5})
        e = error_of(r)
        assert e["kind"] == "input_invalid", e
        assert e["details"]["violations"], e
        r = await s.call_tool("echo_json", {})
        assert error_of(r)["kind"] == "input_invalid"

        # A failing command: exit_code, with its stderr.
        r = await s.call_tool("failer", {})
        e = error_of(r)
        assert e["kind"] == "exit_code", e

        # Approval is never granted over MCP.
        r = await s.call_tool("gated", {})
        e = error_of(r)
        assert e["kind"] == "approval_required", e
        assert "glovebox approve gated" in e["message"], e

        # Unknown tool: a JSON-RPC error (invalid params).
        try:
            await s.call_tool("no_such_tool", {})
            raise AssertionError("unknown tool accepted")
        except McpError as err:
            assert err.error.code == -32602, err.error

        # The glee_* tools of the seed.
        r = await s.call_tool("glee_tools_list", {})
        # Text and structured content are the same object.
        assert r.structuredContent == json.loads(r.content[0].text), r
        listed = r.structuredContent["tools"]
        assert {"name": "greet", "description": "says hello"} in listed, listed
        r = await s.call_tool("glee_tool", {"name": "echo_json", "params": {"msg": "via glee"}})
        assert not r.isError and r.structuredContent["msg"] == "via glee", r
        r = await s.call_tool("glee_tool", {"name": "no_such_tool", "params": {}})
        assert error_of(r)["kind"] == "tool_not_found"
        r = await s.call_tool("glee_tool", {"params": {}})
        assert error_of(r)["kind"] == "input_invalid"

        # Calls run concurrently: four 1 s calls take well under 4 s.
        t0 = time.monotonic()
        rs = await asyncio.gather(*[s.call_tool("nap", {}) for _ in range(4)])
        took = time.monotonic() - t0
        assert all(not r.isError for r in rs), rs
        assert took < 3.0, took


async def scenario_create(args):
    changed = asyncio.Event()

    async def on_message(m):
        if isinstance(m, types.ServerNotification) and isinstance(
            m.root, types.ToolListChangedNotification
        ):
            changed.set()

    async with connect(args, on_message) as (s, _):
        before, _ = await all_tools(s)
        definition = {
            "description": "made by an agent",
            "kind": "command",
            "version": 1,
            "inputs": {"schema": {"type": "object", "properties": {}}},
            "outputs": {"format": "text"},
            "exec": {"command": {"entrypoint": "true", "args": []}},
            "permissions": {"network": False, "fs": {"read": [], "write": []}, "secrets": {}},
        }
        r = await s.call_tool("glee_tool_create", {"name": "agent_made", "definition": definition})
        assert not r.isError, r
        assert r.structuredContent["approve_with"] == "glovebox approve agent_made", r
        await asyncio.wait_for(changed.wait(), 10)
        after, _ = await all_tools(s)
        assert "agent_made" in [t.name for t in after], after
        assert len(after) == len(before) + 1
        # A created tool needs a person's approval before it runs.
        r = await s.call_tool("agent_made", {})
        assert error_of(r)["kind"] == "approval_required"

        # Beyond the ceiling (network): permission_exceeds_ceiling.
        bad = dict(definition, permissions={"network": True, "fs": {"read": [], "write": []}, "secrets": {}})
        r = await s.call_tool("glee_tool_create", {"name": "agent_net", "definition": bad})
        assert error_of(r)["kind"] == "permission_exceeds_ceiling", r

        # A tool written to disk by someone else: the watcher notices.
        changed.clear()
        d = os.path.join(args.root, ".glee", "tools", "hand_made")
        os.makedirs(d)
        manifest = dict(definition, name="hand_made", description="written by hand")
        with open(os.path.join(d, "tool.yml"), "w") as f:
            json.dump(manifest, f)
        await asyncio.wait_for(changed.wait(), 10)
        after2, _ = await all_tools(s)
        assert "hand_made" in [t.name for t in after2], after2


def pids_with(marker):
    me = os.getpid()
    found = []
    for p in os.listdir("/proc"):
        if not p.isdigit() or int(p) == me:
            continue
        try:
            with open(f"/proc/{p}/cmdline", "rb") as f:
                if marker.encode() in f.read():
                    found.append(int(p))
        except OSError:
            pass
    return found


async def scenario_cancel(args):
    marker = args.arg
    progress = []

    async def on_progress(value, total, message):
        progress.append((value, message))

    async with connect(args) as (s, _):
        request_id = s._request_id  # the id the next request gets
        task = asyncio.create_task(
            s.call_tool("slow", {"marker": marker}, progress_callback=on_progress)
        )
        deadline = time.monotonic() + 15
        while len(pids_with(marker)) < 2:
            assert time.monotonic() < deadline, "the slow tool's processes never appeared"
            await asyncio.sleep(0.1)
        # Running longer than a second: progress arrives.
        while not progress:
            assert time.monotonic() < deadline, "no progress notification"
            await asyncio.sleep(0.1)
        log("progress:", progress)
        await s.send_notification(
            types.ClientNotification(
                types.CancelledNotification(
                    params=types.CancelledNotificationParams(requestId=request_id, reason="test")
                )
            )
        )
        deadline = time.monotonic() + 10
        while pids_with(marker):
            assert time.monotonic() < deadline, f"processes survived the cancel: {pids_with(marker)}"
            await asyncio.sleep(0.1)
        task.cancel()
        # The session still works after a cancelled call.
        r = await s.call_tool("echo_json", {"msg": "still here"})
        assert r.structuredContent["msg"] == "still here", r


async def scenario_dump(args):
    """Prints every tool as the client decoded it, one JSON line."""
    async with connect(args) as (s, _):
        tools, _ = await all_tools(s)
        dumped = [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in tools]
        print("TOOLS " + json.dumps(dumped), flush=True)


SCENARIOS = {
    "dump": scenario_dump,
    "list": scenario_list,
    "call": scenario_call,
    "create": scenario_create,
    "cancel": scenario_cancel,
}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--transport", choices=["stdio", "http"], required=True)
    p.add_argument("--bin")
    p.add_argument("--root")
    p.add_argument("--url")
    p.add_argument("--token")
    p.add_argument("scenario", choices=sorted(SCENARIOS))
    p.add_argument("arg", nargs="?")
    args = p.parse_args()
    asyncio.run(SCENARIOS[args.scenario](args))
    print(f"SCENARIO-OK {args.scenario}", flush=True)


if __name__ == "__main__":
    main()
