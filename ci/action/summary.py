"""policy: learn — the step's output, then the proposed inputs written to
the job summary ($GITHUB_STEP_SUMMARY, else stderr).

argv: the JSON `glovebox sandbox --learn --json` printed, the working
directory, $HOME, the network input, the env input.
"""
import json
import os
import sys

path, cwd, home, network, env = sys.argv[1:6]
with open(path, encoding="utf-8") as f:
    text = f.read()
try:
    r = json.loads(text)
except ValueError:
    sys.stderr.write(text)
    sys.exit(0)
if "proposal" not in r:
    sys.stderr.write(r.get("error", {}).get("message", text) + "\n")
    sys.exit(0)
sys.stdout.write(r.get("stdout", ""))
sys.stderr.write(r.get("stderr", ""))


def shown(p):
    rel = os.path.relpath(p, cwd)
    if not rel.startswith(".."):
        return rel
    if home and (p == home or p.startswith(home.rstrip("/") + "/")):
        return "~" + p[len(home.rstrip("/")):]
    return p


def block(key, items):
    if not items:
        return []
    return [f"    {key}: |"] + [f"      {i}" for i in items]


prop = r["proposal"]
reads = [shown(g["path"]) for g in prop["grants"] if g["access"] == "read"]
writes = [shown(g["path"]) for g in prop["grants"] if g["access"] == "write"]
hosts = prop.get("hosts", [])
lines = ["  with:", "    policy: enforce"]
lines += block("read", reads)
lines += block("write", writes)
if hosts or network not in ("off", "false", ""):
    lines.append("    network: on" if hosts else "    network: off")
lines += block("allow-hosts", hosts)
lines += block("env", [e.strip() for e in env.splitlines() if e.strip()])
notes = [f"- not proposed: `{shown(k)}` (glovebox's own state)" for k in prop.get("kept_out", [])]
notes += [
    f"- not proposed: a write to `{shown(w)}` (refused while learning; the step succeeded without it)"
    for w in prop.get("unneeded_writes", [])
]
notes += [f"- not proposed: `{l}` (a user-database lookup; add it by hand if the step needs it)" for l in prop.get("lookups", [])]
out = (
    "### glovebox learned this step's inputs\n\n"
    + f"The step {'succeeded' if r.get('ok') else 'failed'} while learning. Paste these inputs (write directories are made for you) and review them:\n\n"
    + "```yaml\n" + "\n".join(lines) + "\n```\n"
    + ("\n" + "\n".join(notes) + "\n" if notes else "")
)
summary = os.environ.get("GITHUB_STEP_SUMMARY")
if summary:
    with open(summary, "a", encoding="utf-8") as f:
        f.write(out)
else:
    sys.stderr.write(out)
