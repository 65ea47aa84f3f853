#!/usr/bin/env bash
# Engine overhead of `glovebox run`: a trivial command tool against
# `glovebox sandbox` of the same argv (the difference is the engine's own
# cost: load and lint the project, validate, template, policy, audit) and
# the bare argv, and a trivial python tool against bare `python3 -c pass`.
# Rewrites the "run" section of bench/RESULTS.md.
#
#   bash bench/run.sh           (RUNS=300 WARMUP=20; QUICK=1 for a smoke run)
source "$(dirname "$0")/lib.sh"
if [ -n "$QUICK" ]; then RUNS=${RUNS:-20}; WARMUP=${WARMUP:-3}; fi
RUNS=${RUNS:-300}
WARMUP=${WARMUP:-20}
P=bench/projects/trivial
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
need_release
need_tools hyperfine
"$GB" --root "$P" run noop_cmd > /dev/null
"$GB" --root "$P" run noop_py > /dev/null
hf "$OUT/cmd.json" "$RUNS" "$WARMUP" \
    "$GB sandbox --read $P --cwd $P -- /bin/true x" \
    "$GB --root $P run noop_cmd" \
    "/bin/true x"
hf "$OUT/py.json" "$RUNS" "$WARMUP" \
    "$PY -c pass" \
    "$GB --root $P run noop_py"
C0=$(med_ms "$OUT/cmd.json" 0) C1=$(med_ms "$OUT/cmd.json" 1) C2=$(med_ms "$OUT/cmd.json" 2)
P0=$(med_ms "$OUT/py.json" 0) P1=$(med_ms "$OUT/py.json" 1)
metric run.engine_cost_ms "$(calc "$C1 - $C0")"
metric run.cmd_vs_bare "$(calc "$C1 / $C2")"
metric run.py_vs_bare "$(calc "$P1 / $P0")"
python3 bench/section.py run "Engine overhead (\`bench/run.sh\`)" "$BENCH_RESULTS" \
    "$(quick_note)Target: the engine's own cost (second − first in the first table: \`run\` of a command tool minus \`sandbox\` of its argv) under 0.5 ms at the median (issue 19; the first target was 1 ms). The third row is the bare argv. The second table is a trivial python tool against bare \`python3 -c pass\`." \
    "$OUT/cmd.json" "$OUT/py.json"
echo "== wrote the run section of $BENCH_RESULTS" >&2
