#!/usr/bin/env bash
# Learn mode (issue 33; hand-run, not part of all.sh), two tables:
# 1. overhead per call: `glovebox sandbox --learn` (seccomp user
#    notification on every open, exec, create, remove and rename, the
#    user's view as ~30 read grants, a copy of the working directory)
#    against the enforcing `glovebox sandbox` of the same command with the
#    flags learn proposed, for /bin/true, python3, git status in a small
#    repository, `npm test` of a small package and pytest in a venv;
# 2. the proposal's size against the observed set for each workload:
#    paths observed (distinct, needing a grant), lines proposed, files
#    under the proposed grants (each once) and their ratio.
# Needs hyperfine, node/npm and tests/learn/setup.sh's wheels (.ci/setup).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
gb="${GLOVEBOX:-$here/target/release/glovebox}"
runs="${RUNS:-20}"
wheels="${GLOVEBOX_LEARN_WHEELS:-$here/target/learn-wheels}"
bash "$here/tests/learn/setup.sh" >/dev/null
dir=$(mktemp -d /tmp/glovebox-bench-learn-XXXXXX)
trap 'rm -rf "$dir"' EXIT

# The workloads (as in tests/jail_learn.rs).
mkdir -p "$dir/repo/src" && cd "$dir/repo"
git init -q && for i in $(seq 1 50); do echo "$i" > "src/f$i.txt"; done
git add . && git -c user.email=b@example.com -c user.name=b commit -qm bench
mkdir -p "$dir/pkg/test" && cd "$dir/pkg"
echo '{"name": "tiny", "version": "1.0.0", "private": true, "scripts": {"test": "node test/run.js"}}' > package.json
echo 'module.exports = (a, b) => a + b;' > index.js
printf "const add = require('../index.js');\nrequire('assert').strictEqual(add(2, 3), 5);\n" > test/run.js
mkdir -p "$dir/py/tests" && cd "$dir/py"
/usr/bin/python3 -m venv --without-pip .venv
.venv/bin/python "$(ls "$wheels"/pip-*.whl)/pip" install --quiet --no-index --no-compile \
    --disable-pip-version-check --find-links "$wheels" pytest
printf 'def test_sum():\n    assert sum([1, 2, 3]) == 6\n' > tests/test_sum.py
cd "$dir"

# name|cwd|command
workloads=(
    "/bin/true|$dir/repo|/bin/true"
    "python3 -c pass|$dir/repo|python3 -c pass"
    "git status|$dir/repo|git status --short"
    "npm test|$dir/pkg|npm test"
    "pytest in a venv|$dir/py|.venv/bin/pytest -q -p no:cacheprovider tests"
)
args=()
sizes="$dir/sizes.md"
echo "| workload | paths observed | lines proposed | files under the grants | files / observed |" > "$sizes"
echo "|---|--:|--:|--:|--:|" >> "$sizes"
for w in "${workloads[@]}"; do
    IFS='|' read -r name cwd cmd <<<"$w"
    # shellcheck disable=SC2086
    (cd "$cwd" && "$gb" sandbox --learn --json -- $cmd) > "$dir/learned.json"
    flags=$(python3 - "$dir/learned.json" "$sizes" "$name" <<'PY'
import json, os, sys
j = json.load(open(sys.argv[1]))
assert j["ok"], j
p = j["proposal"]
files = set()
for g in p["grants"]:
    path = g["path"]
    if os.path.isfile(path) or os.path.islink(path):
        files.add(path)
    for top, dirs, names in os.walk(path):
        files.update(os.path.join(top, n) for n in names)
        files.update(os.path.join(top, d) for d in dirs if os.path.islink(os.path.join(top, d)))
obs = p["observed"]
lines = len(p["grants"]) + len(p["hosts"])
ratio = f"{len(files) / obs:.2f}" if obs else "—"
with open(sys.argv[2], "a") as f:
    f.write(f"| {sys.argv[3]} | {obs} | {lines} | {len(files)} | {ratio} |\n")
print(" ".join(j["args"]))
PY
)
    args+=(-n "enforcing (proposed flags): $name" "$gb sandbox --cwd $cwd $flags -- $cmd")
    args+=(-n "learning: $name" "$gb sandbox --cwd $cwd --learn --json -- $cmd")
done
hyperfine -N --warmup 3 --runs "$runs" --export-markdown "$dir/out.md" "${args[@]}" >/dev/null
sed "s|$dir|D|g" "$dir/out.md"
echo
sed "s|$dir|D|g" "$sizes"
