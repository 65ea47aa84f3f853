#!/usr/bin/env bash
# Every benchmark in one command, as root on a Debian-ish box:
#
#   bash bench/all.sh            full run (~15 min on 2 cores; quiet machine!)
#   QUICK=1 bash bench/all.sh    smoke run (~2 min): proves the harness works
#
# Builds the release binary, installs what it compares against (bubblewrap,
# firejail, hyperfine, curl; only when missing), then runs each section's
# script — jail.sh (sandbox vs bare, bwrap, firejail), run.sh (engine
# cost), http.sh (http tool), serve.sh (server mode: calls/s, latency,
# RSS), warm.sh (warm python workers: served python call vs bare python),
# lint.sh (1,000 tools) — and headline.py (machine + target ratios).
# Each script also runs alone and rewrites only its own section of
# bench/RESULTS.md. SECTIONS="jail run" limits the run to some sections.
source "$(dirname "$0")/lib.sh"
SECTIONS=${SECTIONS:-jail run http serve warm lint}

need_tools bwrap firejail hyperfine curl
need_release
cargo build --release --quiet --example http_inproc
export BENCH_NO_BUILD=1

LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
for s in $SECTIONS; do
  echo "==== $s" >&2
  bash "bench/$s.sh"
done
python3 bench/headline.py --glovebox "$GB" --load "$LOAD_BEFORE -> $(cut -d' ' -f1-3 /proc/loadavg)"
echo "==== wrote $BENCH_RESULTS" >&2
