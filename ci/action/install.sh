#!/usr/bin/env bash
# Step 1 of action.yml: put a glovebox binary on the job's PATH.
# INPUT_GLOVEBOX: a binary to use as it is; else the binary built from
# the action's own checkout (GLOVEBOX_SRC) by an earlier job, kept in
# GLOVEBOX_CACHE (action.yml restores and saves it with actions/cache,
# keyed by `install.sh --key`), else that checkout is built with cargo
# and put there. Then `glovebox doctor` shows what this runner enforces
# (printed, never fatal here: the run step refuses with a clear message
# if the jail cannot be built).
#
# `install.sh --key` prints the hash of what the binary is built from
# (Cargo.toml, Cargo.lock, build.rs and src/), the cache's key.
set -euo pipefail
key() {
    local src="${GLOVEBOX_SRC:?GLOVEBOX_SRC is not set}"
    local parts=() p
    for p in Cargo.toml Cargo.lock build.rs src; do
        [ -e "$src/$p" ] && parts+=("$p")
    done
    (cd "$src" && find "${parts[@]}" -type f | LC_ALL=C sort | xargs sha256sum | sha256sum | cut -c1-32)
}
if [ "${1:-}" = "--key" ]; then
    key
    exit 0
fi
dest="${RUNNER_TEMP:-${TMPDIR:-/tmp}}/glovebox-bin"
mkdir -p "$dest"
if [ -n "${INPUT_GLOVEBOX:-}" ]; then
    [ -x "$INPUT_GLOVEBOX" ] || { echo "glovebox: $INPUT_GLOVEBOX is not an executable file" >&2; exit 2; }
    cp "$INPUT_GLOVEBOX" "$dest/glovebox"
else
    src="${GLOVEBOX_SRC:?GLOVEBOX_SRC is not set}"
    cache="${GLOVEBOX_CACHE:-$HOME/.cache/glovebox-action}/$(key)"
    if [ -x "$cache/glovebox" ]; then
        echo "glovebox: using the binary built earlier from this source ($cache)"
        cp "$cache/glovebox" "$dest/glovebox"
    else
        command -v cargo >/dev/null || { echo "glovebox: cargo is needed to build glovebox (install a Rust toolchain, or pass with: glovebox: PATH)" >&2; exit 2; }
        cargo build --release --locked --manifest-path "$src/Cargo.toml"
        cp "$src/target/release/glovebox" "$dest/glovebox"
        mkdir -p "$cache"
        cp "$src/target/release/glovebox" "$cache/glovebox"
    fi
fi
chmod 755 "$dest/glovebox"
if [ -n "${GITHUB_PATH:-}" ]; then
    echo "$dest" >> "$GITHUB_PATH"
fi
"$dest/glovebox" doctor || echo "glovebox: doctor reports gaps on this runner (see above)"
