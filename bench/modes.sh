#!/usr/bin/env bash
# The jail's two modes (issue 18) side by side: `glovebox sandbox --
# /bin/true` as nobody in a process that may create user namespaces
# (namespaces mode) and in one that may not (bubblewrap --disable-userns:
# the namespace-free jail with its subreaper). Both run under the same
# bubblewrap wrapper, so the wrapper costs the same on each side.
#
#   GB=path/to/glovebox bash bench/modes.sh
#
# Prints a markdown table (medians, ratios to the bare command in the same
# wrapper); nothing is rewritten.
source "$(dirname "$0")/lib.sh"
GB=${GB_MODES:-$GB}
RUNS=${RUNS:-200}
WARMUP=${WARMUP:-10}
need_tools bwrap hyperfine
OUT=$(mktemp -d)
STATE=$(mktemp -d)
chown 65534:65534 "$OUT"
chown 65534:65534 "$STATE"
trap 'rm -rf "$OUT" "$STATE"' EXIT
for mode in namespaces namespace-free; do
  extra=()
  [ "$mode" = namespace-free ] && extra=(--disable-userns)
  setpriv --reuid=65534 --regid=65534 --clear-groups \
    bwrap --dev-bind / / --unshare-user "${extra[@]}" --uid 1000 --gid 1000 -- \
    env GLOVEBOX_STATE_DIR="$STATE" hyperfine -N --style none --runs "$RUNS" --warmup "$WARMUP" \
      --export-json "$OUT/$mode.json" \
      -n bare /bin/true \
      -n glovebox "$GB sandbox -- /bin/true" >/dev/null
done
python3 - "$OUT" <<'PY'
import json, sys
print("| mode | bare ms | glovebox ms | ×bare |")
print("|---|--:|--:|--:|")
for mode in ("namespaces", "namespace-free"):
    r = {x["command"]: x for x in json.load(open(f"{sys.argv[1]}/{mode}.json"))["results"]}
    b, g = r["bare"]["median"] * 1e3, r["glovebox"]["median"] * 1e3
    print(f"| {mode} | {b:.3f} | {g:.3f} | {g / b:.1f} |")
PY
