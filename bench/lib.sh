# Shared by the bench/*.sh scripts (source it; it cds to the repo root).
#
#   GB          the release binary (built by `need_release`)
#   QUICK=1     a fast smoke run: few runs, short load phases (numbers are
#               not worth keeping: they go to bench/RESULTS.quick.md)
#   ROUNDS      hyperfine passes per table (default 5, QUICK: 2): each pass
#               runs every command RUNS/ROUNDS times, so the commands of a
#               table alternate in blocks and a load change on this shared
#               machine hits them all alike; `hf_merge.py` joins the passes.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
GB=$PWD/target/release/glovebox
PY=/usr/bin/python3 # the distro interpreter, not a PATH shim
QUICK=${QUICK:-}
if [ -n "$QUICK" ]; then ROUNDS=${ROUNDS:-2}; else ROUNDS=${ROUNDS:-5}; fi
# A smoke run never overwrites the real results: it writes beside them
# (both files are git-ignored).
if [ -n "$QUICK" ]; then
  export BENCH_RESULTS=${BENCH_RESULTS:-bench/RESULTS.quick.md} BENCH_METRICS=${BENCH_METRICS:-bench/metrics.quick.json}
  [ -e "$BENCH_RESULTS" ] || cp bench/RESULTS.md "$BENCH_RESULTS"
else
  export BENCH_RESULTS=${BENCH_RESULTS:-bench/RESULTS.md} BENCH_METRICS=${BENCH_METRICS:-bench/metrics.json}
fi

# need_release: build the release binary (incremental, quiet).
need_release() {
  if [ -z "${BENCH_NO_BUILD:-}" ]; then
    echo "== cargo build --release" >&2
    cargo build --release --quiet --bin glovebox
  fi
}

# need_tools CMD...: apt-get install the packages providing CMDs that are
# missing (bwrap → bubblewrap; everything else is its own package name).
need_tools() {
  local missing=() c
  for c in "$@"; do
    command -v "$c" >/dev/null && continue
    case $c in bwrap) missing+=(bubblewrap) ;; *) missing+=("$c") ;; esac
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" -ne 0 ]; then
    echo "bench: missing ${missing[*]} and not root: install them, then rerun" >&2
    exit 1
  fi
  echo "== apt-get install ${missing[*]}" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y "${missing[@]}" ||
    { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y "${missing[@]}"; }
}

# hf OUT.json RUNS WARMUP [-n NAME] CMD ...: hyperfine -N in $ROUNDS passes,
# merged into OUT.json (same format as --export-json).
hf() {
  local out=$1 runs=$2 warmup=$3 r parts=()
  shift 3
  local per=$(((runs + ROUNDS - 1) / ROUNDS))
  for r in $(seq "$ROUNDS"); do
    hyperfine -N --style basic --warmup "$warmup" --runs "$per" \
      --export-json "$out.$r" "$@" >&2
    parts+=("$out.$r")
  done
  python3 bench/hf_merge.py "$out" "${parts[@]}"
  rm -f "${parts[@]}"
}

# metric KEY VALUE: record one number or string in bench/metrics.json,
# which bench/headline.py turns into the headline table.
metric() {
  python3 bench/metric.py "$1" "$2"
}

# A note for the section header when the numbers are a smoke run.
quick_note() {
  [ -n "$QUICK" ] && echo "**QUICK=1 smoke run: too few runs to trust; rerun without QUICK for numbers.** " || true
}

# med_ms FILE.json INDEX: median in ms of the INDEX-th command of a
# hyperfine JSON.
med_ms() {
  python3 -c 'import json,sys; print("%.3f" % (json.load(open(sys.argv[1]))["results"][int(sys.argv[2])]["median"] * 1e3))' "$1" "$2"
}

# calc EXPR: floating-point arithmetic (awk).
calc() {
  awk "BEGIN { printf \"%.3f\", $1 }"
}
