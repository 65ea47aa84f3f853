"""Drives `glovebox mcp` (stdio) or `glovebox serve` (Streamable HTTP) with
the official MCP Python SDK 2.x (`mcp.Client`), in its default mode
(`auto`: `server/discover`, MCP 2026-07-28) or in `legacy` mode (the
`initialize` handshake), one scenario per run. Prints `SCENARIO-OK
<name>` last; any failure raises. Run by tests/mcp.rs:

    python client2.py --mode auto|legacy --transport stdio --bin B --root DIR [--server-arg A]… SCENARIO [ARG]
    python client2.py --mode auto|legacy --transport http --url URL --root DIR SCENARIO [ARG]
"""

import argparse
import asyncio
import json
import os
import time
import warnings

import mcp_types as types
from mcp import Client, StdioServerParameters

warnings.simplefilter("ignore")

CLIENT_NAME = "glovebox-test-client"


def client(args, **kw):
    if args.transport == "stdio":
        server = StdioServerParameters(
            command=args.bin,
            args=["--root", args.root, "mcp", *args.server_arg],
            env=dict(os.environ),
        )
    else:
        server = args.url
    return Client(
        server,
        mode=args.mode,
        client_info=types.Implementation(name=CLIENT_NAME, version="1"),
        **kw,
    )


def expected_version(args):
    return "2026-07-28" if args.mode == "auto" else "2025-11-25"


DEFINITION = {
    "description": "made by an agent",
    "kind": "command",
    "version": 1,
    "inputs": {"schema": {"type": "object", "properties": {}}},
    "outputs": {"format": "text"},
    "exec": {"command": {"entrypoint": "true", "args": []}},
    "permissions": {"network": False, "fs": {"read": [], "write": []}, "secrets": {}},
}


async def names(c):
    out, cursor = [], None
    while True:
        page = await c.list_tools(cursor=cursor) if cursor else await c.list_tools()
        out.extend(t.name for t in page.tools)
        cursor = page.next_cursor
        if not cursor:
            return out


async def scenario_changes(args):
    """list_changed after glee_tool_create and after an edit on disk, ping,
    a call (its audit line is checked by the test), the session's end."""
    changed = asyncio.Event()

    async def on_message(m):
        if isinstance(m, types.ToolListChangedNotification):
            changed.set()

    async with client(args, message_handler=on_message) as c:
        assert c.protocol_version == expected_version(args), c.protocol_version
        await c.session.send_ping()
        r = await c.call_tool("echo_json", {"msg": "audited"})
        assert not r.is_error and r.structured_content["msg"] == "audited", r
        # JSON output without exec.command.stdout.format: structured.
        r = await c.call_tool("plain_json", {})
        assert not r.is_error and r.structured_content == {"n": 3}, r
        # Output breaking the declared outputSchema: an error naming it.
        r = await c.call_tool("bad_json", {})
        assert r.is_error, r
        e = json.loads(r.content[0].text)
        assert e["kind"] == "output_invalid", e
        assert "/n" in e["message"] and "outputSchema" in e["message"], e
        r = await c.call_tool("glee_tools_list", {})
        assert r.structured_content == json.loads(r.content[0].text), r

        async def wait_change(action):
            if args.mode == "auto":
                async with c.listen(tools_list_changed=True) as sub:
                    assert sub.honored.tools_list_changed, sub.honored
                    await action()

                    async def first():
                        async for event in sub:
                            return event

                    event = await asyncio.wait_for(first(), 10)
                    assert type(event).__name__ == "ToolsListChanged", event
            else:
                changed.clear()
                await action()
                await asyncio.wait_for(changed.wait(), 10)

        async def create():
            r = await c.call_tool(
                "glee_tool_create", {"name": "agent_made", "definition": DEFINITION}
            )
            assert not r.is_error, r

        await wait_change(create)
        assert "agent_made" in await names(c)

        async def edit():
            d = os.path.join(args.root, ".glee", "tools", "hand_made")
            os.makedirs(d)
            with open(os.path.join(d, "tool.yml"), "w") as f:
                json.dump(dict(DEFINITION, name="hand_made"), f)

        await wait_change(edit)
        assert "hand_made" in await names(c)


async def scenario_load(args):
    """ARG concurrent calls of the 1 s `nap` tool: prints how many ran."""
    n = int(args.arg)
    async with client(args) as c:
        t0 = time.monotonic()
        rs = await asyncio.gather(
            *[c.call_tool("nap", {}) for _ in range(n)], return_exceptions=True
        )
        ok = sum(1 for r in rs if not isinstance(r, BaseException) and not r.is_error)
        print(f"LOAD ok={ok} of={n} took={time.monotonic() - t0:.1f}", flush=True)
        for r in rs:
            if isinstance(r, BaseException) or r.is_error:
                print("LOAD-FAILURE", repr(r)[:300], flush=True)


async def scenario_listen_until_stop(args):
    """Opens a listen stream, says LISTENING, and waits for the server to
    end it: a graceful end (the final result) passes, a lost stream fails."""
    async with client(args) as c:
        async with c.listen(tools_list_changed=True) as sub:
            print("LISTENING", flush=True)
            async for _ in sub:
                pass
    print("STREAM-ENDED", flush=True)


async def scenario_balanced(args):
    """ARG is TOOL:CLIENTS:CALLS: CLIENTS separate clients (each its own
    connection pool) call TOOL with {"n": i} CALLS times each, all at
    once; prints how many succeeded and every failure."""
    tool, clients, calls = args.arg.split(":")
    clients, calls = int(clients), int(calls)

    async def one(k):
        ok, failures = 0, []
        async with client(args) as c:
            for i in range(calls):
                try:
                    r = await c.call_tool(tool, {"n": k * 1000 + i})
                    if r.is_error:
                        failures.append(repr(r)[:300])
                    else:
                        ok += 1
                except Exception as e:  # noqa: BLE001 - every failure is counted
                    failures.append(repr(e)[:300])
        return ok, failures

    t0 = time.monotonic()
    rs = await asyncio.gather(*[one(k) for k in range(clients)], return_exceptions=True)
    ok, failures = 0, []
    for r in rs:
        if isinstance(r, BaseException):
            failures.append(repr(r)[:300])
        else:
            ok += r[0]
            failures.extend(r[1])
    print(f"BALANCED ok={ok} of={clients * calls} took={time.monotonic() - t0:.1f}", flush=True)
    for f in failures:
        print("BALANCED-FAILURE", f, flush=True)


async def scenario_listen_for(args):
    """Opens a listen stream, says LISTENING, waits for a tools
    list_changed notification, then lists the tools: ARG must be among
    them (prints CHANGED)."""
    async with client(args) as c:
        async with c.listen(tools_list_changed=True) as sub:
            assert sub.honored.tools_list_changed, sub.honored
            print("LISTENING", flush=True)
            async for event in sub:
                assert type(event).__name__ == "ToolsListChanged", event
                break
        have = await names(c)
        assert args.arg in have, have
        print("CHANGED", args.arg, flush=True)


SCENARIOS = {
    "balanced": scenario_balanced,
    "changes": scenario_changes,
    "listen_for": scenario_listen_for,
    "load": scenario_load,
    "listen_until_stop": scenario_listen_until_stop,
}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--mode", choices=["auto", "legacy"], required=True)
    p.add_argument("--transport", choices=["stdio", "http"], required=True)
    p.add_argument("--bin")
    p.add_argument("--root")
    p.add_argument("--url")
    p.add_argument("--server-arg", action="append", default=[], help="passed to `glovebox mcp` (stdio)")
    p.add_argument("scenario", choices=sorted(SCENARIOS))
    p.add_argument("arg", nargs="?")
    args = p.parse_args()
    asyncio.run(SCENARIOS[args.scenario](args))
    print(f"SCENARIO-OK {args.scenario}", flush=True)


if __name__ == "__main__":
    main()
