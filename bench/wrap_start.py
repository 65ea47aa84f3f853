#!/usr/bin/env python3
"""How long a wrapped MCP server takes to start, against the bare server
(issue 44 item 3, hand-run).

For each real server the tests use, a client (this script: plain JSON-RPC
over stdio, stdlib only) starts it and measures two moments from the
spawn: the `initialize` answer (what a client's timeout waits for: Claude
Code 30 s, Gemini CLI's `mcp list` probe 5 s) and the first `tools/list`
that holds tools (after `notifications/tools/list_changed` when the
handshake was answered before the server was ready). Each server is
measured on its first start (an empty cache: the package is fetched and
installed) and on later starts (the install reused), bare and through
`glovebox wrap`, side by side, as ratios:

- `@modelcontextprotocol/server-filesystem` by `npx -y` (bare: a fresh
  npm cache; wrapped: a fresh glovebox state, `--allow-host
  registry.npmjs.org`; later: the same caches, and wrapped once more
  without the registry: the install glovebox made, no network at all);
- `mcp-server-time` by `uvx` (bare: uv in a venv of its own, a fresh
  `UV_CACHE_DIR`; wrapped: glovebox installs it from wheels in the jail,
  `--allow-host pypi.org --allow-host files.pythonhosted.org`) and from
  its venv (tests/mcp/setup-time.sh: later starts only).

    python3 bench/wrap_start.py [--glovebox target/debug/glovebox] [--runs 5] [--write]

`--write` rewrites the `wrap-start` section of bench/RESULTS.md.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

FS = "@modelcontextprotocol/server-filesystem@2026.8.31"
TIME = "mcp-server-time@2026.10.19"
LIMIT = 600.0


def start(argv, cwd, env):
    """Spawns `argv`; returns (initialize answered, tools listed) in
    seconds from the spawn, or raises with what went wrong."""
    began = time.monotonic()
    p = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    nid = [0]

    def send(msg):
        p.stdin.write(json.dumps(msg) + "\n")
        p.stdin.flush()

    def request(method, params):
        nid[0] += 1
        send({"jsonrpc": "2.0", "id": nid[0], "method": method, "params": params})
        return nid[0]

    def read_until(pred):
        while time.monotonic() - began < LIMIT:
            line = p.stdout.readline()
            if not line:
                raise RuntimeError("the server ended: " + p.stderr.read()[-2000:])
            m = json.loads(line)
            if pred(m):
                return m
        raise RuntimeError("no answer within %d s" % LIMIT)

    try:
        i = request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                   "clientInfo": {"name": "wrap-start-bench", "version": "1"}})
        m = read_until(lambda m: m.get("id") == i)
        if "error" in m:
            raise RuntimeError(m["error"]["message"])
        init = time.monotonic() - began
        send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        while True:
            i = request("tools/list", {})
            m = read_until(lambda m: m.get("id") == i)
            if m.get("result", {}).get("tools"):
                return init, time.monotonic() - began
            read_until(lambda m: m.get("method") == "notifications/tools/list_changed")
    finally:
        p.stdin.close()
        try:
            p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def uv(work):
    """uvx from PyPI in a venv of its own (the bare side of `uvx`)."""
    venv = os.path.join(work, "uv-venv")
    subprocess.run(["/usr/bin/python3", "-m", "venv", venv], check=True)
    subprocess.run([os.path.join(venv, "bin/pip"), "install", "--quiet",
                    "--disable-pip-version-check", "uv"], check=True)
    return os.path.join(venv, "bin/uvx")


def median(xs):
    return statistics.median(xs) if xs else float("nan")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--glovebox", default="target/debug/glovebox")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--write", action="store_true")
    a = ap.parse_args()
    gb = os.path.abspath(a.glovebox)
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    subprocess.run(["bash", os.path.join(repo, "tests/mcp/setup-time.sh")], check=True,
                   stdout=subprocess.DEVNULL)
    time_venv = os.path.join(repo, "target/mcp-time-venv")
    load_before = open("/proc/loadavg").read().split()[:3]
    work = tempfile.mkdtemp(prefix="wrap-start-")
    data = os.path.join(work, "data")
    os.makedirs(data)
    uvx = uv(work)
    base = dict(os.environ)
    base.pop("GLOVEBOX_STATE_DIR", None)

    def env(**kv):
        e = dict(base)
        e.update(kv)
        return e

    rows = []  # (server, start, bare (init, tools), wrapped (init, tools))

    def measure(label, server, bare, wrapped, runs):
        b, w = [], []
        for r in range(runs):
            # Alternated: a load change on the shared machine hits both.
            for side, out in ((bare, b), (wrapped, w)):
                argv, e = side(r)
                out.append(start(argv, work, e))
                print(label, server, "bare" if out is b else "wrapped", "%.2f %.2f" % out[-1],
                      file=sys.stderr, flush=True)
        rows.append((server, label, b, w))

    npx = ["npx", "-y", FS, data]
    # First starts: every run with empty caches.
    measure("first", "server-filesystem (npx -y)",
            lambda r: (npx, env(npm_config_cache=os.path.join(work, "npm-first-%d" % r))),
            lambda r: ([gb, "wrap", "--allow-host", "registry.npmjs.org", "--read", data, "--"] + npx,
                       env(GLOVEBOX_STATE_DIR=os.path.join(work, "gb-first-%d" % r))),
            max(1, a.runs // 3))
    measure("later", "server-filesystem (npx -y)",
            lambda r: (npx, env(npm_config_cache=os.path.join(work, "npm-first-0"))),
            lambda r: ([gb, "wrap", "--allow-host", "registry.npmjs.org", "--read", data, "--"] + npx,
                       env(GLOVEBOX_STATE_DIR=os.path.join(work, "gb-first-0"))),
            a.runs)
    measure("later, wrapped without network", "server-filesystem (npx -y)",
            lambda r: (npx, env(npm_config_cache=os.path.join(work, "npm-first-0"))),
            lambda r: ([gb, "wrap", "--read", data, "--"] + npx,
                       env(GLOVEBOX_STATE_DIR=os.path.join(work, "gb-first-0"))),
            a.runs)
    pypi = ["--allow-host", "pypi.org", "--allow-host", "files.pythonhosted.org"]
    measure("first", "mcp-server-time (uvx)",
            lambda r: ([uvx, TIME], env(UV_CACHE_DIR=os.path.join(work, "uv-first-%d" % r))),
            lambda r: ([gb, "wrap"] + pypi + ["--", "uvx", TIME],
                       env(GLOVEBOX_STATE_DIR=os.path.join(work, "gb-uv-first-%d" % r))),
            1)
    measure("later", "mcp-server-time (uvx)",
            lambda r: ([uvx, TIME], env(UV_CACHE_DIR=os.path.join(work, "uv-first-0"))),
            lambda r: ([gb, "wrap", "--", "uvx", TIME],
                       env(GLOVEBOX_STATE_DIR=os.path.join(work, "gb-uv-first-0"))),
            a.runs)
    script = os.path.join(time_venv, "bin/mcp-server-time")
    measure("later", "mcp-server-time (its venv)",
            lambda r: ([script], env()),
            lambda r: ([gb, "wrap", "--", script],
                       env(GLOVEBOX_STATE_DIR=os.path.join(work, "gb-venv"))),
            a.runs)
    load_after = open("/proc/loadavg").read().split()[:3]
    shutil.rmtree(work, ignore_errors=True)

    lines = [
        "Medians in seconds from the spawn; `init`: the `initialize` answer, "
        "`tools`: the first `tools/list` holding tools. Wrapped answers `initialize` "
        "when the server is ready or after 2.5 s, whichever comes first (a first start "
        "that installs offers its tools later, with `list_changed`).",
        "",
        "| server | start | runs | bare init | bare tools | wrapped init | wrapped tools "
        "| init wrapped/bare | tools wrapped/bare |",
        "|---|---|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for server, label, b, w in rows:
        bi, bt = median([x[0] for x in b]), median([x[1] for x in b])
        wi, wt = median([x[0] for x in w]), median([x[1] for x in w])
        lines.append("| %s | %s | %d | %.2f | %.2f | %.2f | %.2f | %.2f× | %.2f× |"
                     % (server, label, len(b), bi, bt, wi, wt, wi / bi, wt / bt))
    body = "\n".join(lines)
    print(body)
    if a.write:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import section
        head = ("## Starting a wrapped MCP server (issue 44, `bench/wrap_start.py`, hand-run)\n\n"
                + section.stamp(" ".join(load_before)) + "; load after: " + " ".join(load_after)
                + "; binary `" + os.path.relpath(gb, repo) + "`\n\n")
        section.write(os.environ.get("BENCH_RESULTS", os.path.join(repo, "bench/RESULTS.md")),
                      "wrap-start", head + body + "\n")


if __name__ == "__main__":
    main()
