#!/usr/bin/env bash
# Warm python workers (issue 20): a served python tool call, warm (a fork of
# a worker that already imported the module inside the tool's jail) beside
# the same tool with `exec.python.warm: false` (a fresh interpreter in a
# fresh jail per call, as before), beside a bare `python3 -c pass` on the
# same machine: p50 at 1 client and calls/s at 8 clients through
# `glovebox serve` (bench/load_client.py). Rewrites the "warm" section of
# bench/RESULTS.md.
#
#   bash bench/warm.sh          (SECONDS_PER_RUN=10; QUICK=1 for a smoke run)
source "$(dirname "$0")/lib.sh"
if [ -n "$QUICK" ]; then SECS=${SECONDS_PER_RUN:-2}; else SECS=${SECONDS_PER_RUN:-10}; fi
OUT=$(mktemp -d)
server=""
cleanup() {
  if [ -n "$server" ]; then kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; fi
  rm -rf "$OUT"
}
trap cleanup EXIT
need_release

mkdir -p "$OUT/project/.glee/tools/py_warm" "$OUT/project/.glee/tools/py_cold"
cat > "$OUT/project/mod.py" <<'PY'
import json


def f():
    return {"ok": True}
PY
for t in warm cold; do
  w=true; [ $t = cold ] && w=false
  cat > "$OUT/project/.glee/tools/py_$t/tool.yml" <<YML
name: py_$t
description: a trivial python function, jailed
kind: python
version: 1
inputs:
  schema: {type: object, properties: {}}
outputs: {format: json}
exec:
  python: {module: mod, function: f, warm: $w}
permissions: {network: false, fs: {read: ["."], write: []}}
YML
done

"$GB" --root "$OUT/project" serve --listen 127.0.0.1:0 --max-concurrent 64 2> "$OUT/serve.log" &
server=$!
url=""
for _ in $(seq 100); do
  url=$(grep -o 'http://[0-9.:]*' "$OUT/serve.log" | head -1 || true)
  [ -n "$url" ] && break
  sleep 0.1
done
[ -n "$url" ] || { echo "glovebox serve did not start:" >&2; cat "$OUT/serve.log" >&2; exit 1; }
echo "== $url (pid $server)" >&2

# Alternate the rows so load changes on this shared machine hit them alike.
for pass in 1 2; do
  for t in warm cold; do
    for c in 1 8; do
      echo "== py_$t, $c client(s), ${SECS}s (pass $pass)" >&2
      python3 bench/load_client.py "$url" "py_$t" "$c" "$SECS" | tee "$OUT/$t.c$c.p$pass.json" >&2
    done
  done
  # bare python3 -c pass: p50 of sequential runs
  $PY - "$OUT/bare.p$pass.json" "$([ -n "$QUICK" ] && echo 50 || echo 300)" <<'PY'
import json, statistics, subprocess, sys, time
n = int(sys.argv[2])
lat = []
for _ in range(n):
    t = time.perf_counter()
    subprocess.run(["/usr/bin/python3", "-c", "pass"], check=True)
    lat.append(time.perf_counter() - t)
json.dump({"p50_ms": round(statistics.median(lat) * 1e3, 2), "runs": n}, open(sys.argv[1], "w"))
PY
done

python3 - "$(quick_note)" "$OUT" <<'PY'
import glob, json, os, statistics, subprocess, sys
sys.path.insert(0, "bench")
import section
note, out = sys.argv[1:3]
def rows(pattern):
    return [json.load(open(f)) for f in sorted(glob.glob(os.path.join(out, pattern)))]
med = lambda rs, k: round(statistics.median(r[k] for r in rs), 2)
bare = med(rows("bare.p*.json"), "p50_ms")
r = {}
for t in ("warm", "cold"):
    for c in (1, 8):
        rs = rows(f"{t}.c{c}.p*.json")
        r[t, c] = {"p50": med(rs, "p50_ms"), "p99": med(rs, "p99_ms"), "cps": med(rs, "calls_per_s"),
                   "calls": sum(x["calls"] for x in rs), "errors": sum(x["errors"] for x in rs),
                   "transport": rs[0]["transport"]}
metric = lambda k, v: subprocess.run(["python3", "bench/metric.py", k, str(v)], check=True)
metric("warm.bare_python_p50_ms", bare)
for (t, c), v in r.items():
    metric(f"warm.{t}.c{c}.p50_ms", v["p50"])
    metric(f"warm.{t}.c{c}.calls_per_s", v["cps"])
ratio = lambda a, b: f"{a / b:.2f}×" if b else "?"
lines = ["## Warm python workers (`bench/warm.sh`)", "", section.stamp(), ""]
if note:
    lines += [note, ""]
lines += [f"Transport: **{r['warm', 1]['transport']}**. One trivial python tool (`def f(): return {{'ok': True}}`), "
          "served warm (a fork of a worker that imported the module inside the tool's jail) and as its "
          "`warm: false` twin (a fresh jail and interpreter per call), called by `bench/load_client.py` "
          "in a loop; two passes alternating the rows, medians of the passes. Bare: `python3 -c pass`, "
          "sequential runs, p50. The client runs on the same 2 cores as the server.",
          "",
          "| tool | clients | calls | errors | p50 ms | p99 ms | calls/s | p50 / bare `python3 -c pass` |",
          "|---|--:|--:|--:|--:|--:|--:|--:|"]
for t in ("warm", "cold"):
    for c in (1, 8):
        v = r[t, c]
        lines.append(f"| {t} | {c} | {v['calls']} | {v['errors']} | {v['p50']} | {v['p99']} | {v['cps']} | "
                     f"{ratio(v['p50'], bare) if c == 1 else ''} |")
lines += ["", f"Bare `python3 -c pass` p50: {bare} ms.", "",
          "| target (issue 20) | now | status |", "|---|--:|---|",
          f"| served python call p50 at 1 client < bare `python3 -c pass` | {ratio(r['warm', 1]['p50'], bare)} "
          f"(cold: {ratio(r['cold', 1]['p50'], bare)}) | {'met' if r['warm', 1]['p50'] < bare else '**missed**'} |",
          f"| 8 clients ≥ 400 python calls/s | {r['warm', 8]['cps']}/s (cold: {r['cold', 8]['cps']}/s; "
          f"warm/cold {ratio(r['warm', 8]['cps'], r['cold', 8]['cps'])}) | {'met' if r['warm', 8]['cps'] >= 400 else '**missed**'} |"]
section.write(os.environ["BENCH_RESULTS"], "warm", "\n".join(lines))
print("\n".join(lines))
PY
echo "== wrote the warm section of $BENCH_RESULTS" >&2
