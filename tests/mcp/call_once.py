"""Calls one tool of a `glovebox serve` at URL with the official MCP Python
SDK 2.x (`mcp.Client`, default mode: MCP 2026-07-28) and prints the
result's text. Run by tests/serve_access.rs (the server's own account,
no token).

    python call_once.py URL TOOL
"""

import asyncio
import sys
import warnings

import mcp_types as types
from mcp import Client

warnings.simplefilter("ignore")


async def main(url, tool):
    async with Client(url, client_info=types.Implementation(name="call-once", version="1")) as c:
        result = await c.call_tool(tool, {})
        if result.is_error:
            raise SystemExit(f"the call failed: {result}")
        for part in result.content:
            print(getattr(part, "text", part))


asyncio.run(main(sys.argv[1], sys.argv[2]))
