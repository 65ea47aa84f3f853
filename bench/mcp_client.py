"""MCP-over-HTTP load client for bench/mcp.sh: CLIENTS concurrent sessions
(the official Python `mcp` client, one session each) call one tool in a
loop for SECONDS; prints one JSON line: calls, seconds, calls_per_s,
median_ms, p90_ms.

Usage: python mcp_client.py URL TOOL CLIENTS SECONDS
"""

import asyncio
import json
import statistics
import sys
import time

from mcp import ClientSession
from mcp.client.streamable_http import streamablehttp_client


async def worker(url, tool, stop_at, latencies, ready, go):
    try:
        await session(url, tool, stop_at, latencies, ready, go)
    except BaseException:
        ready.release()  # never leave main() waiting for a dead worker
        raise


async def session(url, tool, stop_at, latencies, ready, go):
    async with streamablehttp_client(url) as (r, w, _):
        async with ClientSession(r, w) as s:
            await s.initialize()
            # One warm-up call per session, not counted.
            res = await s.call_tool(tool, {})
            assert not res.isError, res
            ready.release()
            await go.wait()
            while time.monotonic() < stop_at[0]:
                t0 = time.perf_counter()
                res = await s.call_tool(tool, {})
                latencies.append(time.perf_counter() - t0)
                assert not res.isError, res


async def main():
    url, tool, clients, seconds = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    latencies = []
    ready = asyncio.Semaphore(0)
    go = asyncio.Event()
    stop_at = [float("inf")]
    tasks = [asyncio.create_task(worker(url, tool, stop_at, latencies, ready, go)) for _ in range(clients)]
    for _ in range(clients):
        await ready.acquire()
    start = time.monotonic()
    stop_at[0] = start + seconds
    go.set()
    await asyncio.gather(*tasks)
    took = time.monotonic() - start
    lat = sorted(latencies)
    print(json.dumps({
        "clients": clients,
        "calls": len(lat),
        "seconds": round(took, 3),
        "calls_per_s": round(len(lat) / took, 1),
        "median_ms": round(statistics.median(lat) * 1e3, 2),
        "p90_ms": round(lat[int(len(lat) * 0.9)] * 1e3, 2),
    }))


asyncio.run(main())
