#!/usr/bin/env bash
# MCP throughput benchmark: calls/s and median latency of a trivial command
# tool (`true`, jailed) called through `glovebox serve` (MCP Streamable
# HTTP) by the official Python MCP client, with 1 and 8 concurrent client
# sessions. Rewrites the "mcp" section of bench/RESULTS.md.
#
# Run from anywhere:   bash bench/mcp.sh
# Knobs (env): SECONDS_PER_RUN (default 10).
set -euo pipefail

cd "$(dirname "$0")/.."
SECS=${SECONDS_PER_RUN:-10}
GB=target/release/glovebox
OUT=$(mktemp -d)
server=""
cleanup() {
  if [ -n "$server" ]; then kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; fi
  rm -rf "$OUT"
}
trap cleanup EXIT

echo "== cargo build --release"
cargo build --release --quiet
bash tests/mcp/setup.sh
PY=target/mcp-venv/bin/python

# A project with one trivial tool.
mkdir -p "$OUT/project/.glee/tools/noop"
cat > "$OUT/project/.glee/tools/noop/tool.yml" <<'YML'
name: noop
description: does nothing, jailed
kind: command
version: 1
inputs:
  schema: {type: object, properties: {}}
outputs: {format: text}
exec:
  command: {entrypoint: "true", args: []}
permissions: {network: false, fs: {read: ["."], write: []}}
YML

"$GB" --root "$OUT/project" serve --listen 127.0.0.1:0 2> "$OUT/serve.log" &
server=$!
for _ in $(seq 100); do
  grep -q "serving MCP at" "$OUT/serve.log" && break
  sleep 0.1
done
url=$(sed -n 's/^glovebox: serving MCP at //p' "$OUT/serve.log" | head -1)
[ -n "$url" ] || { echo "glovebox serve did not start:"; cat "$OUT/serve.log"; exit 1; }
echo "== $url"

for c in 1 8; do
  echo "== $c client(s), ${SECS}s"
  "$PY" bench/mcp_client.py "$url" noop "$c" "$SECS" | tee "$OUT/c$c.json"
done

python3 - "$OUT/c1.json" "$OUT/c8.json" <<'PY'
import datetime, json, os, platform, subprocess, sys
rows = [json.load(open(f)) for f in sys.argv[1:]]
commit = subprocess.run(["git", "describe", "--always", "--dirty"], capture_output=True, text=True).stdout.strip()
load = open("/proc/loadavg").read().split()[0]
lines = ["## MCP over HTTP (`glovebox serve`)", "",
         f"- date: {datetime.date.today()}, commit `{commit}`, {os.cpu_count()} cores, kernel `{platform.release()}`, load {load}",
         "",
         "A trivial command tool (`true`, jailed) called through MCP Streamable HTTP by the official Python `mcp` client "
         "(one session per client, each calling in a loop). Latency is what the client sees per `tools/call`, "
         "including the client's own overhead; the client runs on the same cores as the server.",
         "",
         "| clients | calls | calls/s | median ms | p90 ms |", "|--:|--:|--:|--:|--:|"]
for r in rows:
    lines.append(f"| {r['clients']} | {r['calls']} | {r['calls_per_s']} | {r['median_ms']} | {r['p90_ms']} |")
body = "\n".join(lines) + "\n"
path = "bench/RESULTS.md"
begin, end = "<!-- mcp:begin -->", "<!-- mcp:end -->"
text = open(path).read() if os.path.exists(path) else "# Benchmarks\n"
block = f"{begin}\n{body}{end}"
if begin in text and end in text:
    text = text[: text.index(begin)] + block + text[text.index(end) + len(end):]
else:
    text = text.rstrip("\n") + "\n\n" + block + "\n"
open(path, "w").write(text)
print(body)
PY
