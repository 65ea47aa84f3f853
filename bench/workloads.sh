#!/usr/bin/env bash
# Real work inside the jail (issue 35): a file walk, `git status` and a
# python import of 20 stdlib modules, each bare, under `glovebox sandbox`
# and under bwrap, side by side in one hyperfine run per workload. Each
# workload's table also holds the jail's start (`/bin/true` under each),
# so the work's own ratio is printed with the start subtracted:
#   (jailed work − jailed /bin/true) / (bare work − bare /bin/true).
# Prints markdown tables on stdout (hand-run; paste into bench/RESULTS.md).
#
#   bash bench/workloads.sh                      (RUNS=40; QUICK=1 for a smoke run)
#   GB_BEFORE=/tmp/glovebox-main bash bench/workloads.sh
#   GB_AFTER=/tmp/glovebox-new BENCH_NO_BUILD=1 GB_BEFORE=... bash bench/workloads.sh
#                      (adds the rows of an older binary: a lever's before/after in one run)
#   ONLY="find git" bash bench/workloads.sh      (a subset: find git python pytest cargo pyrun oneshot)
#
# `pytest` is 40 small tests in a venv with pytest (installed from the
# package index into a temporary venv; skipped with a line saying so when
# it cannot be), its cache and its capture off (capture makes temporary
# files, and bwrap's view has no writable /tmp); `cargo` is `cargo check --offline` of a
# one-file crate already checked once (cargo's fingerprints, the
# toolchain's start), with `~/.rustup` and `~/.cargo` readable and the
# crate writable (its lock file).
#
# `pyrun` is the cold python tool of bench/projects/trivial (`run noop_py`)
# against bare `python3 -c pass` and `sandbox -- python3 -c pass`.
#
# Bare commands run under `setsid`, as the jailed ones do (glovebox and
# bwrap both start a session): with the scheduler's autogroups each session
# is its own scheduling group, and on a shared, loaded machine a bare
# command left in the script's session competes with everything else that
# session runs. Its exec is in the bare `/bin/true` row, so it is subtracted.
#
# The repository `git status` runs in is a fresh clone of this one (its
# commits, a clean tree), made in a temporary directory.
source "$(dirname "$0")/lib.sh"
# GB_AFTER: measure this binary instead of the release build (with
# BENCH_NO_BUILD=1), e.g. a copy kept while the next build runs.
GB=${GB_AFTER:-$GB}
if [ -n "$QUICK" ]; then RUNS=${RUNS:-10}; WARMUP=${WARMUP:-2}; fi
RUNS=${RUNS:-40}
WARMUP=${WARMUP:-3}
ONLY=${ONLY:-find git python pytest cargo pyrun oneshot}
BWRAP="bwrap --ro-bind / / --dev /dev --proc /proc --unshare-all --new-session --die-with-parent"
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
need_release
need_tools bwrap hyperfine git

git clone --quiet --no-hardlinks "$PWD" "$OUT/repo"
REPO=$OUT/repo
MODULES="json,re,os,sys,collections,itertools,functools,pathlib,subprocess,typing,dataclasses,datetime,decimal,fractions,argparse,logging,tempfile,shutil,textwrap,unittest"
PYCODE="import $MODULES"

# The jailed forms of CMD (glovebox, the older glovebox, bwrap).
# CMD is one string, quoted for hyperfine -N (shell words, no shell).
variants() { # NAME GRANTS CWD CMD
  local name=$1 grants=$2 cwd=$3 cmd=$4
  printf '%s\n' -n "$name bare" "setsid $cmd"
  printf '%s\n' -n "$name glovebox" "$GB sandbox $grants --cwd $cwd -- $cmd"
  if [ -n "${GB_BEFORE:-}" ]; then
    printf '%s\n' -n "$name glovebox (before)" "$GB_BEFORE sandbox $grants --cwd $cwd -- $cmd"
  fi
  printf '%s\n' -n "$name bwrap" "$BWRAP ${BWRAP_EXTRA:-}--chdir $cwd $cmd"
}

run_table() { # KEY NAME GRANTS CWD CMD
  local key=$1
  shift
  local args=()
  mapfile -t args < <(variants "$@")
  local t=()
  mapfile -t t < <(variants true "$2" / /bin/true)
  echo "== $1" >&2
  hf "$OUT/$key.json" "$RUNS" "$WARMUP" "${args[@]}" "${t[@]}"
  $PY - "$OUT/$key.json" "$1" <<'EOF'
import json, sys
runs = {r["command"]: r for r in json.load(open(sys.argv[1]))["results"]}
name = sys.argv[2]
med = {k: r["median"] * 1e3 for k, r in runs.items()}
first = next(iter(runs.values()))
print(f"| {name} ({len(first['times'])} runs, {first.get('passes', 1)} passes) | median ms | user+sys ms (mean) | ×bare | ×bare, start subtracted |")
print("|---|--:|--:|--:|--:|")
work0 = med[f"{name} bare"] - med["true bare"]
for k, r in runs.items():
    if not k.startswith(name + " "):
        continue
    who = k[len(name) + 1:]
    start = med.get(f"true {who}", med["true bare"])
    x = med[k] / med[f"{name} bare"]
    xs = (med[k] - start) / work0 if work0 > 0 else float("nan")
    # bwrap's own rusage holds none of the command's CPU (the command is
    # not its reaped child): no CPU column for it.
    cpu = "–" if who == "bwrap" else f"{(r.get('user', 0) + r.get('system', 0)) * 1e3:.1f}"
    print(f"| {k} | {med[k]:.2f} | {cpu} | {x:.2f} | {xs:.2f} |")
for k in runs:
    if k.startswith("true "):
        print(f"| {k} | {med[k]:.2f} | | | |")
print()
EOF
}

pytest_table() {
  local P=$OUT/pyproj
  mkdir -p "$P/tests"
  if ! { $PY -m venv "$OUT/venv" && "$OUT/venv/bin/pip" install --quiet pytest; } >"$OUT/pip.log" 2>&1; then
    echo "(pytest not measured: its venv could not be made; $OUT/pip.log: $(tail -1 "$OUT/pip.log"))"
    echo
    return
  fi
  $PY - "$P/tests/test_small.py" <<'EOF'
import sys
with open(sys.argv[1], "w") as f:
    for i in range(40):
        f.write(f"def test_{i}():\n    assert sum(range({i})) == {i} * ({i} - 1) // 2\n\n")
EOF
  run_table pytest pytest "--read $OUT" "$P" "$OUT/venv/bin/python -m pytest -q -s -p no:cacheprovider --rootdir $P $P/tests"
}

cargo_table() {
  local C=$OUT/crate cargo
  cargo=$(command -v cargo) || { echo "(cargo not measured: no cargo on PATH)"; echo; return; }
  mkdir -p "$C/src"
  printf '[package]\nname = "tiny"\nversion = "0.1.0"\nedition = "2021"\n' > "$C/Cargo.toml"
  printf 'pub fn add(a: u64, b: u64) -> u64 {\n    a + b\n}\n' > "$C/src/lib.rs"
  (cd "$C" && "$cargo" check --offline --quiet)
  local rustup=${RUSTUP_HOME:-$HOME/.rustup} cargo_home=${CARGO_HOME:-$HOME/.cargo}
  RUSTUP_HOME=$rustup CARGO_HOME=$cargo_home BWRAP_EXTRA="--bind $C $C " run_table cargo "cargo check" \
    "--read $rustup --read $cargo_home --write $C --env RUSTUP_HOME --env CARGO_HOME --env PATH" "$C" \
    "$cargo check --offline --quiet --manifest-path $C/Cargo.toml"
}

pyrun() {
  local P=bench/projects/trivial rows=()
  "$GB" --root "$P" run noop_py > /dev/null
  [ -n "${GB_BEFORE:-}" ] && rows=(-n "run noop_py (before)" "$GB_BEFORE --root $P run noop_py")
  echo "== cold python tool" >&2
  hf "$OUT/pyrun.json" "$RUNS" "$WARMUP" \
    -n "python3 -c pass" "setsid $PY -c pass" \
    -n "sandbox -- python3 -c pass" "$GB sandbox -- $PY -c pass" \
    -n "run noop_py" "$GB --root $P run noop_py" \
    "${rows[@]}"
  $PY - "$OUT/pyrun.json" <<'EOF'
import json, sys
runs = json.load(open(sys.argv[1]))["results"]
bare = runs[0]["median"]
print(f"| cold python ({len(runs[0]['times'])} runs, {runs[0].get('passes', 1)} passes) | median ms | user+sys ms (mean) | ×bare |")
print("|---|--:|--:|--:|")
for r in runs:
    cpu = (r.get("user", 0) + r.get("system", 0)) * 1e3
    print(f"| {r['command']} | {r['median'] * 1e3:.2f} | {cpu:.1f} | {r['median'] / bare:.2f} |")
print()
EOF
}

# One-shot cost: `sandbox -- /bin/true` against the kernel's floor of the
# same jail (bench/jail_floor.c, as in bench/jail.sh; root and a C
# compiler) and glovebox's own start (`--version`).
oneshot() {
  local rows=() floor=()
  if [ "$(id -u)" = 0 ] && cc -O2 -o "$OUT/jail_floor" bench/jail_floor.c; then
    floor=(-n floor "$OUT/jail_floor once 25 835")
  fi
  [ -n "${GB_BEFORE:-}" ] && rows=(-n "sandbox -- /bin/true (before)" "$GB_BEFORE sandbox -- /bin/true" -n "glovebox --version (before)" "setsid $GB_BEFORE --version")
  echo "== one-shot" >&2
  hf "$OUT/oneshot.json" "$((RUNS * 4))" "$WARMUP" \
    -n "/bin/true" "setsid /bin/true" \
    -n "sandbox -- /bin/true" "$GB sandbox -- /bin/true" \
    -n "glovebox --version" "setsid $GB --version" \
    "${floor[@]}" "${rows[@]}"
  $PY - "$OUT/oneshot.json" <<'EOF'
import json, sys
runs = {r["command"]: r for r in json.load(open(sys.argv[1]))["results"]}
med = {k: r["median"] * 1e3 for k, r in runs.items()}
first = next(iter(runs.values()))
print(f"| one-shot ({len(first['times'])} runs, {first.get('passes', 1)} passes) | median ms | ×floor | above bare /bin/true, ms |")
print("|---|--:|--:|--:|")
for k in runs:
    xf = f"{med[k] / med['floor']:.2f}" if "floor" in med and "sandbox" in k else ""
    print(f"| {k} | {med[k]:.3f} | {xf} | {med[k] - med['/bin/true']:.3f} |")
print()
EOF
}

echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'), commit \`$(git rev-parse --short HEAD)\`, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo
for w in $ONLY; do
  case $w in
    find) run_table find find "--read /usr" / "find /usr/lib -type f" ;;
    git) run_table git "git status" "--read $REPO" "$REPO" "git -C $REPO status --short" ;;
    python) run_table python "python imports" "" / "$PY -c '$PYCODE'" ;;
    pytest) pytest_table ;;
    cargo) cargo_table ;;
    pyrun) pyrun ;;
    oneshot) oneshot ;;
    true) ;;
  esac
done
