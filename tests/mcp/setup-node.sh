#!/usr/bin/env bash
# Installs a real MCP server from npm that tests/mcp_wrap_registry.rs runs
# jailed: the reference filesystem server, pinned, in target/mcp-node
# (run as `node …/dist/index.js`: a server `npx -y` fetches at start lands
# in the jail's HOME, which no jail may execute). Done once: a rerun is a
# no-op when it is there. Exits non-zero, with the reason on stderr, when
# it cannot be installed (no network, no npm).
set -euo pipefail
cd "$(dirname "$0")/../.."
dir="${GLOVEBOX_MCP_NODE:-target/mcp-node}"
pkg=@modelcontextprotocol/server-filesystem
pin=2026.8.31
main="$dir/node_modules/$pkg/dist/index.js"
if [ -f "$main" ] && grep -q "\"version\": \"$pin\"" "$dir/node_modules/$pkg/package.json"; then
    exit 0
fi
command -v npm >/dev/null || { echo "npm missing" >&2; exit 1; }
mkdir -p "$dir"
npm install --silent --no-audit --no-fund --prefix "$dir" "$pkg@$pin"
[ -f "$main" ]
echo "$pkg $pin installed in $dir"
