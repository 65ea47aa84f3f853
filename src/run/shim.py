# glovebox python shim: runs inside the jail as `python3 -I -B -c <this>`.
# Cold (no arguments): reads {"cwd", "module", "function", "args", "kwargs",
# "return"} as JSON on stdin, imports the module from cwd, calls the
# function, and writes one JSON document to the original stdout, which only
# this shim writes to: the function's own prints (Python or C level, and
# its subprocesses) go to stderr, because fd 1 is pointed at stderr before
# the module is imported.
# Warm (`warm INIT`): a zygote; see `warm()` in shim_warm.py, which is
# compiled only for warm workers (python::SHIM_WARM), and src/run/warm.rs.
import importlib
import importlib.machinery
import os
import sys

# What importlib.util re-exports, from where it takes them: importing
# importlib.util itself (contextlib, functools, types, warnings) cost a
# cold call more than a millisecond.
from importlib._bootstrap import module_from_spec
from importlib._bootstrap_external import spec_from_file_location


def json_codec():
    """`loads` and `dumps` as the json package does them with its
    defaults, on the same C scanner and encoder (`_json`) json itself
    uses, without importing json: its regular expressions (`re`, `enum`)
    were a third of the shim's start. The json package where the
    accelerator is missing or does not answer as json would."""
    try:
        from _json import encode_basestring_ascii, make_encoder, make_scanner

        class Settings:  # json.JSONDecoder()'s
            strict = True
            object_hook = None
            object_pairs_hook = None
            parse_float = float
            parse_int = int
            parse_constant = {"-Infinity": float("-inf"), "Infinity": float("inf"), "NaN": float("nan")}.__getitem__

        scan = make_scanner(Settings())

        def default(o):
            raise TypeError(f"Object of type {o.__class__.__name__} is not JSON serializable")

        def loads(text):
            if isinstance(text, (bytes, bytearray)):
                text = text.decode("utf-8", "surrogatepass")
            blank = " \t\n\r"
            start = len(text) - len(text.lstrip(blank))
            try:
                value, end = scan(text, start)
            except StopIteration as e:
                raise ValueError(f"expecting a JSON value at {e.value}") from None
            if text[end:].strip(blank):
                raise ValueError(f"extra data after the JSON value at {end}")
            return value

        def dumps(value):
            if isinstance(value, str):
                return encode_basestring_ascii(value)
            # A fresh encoder (and circular-reference table) per document,
            # as json.dumps makes: a failed one leaves entries behind.
            # allow_nan off: NaN and the infinities are not JSON, and
            # glovebox would read no result; a value holding one is the
            # tool's error (ValueError), as json.dumps(allow_nan=False).
            encode = make_encoder({}, default, encode_basestring_ascii, None, ": ", ", ", False, False, False)
            return "".join(encode(value, 0))

        probe = {"a": [1, -2.5, None, True, False, "\u00e9\n\"", {"b": {}}, []], "": 1e300}
        text = '{"a": [1, -2.5, null, true, false, "\\u00e9\\n\\"", {"b": {}}, []], "": 1e+300}'
        if dumps(probe) != text or loads(text) != probe or loads(b" [] ") != []:
            raise TypeError("the json accelerator does not answer as json")
        return loads, dumps
    except (ImportError, AttributeError, TypeError, ValueError):
        import json

        def dumps(value):
            return json.dumps(value, allow_nan=False)

        return json.loads, dumps


loads, dumps = json_codec()

# Safe paths: the interpreter runs isolated (`-I`: neither the script's
# directory nor the working directory is on sys.path), and the tool's
# directory is *appended* to sys.path, after the standard library and
# site-packages: the tool's own helper modules import from it, but a
# project file named like a standard or installed module (csv.py,
# json.py, traceback.py) never shadows it, for the tool or the shim.


class SourceOnly(importlib.machinery.SourceFileLoader):
    """Compiles a module from its source file and never reads a byte-code
    cache: a write grant could plant `__pycache__/N.cpython-*.pyc` whose
    header matches the source's size and mtime, which Python's own check
    accepts in place of the source."""

    def get_code(self, fullname):
        path = self.get_filename(fullname)
        return self.source_to_code(self.get_data(path), path)


SYSTEM = os.path.realpath(sys.base_prefix).rstrip("/") + "/"


def source_only_outside_the_system():
    """Every directory on sys.path outside the Python installation
    (the tool's cwd, the project, a venv) is searched with SourceOnly for
    `.py` files; the installation's own modules (read-only in every jail)
    keep their byte-code caches, so the standard library loads as fast as
    in a bare `python3`."""
    m = importlib.machinery
    kinds = [(m.ExtensionFileLoader, m.EXTENSION_SUFFIXES), (m.SourcelessFileLoader, m.BYTECODE_SUFFIXES)]
    cached = m.FileFinder.path_hook(kinds[0], (m.SourceFileLoader, m.SOURCE_SUFFIXES), kinds[1])
    strict = m.FileFinder.path_hook(kinds[0], (SourceOnly, m.SOURCE_SUFFIXES), kinds[1])

    def hook(path):
        where = os.path.realpath(path or ".")
        if (where + "/").startswith(SYSTEM):
            return cached(path)
        return Absent(strict(path)) if ABSENT else strict(path)

    finder_hooks = [h for h in sys.path_hooks if "FileFinder" in getattr(h, "__qualname__", "")]
    sys.path_hooks[:] = [h for h in sys.path_hooks if h not in finder_hooks] + [hook]
    sys.path_importer_cache.clear()


# The names the tool's imports had nothing under in the project when
# glovebox looked (`DIR/NAME`, real paths): a module found there now was
# put there since, by a second call (whose clean-up comes after it).
ABSENT = set()


class Absent:
    """A path entry's finder that never finds a module under a name in
    ABSENT (whatever its suffix: `.py`, a package, a native extension)."""

    def __init__(self, finder):
        self.finder = finder

    def find_spec(self, fullname, target=None):
        spec = self.finder.find_spec(fullname, target)
        if spec is None:
            return None
        names = list(spec.submodule_search_locations or [])
        if spec.origin and spec.has_location:
            where, base = os.path.split(spec.origin)
            names.append(where if base.startswith("__init__.") else os.path.join(where, base.split(".")[0]))
        if any(os.path.realpath(n) in ABSENT for n in names):
            return None
        return spec

    def invalidate_caches(self):
        self.finder.invalidate_caches()

    def __getattr__(self, name):
        return getattr(self.finder, name)


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
            init = os.path.join(path, "__init__.py")
            spec = spec_from_file_location(
                name, init, loader=SourceOnly(name, init), submodule_search_locations=[path]
            )
        elif path.endswith(".py"):
            spec = spec_from_file_location(name, path, loader=SourceOnly(name, path))
        else:
            spec = spec_from_file_location(name, path)
        module = module_from_spec(spec)
        sys.modules[name] = module
        if spec.loader is not None:
            spec.loader.exec_module(module)
        parent, _, child = name.rpartition(".")
        if parent:
            setattr(sys.modules[parent], child, module)
    return module


def load(request):
    if request.get("chain"):
        return load_chain(request["chain"])
    # Not in cwd when glovebox looked (an installed module): imported by
    # name from everywhere but cwd, where a file planted since then by
    # another call would otherwise be found.
    cwd = request["cwd"]
    saved = sys.path[:]
    sys.path[:] = [p for p in saved if p not in (cwd, "", ".")]
    try:
        return importlib.import_module(request["module"])
    finally:
        sys.path[:] = saved


def prepare(request):
    # Last: only for names the standard library and site-packages do not
    # have (the tool's own modules).
    sys.path.append(request["cwd"])
    sys.argv = [request["module"]]
    ABSENT.update(os.path.realpath(p) for p in request.get("absent") or [])
    # Never read compiled files from the project's __pycache__ (a write
    # grant could plant one whose header matches the source): the tool's
    # own modules compile from source (SourceOnly); the installation's
    # keep their caches.
    source_only_outside_the_system()


def failure(e, cwd):
    saved = sys.path[:]
    sys.path[:] = [p for p in saved if p not in (cwd, "", ".")]
    try:
        import traceback
    finally:
        sys.path[:] = saved
    return dumps(
        {
            "ok": False,
            "type": type(e).__name__,
            "message": str(e),
            "traceback": traceback.format_exc(),
        }
    )


def invoke(request, module, cwd, result):
    """Calls the function (importing the module first when `module` is
    None) and writes the one JSON reply to `result`."""
    try:
        if module is None:
            module = load(request)
        function = getattr(module, request["function"])
        value = function(*request["args"], **request.get("kwargs", {}))
        if request["return"] == "json":
            payload = dumps({"ok": True, "value": value})
        else:
            payload = dumps({"ok": True, "value": value if isinstance(value, str) else str(value)})
    except BaseException as e:  # noqa: BLE001 - every exception is the tool's result
        payload = failure(e, cwd)
    sys.stdout.flush()
    result.write(payload)
    result.flush()


def cold():
    request = loads(sys.stdin.read())
    result = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = os.fdopen(1, "w", buffering=1, closefd=False)
    sys.stdin = open(os.devnull)
    prepare(request)
    invoke(request, None, request["cwd"], result)


# `warm` exists only in a warm worker's source (python::SHIM_WARM); asked
# for without it, the worker fails at once (NameError) and the call runs
# cold.
if len(sys.argv) > 2 and sys.argv[1] == "warm":
    warm()
else:
    cold()
