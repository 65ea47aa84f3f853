#!/bin/sh
# Counts to-do markers in the files under a directory (default: the current one).
# Used by the repo_scan example tool. Skips version control, glovebox's
# own files and virtual environments (python3 -m venv examples/.venv).
set -u
target="${1:-.}"
if [ ! -e "$target" ]; then
    echo "scan_todos: no such path: $target" >&2
    exit 2
fi
# grep exits 1 when nothing matches; that is a count of zero, not a failure.
count=$(grep -r -o -I --exclude-dir=.git --exclude-dir=.glee --exclude-dir=.venv --exclude-dir=venv --exclude-dir=node_modules -e "TO""DO" -- "$target" 2>/dev/null | wc -l)
count=$(echo "$count" | tr -d ' ')
echo "Scan complete."
echo "Matches found: $count"
