#!/usr/bin/env bash
# The jail's mount tree (issue 14): `glovebox sandbox -- /bin/true` before
# and after the tree, side by side with the bare command and bubblewrap,
# plus a call inside a project whose write grant covers the root (so the
# control surface is bound read-only again on top of it).
#
#   GB_AFTER=path/to/after GB_BEFORE=path/to/before bash bench/tree.sh
#
# Prints a markdown table (medians, ratios); nothing is rewritten.
source "$(dirname "$0")/lib.sh"
GB=${GB_AFTER:-$GB}
: "${GB_BEFORE:?set GB_BEFORE to a glovebox binary built without the tree}"
RUNS=${RUNS:-300}
WARMUP=${WARMUP:-10}
BWRAP="bwrap --ro-bind / / --dev /dev --proc /proc --unshare-all --new-session --die-with-parent"
OUT=$(mktemp -d)
PROJ=$(mktemp -d)
trap 'rm -rf "$OUT" "$PROJ"' EXIT
need_tools bwrap hyperfine
mkdir -p "$PROJ/.glee/tools/t" "$PROJ/.git" "$PROJ/scripts"
printf '#!/bin/sh\necho hi\n' >"$PROJ/scripts/t.sh"
chmod +x "$PROJ/scripts/t.sh"
cat >"$PROJ/.glee/tools/t/tool.yml" <<'YML'
name: t
description: bench tool
kind: command
version: 1
inputs: {schema: {type: object}}
outputs: {format: text}
exec: {command: {entrypoint: ./scripts/t.sh, cwd: .}}
permissions: {network: false, fs: {read: ["."], write: ["."]}}
YML
echo '[]' >"$PROJ/tools.json"
P="--root $PROJ --write $PROJ --cwd $PROJ"
hf "$OUT/t.json" "$RUNS" "$WARMUP" \
  -n bare /bin/true \
  -n before "$GB_BEFORE sandbox -- /bin/true" \
  -n after "$GB sandbox -- /bin/true" \
  -n "before, project --write ." "$GB_BEFORE sandbox $P -- /bin/true" \
  -n "after, project --write . (4 protected rebinds)" "$GB sandbox $P -- /bin/true" \
  -n bwrap "$BWRAP /bin/true"
python3 - "$OUT/t.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["results"]
med = {x["command"]: x["median"] * 1e3 for x in r}
bare, bw = med["bare"], med["bwrap"]
print("| command | median ms | ×bare | ×bwrap |")
print("|---|--:|--:|--:|")
for x in r:
    m = x["median"] * 1e3
    print(f"| {x['command']} | {m:.3f} | {m / bare:.2f} | {m / bw:.2f} |")
PY
