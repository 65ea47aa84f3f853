#!/usr/bin/env bash
# Where a one-shot call's time goes, lever by lever (issue 19), side by
# side in one run: `sandbox -- /bin/true` and `run` of a trivial command
# tool for each binary given, against the bare command and bubblewrap,
# plus what each call makes the kernel do (clones, mounts, syncs: from
# `strace -f -c` of one call). The binaries are the same source at
# successive commits, so each column difference is one lever.
#
#   BINS="before:/tmp/gb-main mid:/tmp/gb-mid after:target/release/glovebox" \
#     bash bench/breakdown.sh
#
# Prints markdown tables (medians of hyperfine passes that alternate, see
# lib.sh); nothing is rewritten.
source "$(dirname "$0")/lib.sh"
: "${BINS:?set BINS to NAME:PATH pairs}"
RUNS=${RUNS:-200}
WARMUP=${WARMUP:-10}
BWRAP="bwrap --ro-bind / / --dev /dev --proc /proc --unshare-all --new-session --die-with-parent"
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
need_tools bwrap hyperfine strace
P=bench/projects/trivial
args=(-n bare "/bin/true" -n bwrap "$BWRAP /bin/true")
for b in $BINS; do
  name=${b%%:*} bin=${b#*:}
  args+=(-n "sandbox, $name" "$bin sandbox -- /bin/true")
  args+=(-n "run, $name" "$bin --root $P run noop_cmd")
done
hf "$OUT/t.json" "$RUNS" "$WARMUP" "${args[@]}"

for b in $BINS; do
  name=${b%%:*} bin=${b#*:}
  for what in sandbox run; do
    if [ $what = sandbox ]; then cmd=("$bin" sandbox -- /bin/true); else cmd=("$bin" --root "$P" run noop_cmd); fi
    strace -f -c -o "$OUT/$name.$what.strace" "${cmd[@]}" >/dev/null 2>&1 || true
  done
done

python3 - "$OUT" "$BINS" <<'PY'
import json, sys
out, bins = sys.argv[1], sys.argv[2].split()
names = [b.split(":", 1)[0] for b in bins]
r = json.load(open(f"{out}/t.json"))["results"]
med = {x["command"]: x["median"] * 1e3 for x in r}
bare, bw = med["bare"], med["bwrap"]
print("| command | median ms | ×bare | ×bwrap |")
print("|---|--:|--:|--:|")
for x in r:
    m = x["median"] * 1e3
    print(f"| {x['command']} | {m:.3f} | {m / bare:.2f} | {m / bw:.2f} |")
print()
print("| engine cost (run − sandbox, medians) | " + " | ".join(names) + " |")
print("|---|" + "--:|" * len(names))
print("| ms | " + " | ".join(f"{med['run, ' + n] - med['sandbox, ' + n]:.3f}" for n in names) + " |")
print()
def calls(path):
    d = {}
    for line in open(path).read().splitlines()[2:]:
        f = line.split()
        if len(f) >= 5 and f[0][0].isdigit():
            d[f[-1]] = int(f[3])
    return d
want = ["clone", "clone3", "mount", "umount2", "mkdir", "landlock_add_rule", "fsync", "fdatasync", "flock", "openat", "total"]
cols = [(n, w) for n in names for w in ("sandbox", "run")]
print("| syscalls per call (strace -f -c) | " + " | ".join(f"{w}, {n}" for n, w in cols) + " |")
print("|---|" + "--:|" * len(cols))
tables = {c: calls(f"{out}/{c[0]}.{c[1]}.strace") for c in cols}
for s in want:
    print(f"| {s} | " + " | ".join(str(tables[c].get(s, 0)) for c in cols) + " |")
PY
