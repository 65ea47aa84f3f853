#!/usr/bin/env bash
# Creates the Python venv of the MCP 2.x client tests: the official `mcp`
# package 2.x from PyPI (its `Client` speaks MCP 2026-07-28 by default,
# through server/discover, and the initialize handshake in `legacy` mode),
# pinned, in target/mcp2-venv. A separate venv from setup.sh's: the 1.x
# line is what most clients still use, and both are tested.
# Done once: a rerun is a no-op when the pinned package imports. Exits
# non-zero, with the reason on stderr, when it cannot be installed.
set -euo pipefail
cd "$(dirname "$0")/../.."
venv="${GLOVEBOX_MCP2_VENV:-target/mcp2-venv}"
pin=2.3.0
check="import importlib.metadata as m, mcp, mcp_types; assert m.version('mcp') == '$pin'"
if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "$check" 2>/dev/null; then
    exit 0
fi
mkdir -p "$(dirname "$venv")"
python3 -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check "mcp==$pin"
"$venv/bin/python" -c "$check"
echo "mcp client $pin installed in $venv"
