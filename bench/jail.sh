#!/usr/bin/env bash
# Jail overhead benchmark: wall time of `glovebox sandbox -- CMD` against the
# bare command and against bubblewrap with a comparable policy, for /bin/true
# (pure start-up cost) and `python3 -c pass` (a realistic small tool).
#
# Run from anywhere:   bash bench/jail.sh
# Builds the release binary, installs bubblewrap + hyperfine if missing,
# runs hyperfine and rewrites the "jail" section of bench/RESULTS.md.
# Knobs (env): WARMUP (default 50), RUNS (default 500).
set -euo pipefail

cd "$(dirname "$0")/.."
WARMUP=${WARMUP:-50}
RUNS=${RUNS:-500}
GB=target/release/glovebox
# The distro interpreter, not a PATH shim (pyenv's is a bash script).
PY=/usr/bin/python3
BWRAP="bwrap --ro-bind / / --dev /dev --proc /proc --unshare-all --new-session --die-with-parent"
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT

echo "== cargo build --release"
cargo build --release --quiet

if ! command -v bwrap >/dev/null || ! command -v hyperfine >/dev/null; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "bwrap/hyperfine missing and not root: install bubblewrap and hyperfine, then rerun" >&2
    exit 1
  fi
  apt-get install -y bubblewrap hyperfine || { apt-get update && apt-get install -y bubblewrap hyperfine; }
fi

bench() { # bench JSON_NAME CMD...
  local json="$OUT/$1"; shift
  hyperfine -N --warmup "$WARMUP" --runs "$RUNS" --export-json "$json" "$@"
}

LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
echo "== /bin/true"
bench true.json \
  -n bare /bin/true \
  -n glovebox "$GB sandbox -- /bin/true" \
  -n "glovebox --netns" "$GB sandbox --netns -- /bin/true" \
  -n bwrap "$BWRAP /bin/true"

echo "== python3 -c pass"
bench python.json \
  -n bare "$PY -c pass" \
  -n glovebox "$GB sandbox -- $PY -c pass" \
  -n bwrap "$BWRAP $PY -c pass"

python3 bench/report.py --glovebox "$GB" --bwrap "$BWRAP" \
  --load "$LOAD_BEFORE -> $(cut -d' ' -f1-3 /proc/loadavg)" \
  --results bench/RESULTS.md "$OUT/true.json" "$OUT/python.json"
echo "== wrote bench/RESULTS.md"
