//! The TUN device of a call's network namespace (transparent egress, see
//! `crate::egress::transparent`): made by the child in its own namespace
//! before it is confined, its descriptor handed to the supervisor like
//! the proxy's listener. Child-side: no allocation, one system call per
//! step on prepared data.

use std::os::fd::RawFd;

use super::*;

/// Where the device lives: its name, the jail's own address on it and the
/// MTU. Every route but loopback's goes through it.
#[derive(Debug, Clone, Copy)]
pub struct TunSetup {
    /// Interface name, NUL-terminated (at most 15 bytes before the NUL).
    pub name: &'static [u8],
    /// The jail's own IPv4 address on the device.
    pub addr: [u8; 4],
    /// The device's MTU.
    pub mtu: i32,
}

/// An `ifreq` naming `name`.
fn ifreq(name: &[u8]) -> libc::ifreq {
    // SAFETY: ifreq is plain data; zeroed is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    let n = name.len().min(req.ifr_name.len() - 1);
    for (dst, src) in req.ifr_name.iter_mut().zip(&name[..n]) {
        *dst = *src as libc::c_char;
    }
    req
}

fn sockaddr_in(addr: [u8; 4]) -> libc::sockaddr {
    let sin = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: 0,
        sin_addr: libc::in_addr {
            s_addr: u32::from_ne_bytes(addr),
        },
        sin_zero: [0; 8],
    };
    // SAFETY: sockaddr_in and sockaddr have the same size (16 bytes) and
    // both are plain data.
    unsafe { std::mem::transmute::<libc::sockaddr_in, libc::sockaddr>(sin) }
}

/// Opens `/dev/net/tun`, makes the device `setup.name` (layer 3, no
/// packet information header), gives it `setup.addr` and `setup.mtu`,
/// brings it up and routes every IPv4 destination through it (a default
/// route; loopback keeps its own). Returns the device's descriptor,
/// non-blocking and close-on-exec. The device is persistent: it lives as
/// long as the namespace (which the descriptor keeps alive), so closing
/// the descriptor ends it without waiting. Any failure closes what was
/// made and returns the errno (a device left persistent then has no
/// address or route and goes with the namespace).
pub fn tun_up(setup: &TunSetup) -> SysResult<RawFd> {
    // SAFETY: open(2) of a NUL-terminated literal path.
    let tun = check_int(unsafe {
        libc::open(
            c"/dev/net/tun".as_ptr(),
            libc::O_RDWR | libc::O_CLOEXEC | libc::O_NONBLOCK,
        )
    })?;
    match configure(tun, setup) {
        Ok(()) => Ok(tun),
        Err(e) => {
            close(tun);
            Err(e)
        }
    }
}

fn configure(tun: RawFd, setup: &TunSetup) -> SysResult<()> {
    let mut req = ifreq(setup.name);
    req.ifr_ifru.ifru_flags = (libc::IFF_TUN | libc::IFF_NO_PI) as libc::c_short;
    // SAFETY: TUNSETIFF reads one ifreq, valid for the call.
    check_int(unsafe { libc::ioctl(tun, libc::TUNSETIFF, &req as *const libc::ifreq) })?;
    // Persistent: closing the supervisor's descriptor then only detaches
    // it, and the device goes with the namespace, in the kernel's own
    // clean-up of it (removing a device when its last descriptor closes
    // waits for the kernel's RCU grace periods, tens of milliseconds at
    // the end of every call).
    // SAFETY: TUNSETPERSIST takes an integer argument.
    check_int(unsafe { libc::ioctl(tun, libc::TUNSETPERSIST, 1 as libc::c_ulong) })?;
    // SAFETY: socket(2) with integer arguments.
    let sock = check_int(unsafe {
        libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0)
    })?;
    let r = address_and_route(sock, setup);
    close(sock);
    r
}

fn address_and_route(sock: RawFd, setup: &TunSetup) -> SysResult<()> {
    let mut req = ifreq(setup.name);
    req.ifr_ifru.ifru_addr = sockaddr_in(setup.addr);
    // SAFETY: SIOCSIFADDR reads one ifreq, valid for the call.
    check_int(unsafe { libc::ioctl(sock, libc::SIOCSIFADDR, &req as *const libc::ifreq) })?;
    let mut req = ifreq(setup.name);
    req.ifr_ifru.ifru_mtu = setup.mtu;
    // SAFETY: SIOCSIFMTU reads one ifreq, valid for the call.
    check_int(unsafe { libc::ioctl(sock, libc::SIOCSIFMTU, &req as *const libc::ifreq) })?;
    let mut req = ifreq(setup.name);
    req.ifr_ifru.ifru_flags = (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
    // SAFETY: SIOCSIFFLAGS reads one ifreq, valid for the call.
    check_int(unsafe { libc::ioctl(sock, libc::SIOCSIFFLAGS, &req as *const libc::ifreq) })?;
    // SAFETY: rtentry is plain data (and a null device pointer); zeroed is
    // a valid value.
    let mut rt: libc::rtentry = unsafe { std::mem::zeroed() };
    rt.rt_dst = sockaddr_in([0; 4]);
    rt.rt_genmask = sockaddr_in([0; 4]);
    rt.rt_gateway = sockaddr_in([0; 4]);
    rt.rt_flags = libc::RTF_UP;
    // The kernel only reads the name (copied from user memory): the
    // pointer's mutability is the C declaration's, nothing writes to it.
    rt.rt_dev = setup.name.as_ptr() as *mut libc::c_char;
    // SAFETY: SIOCADDRT reads one rtentry and the NUL-terminated name it
    // points to, both valid for the call.
    check_int(unsafe { libc::ioctl(sock, libc::SIOCADDRT, &rt as *const libc::rtentry) })?;
    Ok(())
}

/// Whether this process may open `/dev/net/tun` for reading and writing
/// (`doctor`: the device exists and is not denied; making one needs a
/// network namespace of the call's own besides). `Err` is the errno.
pub fn tun_openable() -> SysResult<()> {
    // SAFETY: open(2) of a NUL-terminated literal path.
    let fd =
        check_int(unsafe { libc::open(c"/dev/net/tun".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) })?;
    close(fd);
    Ok(())
}

/// `fd` registered with the current tokio runtime's reactor (the
/// supervisor's side of the device; must be called inside the runtime).
pub fn async_fd(
    fd: std::os::fd::OwnedFd,
) -> std::io::Result<tokio::io::unix::AsyncFd<std::os::fd::OwnedFd>> {
    // SAFETY: an OwnedFd is a valid, open descriptor that only closes when
    // it is dropped, and the AsyncFd owns it from here on: it stays open
    // and the same for the AsyncFd's whole life, and `as_raw_fd` always
    // returns that one descriptor.
    unsafe { tokio::io::unix::AsyncFd::register(fd) }.map_err(std::io::Error::from)
}
