#!/usr/bin/env bash
# Creates the Python venv the MCP tests drive glovebox with: the official
# `mcp` client package from PyPI (1.x, the line today's MCP clients use,
# which negotiates through the initialize handshake), in target/mcp-venv.
# The export tests (tests/export.rs) check `glovebox export` against the
# type definitions of the official `openai` and `anthropic` SDKs, pinned
# here, in the same venv.
# Done once: a rerun is a no-op when the package imports. Exits non-zero,
# with the reason on stderr, when the venv or the package cannot be
# installed (no network, no python3-venv).
set -euo pipefail
cd "$(dirname "$0")/../.."
venv="${GLOVEBOX_MCP_VENV:-target/mcp-venv}"
openai_pin=3.54.0
anthropic_pin=2.12.0
check="import importlib.metadata as m, mcp.client.streamable_http, openai, anthropic; assert m.version('mcp').startswith('1.'); assert m.version('openai') == '$openai_pin'; assert m.version('anthropic') == '$anthropic_pin'"
if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "$check" 2>/dev/null; then
    exit 0
fi
mkdir -p "$(dirname "$venv")"
python3 -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check 'mcp>=1.22,<2' \
    "openai==$openai_pin" "anthropic==$anthropic_pin"
"$venv/bin/python" -c "$check"
echo "mcp client $("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("mcp"))') installed in $venv"
