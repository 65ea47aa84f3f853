#!/usr/bin/env bash
# CPU time per served call, side by side: `glovebox serve` of each binary
# given, driven by bench/load_client.py (1 and 8 clients, ROUNDS passes of
# SECS seconds, the servers taking turns), reporting calls/s, p50 and the
# CPU the server spent per call (its user + system time and its reaped
# children's, from /proc/PID/stat). Calls/s on this shared machine moves
# with the other agents' load; CPU per call moves much less, so it is the
# number to compare between binaries. Prints one line per pass.
#
#   BINS="before:/tmp/gb-main after:target/release/glovebox" bash bench/cpu_per_call.sh
source "$(dirname "$0")/lib.sh"
: "${BINS:?set BINS to NAME:PATH pairs}"
SECS=${SECS:-3}
ROUNDS=${ROUNDS:-3}
OUT=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  rm -rf "$OUT"
}
trap cleanup EXIT
# One project per binary: each server its own log and audit head (binaries
# of different versions may keep the head in different formats).
for b in $BINS; do
  n=${b%%:*}
  mkdir -p "$OUT/p-$n/.glee/tools/noop"
  cat > "$OUT/p-$n/.glee/tools/noop/tool.yml" <<'YML'
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
declare -A URL PID
for b in $BINS; do
  n=${b%%:*}
  "${b#*:}" --root "$OUT/p-$n" serve --listen 127.0.0.1:0 --max-concurrent 64 >/dev/null 2>"$OUT/$n.log" &
  PID[$n]=$!
  pids+=($!)
done
for b in $BINS; do
  n=${b%%:*}
  for _ in $(seq 100); do grep -q http "$OUT/$n.log" && break; sleep 0.1; done
  URL[$n]=$(grep -o 'http://[0-9.:]*' "$OUT/$n.log" | head -1)
  $PY bench/load_client.py "${URL[$n]}" noop 2 1 >/dev/null # warm-up
done
cpu() { awk '{print $14 + $15 + $16 + $17}' "/proc/$1/stat"; }
tick=$(getconf CLK_TCK)
echo "| pass | clients | server | calls | calls/s | p50 ms | CPU ms per call |"
echo "|--:|--:|---|--:|--:|--:|--:|"
for r in $(seq "$ROUNDS"); do
  for c in 1 8; do
    for b in $BINS; do
      n=${b%%:*}
      a=$(cpu "${PID[$n]}")
      out=$($PY bench/load_client.py "${URL[$n]}" noop "$c" "$SECS")
      z=$(cpu "${PID[$n]}")
      echo "$out" | $PY -c '
import json, sys
d = json.load(sys.stdin)
r, c, n, ticks, hz = sys.argv[1:6]
ms = int(ticks) * 1000 / int(hz) / max(d["calls"], 1)
print("| %s | %s | %s | %d | %s | %s | %.2f |" % (r, c, n, d["calls"], d["calls_per_s"], d["p50_ms"], ms))
' "$r" "$c" "$n" "$((z - a))" "$tick"
    done
  done
done
