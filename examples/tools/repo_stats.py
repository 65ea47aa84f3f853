"""Repository statistics for the repo_stats example tool (stdlib only)."""

import os

SKIP_DIRS = {".git", ".glee", ".venv", "__pycache__", "node_modules", "target"}


def run(path="."):
    """Count the regular files under `path` and the lines of the text ones."""
    files = 0
    loc = 0
    for dirpath, dirnames, filenames in os.walk(path):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
        for name in filenames:
            full = os.path.join(dirpath, name)
            if not os.path.isfile(full) or os.path.islink(full):
                continue
            files += 1
            try:
                with open(full, "rb") as handle:
                    data = handle.read()
            except OSError:
                continue
            if b"\0" in data:
                continue
            loc += data.count(b"\n")
            if data and not data.endswith(b"\n"):
                loc += 1
    return {"files": files, "loc": loc}


if __name__ == "__main__":
    import json
    import sys

    print(json.dumps(run(sys.argv[1] if len(sys.argv) > 1 else ".")))
