#!/usr/bin/env bash
# Learn mode's overhead per call (issue 33; hand-run, not part of all.sh):
# `glovebox sandbox --learn` (seccomp user notification on every open,
# exec, create, remove and rename, the user's view as ~30 read grants, a
# copy of the working directory) against the enforcing `glovebox sandbox`
# of the same command, in a small git repository. Prints a markdown table.
set -euo pipefail
gb="${GLOVEBOX:-$(dirname "$0")/../target/release/glovebox}"
runs="${RUNS:-20}"
dir=$(mktemp -d /tmp/glovebox-bench-learn-XXXXXX)
trap 'rm -rf "$dir"' EXIT
cd "$dir"
git init -q && mkdir src && for i in $(seq 1 50); do echo "$i" > "src/f$i.txt"; done
git add . && git -c user.email=b@example.com -c user.name=b commit -qm bench
hyperfine -N --warmup 3 --runs "$runs" --export-markdown "$dir/out.md" \
    -n "sandbox -- /bin/true" "$gb sandbox -- /bin/true" \
    -n "sandbox --learn -- /bin/true" "$gb sandbox --learn --json -- /bin/true" \
    -n "sandbox -- python3 -c pass" "$gb sandbox -- python3 -c pass" \
    -n "sandbox --learn -- python3 -c pass" "$gb sandbox --learn --json -- python3 -c pass" \
    -n "sandbox --read . -- git status" "$gb sandbox --read . -- git status --short" \
    -n "sandbox --learn -- git status" "$gb sandbox --learn --json -- git status --short" \
    >/dev/null
cat "$dir/out.md"
