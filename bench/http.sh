#!/usr/bin/env bash
# Cost of an http tool call: `glovebox run` of a GET tool against `curl -s`
# of the same URL on the same local server (one hyperfine run; the
# difference is glovebox's added latency: process start, project load and
# lint, validation, templating, TLS config, the runtime, the SSRF guard),
# and calls/s with 8 concurrent `glovebox run` callers for ~5 s. Writes the
# "http" section of bench/RESULTS.md.
#
# Run from anywhere:   bash bench/http.sh   (RUNS=300 WARMUP=20 SECONDS_LOAD=5;
#                                            QUICK=1 for a smoke run)
source "$(dirname "$0")/lib.sh"
if [ -n "$QUICK" ]; then RUNS=${RUNS:-20}; WARMUP=${WARMUP:-3}; SECONDS_LOAD=${SECONDS_LOAD:-1}; fi
RUNS=${RUNS:-300}
INPROC_N=$([ -n "$QUICK" ] && echo 50 || echo 500)
WARMUP=${WARMUP:-20}
SECONDS_LOAD=${SECONDS_LOAD:-5}
OUT=$(mktemp -d)
need_release
[ -n "${BENCH_NO_BUILD:-}" ] || cargo build --release --quiet --example http_inproc
need_tools hyperfine curl
python3 bench/http_server.py > "$OUT/port" &
SERVER=$!
trap 'kill $SERVER 2>/dev/null; rm -rf "$OUT"' EXIT
for _ in $(seq 50); do [ -s "$OUT/port" ] && break; sleep 0.1; done
PORT=$(cat "$OUT/port")
URL="http://127.0.0.1:$PORT/ping"
P=$OUT/project
mkdir -p "$P/.glee/tools/ping"
cat > "$P/.glee/config.yml" <<YML
security:
  http:
    allow_private: true
YML
cat > "$P/.glee/tools/ping/tool.yml" <<YML
name: ping
description: GET a local JSON endpoint
kind: http
version: 1
inputs:
  schema: {type: object, properties: {}}
outputs:
  format: json
exec:
  http:
    method: GET
    url: $URL
permissions:
  network: true
YML
"$GB" --root "$P" run ping --json | grep -q '"ok":true'
read -r INPROC_CALL INPROC_BARE INPROC_ADDED < <(target/release/examples/http_inproc "$P" ping "$URL" "$INPROC_N")
CALLS=$(python3 bench/http_load.py "$SECONDS_LOAD" 8 "$GB" --root "$P" run ping)
hf "$OUT/http.json" "$RUNS" "$WARMUP" \
    "curl -s $URL" \
    "$GB --root $P run ping"
metric http.inproc_added_ms "$INPROC_ADDED"
metric http.run_vs_curl "$(calc "$(med_ms "$OUT/http.json" 1) / $(med_ms "$OUT/http.json" 0)")"
metric http.cli_calls_per_s_8 "$CALLS"
python3 bench/section.py http "http tools (\`bench/http.sh\`)" "$BENCH_RESULTS" \
    "$(quick_note)Target: added latency under 0.3 ms in-process. The server is Python's http.server on 127.0.0.1 (the same for every row; its ~1 ms per request dominates the in-process numbers). In the table both rows are whole processes: curl pays for loading libcurl and its TLS stack, glovebox for process start, project load and lint; so the CLI difference can be negative and says little about the request path itself — the in-process line does.

In-process (\`bench/http_inproc.rs\`, $INPROC_N calls): \`Engine::call\` median $INPROC_CALL ms against a bare std TcpStream GET median $INPROC_BARE ms: **$INPROC_ADDED ms added**.

Throughput: $CALLS calls/s with 8 concurrent \`glovebox run\` callers over ${SECONDS_LOAD} s." \
    "$OUT/http.json"
