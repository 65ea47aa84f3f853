#!/usr/bin/env bash
# Step 1 of action.yml: put a glovebox binary on the job's PATH.
# INPUT_GLOVEBOX: a binary to use as it is; else the action's own checkout
# (GLOVEBOX_SRC) is built with cargo. Then `glovebox doctor` shows what
# this runner enforces (printed, never fatal here: the run step refuses
# with a clear message if the jail cannot be built).
set -euo pipefail
dest="${RUNNER_TEMP:-${TMPDIR:-/tmp}}/glovebox-bin"
mkdir -p "$dest"
if [ -n "${INPUT_GLOVEBOX:-}" ]; then
    [ -x "$INPUT_GLOVEBOX" ] || { echo "glovebox: $INPUT_GLOVEBOX is not an executable file" >&2; exit 2; }
    cp "$INPUT_GLOVEBOX" "$dest/glovebox"
else
    src="${GLOVEBOX_SRC:?GLOVEBOX_SRC is not set}"
    command -v cargo >/dev/null || { echo "glovebox: cargo is needed to build glovebox (install a Rust toolchain, or pass with: glovebox: PATH)" >&2; exit 2; }
    cargo build --release --locked --manifest-path "$src/Cargo.toml"
    cp "$src/target/release/glovebox" "$dest/glovebox"
fi
chmod 755 "$dest/glovebox"
if [ -n "${GITHUB_PATH:-}" ]; then
    echo "$dest" >> "$GITHUB_PATH"
fi
"$dest/glovebox" doctor || echo "glovebox: doctor reports gaps on this runner (see above)"
