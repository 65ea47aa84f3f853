#!/usr/bin/env bash
# Egress without a network namespace (issue 30): what the connect broker
# costs a networked call, side by side with the namespaced path, in one
# run on one loopback HTTP server.
#
#   bash bench/broker.sh          (RUNS=200 by default)
#
# Rows: `sandbox -- /bin/true` and `sandbox --net -- curl URL` with
# namespaces, and the same under `container-profile` (Docker's default
# profile: the namespace-free jail, curl's connect made by the
# supervisor); then a 32 MiB download through the proxy both ways (the
# broker only decides the connect: the bytes take the same relay).
# Prints a markdown table of medians; its numbers go to bench/RESULTS.md
# by hand.
source "$(dirname "$0")/lib.sh"
RUNS=${RUNS:-200}
need_release
need_tools hyperfine curl
W=$(mktemp -d)
head -c $((32 << 20)) /dev/urandom >"$W/big"
echo ok >"$W/small"
$PY -m http.server 0 --bind 127.0.0.1 --directory "$W" >"$W/http.log" 2>&1 &
SRV=$!
trap 'kill $SRV 2>/dev/null; rm -rf "$W"' EXIT
for _ in $(seq 50); do
  PORT=$(grep -o 'port [0-9]*' "$W/http.log" | grep -o '[0-9]*' || true)
  [ -n "$PORT" ] && break
  sleep 0.1
done
: "${PORT:?the http server did not start}"
NET="--net --allow-private"
cargo build --release --quiet --example container-profile
C="$PWD/target/release/examples/container-profile --"
hf "$W/calls.json" "$RUNS" 10 \
  -n "namespaces: true" "$GB sandbox -- /bin/true" \
  -n "namespaces: curl" "$GB sandbox $NET -- curl -sf http://127.0.0.1:$PORT/small" \
  -n "namespace-free: true" "$C $GB sandbox -- /bin/true" \
  -n "namespace-free: curl" "$C $GB sandbox $NET -- curl -sf http://127.0.0.1:$PORT/small"
hf "$W/big.json" 10 1 \
  -n "namespaces: 32 MiB" "$GB sandbox $NET -- curl -sf -o /dev/null http://127.0.0.1:$PORT/big" \
  -n "namespace-free: 32 MiB" "$C $GB sandbox $NET -- curl -sf -o /dev/null http://127.0.0.1:$PORT/big"
python3 - "$W/calls.json" "$W/big.json" <<'PY'
import json, sys
r = {}
for f in sys.argv[1:]:
    r.update({x["command"]: x["median"] * 1e3 for x in json.load(open(f))["results"]})
print("| row | median |")
print("|---|--:|")
for k, v in r.items():
    print(f"| {k} | {v:.2f} ms |")
ns = r["namespaces: curl"] - r["namespaces: true"]
nf = r["namespace-free: curl"] - r["namespace-free: true"]
print(f"\nnetworked call over its mode's /bin/true: namespaces +{ns:.2f} ms, namespace-free +{nf:.2f} ms")
print(f"32 MiB: namespace-free / namespaces = {r['namespace-free: 32 MiB'] / r['namespaces: 32 MiB']:.3f}")
PY
