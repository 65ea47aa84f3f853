#!/usr/bin/env bash
# Creates the venv of a real MCP server from PyPI that tests/mcp_wrap.rs
# runs jailed: `mcp-server-time` (the reference servers' time server), in
# target/mcp-time-venv. Done once: a rerun is a no-op when it is there.
# Exits non-zero, with the reason on stderr, when it cannot be installed
# (no network, no python3-venv).
set -euo pipefail
cd "$(dirname "$0")/../.."
venv="${GLOVEBOX_MCP_TIME_VENV:-target/mcp-time-venv}"
pin=2026.10.19
check="import importlib.metadata as m; assert m.version('mcp-server-time') == '$pin'"
if [ -x "$venv/bin/mcp-server-time" ] && "$venv/bin/python" -c "$check" 2>/dev/null; then
    exit 0
fi
mkdir -p "$(dirname "$venv")"
# The system python: the jail runs the venv through its interpreter, which
# must lie in the baseline (a pyenv or conda python does not).
/usr/bin/python3 -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check "mcp-server-time==$pin"
"$venv/bin/python" -c "$check"
echo "mcp-server-time $pin installed in $venv"
