#!/usr/bin/env bash
# Creates the Python venv tests/http_api.rs runs Schemathesis from
# (PyPI, pinned), in target/schemathesis-venv. Done once: a rerun is a
# no-op when the pinned version is installed. Exits non-zero, with the
# reason on stderr, when it cannot be installed (no network, no venv).
set -euo pipefail
cd "$(dirname "$0")/../.."
version=4.32.5
venv="${GLOVEBOX_SCHEMATHESIS_VENV:-target/schemathesis-venv}"
check="import importlib.metadata as m; assert m.version('schemathesis') == '$version'"
if [ -x "$venv/bin/st" ] && "$venv/bin/python" -c "$check" 2>/dev/null; then
    exit 0
fi
mkdir -p "$(dirname "$venv")"
python3 -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check "schemathesis==$version"
"$venv/bin/python" -c "$check"
echo "schemathesis $version installed in $venv"
