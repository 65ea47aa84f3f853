#!/usr/bin/env bash
# Decided once (issue 29): what resolving every grant once to a descriptor
# costs per call, side by side with a glovebox built from an earlier
# commit (which resolved each path by name at every step), in one run.
#
#   OLD=/path/to/old/glovebox bash bench/hold.sh     (RUNS=400 by default)
#
# Rows: `sandbox -- /bin/true` with the baseline only, and with 12 extra
# grants (6 read, 6 write: each one held, fstat'd, Landlock'd by
# descriptor, opened again and compared in the child before its bind).
# Prints a markdown table of medians and new/old ratios; hand-run, its
# numbers go to bench/RESULTS.md by hand.
source "$(dirname "$0")/lib.sh"
: "${OLD:?set OLD to the glovebox binary to compare with}"
RUNS=${RUNS:-400}
need_release
need_tools hyperfine
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
GRANTS=()
for i in 1 2 3 4 5 6; do
  mkdir -p "$W/r$i/sub" "$W/w$i/sub"
  GRANTS+=(--read "$W/r$i" --write "$W/w$i")
done
run() { # NAME ARGS...
  local name=$1
  shift
  hf "$W/$name.json" "$RUNS" 20 \
    -n old "$OLD sandbox $* -- /bin/true" \
    -n new "$GB sandbox $* -- /bin/true"
  python3 - "$W/$name.json" "$name" <<'PY'
import json, sys
r = {x["command"]: x for x in json.load(open(sys.argv[1]))["results"]}
o, n = r["old"]["median"] * 1e3, r["new"]["median"] * 1e3
print(f"| {sys.argv[2]} | {o:.2f} ms | {n:.2f} ms | {n / o:.3f} |")
PY
}
echo "| sandbox -- /bin/true | old (median) | new (median) | new/old |"
echo "|---|--:|--:|--:|"
run "baseline only" ""
run "12 more grants" "${GRANTS[*]}"
