#!/usr/bin/env python3
"""Egress over an emulated link: the 1 MiB target where a fetch crosses a
network, not loopback (issue 16).

The HTTP file server of bench/egress.py listens in a network namespace
made for the run, at a private address (198.18/15, the benchmarking
range) behind a point-to-point link from the host; curl fetches a 1 MiB
and a 10 MiB file from it bare, in `glovebox sandbox --net=direct` and in
`glovebox sandbox --net --allow-private` (the tool's own namespace and the
egress proxy), modes interleaved and their order rotated every round;
medians of curl's own timings (time to first byte, time_total), so process
start-up does not count; the wall time of each whole call (process
start-up included) is shown for the 1 MiB fetch, against the < 2 ms per
call target.

A link is `veth` (a veth pair, no shaping) or `RTT@RATE` (`1ms@1gbit`,
`5ms@100mbit`): a veth pair with `tc qdisc … netem delay RTT/2 rate RATE`
on both ends where the kernel has sch_netem; else (this machine:
`CONFIG_NET_SCH_NETEM` is not set, nor `sch_fq` for a BPF delay) two TUN
devices joined by a delay line run by this script in a child process: each
direction holds a packet for RTT/2 after it has been serialized at RATE
(Ethernet framing counted), unbounded queue, no loss. The TUN devices
carry TSO/GSO packets (`IFF_VNET_HDR`), so TCP still segments at MSS 1448
while the line handles up to 64 KiB per packet. `line` is that line with
no delay and no rate limit, to compare with `veth`: the line's own cost.

Clean-up: the namespace is anonymous (made with unshare(2) by the main
thread, which returns to the host's at once), held only by this process's
listening socket and the line's device; the veth end inside it and the
TUN devices go with it. So even a killed run leaves no namespace, veth or
TUN behind (the line child dies with its parent: PR_SET_PDEATHSIG);
an interrupted one also deletes its host-side device in a `finally`.

Run it under `chrt -r 10` (the line inherits it): without priority the
line's wake-ups wait in run queues on a loaded machine (a TCP connect over
`5ms@100mbit` took 9.4 ms at load 7 instead of 5.25 ms).

    chrt -r 10 python3 bench/egress_link.py GLOVEBOX [--before OLD] [--links veth,1ms@1gbit,5ms@100mbit] [--runs N]
"""

import argparse
import collections
import ctypes
import fcntl
import os
import re
import select
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from egress import make_files, run, sandbox_modes, serve_files  # noqa: E402

CLONE_NEWNET = 0x40000000
PR_SET_PDEATHSIG = 1
LIBC = ctypes.CDLL(None, use_errno=True)


def setns(fd):
    if LIBC.setns(fd, CLONE_NEWNET) != 0:
        raise OSError(ctypes.get_errno(), "setns")


def parse_link(spec):
    """`veth`, `line` or `RTT@RATE` → (kind, rtt in seconds, rate in bit/s; 0 = none)."""
    if spec in ("veth", "line"):
        return spec, 0.0, 0
    m = re.fullmatch(r"([\d.]+)ms@([\d.]+)(k|m|g)bit", spec)
    if not m:
        sys.exit(f"bad link {spec!r}: write veth, line or RTT@RATE (1ms@1gbit, 5ms@100mbit)")
    return "shaped", float(m[1]) / 1000, int(float(m[2]) * {"k": 1e3, "m": 1e6, "g": 1e9}[m[3]])


# --- the delay line (runs in a child process) -------------------------------

TUNSETIFF = 0x400454CA
TUNSETOFFLOAD = 0x400454D0
IFF_TUN, IFF_NO_PI, IFF_VNET_HDR = 0x0001, 0x1000, 0x4000
TUN_F_CSUM, TUN_F_TSO4, TUN_F_TSO6 = 0x01, 0x02, 0x04
VNET_HDR = 10  # struct virtio_net_hdr


def open_tun(name):
    fd = os.open("/dev/net/tun", os.O_RDWR)
    fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH22x", name.encode(), IFF_TUN | IFF_NO_PI | IFF_VNET_HDR))
    fcntl.ioctl(fd, TUNSETOFFLOAD, TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6)
    os.set_blocking(fd, False)
    return fd


def wire_bits(pkt):
    """Bits a packet (virtio header + IP packet, maybe a GSO one) takes on
    an Ethernet link: each segment's IP bytes + 38 (header, FCS, preamble,
    gap)."""
    _, gso_type, hdr_len, gso_size = struct.unpack_from("<BBHH", pkt)
    ip = len(pkt) - VNET_HDR
    segs = 1
    if gso_type and gso_size:
        segs = max(1, -(-(ip - hdr_len) // gso_size))
    return 8 * (ip + (segs - 1) * hdr_len + segs * 38)


def line_child(host_dev, ns_dev, ns_fd, rtt, rate):
    """Joins the TUN device `host_dev` (host namespace) and `ns_dev` (the
    namespace of `ns_fd`): what one reads goes out of the other after it
    was serialized at `rate` bit/s (0: at once) and then RTT/2."""
    LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() == 1:
        return
    a = open_tun(host_dev)
    setns(ns_fd)
    b = open_tun(ns_dev)
    print("ready", flush=True)
    owd = rtt / 2
    peer = {a: b, b: a}
    queue = {a: collections.deque(), b: collections.deque()}  # (due, packet) read from the key
    free = {a: 0.0, b: 0.0}  # when each direction's wire is free
    while True:
        now = time.monotonic()
        for fd, q in queue.items():
            while q and q[0][0] <= now:
                try:
                    os.write(peer[fd], q.popleft()[1])
                except OSError:
                    pass  # the device is going away, or refused one packet: as a lossy wire would
        due = [q[0][0] for q in queue.values() if q]
        ready, _, _ = select.select([a, b], [], [], max(0.0, min(due) - now) if due else None)
        now = time.monotonic()
        for fd in ready:
            while True:
                try:
                    pkt = os.read(fd, 65536 + 256)
                except BlockingIOError:
                    break
                sent = max(now, free[fd]) + (wire_bits(pkt) / rate if rate else 0.0)
                free[fd] = sent
                queue[fd].append((sent + owd, pkt))


# --- the namespace and the link ---------------------------------------------


def sh(*cmd, ns=None, check=True):
    """Runs `cmd`, inside the namespace of the fd `ns` when given."""
    prefix = ["nsenter", f"--net=/proc/self/fd/{ns}"] if ns is not None else []
    return subprocess.run(
        prefix + list(cmd), pass_fds=(ns,) if ns is not None else (), check=check,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )


class Link:
    """A namespace behind a link from the host: `.ns` (an fd of it),
    `.server` (its address), `.how` (what carries the link)."""

    def __init__(self, spec, tag):
        self.kind, self.rtt, self.rate = parse_link(spec)
        self.host_dev, self.ns_dev = f"gbx{tag}h", f"gbx{tag}n"
        # Point-to-point /32s in 198.18/15, one pair per run and link.
        n = ((os.getpid() % 4096) * 8 + tag * 4) % 65536
        net = f"198.18.{n // 256}."
        self.host_ip, self.server = net + str(n % 256 + 1), net + str(n % 256 + 2)
        self.line = None
        self.ns = None

    def __enter__(self):
        host = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
        try:
            if LIBC.unshare(CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWNET): run as root")
            self.ns = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
        finally:
            setns(host)
            os.close(host)
        sh("ip", "link", "set", "lo", "up", ns=self.ns)
        if self.kind == "line" or (self.kind == "shaped" and not self._veth_netem()):
            self._tun_line()
        elif self.kind == "veth":
            self._veth()
            self.how = "veth"
        for dev, me, peer, ns in ((self.host_dev, self.host_ip, self.server, None),
                                  (self.ns_dev, self.server, self.host_ip, self.ns)):
            sh("ip", "addr", "add", me, "peer", peer, "dev", dev, ns=ns)
            sh("ip", "link", "set", dev, "up", ns=ns)
        return self

    def _veth(self):
        sh("ip", "link", "add", self.ns_dev, "type", "veth", "peer", "name", self.host_dev, ns=self.ns)
        sh("ip", "link", "set", self.host_dev, "netns", str(os.getpid()), ns=self.ns)

    def _veth_netem(self):
        """A veth pair with netem on both ends; False (and nothing left)
        where the kernel has no netem."""
        self._veth()
        opts = ["delay", f"{self.rtt * 500:g}ms", "rate", f"{self.rate}bit", "limit", "100000"]
        for dev, ns in ((self.host_dev, None), (self.ns_dev, self.ns)):
            r = sh("tc", "qdisc", "add", "dev", dev, "root", "netem", *opts, ns=ns, check=False)
            if r.returncode != 0:
                self.netem_error = r.stderr.decode().strip().splitlines()[-1:]
                sh("ip", "link", "del", self.host_dev, check=False)
                return False
        self.how = "veth + netem"
        return True

    def _tun_line(self):
        self.line = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--line-child", self.host_dev, self.ns_dev,
             str(self.ns), str(self.rtt), str(self.rate)],
            pass_fds=(self.ns,), stdout=subprocess.PIPE,
        )
        if self.line.stdout.readline().strip() != b"ready":
            raise RuntimeError("the delay line did not start")
        self.how = "TUN + delay line" + (" (no netem: " + " ".join(getattr(self, "netem_error", [])) + ")"
                                         if self.kind == "shaped" else "")

    def __exit__(self, *exc):
        if self.line:
            self.line.kill()
            self.line.wait()
        sh("ip", "link", "del", self.host_dev, check=False)
        if self.ns is not None:
            os.close(self.ns)

    def listener(self):
        """A socket bound in the namespace, on the server's address."""
        host = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
        try:
            setns(self.ns)
            s = socket.socket()
            s.bind((self.server, 0))
        finally:
            setns(host)
            os.close(host)
        return s


# --- the bench ---------------------------------------------------------------


def measure(link, modes, runs, root):
    listener = link.listener()
    try:
        return fetch(link.server, serve_files(root, listener), modes, runs)
    finally:
        listener.shutdown(socket.SHUT_RDWR)  # ends the server's accept loop
        listener.close()


def fetch(server, port, modes, runs):
    fmt = "%{time_starttransfer} %{time_total}"

    def curl(name):
        return ["curl", "-sS", "-o", "/dev/null", "-w", fmt, f"http://{server}:{port}/{name}"]

    for m in modes:  # warm-up, and the proof that every mode gets through
        run(modes[m] + curl("small"))
    got = {m: {"big": [], "huge": []} for m in modes}
    order = list(modes)
    for i in range(runs):
        order = order[1:] + order[:1]
        for name in ("big", "huge"):
            for m in order:
                wall, out = run(modes[m] + curl(name))
                got[m][name].append([float(x) * 1000 for x in out.split()] + [wall * 1000])
    return got


def report(spec, link, got, runs, load):
    def med(m, name, k):
        return statistics.median(x[k] for x in got[m][name])

    size = {"big": 1, "huge": 10}
    lines = [
        f"**{spec}** ({link.how}; {runs} runs per mode; load {load} → {os.getloadavg()[0]:.2f})",
        "",
        "| mode | 1 MiB: wall per call | 1 MiB: first byte | 1 MiB: total (rate) | 10 MiB: total (rate) |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for m in got:
        cells = [f"{med(m, 'big', 2):.2f} ms", f"{med(m, 'big', 0):.2f} ms"] + [
            f"{med(m, n, 1):.2f} ms ({size[n] * 1000 / med(m, n, 1):.0f} MiB/s)" for n in ("big", "huge")
        ]
        lines.append(f"| {m} | " + " | ".join(cells) + " |")
    lines.append("")
    for tag in sorted({m.removeprefix("proxied") for m in got if m.startswith("proxied")}):
        p, d = "proxied" + tag, "direct" + tag
        loss = {n: (1 - med(d, n, 1) / med(p, n, 1)) * 100 for n in size}
        bare = {n: (1 - med("bare", n, 1) / med(p, n, 1)) * 100 for n in size}
        lines.append(
            f"proxied{tag}: 1 MiB rate **{-loss['big']:+.1f} % vs direct{tag}** ({-bare['big']:+.1f} % vs bare), "
            f"first byte {med(p, 'big', 0) - med(d, 'big', 0):+.2f} ms, "
            f"wall per call {med(p, 'big', 2) - med(d, 'big', 2):+.2f} ms; "
            f"10 MiB rate **{-loss['huge']:+.1f} % vs direct{tag}** ({-bare['huge']:+.1f} % vs bare)."
        )
    lines.append("")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("glovebox", nargs="?", default="target/release/glovebox")
    ap.add_argument("--before", default=None, help="an older glovebox to run side by side")
    ap.add_argument("--links", default="veth,1ms@1gbit,5ms@100mbit")
    ap.add_argument("--runs", type=int, default=30)
    args = ap.parse_args()
    links = args.links.split(",")
    for spec in links:
        parse_link(spec)

    def stop(signum, _frame):
        raise SystemExit(128 + signum)  # unwinds through the `finally`s

    for s in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, stop)
    modes = {"bare": [], **sandbox_modes(args.glovebox, args.before)}
    root = make_files({"small": 100, "big": 1 << 20, "huge": 10 << 20})
    try:
        for tag, spec in enumerate(links):
            load = f"{os.getloadavg()[0]:.2f}"
            with Link(spec, tag) as link:
                got = measure(link, modes, args.runs, root)
                print(report(spec, link, got, args.runs, load), flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--line-child"]:
        h, n, fd, rtt, rate = sys.argv[2:]
        line_child(h, n, int(fd), float(rtt), int(rate))
    else:
        main()
