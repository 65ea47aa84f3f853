#!/usr/bin/env bash
# `glovebox doctor --prove` (issue 46): what one tool's battery costs, side
# by side with `glovebox doctor` in the same run (alternating), wall time
# and CPU time (user + system of glovebox and every process it started),
# and where the battery's time goes (the attempts' own times, from
# `--json`).
#
#   bash bench/prove.sh          (RUNS=10 by default; PROVE_BIN=… to
#                                 measure another binary, e.g. a debug one)
#
# Rows: `doctor`; `doctor --prove repo_scan` on the example project (a
# command tool, network off); `doctor --prove fetch` on a project of one
# networked tool with an allowlist, a placeholder secret and a write grant
# over the project (its egress proxy and per-call CA made too). Prints
# markdown; hand-run, its numbers go to bench/RESULTS.md by hand.
source "$(dirname "$0")/lib.sh"
RUNS=${RUNS:-10}
if [ -n "${PROVE_BIN:-}" ]; then
  GB=$PROVE_BIN
else
  need_release
fi
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
P=$W/project
mkdir -p "$P/.glee/tools/fetch" "$P/.git/hooks" "$P/src"
echo main >"$P/src/main.txt"
cat >"$P/.glee/tools/fetch/tool.yml" <<'YML'
name: fetch
description: a networked tool for the prover
kind: command
version: 1
inputs: {schema: {type: object, properties: {}}}
outputs: {format: text}
exec: {command: {entrypoint: cat, args: [src/main.txt]}}
permissions:
  network: {allow: [api.example.com]}
  fs: {read: [], write: ["."]}
  secrets: {API_TOKEN: {type: string, hosts: [api.example.com]}}
YML
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
"$PY" - "$GB" "$RUNS" "$PWD/examples" "$P" <<'PY'
import json, resource, statistics, subprocess, sys, time
gb, runs, examples, project = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
rows = {
    "doctor": [gb, "doctor"],
    "doctor --prove repo_scan": [gb, "--root", examples, "doctor", "--prove", "repo_scan"],
    "doctor --prove fetch": [gb, "--root", project, "doctor", "--prove", "fetch"],
}
wall = {k: [] for k in rows}
cpu = {k: [] for k in rows}
for _ in range(runs):
    for name, cmd in rows.items():
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t = time.monotonic()
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wall[name].append(time.monotonic() - t)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu[name].append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
base_w = statistics.median(wall["doctor"])
base_c = statistics.median(cpu["doctor"])
print("| command | wall (median) | CPU (median) | wall / doctor | CPU / doctor |")
print("|---|--:|--:|--:|--:|")
for name in rows:
    w, c = statistics.median(wall[name]), statistics.median(cpu[name])
    print(f"| `{name}` | {w*1e3:.0f} ms | {c*1e3:.0f} ms | {w/base_w:.1f}× | {c/base_c:.1f}× |")
print()
print("Where the battery's time goes (one run of each, the attempts' own times):")
print()
for name in ["doctor --prove repo_scan", "doctor --prove fetch"]:
    out = subprocess.run(rows[name] + ["--json"], capture_output=True)
    report = json.loads(out.stdout)
    for t in report["tools"]:
        fam = {}
        for i in t["invariants"]:
            for c in i["checks"]:
                fam[i["invariant"]] = fam.get(i["invariant"], 0) + c.get("micros", 0)
        total = sum(fam.values())
        top = sorted(fam.items(), key=lambda kv: -kv[1])[:4]
        shown = ", ".join(f"{k} {v/1e3:.0f} ms" for k, v in top)
        print(f"- `{name}`: {t['duration_ms']} ms in all, {total/1e3:.0f} ms of attempts ({shown})")
PY
echo
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
