#!/usr/bin/env bash
# Served throughput, side by side in one run: `glovebox serve` before and
# after a change, and a bare fork+exec server (bench/bare_server.py: the
# same invoke endpoint, `true` run by a plain fork+exec per call, no jail,
# no audit), each driven by bench/load_client.py with 1 and 8 clients
# calling a trivial command tool (`true`) over the HTTP API. The servers
# take turns (ROUNDS passes of SECS seconds each), so a load change on
# this shared machine hits them alike; the medians of the passes are
# reported with ×bare. Prints a markdown table; nothing is rewritten.
#
#   GB_BEFORE=path/to/before [GB_AFTER=path/to/after] bash bench/served.sh
source "$(dirname "$0")/lib.sh"
GB=${GB_AFTER:-$GB}
: "${GB_BEFORE:?set GB_BEFORE to the glovebox binary to compare with}"
SECS=${SECS:-4}
ROUNDS=${ROUNDS:-3}
OUT=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  rm -rf "$OUT"
}
trap cleanup EXIT

for who in before after; do
  mkdir -p "$OUT/$who/.glee/tools/noop"
  cat > "$OUT/$who/.glee/tools/noop/tool.yml" <<'YML'
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
done

start_gb() { # BIN WHO
  "$1" --root "$OUT/$2" serve --listen 127.0.0.1:0 --max-concurrent 64 2> "$OUT/$2.log" &
  pids+=($!)
  local url=""
  for _ in $(seq 100); do
    url=$(grep -o 'http://[0-9.:]*' "$OUT/$2.log" | head -1 || true)
    [ -n "$url" ] && break
    sleep 0.1
  done
  [ -n "$url" ] || { echo "glovebox serve ($2) did not start:" >&2; cat "$OUT/$2.log" >&2; exit 1; }
  echo "$url"
}
URL_BEFORE=$(start_gb "$GB_BEFORE" before)
URL_AFTER=$(start_gb "$GB" after)
$PY bench/bare_server.py true > "$OUT/bare.port" &
pids+=($!)
for _ in $(seq 50); do [ -s "$OUT/bare.port" ] && break; sleep 0.1; done
URL_BARE="http://127.0.0.1:$(cat "$OUT/bare.port")"

for r in $(seq "$ROUNDS"); do
  for c in 1 8; do
    for who in bare before after; do
      case $who in bare) url=$URL_BARE ;; before) url=$URL_BEFORE ;; after) url=$URL_AFTER ;; esac
      echo "== round $r, $who, $c client(s), ${SECS}s" >&2
      $PY bench/load_client.py "$url" noop "$c" "$SECS" > "$OUT/$who.c$c.r$r.json"
    done
  done
done

$PY - "$OUT" "$ROUNDS" <<'PY'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
def med(who, c, k):
    return statistics.median(json.load(open(f"{out}/{who}.c{c}.r{r}.json"))[k] for r in range(1, rounds + 1))
def errs(who, c):
    return sum(json.load(open(f"{out}/{who}.c{c}.r{r}.json"))["errors"] for r in range(1, rounds + 1))
print(f"| server | clients | calls/s | ×bare calls/s | p50 ms | p99 ms | errors |")
print("|---|--:|--:|--:|--:|--:|--:|")
for c in (1, 8):
    bare = med("bare", c, "calls_per_s")
    for who, name in (("bare", "bare fork+exec (bare_server.py)"), ("before", "glovebox serve, before"), ("after", "glovebox serve, after")):
        cps = med(who, c, "calls_per_s")
        print(f"| {name} | {c} | {cps:.0f} | {cps / bare:.2f} | {med(who, c, 'p50_ms'):.2f} | {med(who, c, 'p99_ms'):.2f} | {errs(who, c)} |")
PY
