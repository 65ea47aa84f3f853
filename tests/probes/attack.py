"""Attack probe run inside the jail by the integration tests.

Usage: attack.py ATTACK [ARGS...]

It first prints PROBE-START (so a test knows the probe really ran, rather
than failing for an unrelated reason), then performs one attack and prints
one line: `ESCAPED <detail>` when the attack worked, `BLOCKED <detail>` when
the kernel refused it. Tests never trust these lines alone: they check the
effect (a listener got nothing, a file does not exist, a process is alive).
"""

import ctypes
import errno
import mmap
import os
import signal
import socket
import sys
import time

print("PROBE-START", flush=True)

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
CANARY = b"GLOVEBOX-CANARY-PAYLOAD"


def escaped(detail):
    print("ESCAPED", detail, flush=True)
    sys.exit(0)


def blocked(detail):
    print("BLOCKED", detail, flush=True)
    sys.exit(0)


def attempt(fn, what):
    try:
        fn()
    except OSError as e:
        blocked(f"{what}: {e.errno} {errno.errorcode.get(e.errno, '')}")
    escaped(what)


def syscall(nr, *args):
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) for a in args])
    if r < 0:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    return r


def tcp(host, port):
    fam = socket.AF_INET6 if ":" in host else socket.AF_INET

    def go():
        s = socket.socket(fam, socket.SOCK_STREAM)
        s.settimeout(2)
        s.connect((host, int(port)))
        s.sendall(CANARY)
        s.close()

    attempt(go, f"tcp connect {host}:{port}")


def udp(host, port):
    fam = socket.AF_INET6 if ":" in host else socket.AF_INET

    def go():
        s = socket.socket(fam, socket.SOCK_DGRAM)
        s.sendto(CANARY, (host, int(port)))

    attempt(go, f"udp send {host}:{port}")


def fastopen(host, port):
    # MSG_FASTOPEN connects an unconnected TCP socket by a send, to the
    # address the send names (no connect call to intercept).
    fam = socket.AF_INET6 if ":" in host else socket.AF_INET

    def go():
        s = socket.socket(fam, socket.SOCK_STREAM)
        s.settimeout(2)
        s.sendto(CANARY, socket.MSG_FASTOPEN, (host, int(port)))
        s.sendall(CANARY)
        s.close()

    attempt(go, f"tcp fastopen {host}:{port}")


def listen():
    # A server on the host's network (no network namespace): anyone could
    # connect in and read what the tool serves.
    def go():
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        print("LISTENING", s.getsockname()[1], flush=True)

    attempt(go, "tcp listen")


def connect_race(host, port, proxy_port="3128", rounds="300"):
    # One process connects sockets through a sockaddr_in in shared memory
    # while a second process rewrites that memory between the proxy's
    # address and HOST:PORT: whatever the supervisor read, nothing may
    # connect to HOST:PORT. A connection whose peer is HOST:PORT is an
    # escape. The rewriter is a process of its own (the page is shared),
    # not a thread: a thread needs the interpreter's lock between its
    # writes, and under load it could be starved for a whole run, which
    # left the address one way for every connect.
    import struct

    def sin(p):
        return struct.pack("!HH4s8x", 0, int(p), socket.inet_aton(host if p == port else "127.0.0.1"))

    good = bytearray(sin(proxy_port))
    bad = bytearray(sin(port))
    for b in (good, bad):
        b[0:2] = struct.pack("=H", socket.AF_INET)
    good, bad = bytes(good), bytes(bad)
    page = mmap.mmap(-1, mmap.PAGESIZE)  # MAP_SHARED | MAP_ANONYMOUS
    page[0:16] = good
    addr = ctypes.addressof(ctypes.c_char.from_buffer(page))
    STOP = 64
    flipper = os.fork()
    if flipper == 0:
        while page[STOP] == 0:
            page[0:16] = bad
            page[0:16] = good
        os._exit(0)
    proxied = refused = 0
    escaped_to = None
    libc.connect.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_uint]
    # At least ROUNDS connects, and on until both outcomes were seen (the
    # race really ran both ways), at most 20 times as many.
    n = 0
    try:
        while n < int(rounds) or (n < 20 * int(rounds) and not (proxied and refused)):
            n += 1
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            r = libc.connect(s.fileno(), ctypes.c_void_p(addr), 16)
            if r == 0:
                peer = s.getpeername()
                if peer == (host, int(port)):
                    escaped_to = peer
                    s.sendall(CANARY)
                proxied += 1
            else:
                refused += 1
            s.close()
    finally:
        page[STOP] = 1
        os.waitpid(flipper, 0)
    print("RACE", "proxied", proxied, "refused", refused, flush=True)
    if escaped_to:
        escaped(f"connect race reached {escaped_to}")
    blocked(f"connect race: {proxied} to the proxy, {refused} refused")


def unix(path):
    def go():
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(path)
        s.sendall(CANARY)

    attempt(go, f"unix connect {path}")


def abstract(name):
    def go():
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect("\0" + name)
        s.sendall(CANARY)

    attempt(go, f"abstract unix connect {name}")


def dgram_pair(path):
    # A datagram socketpair could sendto() a named socket outside.
    def go():
        a, _ = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
        a.sendto(CANARY, path)

    attempt(go, "unix datagram socketpair sendto")


def netlink():
    attempt(lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0), "netlink socket")


def families(*specs):
    # Each spec is FAMILY:TYPE:PROTOCOL (numbers). One line per spec:
    # `made` when the socket could be created (ESCAPED at the end), else
    # the errno (EPERM is the jail's filter; the kernel lacking a family
    # says EAFNOSUPPORT).
    made = []
    for spec in specs:
        fam, ty, proto = (int(x) for x in spec.split(":"))
        try:
            socket.socket(fam, ty, proto).close()
            print("FAMILY", spec, "made", flush=True)
            made.append(spec)
        except OSError as e:
            print("FAMILY", spec, errno.errorcode.get(e.errno, str(e.errno)), flush=True)
    if made:
        escaped("socket families " + " ".join(made))
    blocked("socket families " + " ".join(specs))


def packet():
    attempt(lambda: socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0), "packet socket")


def io_uring():
    params = ctypes.create_string_buffer(120)
    attempt(lambda: syscall(425, 8, ctypes.addressof(params)), "io_uring_setup")


def socketpair_ok():
    a, b = socket.socketpair()
    a.sendall(b"ping")
    if b.recv(4) == b"ping":
        print("SOCKETPAIR-OK", flush=True)
    r, w = os.pipe()
    os.write(w, b"x")
    if os.read(r, 1) == b"x":
        print("PIPE-OK", flush=True)


def read(path):
    def go():
        with open(path, "rb") as f:
            sys.stdout.write(f.read().decode(errors="replace"))

    attempt(go, f"read {path}")


def listdir(path):
    def go():
        print(os.listdir(path))

    attempt(go, f"listdir {path}")


def write(path):
    def go():
        with open(path, "wb") as f:
            f.write(CANARY)

    attempt(go, f"write {path}")


def link(src, dst):
    attempt(lambda: os.link(src, dst), f"link {src} -> {dst}")


def rename(src, dst):
    attempt(lambda: os.rename(src, dst), f"rename {src} -> {dst}")


def truncate(path):
    attempt(lambda: os.truncate(path, 0), f"truncate {path}")


def ptrace(pid):
    PTRACE_ATTACH = 16
    attempt(lambda: syscall(101, PTRACE_ATTACH, int(pid), 0, 0), f"ptrace attach {pid}")


def vmread(pid, addr="0x400000"):
    buf = ctypes.create_string_buffer(64)

    class iovec(ctypes.Structure):
        _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]

    local = iovec(ctypes.addressof(buf), 64)
    remote = iovec(int(addr, 0), 64)
    attempt(
        lambda: syscall(310, int(pid), ctypes.addressof(local), 1, ctypes.addressof(remote), 1, 0),
        f"process_vm_readv {pid}",
    )


def kill(pid):
    attempt(lambda: os.kill(int(pid), 9), f"kill {pid}")


def retune(pid):
    """Change another process's limits, nice value and I/O priority.

    The kernel asks only for the same uid (no ptrace or signal check), so
    without a PID namespace a neighbour of the jail's uid is in reach
    unless the filter refuses. The same calls on the probe itself must
    work (SELF-OK), so a refusal is not a broken probe."""
    import resource
    ioprio_set = {"x86_64": 251, "aarch64": 30}[os.uname().machine]
    idle = (3 << 13) | 7  # IOPRIO_CLASS_IDLE
    resource.prlimit(0, resource.RLIMIT_NOFILE, resource.getrlimit(resource.RLIMIT_NOFILE))
    os.setpriority(os.PRIO_PROCESS, 0, os.getpriority(os.PRIO_PROCESS, 0) + 1)
    syscall(ioprio_set, 1, 0, idle)
    print("SELF-OK", flush=True)
    pid = int(pid)
    done, refused = [], []
    for what, fn in [
        ("prlimit", lambda: resource.prlimit(pid, resource.RLIMIT_NOFILE, (7, 7))),
        ("setpriority", lambda: os.setpriority(os.PRIO_PROCESS, pid, 19)),
        ("ioprio_set", lambda: syscall(ioprio_set, 1, pid, idle)),
    ]:
        try:
            fn()
            done.append(what)
        except OSError as e:
            refused.append(f"{what}: {errno.errorcode.get(e.errno, e.errno)}")
    if done:
        escaped(f"{' '.join(done)} of {pid}")
    blocked("; ".join(refused))


def environ(pid):
    read(f"/proc/{pid}/environ")


def find_canary_env(marker):
    """Look for `marker` in every process environment and cmdline we can see."""
    found = []
    me = str(os.getpid())
    try:
        pids = os.listdir("/proc")
        listed = True
    except OSError:
        # /proc cannot be listed (Landlock keeps the host's /proc closed in
        # a jail without a PID namespace): try every pid by number instead.
        pids = [str(p) for p in range(1, 65536)]
        listed = False
    for d in pids:
        # Our own argv holds the marker we were given.
        if not d.isdigit() or d == me:
            continue
        for f in ("environ", "cmdline"):
            try:
                with open(f"/proc/{d}/{f}", "rb") as fh:
                    if marker.encode() in fh.read():
                        found.append(f"{d}/{f}")
            except OSError:
                pass
    if found:
        escaped("found " + ",".join(found))
    if not listed:
        blocked("marker not visible; /proc cannot be listed, pids 1-65535 tried")
    blocked("marker not visible; pids seen: " + ",".join(p for p in os.listdir("/proc") if p.isdigit()))


def tiocsti():
    import fcntl
    import termios

    results = []
    for fd in (0, 1, 2):
        try:
            fcntl.ioctl(fd, termios.TIOCSTI, b"X")
            results.append(f"fd{fd}:injected")
        except OSError as e:
            results.append(f"fd{fd}:{errno.errorcode.get(e.errno, e.errno)}")
    try:
        fd = os.open("/dev/tty", os.O_RDWR)
        fcntl.ioctl(fd, termios.TIOCSTI, b"X")
        results.append("devtty:injected")
    except OSError as e:
        results.append(f"devtty:{errno.errorcode.get(e.errno, e.errno)}")
    if any("injected" in r for r in results):
        escaped(" ".join(results))
    blocked(" ".join(results))


def i386():
    # mov eax, 20 (getpid in the i386 table); int 0x80; ret
    code = b"\xb8\x14\x00\x00\x00\xcd\x80\xc3"
    mem = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    mem.write(code)
    addr = ctypes.addressof(ctypes.c_char.from_buffer(mem))
    fn = ctypes.CFUNCTYPE(ctypes.c_int)(addr)
    print("CALLING-INT80", flush=True)
    r = fn()
    escaped(f"int 0x80 returned {r}")


def unshare(flag):
    attempt(lambda: syscall(272, int(flag, 0)), f"unshare {flag}")


def clone(flag):
    """clone(2) itself (not libc's fork, not clone3) with FLAG | SIGCHLD
    and no new stack: a fork. The child leaves at once."""
    nr = {"x86_64": 56, "aarch64": 220}[os.uname().machine]

    def go():
        pid = syscall(nr, int(flag, 0) | signal.SIGCHLD, 0, 0, 0, 0)
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)

    attempt(go, f"clone {flag}")


def mount():
    def go():
        if libc.mount(b"none", b"/tmp", b"tmpfs", ctypes.c_ulong(0), None) != 0:
            e = ctypes.get_errno()
            raise OSError(e, os.strerror(e))

    attempt(go, "mount tmpfs on /tmp")


def forkbomb(marker_dir):
    open(os.path.join(marker_dir, "bomb-started"), "w").close()
    n = 0
    failures = 0
    deadline = time.time() + 3
    while time.time() < deadline:
        try:
            if os.fork() == 0:
                time.sleep(30)
                os._exit(0)
            n += 1
        except OSError:
            failures += 1
            time.sleep(0.001)
    print(f"FORKS {n} FAILED {failures}", flush=True)
    blocked(f"forks={n} refused={failures}")


def membomb(mb):
    chunks = []
    for i in range(int(mb)):
        chunks.append(b"\x01" * (1 << 20))
        if i % 64 == 0:
            print(f"ALLOCATED {i} MiB", flush=True)
    escaped(f"allocated {mb} MiB")


def daemon(marker, out_dir):
    """Double fork + setsid; the daemon sleeps with `marker` in its argv."""
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            with open(os.path.join(out_dir, "daemon-started"), "w") as f:
                f.write(str(os.getpid()))
            os.execvp("python3", ["python3", "-c", "import time; time.sleep(300)", marker])
        os._exit(0)
    deadline = time.time() + 5
    while not os.path.exists(os.path.join(out_dir, "daemon-started")) and time.time() < deadline:
        time.sleep(0.01)
    print("PARENT-EXITING", flush=True)


def chmod(path, mode="0777"):
    attempt(lambda: os.chmod(path, int(mode, 8)), f"chmod {mode} {path}")


def chmod_same(path):
    """chmod to the file's current mode: an escape changes nothing."""
    attempt(lambda: os.chmod(path, os.stat(path).st_mode & 0o7777), f"chmod (same mode) {path}")


def chown(path, uid="-1", gid="-1"):
    attempt(lambda: os.chown(path, int(uid), int(gid)), f"chown {uid}:{gid} {path}")


def chown_same(path):
    def go():
        st = os.stat(path)
        os.chown(path, st.st_uid, st.st_gid)

    attempt(go, f"chown (same owner) {path}")


def utime(path, seconds="946684800"):
    attempt(lambda: os.utime(path, (int(seconds), int(seconds))), f"utime {path}")


def utime_same(path):
    def go():
        st = os.stat(path)
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))

    attempt(go, f"utime (same times) {path}")


def setxattr(path, name="user.glovebox"):
    attempt(lambda: os.setxattr(path, name, CANARY), f"setxattr {name} {path}")


def removexattr(path, name="user.glovebox-none"):
    attempt(lambda: os.removexattr(path, name), f"removexattr {name} {path}")


def stat(path):
    def go():
        st = os.stat(path)
        print("STAT", oct(st.st_mode), st.st_size, flush=True)

    attempt(go, f"stat {path}")


def inotify(path):
    def go():
        fd = libc.inotify_init1(0)
        if fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1")
        wd = libc.inotify_add_watch(fd, os.fsencode(path), 0xFFF)
        if wd < 0:
            raise OSError(ctypes.get_errno(), "inotify_add_watch")

    attempt(go, f"inotify_add_watch {path}")


def chattr(path, how="set"):
    """Sets the nodump inode flag (`chattr +d`) through a read-only
    descriptor; with `same`, sets the flags the file has (an escape changes
    nothing); with `get`, only reads them (does this file system have
    inode flags?)."""
    import fcntl
    import struct

    def go():
        fd = os.open(path, os.O_RDONLY)
        try:
            flags = struct.unpack("l", fcntl.ioctl(fd, 0x80086601, struct.pack("l", 0)))[0]
            if how == "get":
                return
            new = flags if how == "same" else flags | 0x40
            fcntl.ioctl(fd, 0x40086602, struct.pack("l", new))
        finally:
            os.close(fd)

    attempt(go, f"chattr ({how}) {path}")


def file_setattr(path, how="set"):
    """Sets the nodump flag by path with file_setattr(2) (no open at all);
    with `same`, the flags the file has; with `get`, only reads them (does
    this kernel have the call?)."""

    def go():
        buf = ctypes.create_string_buffer(24)
        p = ctypes.c_char_p(os.fsencode(path))
        r = libc.syscall(ctypes.c_long(468), ctypes.c_long(-100), p, buf, ctypes.c_long(24), ctypes.c_long(0))
        if r < 0:
            raise OSError(ctypes.get_errno(), "file_getattr")
        if how == "get":
            return
        xflags = int.from_bytes(buf.raw[:8], "little")
        if how != "same":
            xflags |= 0x80
        buf.raw = xflags.to_bytes(8, "little") + buf.raw[8:]
        r = libc.syscall(ctypes.c_long(469), ctypes.c_long(-100), p, buf, ctypes.c_long(24), ctypes.c_long(0))
        if r < 0:
            raise OSError(ctypes.get_errno(), "file_setattr")

    attempt(go, f"file_setattr ({how}) {path}")


def mkdir(path):
    attempt(lambda: os.makedirs(path), f"mkdir {path}")


def output(mb):
    chunk = b"y" * (1 << 20)
    out = sys.stdout.buffer
    for _ in range(int(mb)):
        out.write(chunk)
    out.flush()


def sysv_shm(key):
    """Attach the host's System V shared memory segment `key` and print it."""
    libc.shmget.restype = ctypes.c_int
    libc.shmat.restype = ctypes.c_void_p
    def go():
        shmid = libc.shmget(ctypes.c_int(int(key)), ctypes.c_size_t(0), ctypes.c_int(0))
        if shmid < 0:
            raise OSError(ctypes.get_errno(), "shmget")
        addr = libc.shmat(ctypes.c_int(shmid), None, ctypes.c_int(0o10000))  # SHM_RDONLY
        if addr in (None, ctypes.c_void_p(-1).value):
            raise OSError(ctypes.get_errno(), "shmat")
        print("SHM", ctypes.string_at(addr, 64).split(b"\0")[0].decode(errors="replace"), flush=True)

    attempt(go, f"shm {key}")


ATTACKS = {
    "tcp": tcp,
    "udp": udp,
    "unix": unix,
    "abstract": abstract,
    "dgram_pair": dgram_pair,
    "netlink": netlink,
    "packet": packet,
    "families": families,
    "fastopen": fastopen,
    "listen": listen,
    "connect_race": connect_race,
    "io_uring": io_uring,
    "socketpair_ok": socketpair_ok,
    "sysv_shm": sysv_shm,
    "read": read,
    "listdir": listdir,
    "write": write,
    "link": link,
    "rename": rename,
    "truncate": truncate,
    "ptrace": ptrace,
    "vmread": vmread,
    "kill": kill,
    "retune": retune,
    "environ": environ,
    "find_canary_env": find_canary_env,
    "tiocsti": tiocsti,
    "i386": i386,
    "unshare": unshare,
    "clone": clone,
    "mount": mount,
    "forkbomb": forkbomb,
    "membomb": membomb,
    "daemon": daemon,
    "output": output,
    "chmod": chmod,
    "chmod_same": chmod_same,
    "chown": chown,
    "chown_same": chown_same,
    "utime": utime,
    "utime_same": utime_same,
    "setxattr": setxattr,
    "removexattr": removexattr,
    "stat": stat,
    "inotify": inotify,
    "mkdir": mkdir,
    "chattr": chattr,
    "file_setattr": file_setattr,
}

if __name__ == "__main__":
    ATTACKS[sys.argv[1]](*sys.argv[2:])
