#!/usr/bin/env bash
# Server mode: calls/s and p50/p99 latency of a trivial command tool
# (`true`, jailed) through `glovebox serve` with 1, 8 and 32 concurrent
# clients, and the supervisor's RSS (from /proc of the server process) at
# idle and at its peak during the 32-client run. The client
# (bench/load_client.py) uses the HTTP API's invoke endpoint when the server
# has one, else MCP at /mcp; the section says which.
# Rewrites the "serve" section of bench/RESULTS.md.
#
#   bash bench/serve.sh          (SECONDS_PER_RUN=10; QUICK=1 for a smoke run)
source "$(dirname "$0")/lib.sh"
if [ -n "$QUICK" ]; then SECS=${SECONDS_PER_RUN:-2}; else SECS=${SECONDS_PER_RUN:-10}; fi
OUT=$(mktemp -d)
server=""
cleanup() {
  if [ -n "$server" ]; then kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; fi
  rm -rf "$OUT"
}
trap cleanup EXIT
need_release

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

# Run every client's call at once (with the default --max-concurrent 16,
# calls past 16 wait in the queue, which would measure the queue).
"$GB" --root "$OUT/project" serve --listen 127.0.0.1:0 --max-concurrent 64 2> "$OUT/serve.log" &
server=$!
url=""
for _ in $(seq 100); do
  url=$(grep -o 'http://[0-9.:]*' "$OUT/serve.log" | head -1 || true)
  [ -n "$url" ] && break
  sleep 0.1
done
[ -n "$url" ] || { echo "glovebox serve did not start:" >&2; cat "$OUT/serve.log" >&2; exit 1; }
echo "== $url (pid $server)" >&2

kb() { awk -v k="$1:" '$1 == k { print $2 }' "/proc/$server/status"; }
sleep 1
RSS_IDLE=$(kb VmRSS)
for c in 1 8 32; do
  echo "== $c client(s), ${SECS}s" >&2
  python3 bench/load_client.py "$url" noop "$c" "$SECS" --pid "$server" | tee "$OUT/c$c.json" >&2
done
sleep 1
RSS_AFTER=$(kb VmRSS)
RSS_HWM=$(kb VmHWM)
THREADS=$(kb Threads)

python3 - "$RSS_IDLE" "$RSS_AFTER" "$RSS_HWM" "$THREADS" "$(quick_note)" "$OUT"/c1.json "$OUT"/c8.json "$OUT"/c32.json <<'PY'
import json, os, subprocess, sys
sys.path.insert(0, "bench")
import section
idle, after, hwm, threads, note = sys.argv[1:6]
rows = [json.load(open(f)) for f in sys.argv[6:]]
mb = lambda kb: f"{int(kb) / 1024:.1f}"
peak = rows[-1]["rss_max_kb"]
metric = lambda k, v: subprocess.run(["python3", "bench/metric.py", k, str(v)], check=True)
for r in rows:
    metric(f"serve.c{r['clients']}.calls_per_s", r["calls_per_s"])
    metric(f"serve.c{r['clients']}.p50_ms", r["p50_ms"])
    metric(f"serve.c{r['clients']}.p99_ms", r["p99_ms"])
metric("serve.transport", rows[0]["transport"])
metric("serve.rss_idle_mb", mb(idle))
metric("serve.rss_peak32_mb", mb(peak))
lines = ["## Server mode (`bench/serve.sh`)", "", section.stamp(), ""]
if note:
    lines += [note, ""]
lines += [f"Transport: **{rows[0]['transport']}** (the HTTP API when `GET /api/v1/tools` answers, else MCP). "
          "A trivial command tool (`true`, jailed: a fresh jail per call) called by `bench/load_client.py` "
          "(stdlib Python, one keep-alive connection per client, each calling in a loop, ACKing at once: "
          "the server sets TCP_NODELAY, so ordinary delayed-ACK clients see the same — "
          "`BENCH_NO_QUICKACK=1` checks that). Latency is what the "
          "client sees, including its own overhead; the client runs on the same cores as the server.",
          "",
          "| clients | calls | errors | calls/s | p50 ms | p99 ms | peak RSS MB |", "|--:|--:|--:|--:|--:|--:|--:|"]
for r in rows:
    lines.append(f"| {r['clients']} | {r['calls']} | {r['errors']} | {r['calls_per_s']} | {r['p50_ms']} | {r['p99_ms']} | {mb(r['rss_max_kb'])} |")
lines += ["", f"Supervisor (the `glovebox serve` process, children excluded): RSS idle {mb(idle)} MB; "
          f"peak during 32 clients {mb(peak)} MB (sampled every 20 ms; VmHWM over the whole run {mb(hwm)} MB); "
          f"{mb(after)} MB idle afterwards; {threads} threads."]
errs = [e for r in rows for e in r.get("first_errors", [])]
if errs:
    lines += ["", f"First errors: `{errs[:3]}`"]
section.write(os.environ["BENCH_RESULTS"], "serve", "\n".join(lines))
print("\n".join(lines))
PY
echo "== wrote the serve section of $BENCH_RESULTS" >&2
