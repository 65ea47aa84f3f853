"""Turns deploy/base's rendered Deployment into what `podman kube play`
(Debian 12's podman 4.3) runs as written, for .ci/container. Every change
is one podman 4.3 cannot take as Kubernetes would, or one this machine
needs; everything else (the pod and container securityContext, the
RuntimeDefault seccomp profile, the read-only root, no capabilities, uid
65532, the emptyDirs, the approvals ConfigMap, the API token from a
Secret, the probes) runs as the manifest says.

    python kube-play.py RENDERED IMAGE PORT CHECKPOINT_DIR APPROVALS_DIR OUT_DIR

Writes OUT_DIR/play.yaml (the Deployment and the approvals ConfigMap) and
OUT_DIR/glovebox-api.json (the API token, in the flat {key: base64} form
podman 4.3 reads a secretKeyRef's `podman secret` in).
"""

import base64
import json
import os
import re
import sys

import yaml

rendered, image, port, checkpoint_dir, approvals_dir, out = sys.argv[1:]
docs = [d for d in yaml.safe_load_all(open(rendered)) if d]
dep = next(d for d in docs if d["kind"] == "Deployment")
# One pod: podman plays a Deployment as one pod.
dep["spec"]["replicas"] = 1
spec = dep["spec"]["template"]["spec"]
c = spec["containers"][0]
# The image built from the local rootfs, with the project baked in.
c["image"] = image
# podman 4.3 supports neither status.podIP nor metadata.namespace as a
# fieldRef: the pod shares the host's network here, so its address is
# the host's loopback.
literal = {"status.podIP": "127.0.0.1", "metadata.namespace": "default"}
for e in c["env"]:
    path = e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
    if path in literal:
        e.pop("valueFrom")
        e["value"] = literal[path]
# Kubernetes expands $(VAR) in args from the container's env; podman 4.3
# does not. The port moves to a free one of the host's (host network).
env = {e["name"]: e["value"] for e in c["env"] if "value" in e}
c["args"] = [
    re.sub(r"\$\((\w+)\)", lambda m: env.get(m.group(1), m.group(0)), a).replace(
        ":7878", f":{port}"
    )
    for a in c["args"]
]
# The same expansion in env values (GLOVEBOX_METRICS_LISTEN), and the
# metrics port moves to any free one (glovebox prints it).
for e in c["env"]:
    if e.get("name") == "GLOVEBOX_METRICS_LISTEN":
        e["value"] = "127.0.0.1:0"
# Host network: podman refuses port mappings with it.
c.pop("ports", None)
# podman 4.3 knows no `sleep` preStop action (Kubernetes 1.29+); the
# drain after SIGTERM is glovebox's own and runs as written.
c.pop("lifecycle", None)
for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
    c[probe]["httpGet"]["port"] = int(port)
for v in spec["volumes"]:
    if v["name"] == "checkpoint-key":
        # podman 4.3 writes a secret volume's files base64-encoded: the
        # key comes from a host directory instead.
        v.pop("secret")
        v["hostPath"] = {"path": checkpoint_dir, "type": "Directory"}
approvals = {
    "apiVersion": "v1",
    "kind": "ConfigMap",
    "metadata": {"name": "glovebox-approvals"},
    "data": {f: open(os.path.join(approvals_dir, f)).read() for f in sorted(os.listdir(approvals_dir))},
}
with open(os.path.join(out, "play.yaml"), "w") as f:
    yaml.safe_dump_all([dep, approvals], f, sort_keys=False)
with open(os.path.join(out, "glovebox-api.json"), "w") as f:
    json.dump({"token": base64.b64encode(b"kube-play-token").decode()}, f)
