# glovebox python shim: runs inside the jail as `python3 -I -B -c <this>`.
# Reads {"cwd", "module", "function", "args", "kwargs", "return"} as JSON on stdin,
# imports the module from cwd, calls the function, and writes one JSON
# document to the original stdout, which only this shim writes to: the
# function's own prints (Python or C level, and its subprocesses) go to
# stderr, because fd 1 is pointed at stderr before the module is imported.
import importlib
import importlib.machinery
import importlib.util
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
# Never read compiled files from the project's __pycache__ (a write grant
# could plant one whose header matches the source): compile from source.
# (glovebox also starts Python with -X pycache_prefix below /dev/null.)
sys.pycache_prefix = os.path.join(os.environ.get("HOME", "/nonexistent"), ".pycache")


def load_chain(chain):
    """Imports each component from the exact file glovebox resolved (never
    by searching sys.path, so a sibling package or module planted next to
    it never runs) and returns the last one."""
    module = None
    for name, kind, path in chain:
        if kind == "namespace":
            spec = importlib.machinery.ModuleSpec(name, None, is_package=True)
            spec.submodule_search_locations = [path]
        elif kind == "package":
            spec = importlib.util.spec_from_file_location(
                name, os.path.join(path, "__init__.py"), submodule_search_locations=[path]
            )
        else:
            spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        if spec.loader is not None:
            spec.loader.exec_module(module)
        parent, _, child = name.rpartition(".")
        if parent:
            setattr(sys.modules[parent], child, module)
    return module


try:
    if request.get("chain"):
        module = load_chain(request["chain"])
    else:
        module = importlib.import_module(request["module"])
    function = getattr(module, request["function"])
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
