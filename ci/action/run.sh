#!/usr/bin/env bash
# Step 2 of action.yml: run INPUT_RUN with `bash -eo pipefail -c` inside
# `glovebox sandbox`, granting the listed paths. The exit status is the
# step's (3 when the jail cannot be built here: see glovebox doctor).
set -euo pipefail
: "${INPUT_RUN:?the action needs a run: input}"
gb="${GLOVEBOX_BIN:-glovebox}"
args=()
lines() { printf '%s\n' "$1" | sed -e 's/^[[:space:]]*//' -e 's/[[:space:]]*$//' | grep -v '^$' || true; }
while IFS= read -r p; do args+=(--read "$p"); done < <(lines "${INPUT_READ:-.}")
while IFS= read -r p; do args+=(--write "$p"); done < <(lines "${INPUT_WRITE:-}")
while IFS= read -r e; do args+=(--env "$e"); done < <(lines "${INPUT_ENV:-}")
case "${INPUT_NETWORK:-off}" in
    off|false|"") ;;
    on|true) args+=(--net) ;;
    direct) args+=(--net=direct) ;;
    *) echo "glovebox: network must be off, on or direct, not ${INPUT_NETWORK}" >&2; exit 2 ;;
esac
args+=(--timeout "${INPUT_TIMEOUT:-600}" --memory "${INPUT_MEMORY:-2G}")
exec "$gb" sandbox "${args[@]}" -- bash -eo pipefail -c "$INPUT_RUN"
