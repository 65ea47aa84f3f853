#!/usr/bin/env bash
# The wheels tests/jail_learn_workloads.rs installs offline into the venv
# it makes (pytest and its dependencies, pinned, and pip itself to run the
# install from its wheel), in target/learn-wheels. The tests reach no
# network: only this script does (PyPI, once).
# Done once: a rerun is a no-op when every pinned wheel is there. Exits
# non-zero, with the reason on stderr, when pip cannot download them.
set -euo pipefail
cd "$(dirname "$0")/../.."
dir="${GLOVEBOX_LEARN_WHEELS:-target/learn-wheels}"
pins=(pytest==8.3.4 pluggy==1.5.0 iniconfig==2.0.0 packaging==24.2 pip==24.3.1)
have=1
for p in "${pins[@]}"; do
    name=${p%%==*}
    ver=${p##*==}
    compgen -G "$dir/${name}-${ver}-*.whl" >/dev/null || have=0
done
[ "$have" = 1 ] && exit 0
mkdir -p "$dir"
python3 -m pip download --quiet --disable-pip-version-check --no-deps \
    --only-binary=:all: -d "$dir" "${pins[@]}"
echo "learn wheels in $dir: $(ls "$dir" | tr '\n' ' ')"
