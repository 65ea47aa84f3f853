#!/usr/bin/env bash
# What pinning costs an approved python tool's call (issue 42 item 4):
# the same tool (examples/repo_stats on a small tree) with
# `approval.required: false` and `true` (approved, so each call gets the
# pin file and src/run/pin.py checks every project module it loads),
# calls interleaved, medians side by side in one run.
#
#   bench/pins.sh [GLOVEBOX] [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-target/release/glovebox}
rounds=${2:-30}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for v in free pinned; do
    cp -r examples "$work/$v"
    rm -rf "$work/$v/.venv"
    python3 -m venv --without-pip "$work/$v/.venv"
done
sed -i "s/required: false/required: true\n  reason: bench/" "$work/pinned/.glee/tools/repo_stats/tool.yml"
export GLOVEBOX_STATE_DIR="$work/state"
"$bin" --root "$work/pinned" approve repo_stats --yes >/dev/null
python3 - "$bin" "$work" "$rounds" <<'PY'
import statistics, subprocess, sys, time
bin, work, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
times = {"free": [], "pinned": []}
for _ in range(rounds):
    for v in times:
        t = time.perf_counter()
        out = subprocess.run([bin, "--root", f"{work}/{v}", "run", "repo_stats", "--json"],
                             capture_output=True)
        times[v].append(time.perf_counter() - t)
        assert b'"ok":true' in out.stdout, out
free, pinned = (statistics.median(times[v]) * 1000 for v in ("free", "pinned"))
print(f"repo_stats, {rounds} calls each, interleaved: unpinned {free:.1f} ms, "
      f"approved and pinned {pinned:.1f} ms (median), ratio {pinned / free:.2f}")
PY
