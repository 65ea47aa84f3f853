#!/usr/bin/env bash
# Served throughput, side by side in one run: `glovebox serve` of each
# binary given (before and after a change, or lever by lever), and a bare
# fork+exec server (bench/bare_server.py: the
# same invoke endpoint, `true` run by a plain fork+exec per call, no jail,
# no audit), each driven by bench/load_client.py with 1 and 8 clients
# calling a trivial command tool (`true`) over the HTTP API. The servers
# take turns (ROUNDS passes of SECS seconds each), so a load change on
# this shared machine hits them alike; the medians of the passes are
# reported with ×bare. Prints a markdown table; nothing is rewritten.
#
#   BINS="before:/tmp/gb-main after:target/release/glovebox" bash bench/served.sh
#
# KIND=python serves a trivial python tool (`def f(): return {}`, warm
# workers on) as `noop` instead, for the warm path side by side (the bare
# row stays the fork+exec of `true`).
source "$(dirname "$0")/lib.sh"
: "${BINS:?set BINS to NAME:PATH pairs}"
SECS=${SECS:-4}
ROUNDS=${ROUNDS:-3}
OUT=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  rm -rf "$OUT"
}
trap cleanup EXIT

NAMES=""
for b in $BINS; do NAMES="$NAMES ${b%%:*}"; done
KIND=${KIND:-command}
for who in $NAMES; do
  mkdir -p "$OUT/$who/.glee/tools/noop"
  if [ "$KIND" = python ]; then
    printf 'def f():\n    return {"ok": True}\n' > "$OUT/$who/mod.py"
    cat > "$OUT/$who/.glee/tools/noop/tool.yml" <<'YML'
name: noop
description: a trivial python function, jailed, warm
kind: python
version: 1
inputs:
  schema: {type: object, properties: {}}
outputs: {format: json}
exec:
  python: {module: mod, function: f, warm: true}
permissions: {network: false, fs: {read: ["."], write: []}}
YML
    continue
  fi
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

start_gb() { # BIN WHO: starts the server (not in a subshell: its pid is
  # kept for the cleanup) and leaves its URL in $OUT/WHO.url
  "$1" --root "$OUT/$2" serve --listen 127.0.0.1:0 --max-concurrent 64 > /dev/null 2> "$OUT/$2.log" &
  pids+=($!)
  local url=""
  for _ in $(seq 100); do
    url=$(grep -o 'http://[0-9.:]*' "$OUT/$2.log" | head -1 || true)
    [ -n "$url" ] && break
    sleep 0.1
  done
  [ -n "$url" ] || { echo "glovebox serve ($2) did not start:" >&2; cat "$OUT/$2.log" >&2; exit 1; }
  echo "$url" > "$OUT/$2.url"
}
declare -A URL
for b in $BINS; do
  start_gb "${b#*:}" "${b%%:*}"
  URL[${b%%:*}]=$(cat "$OUT/${b%%:*}.url")
done
$PY bench/bare_server.py true > "$OUT/bare.port" 2> "$OUT/bare.log" &
pids+=($!)
for _ in $(seq 50); do [ -s "$OUT/bare.port" ] && break; sleep 0.1; done
URL[bare]="http://127.0.0.1:$(cat "$OUT/bare.port")"

for r in $(seq "$ROUNDS"); do
  for c in 1 8; do
    for who in bare $NAMES; do
      url=${URL[$who]}
      echo "== round $r, $who, $c client(s), ${SECS}s" >&2
      $PY bench/load_client.py "$url" noop "$c" "$SECS" > "$OUT/$who.c$c.r$r.json"
    done
  done
done

$PY - "$OUT" "$ROUNDS" $NAMES <<'PY'
import json, statistics, sys
out, rounds, names = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
def med(who, c, k):
    return statistics.median(json.load(open(f"{out}/{who}.c{c}.r{r}.json"))[k] for r in range(1, rounds + 1))
def errs(who, c):
    return sum(json.load(open(f"{out}/{who}.c{c}.r{r}.json"))["errors"] for r in range(1, rounds + 1))
print(f"| server | clients | calls/s | ×bare calls/s | p50 ms | p99 ms | errors |")
print("|---|--:|--:|--:|--:|--:|--:|")
for c in (1, 8):
    bare = med("bare", c, "calls_per_s")
    for who, name in [("bare", "bare fork+exec (bare_server.py)")] + [(n, f"glovebox serve, {n}") for n in names]:
        cps = med(who, c, "calls_per_s")
        print(f"| {name} | {c} | {cps:.0f} | {cps / bare:.2f} | {med(who, c, 'p50_ms'):.2f} | {med(who, c, 'p99_ms'):.2f} | {errs(who, c)} |")
PY
