#!/usr/bin/env bash
# Engine overhead of `glovebox run`: a trivial command tool against
# `glovebox sandbox` of the same argv (the difference is the engine's own
# cost: load and lint the project, validate, template, policy), and a
# trivial python tool against bare `python3 -c pass`. Side by side in one
# hyperfine run each; writes the "run" section of bench/RESULTS.md.
#
# Run from anywhere:   bash bench/run.sh     (RUNS=300 WARMUP=20 by default)
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-300}
WARMUP=${WARMUP:-20}
GB=$PWD/target/release/glovebox
P=$PWD/bench/projects/trivial
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
cargo build --release --quiet
command -v hyperfine >/dev/null || apt-get install -y hyperfine
hyperfine -N --warmup "$WARMUP" --runs "$RUNS" --export-json "$OUT/cmd.json" \
    "$GB sandbox --read $P --cwd $P -- /bin/true x" \
    "$GB --root $P run noop_cmd"
hyperfine -N --warmup "$WARMUP" --runs "$RUNS" --export-json "$OUT/py.json" \
    "/usr/bin/python3 -c pass" \
    "$GB --root $P run noop_py"
python3 bench/section.py run "Engine overhead (\`bench/run.sh\`)" bench/RESULTS.md \
    "Target: the engine's own cost (second − first in the first table) under 1 ms at the median." \
    "$OUT/cmd.json" "$OUT/py.json"
