#!/usr/bin/env bash
# Step 2 of action.yml: run INPUT_RUN with `bash -eo pipefail -c` inside
# `glovebox sandbox`, granting the listed paths. The exit status is the
# step's (3 when the jail cannot be built here: see glovebox doctor).
set -euo pipefail
: "${INPUT_RUN:?the action needs a run: input}"
gb="${GLOVEBOX_BIN:-glovebox}"
args=()
lines() { printf '%s\n' "$1" | sed -e 's/^[[:space:]]*//' -e 's/[[:space:]]*$//' | grep -v '^$' || true; }
# A path (or a NAME=VALUE value) starting with ~ is under the runner's $HOME
# (where rustup, nvm, pyenv and uv install): the jail's own HOME is private.
home() { case "$1" in "~") printf '%s' "$HOME" ;; "~/"*) printf '%s/%s' "$HOME" "${1#\~/}" ;; *) printf '%s' "$1" ;; esac; }
while IFS= read -r p; do args+=(--read "$(home "$p")"); done < <(lines "${INPUT_READ:-.}")
while IFS= read -r p; do
    p="$(home "$p")"
    # A grant needs something to grant: a missing write path (cargo's
    # target/ on a fresh checkout) is made first, as a directory.
    if [ ! -e "$p" ] && [ ! -L "$p" ]; then
        echo "glovebox: making the write path $p (it did not exist)" >&2
        mkdir -p -- "$p"
    fi
    args+=(--write "$p")
done < <(lines "${INPUT_WRITE:-}")
while IFS= read -r e; do
    case "$e" in *=*) e="${e%%=*}=$(home "${e#*=}")" ;; esac
    args+=(--env "$e")
done < <(lines "${INPUT_ENV:-}")
case "${INPUT_NETWORK:-off}" in
    off|false|"") ;;
    on|true) args+=(--net) ;;
    direct) args+=(--net=direct) ;;
    *) echo "glovebox: network must be off, on or direct, not ${INPUT_NETWORK}" >&2; exit 2 ;;
esac
args+=(--timeout "${INPUT_TIMEOUT:-600}" --memory "${INPUT_MEMORY:-2G}")
case "${INPUT_POLICY:-enforce}" in
    enforce|"")
        while IFS= read -r h; do args+=(--allow-host "$h"); done < <(lines "${INPUT_ALLOW_HOSTS:-}")
        exec "$gb" sandbox "${args[@]}" -- bash -eo pipefail -c "$INPUT_RUN"
        ;;
    learn)
        # Observed, on a throw-away copy (the read/write inputs are not
        # needed: the step reads what the runner sees, less glovebox's own
        # state); the proposed inputs go to the job summary.
        learn=(--learn --json)
        for ((i = 0; i < ${#args[@]}; i++)); do
            case "${args[i]}" in
                --read|--write) i=$((i + 1)) ;;
                *) learn+=("${args[i]}") ;;
            esac
        done
        result="$(mktemp)"
        trap 'rm -f "$result"' EXIT
        set +e
        "$gb" sandbox "${learn[@]}" -- bash -eo pipefail -c "$INPUT_RUN" > "$result"
        status=$?
        set -e
        python3 "$(dirname "$0")/summary.py" "$result" "$PWD" "${HOME:-}" "${INPUT_NETWORK:-off}" "${INPUT_ENV:-}"
        exit "$status"
        ;;
    *) echo "glovebox: policy must be learn or enforce, not ${INPUT_POLICY}" >&2; exit 2 ;;
esac
