# glovebox: approved code stays pinned while it runs (src/run/pins.rs).
# Compiled first, before the python shim (src/run/shim.py) or the bootstrap
# of python commands (src/run/boot.py), and run before anything of the
# project is imported. Without GLOVEBOX_PINS it does nothing.
#
# GLOVEBOX_PINS names a file glovebox wrote into the call's private home
# before the tool started: the project root (as spelt and resolved), the
# directories whose files are not checked one by one (the tool's venv,
# protected whole), the tool's name, a report tag, and the sha256 of every
# file the approval covers, by path relative to the root. From then on
# every project file the interpreter loads as code is read once, hashed,
# and used only when the approval holds exactly those bytes: a module, a
# package's __init__, a sourceless .pyc, a native extension (copied into
# a memfd and loaded from there, so the bytes checked are the bytes
# mapped), a zip on sys.path, a script runpy runs. Whatever imports it:
# an import statement, __import__ of a computed name, importlib,
# runpy. A file the approval does not cover, or whose bytes changed, is
# refused with an ImportError naming it, and reported to glovebox on fd 2
# (a line with the report tag), which records it so that `glovebox
# approve` shows and hashes it next time. The project's __pycache__ is
# never read (a cache could stand in for its source).
#
# Only a call of a tool that requires approval compiles this file; it
# installs the check as soon as it runs (VERIFY, below).


def pin():
    """Installs the check; returns `verify(path)` (the bytes of a file
    the approval covers, raising for one it does not; None for a file
    outside the project), or None when the call is not pinned."""
    import os

    where = os.environ.pop("GLOVEBOX_PINS", None)
    if not where:
        return None
    import _frozen_importlib as bootstrap
    import _frozen_importlib_external as external
    import _imp
    import _io
    import io
    import sys

    try:
        from _sha2 import sha256
    except ImportError:
        try:
            from _sha256 import sha256
        except ImportError:
            from hashlib import sha256

    try:
        with open(where, "rb") as f:
            fields = f.read().split(b"\0")
    except OSError as e:
        raise SystemExit("glovebox: the list of approved files cannot be read (%s); the call was not run" % e)
    if fields[:1] != [b"glovebox-pins-1"] or len(fields) % 2 != 1:
        raise SystemExit("glovebox: the list of approved files is malformed; the call was not run")
    roots, skips, files, tag, tool = [], [], {}, "", "?"
    for i in range(1, len(fields), 2):
        key, value = fields[i].decode("ascii", "replace"), os.fsdecode(fields[i + 1])
        if key == "root":
            roots.append(value.rstrip("/") + "/")
        elif key == "skip":
            skips.append(value.rstrip("/") + "/")
        elif key == "tag":
            tag = value
        elif key == "tool":
            tool = value
        else:
            files[value] = key
    # The interpreter's own installation is not the project's, unless the
    # project lies inside it (a project under /usr/src).
    for base in {sys.base_prefix, sys.base_exec_prefix}:
        real = os.path.realpath(base).rstrip("/") + "/"
        if not any(r.startswith(real) for r in roots):
            skips.append(real)
    roots, skips = tuple(roots), tuple(skips)
    # (importlib.machinery's classes and suffixes, without importing it:
    # the interpreter's own frozen modules are loaded already.)
    suffixes = external.SOURCE_SUFFIXES + external.BYTECODE_SUFFIXES + external.EXTENSION_SUFFIXES
    code = tuple(suffixes) + (".zip", ".egg", ".whl", ".pyz")

    def names(path):
        """The names of `path` relative to the root (as spelt, and with
        its links resolved), or None when glovebox does not pin it (outside
        the root, or in a directory protected whole)."""
        path = os.fsdecode(path)
        spelt = os.path.abspath(path)
        real = os.path.realpath(path)
        if (real + "/").startswith(skips):
            return None
        out = [p[len(r) :] for p in (spelt, real) for r in roots if p.startswith(r)]
        return out or None

    def refuse(path, rel, changed):
        try:
            os.write(2, b"\nglovebox-pinned-refused %s %s\n" % (tag.encode(), os.fsencode(os.path.abspath(path)).hex().encode()))
        except OSError:
            pass
        why = "it changed since" if changed else "it is not covered by"
        raise ImportError(
            "glovebox refused to load %s: %s the approval of tool `%s`; run `glovebox approve %s` to review and approve it"
            % (rel, why, tool, tool),
            path=path,
        )

    def checked(path, rel):
        """The bytes of `path`, read once, when the approval holds them."""
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            if (os.fstat(fd).st_mode & 0o170000) != 0o100000:
                refuse(path, rel[0], False)
            chunks = []
            while True:
                chunk = os.read(fd, 1 << 20)
                if not chunk:
                    break
                chunks.append(chunk)
        finally:
            os.close(fd)
        data = b"".join(chunks)
        digest = sha256(data).hexdigest()
        if any(files.get(n) == digest for n in rel):
            return data
        refuse(path, rel[0], any(n in files for n in rel))

    def verify(path):
        rel = names(path)
        return None if rel is None else checked(path, rel)

    def cache(path):
        return "/__pycache__/" in os.fsdecode(path)

    # Sources, caches, zips and runpy's scripts: every loader of the
    # standard library reads code through io.open_code.
    open_code = _io.open_code

    def pinned_open_code(path):
        rel = names(path)
        if rel is not None:
            if cache(path):
                raise FileNotFoundError(2, "glovebox never reads a project's __pycache__", path)
            if os.fsdecode(path).endswith(code):
                return io.BytesIO(checked(path, rel))
        return open_code(path)

    _io.open_code = io.open_code = pinned_open_code

    # Sourceless .pyc files are read without io.open_code.
    sourceless = external.SourcelessFileLoader.get_data

    def sourceless_get_data(self, path):
        rel = names(path)
        if rel is None:
            return sourceless(self, path)
        return checked(path, rel)

    external.SourcelessFileLoader.get_data = sourceless_get_data

    # Native extensions are mapped by dlopen: the bytes checked go into a
    # memfd, which is what gets mapped (a file swapped after the check is
    # never the one loaded). Where /proc/self/fd cannot be opened, the
    # checked file itself.
    create = external.ExtensionFileLoader.create_module

    def create_module(self, spec):
        rel = names(spec.origin) if spec.origin else None
        if rel is None:
            return create(self, spec)
        data = checked(spec.origin, rel)
        try:
            fd = os.memfd_create("glovebox-pinned", os.MFD_CLOEXEC)
        except (AttributeError, OSError):
            return create(self, spec)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            alias = "/proc/self/fd/%d" % fd
            if not os.path.exists(alias):
                return create(self, spec)
            return _imp.create_dynamic(bootstrap.ModuleSpec(spec.name, self, origin=alias))
        finally:
            os.close(fd)

    external.ExtensionFileLoader.create_module = create_module
    return verify


# The check, installed now: the shim or the bootstrap compiled after this
# file imports nothing of the project before it. The bootstrap checks its
# script with VERIFY.
VERIFY = pin()
