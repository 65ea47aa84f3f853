# glovebox python shim: runs inside the jail as `python3 -I -B -c <this>`.
# Reads {"cwd", "module", "function", "args", "kwargs", "return"} as JSON on stdin,
# imports the module from cwd, calls the function, and writes one JSON
# document to the original stdout, which only this shim writes to: the
# function's own prints (Python or C level, and its subprocesses) go to
# stderr, because fd 1 is pointed at stderr before the module is imported.
import importlib
import json
import os
import sys

# The shim imports what it needs before the tool's directory goes first on
# sys.path (and `traceback`, only needed on failure, with that directory
# off it): a project file named like a standard module (importlib.py,
# traceback.py) can shadow it for the tool's own imports only, never for
# the shim.

request = json.load(sys.stdin)
result = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)
sys.stdout = os.fdopen(1, "w", buffering=1, closefd=False)
sys.stdin = open(os.devnull)
sys.path.insert(0, request["cwd"])
sys.argv = [request["module"]]

try:
    function = getattr(importlib.import_module(request["module"]), request["function"])
    value = function(*request["args"], **request.get("kwargs", {}))
    if request["return"] == "json":
        payload = json.dumps({"ok": True, "value": value})
    else:
        payload = json.dumps({"ok": True, "value": value if isinstance(value, str) else str(value)})
except BaseException as e:  # noqa: BLE001 - every exception is the tool's result
    saved = sys.path[:]
    sys.path[:] = [p for p in saved if p not in (request["cwd"], "", ".")]
    try:
        import traceback
    finally:
        sys.path[:] = saved
    payload = json.dumps(
        {
            "ok": False,
            "type": type(e).__name__,
            "message": str(e),
            "traceback": traceback.format_exc(),
        }
    )

sys.stdout.flush()
result.write(payload)
result.flush()
