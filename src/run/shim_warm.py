# glovebox python shim, warm mode (src/run/warm.rs): the zygote's part,
# compiled only by warm workers, whose `-c` source is this file followed by
# shim.py (whose names these functions use when called, and whose last
# lines call `warm()`). A cold call compiles shim.py alone.
import os
import sys

# --- warm mode -------------------------------------------------------------
# The zygote is the first process of the tool's jail (pid 1 of its PID
# namespace). fd 0 is its control channel to glovebox. It imports the
# module once, then never runs tool code again: for each call it receives
# descriptors (the request pipe, the result pipe, the stderr pipe, the
# call's cgroups) and forks; HOME/TMPDIR is a fresh, empty directory made
# before the call. The child reads the call's parameters and environment
# (secrets) from the request pipe itself, so the zygote never holds them
# and no later call inherits them. When the child ends (or glovebox asks
# for it to be killed) the zygote kills every other process of its
# namespace (`kill(-1)` from pid 1 reaches exactly the namespace), reaps
# them all, removes the call's System V objects, empties HOME and
# /dev/shm, makes the next call's directory and only then reports the
# child's wait status.
#
# What is the same for every call is done once, before the first: the
# message-queue filter, the environment (the worker's own, with HOME and
# TMPDIR at the call's directory, which has one name), the imports the
# child uses. The child only joins its cgroups, reads its request, adds
# its secrets to the environment and calls the function.
#
# Messages: glovebox -> zygote: b"C" with the descriptors (a call), b"K"
# (kill the running call); zygote -> glovebox: b"R", a 4-byte big-endian
# length and a JSON list of the module files it loaded (ready), b"F" (cannot serve warm: glovebox runs the call cold), b"M" (cannot serve
# warm: the import left shared memory or a descriptor), b"S" and a
# 4-byte big-endian wait status (the call is over, nothing of it is left).


def warm():
    # Everything the zygote will ever import, before the tool's directory
    # is on sys.path at all (it goes last, see `prepare`).
    import _signal
    import atexit
    import ctypes
    import gc
    import select
    import shutil
    import signal
    import socket
    import stat
    import struct

    ctl = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM, fileno=0)
    init = loads(sys.argv[2])

    def send(b):
        ctl.sendall(b)

    # Tool prints at import time go to the worker's stderr.
    os.dup2(2, 1)
    sys.stdout = os.fdopen(1, "w", buffering=1, closefd=False)
    sys.stdin = None
    libc = ctypes.CDLL(None, use_errno=True)
    info = ctypes.create_string_buffer(128)
    # Not dumpable: a call cannot open /proc/1/mem or /proc/1/environ (or
    # ptrace) to reach into the zygote and so into later calls.
    if os.getpid() != 1 or libc.prctl(4, 0, 0, 0, 0) != 0:  # PR_SET_DUMPABLE
        send(b"F")
        os._exit(0)
    # A POSIX message queue would outlive its call in the worker's IPC
    # namespace, and nothing can list the queues to remove them: the
    # zygote, before it imports the module, and so every call, gets a
    # filter refusing to create one (EPERM); opening one that exists
    # cannot happen, as none ever does (not even the import can make one).
    # (System V objects are listed in /proc/sysvipc and removed after
    # every call, see `end_all`.)
    mq_open = {"x86_64": 240, "aarch64": 180}.get(os.uname().machine)
    if mq_open is None:
        send(b"F")
        os._exit(0)
    insns = [
        (0x20, 0, 0, 0),  # ld [nr]
        (0x15, 0, 3, mq_open),  # jeq mq_open
        (0x20, 0, 0, 24),  # ld [args[1]] (low word: flags)
        (0x45, 0, 1, 0o100),  # jset O_CREAT
        (0x06, 0, 0, 0x00050000 | 1),  # ret ERRNO(EPERM)
        (0x06, 0, 0, 0x7FFF0000),  # ret ALLOW
    ]
    code = ctypes.create_string_buffer(b"".join(struct.pack("=HBBI", *i) for i in insns))

    class Prog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    prog = Prog(len(insns), ctypes.cast(code, ctypes.c_void_p))
    if libc.prctl(22, 2, ctypes.byref(prog), 0, 0) != 0:  # PR_SET_SECCOMP, FILTER
        send(b"F")
        os._exit(0)

    # pid 1 of a namespace gets no signal from inside it unless it has a
    # handler: none at all.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    home = os.environ.get("HOME", "/nonexistent")
    base_env = dict(os.environ)
    prepare(init)
    watch = watch_hooks()
    try:
        module = load(init)
    except BaseException:  # noqa: BLE001 - the call runs cold and reports it
        send(b"F")
        os._exit(0)
    # Nor may the import leave code of the module's to run in the zygote
    # later: a profile or trace function, a signal handler or a timer, a
    # garbage-collector callback, an audit hook or a fork hook would run
    # between calls, beside each call's descriptors, and could keep what it
    # read there for the calls after. Such a module is served cold.
    if watch.hooked(signal, gc):
        end_all(signal, libc, info)
        send(b"F")
        os._exit(0)
    # Tool code runs in the zygote only during the import: a thread or a
    # process it left running would go on beside every call, so such a
    # module is served cold.
    others = [p for p in os.listdir("/proc") if p.isdigit() and p != "1"]
    if len(os.listdir("/proc/self/task")) != 1 or others:
        end_all(signal, libc, info)
        send(b"F")
        os._exit(0)
    # Nor is a module whose import left memory or a descriptor that every
    # fork shares: one call could leave its parameters there for the next.
    if shares_state():
        end_all(signal, libc, info)
        send(b"M")
        os._exit(0)
    idle = float(init.get("idle_s", 300))
    # The files of every module now loaded from outside the base
    # installation: glovebox voids the worker when one of them changes.
    system = tuple(p + os.sep for p in {sys.base_prefix, sys.base_exec_prefix})
    files = sorted(
        {
            f
            for m in list(sys.modules.values())
            for f in [getattr(m, "__file__", None)]
            if isinstance(f, str) and not f.startswith(system)
        }
    )
    loaded = dumps(files).encode()
    # Every call's environment: the worker's own (what the import changed
    # undone), HOME and TMPDIR at the call's directory (one name, made
    # afresh before each call); the child adds the call's secrets.
    calldir = os.path.join(home, "call")
    base_env["HOME"] = calldir
    base_env["TMPDIR"] = calldir
    if os.environ != base_env:
        os.environ.clear()
        os.environ.update(base_env)
    if "tempfile" in sys.modules:
        sys.modules["tempfile"].tempdir = None
    # The working directory the import may have left (the jail started the
    # zygote in it).
    os.chdir(init["cwd"])
    # The call's sys.stdin, as the cold shim opens it: made here, over a
    # descriptor the child points at a /dev/null of its own before
    # anything else runs (see `child`), so no call shares it.
    stdin = open(os.devnull)
    # What the import left in HOME is no call's to see.
    wipe(home, shutil, stat)
    os.mkdir(calldir, 0o700)
    # Objects that exist now are never collected in a call: the collector
    # does not touch (and so copy) the zygote's pages in every fork.
    gc.freeze()
    sys.stdout.flush()
    sys.stderr.flush()
    send(b"R" + struct.pack(">I", len(loaded)) + loaded)
    while True:
        if not select.select([ctl], [], [], idle)[0]:
            os._exit(0)
        try:
            msg, fds, _flags, _addr = socket.recv_fds(ctl, 1, 16)
        except OSError:
            os._exit(0)
        if not msg:
            os._exit(0)
        if msg != b"C" or len(fds) < 3:
            for fd in fds:
                os.close(fd)
            continue
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            child(fds, module, init["cwd"], stdin, _signal, signal, atexit)
        for fd in fds:
            os.close(fd)
        pidfd = os.pidfd_open(pid)
        while True:
            ready = select.select([ctl, pidfd], [], [])[0]
            if pidfd in ready:
                break
            try:
                m = ctl.recv(1)
            except OSError:
                m = b""
            if not m:
                # glovebox is gone: end everything.
                end_all(signal, libc, info)
                os._exit(0)
            if m == b"K":
                os.kill(-1, signal.SIGKILL)
        os.close(pidfd)
        _, status = os.waitpid(pid, 0)
        end_all(signal, libc, info)
        wipe(home, shutil, stat)
        # The worker's private /dev/shm (POSIX semaphores, shared memory).
        wipe("/dev/shm", shutil, stat)
        # The next call's HOME, empty (wipe removed this one). A zygote
        # that cannot make it ends without a report: the worker is gone
        # and the call failed with it.
        try:
            os.mkdir(calldir, 0o700)
        except OSError:
            os._exit(1)
        send(b"S" + struct.pack(">i", status))


class watch_hooks:
    """What a module's import may register to run in the zygote later.
    Audit and fork hooks cannot be listed afterwards: adding one is seen
    as it happens (an audit hook of the zygote's own refuses a new audit
    hook there, `os.register_at_fork` is wrapped until the import ends);
    the others are read after the import."""

    def __init__(self):
        self.tried = []
        zygote = os.getpid()

        def audit(event, args):
            if event == "sys.addaudithook" and os.getpid() == zygote and self.tried is not None:
                self.tried.append("an audit hook")
                raise RuntimeError("glovebox: no audit hook in a warm worker's zygote")

        sys.addaudithook(audit)
        self.register = os.register_at_fork
        watcher = self

        system = tuple(p + os.sep for p in {sys.base_prefix, sys.base_exec_prefix})

        def ours(hook):
            # The standard library's own (random, logging, threading,
            # concurrent.futures register theirs when first imported):
            # functions of its files, or a lock's own methods.
            if type(getattr(hook, "__self__", None)).__module__ == "_thread":
                return True
            code = getattr(getattr(hook, "__func__", hook), "__code__", None)
            return code is not None and code.co_filename.startswith(system)

        def register_at_fork(**hooks):
            if watcher.tried is not None and not all(map(ours, hooks.values())):
                watcher.tried.append("a fork hook")
            return watcher.register(**hooks)

        os.register_at_fork = register_at_fork
        import posix

        posix.register_at_fork = register_at_fork

    def hooked(self, signal, gc):
        import posix

        tried, self.tried = self.tried, None
        os.register_at_fork = posix.register_at_fork = self.register
        if tried:
            return True
        if sys.getprofile() is not None or sys.gettrace() is not None or gc.callbacks:
            return True
        for timer in (signal.ITIMER_REAL, signal.ITIMER_VIRTUAL, signal.ITIMER_PROF):
            if signal.getitimer(timer) != (0.0, 0.0):
                return True
        for n in signal.valid_signals():
            try:
                handler = signal.getsignal(n)
            except (OSError, ValueError):
                continue
            if callable(handler):
                return True
        return False


def shares_state():
    """True when this process holds something its forks share with each
    other: a shared mapping that is writable or could be made so (anonymous
    `MAP_SHARED` memory, a memfd, System V memory, a deleted or writable
    file; a read-only file the jail cannot write is harmless), or a
    descriptor beyond 0, 1 and 2 (a pipe, a memfd, even the offset of a
    read-only file carries data from one call to the next)."""
    with open("/proc/self/maps") as f:
        maps = f.read().splitlines()
    for line in maps:
        fields = line.split(None, 5)
        if len(fields) < 2 or fields[1][3:4] != "s":
            continue
        path = fields[5] if len(fields) > 5 else ""
        if "w" in fields[1] or not path.startswith("/") or path.endswith(" (deleted)"):
            return True
        if os.access(path, os.W_OK):
            return True
    for fd in os.listdir("/proc/self/fd"):
        if int(fd) > 2:
            try:
                os.readlink("/proc/self/fd/" + fd)
            except OSError:
                continue  # the listing's own descriptor, closed since
            return True
    return False


def end_all(signal, libc, info):
    """Kills and reaps every process of the namespace but this one, then
    removes every System V object of its IPC namespace."""
    while True:
        try:
            os.kill(-1, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            break
    if not sysv_in_use(libc, info):
        return
    for kind, remove in (
        ("shm", lambda i: libc.shmctl(i, 0, None)),
        ("sem", lambda i: libc.semctl(i, 0, 0)),
        ("msg", lambda i: libc.msgctl(i, 0, None)),
    ):
        try:
            with open("/proc/sysvipc/" + kind) as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if len(fields) > 1:
                remove(int(fields[1]))  # IPC_RMID


def sysv_in_use(libc, info):
    """False only when the kernel counts no System V segment, semaphore
    set or message queue in this IPC namespace (`SHM_INFO`'s `used_ids`,
    `SEM_INFO`'s `semusz`, `MSG_INFO`'s `msgpool`): three system calls
    instead of reading /proc/sysvipc after every call. Any answer but a
    count of zero (an error included) means looking."""
    for ask, offset in (
        (lambda: libc.shmctl(0, 14, info), 0),  # SHM_INFO: struct shm_info.used_ids
        (lambda: libc.semctl(0, 0, 19, info), 28),  # SEM_INFO: struct seminfo.semusz
        (lambda: libc.msgctl(0, 12, info), 0),  # MSG_INFO: struct msginfo.msgpool
    ):
        info.raw = bytes(len(info))
        if ask() < 0 or int.from_bytes(info.raw[offset : offset + 4], sys.byteorder) != 0:
            return True
    return False


def wipe(home, shutil, stat):
    """Empties HOME (every call's directory and anything else a call left)."""

    def fix(func, path, _exc):
        try:
            os.chmod(os.path.dirname(path), stat.S_IRWXU)
            os.chmod(path, stat.S_IRWXU, follow_symlinks=False)
        except OSError:
            pass
        try:
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                os.unlink(path)
        except OSError:
            pass

    try:
        os.chmod(home, stat.S_IRWXU)
        entries = os.listdir(home)
    except OSError:
        return
    for name in entries:
        path = os.path.join(home, name)
        try:
            # An empty directory (a call's HOME, mostly): one system call.
            os.rmdir(path)
            continue
        except OSError:
            pass
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, onerror=fix)
        else:
            try:
                os.unlink(path)
            except OSError:
                pass


class Reply:
    """The call's result pipe, written as the cold shim's text file writes
    it (the reply is ASCII JSON), without a text layer made per call."""

    def __init__(self, fd):
        self.fd = fd

    def write(self, text):
        data = text.encode()
        while data:
            data = data[os.write(self.fd, data) :]

    def flush(self):
        pass


def child(fds, module, cwd, stdin, _signal, signal, atexit):
    """One call, in the zygote's fresh fork. Never returns."""
    code = 0
    try:
        req_r, res_w, err_w, *groups = fds
        os.setsid()
        # Join the call's cgroups before anything else (limits of its own).
        for g in groups:
            os.write(g, b"0")
            os.close(g)
        _signal.signal(signal.SIGINT, signal.default_int_handler)
        # A /dev/null of the call's own at 0 and under the zygote's
        # sys.stdin (whose descriptor every fork shares until here).
        null = os.open(os.devnull, os.O_RDWR)
        os.dup2(null, 0)
        os.dup2(null, stdin.fileno(), inheritable=False)
        os.close(null)
        os.dup2(err_w, 1)
        os.dup2(err_w, 2)
        os.close(err_w)
        chunks = []
        while True:
            b = os.read(req_r, 1 << 16)
            if not b:
                break
            chunks.append(b)
        os.close(req_r)
        message = loads(b"".join(chunks))
        # The worker's environment (see `warm`) and the call's secrets.
        env = message["env"]
        if env:
            env.pop("HOME", None)
            env.pop("TMPDIR", None)
            os.environ.update(env)
        sys.stdin = stdin
        invoke(message["request"], module, cwd, Reply(res_w))
        # What a cold interpreter does at exit: wait for the threads the
        # call started, run the exit handlers.
        if "threading" in sys.modules:
            sys.modules["threading"]._shutdown()
        if atexit._ncallbacks():
            atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:  # noqa: BLE001 - no reply: glovebox reports the exit
        code = 70
    os._exit(code)
