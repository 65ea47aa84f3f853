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
#                      (adds the rows of an older binary: a lever's before/after in one run)
#   ONLY="find git" bash bench/workloads.sh      (a subset: find git python true)
#
# The repository `git status` runs in is a fresh clone of this one (its
# commits, a clean tree), made in a temporary directory.
source "$(dirname "$0")/lib.sh"
if [ -n "$QUICK" ]; then RUNS=${RUNS:-10}; WARMUP=${WARMUP:-2}; fi
RUNS=${RUNS:-40}
WARMUP=${WARMUP:-3}
ONLY=${ONLY:-find git python true}
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
  echo "-n"; echo "$name bare"; echo "$cmd"
  echo "-n"; echo "$name glovebox"; echo "$GB sandbox $grants --cwd $cwd -- $cmd"
  if [ -n "${GB_BEFORE:-}" ]; then
    echo "-n"; echo "$name glovebox (before)"; echo "$GB_BEFORE sandbox $grants --cwd $cwd -- $cmd"
  fi
  echo "-n"; echo "$name bwrap"; echo "$BWRAP --chdir $cwd $cmd"
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
print(f"| {name} ({len(first['times'])} runs, {first.get('passes', 1)} passes) | median ms | user+sys ms | ×bare | ×bare, start subtracted |")
print("|---|--:|--:|--:|--:|")
work0 = med[f"{name} bare"] - med["true bare"]
for k, r in runs.items():
    if not k.startswith(name + " "):
        continue
    who = k[len(name) + 1:]
    start = med.get(f"true {who}", med["true bare"])
    x = med[k] / med[f"{name} bare"]
    xs = (med[k] - start) / work0 if work0 > 0 else float("nan")
    cpu = (r.get("user", 0) + r.get("system", 0)) * 1e3
    print(f"| {k} | {med[k]:.2f} | {cpu:.1f} | {x:.2f} | {xs:.2f} |")
for k in runs:
    if k.startswith("true "):
        print(f"| {k} | {med[k]:.2f} | | | |")
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
    true) ;;
  esac
done
